"""Import MuSiQue (multi-hop questions composed of single-hop ones) as a corpus plus fixtures.

Input: MuSiQue's JSONL (``musique_ans_v1.0_dev.jsonl`` and the like: one question a line) or a JSON
list of the same objects: ``{"id", "question", "answer", "answer_aliases", "answerable",
"question_decomposition": [{"question", "answer", "paragraph_support_idx"}],
"paragraphs": [{"idx", "title", "paragraph_text", "is_supporting"}]}``.

Output (in ``out``): ``corpus.jsonl`` (one document per distinct paragraph, ``musique/<title slug>``,
a suffix added when one title names two texts) and ``fixtures.jsonl``.

Rules:

* **Support is one sentence per hop, derived.** MuSiQue marks supporting *paragraphs* and gives
  each hop's question, answer and paragraph. A hop's span is the sentence of its paragraph
  (:func:`~ledgerscope.common.sentences.split_sentences`, the reader's splitter) that states the
  hop's answer (holds it whole, or one of its words: "Hall, who was the first president ...") and
  shares the most words with the hop's question and answer (holding the answer whole counts half a
  word; ties: the earlier sentence); a hop whose answer its paragraph does not state spans the whole
  paragraph (``annotations.support_fallback`` lists those hops). The hops'
  spans together are the **one sufficient set** (joint evidence across documents): the first hop
  ``primary``, the others ``joint``; two hops on one sentence share its span.
* Expected answer = ``answer``; aliases = ``answer_aliases``. Segment inferred as ``import squad``
  does (a free-standing number: ``number-scope``, else ``definition-referent``), recorded as
  inferred. ``answerable: false`` (MuSiQue-Full): an unanswerable control over the question's
  paragraphs. Adjudication ``draft``; stress set ``representative``; origin ``musique:<id>``;
  ``annotations.hops`` = the number of hops.
* Every paragraph is in the corpus, supporting or not (the distractors are what retrieval must
  pass over).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from ledgerscope.common.errors import InputError, Problem
from ledgerscope.common.sentences import split_sentences
from ledgerscope.inputs.coords import quote_context
from ledgerscope.inputs.fixtures import AnswerContract, Fixture, GoldSpan
from ledgerscope.inputs.importers import ImportReport, unanswerable_fixture
from ledgerscope.inputs.importers.squad import SEGMENT_RULE, write_import
from ledgerscope.inputs.sources import Corpus, Source, make_source

DATASET = "musique"
SUPPORT_RULE = (
    "sentence: per hop, the sentence of the hop's supporting paragraph that states the hop's answer and "
    "best matches the hop's question (ledgerscope.common.sentences.split_sentences); the whole "
    "paragraph when none states it; all hops jointly one sufficient set"
)
_WORD = re.compile(r"\w+")
_NUMBER = re.compile(r"(?<![A-Za-z0-9-])\d+(?:[.,]\d+)*(?![A-Za-z0-9]|-[A-Za-z0-9])")


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "untitled"


def _load(file: Path) -> list[tuple[str, Any]]:
    """(where, item) per question: a JSON list, or JSONL (``file:line``)."""
    try:
        text = file.read_bytes().decode("utf-8")
    except OSError as exc:
        raise InputError(Problem(str(file), None, "file", exc.strerror or str(exc))) from exc
    except UnicodeDecodeError as exc:
        raise InputError(Problem(str(file), None, "file", f"not UTF-8: {exc}")) from exc
    if text.lstrip().startswith("["):
        try:
            items = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(Problem(str(file), exc.lineno, "file", f"not valid JSON: {exc.msg}")) from exc
        return [(f"[{i}]", item) for i, item in enumerate(items)]
    out = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            out.append((f"line {n}", json.loads(line)))
        except json.JSONDecodeError as exc:
            raise InputError(Problem(str(file), n, "file", f"not valid JSON: {exc.msg}")) from exc
    return out


def import_musique(file: Path, out: Path) -> ImportReport:
    """Import a MuSiQue file into ``out`` (see the module docstring for the rules)."""
    file, out = Path(file), Path(out)
    report = ImportReport(dataset=DATASET)
    corpus = Corpus()
    fixtures: list[Fixture] = []
    seen: set[str] = set()
    for where, item in _load(file):
        problem = _problem(item)
        if problem:
            report.skipped.append(f"{where}: {problem}; skipped")
            continue
        qid = f"{DATASET}:{item['id']}"
        if qid in seen:
            report.skipped.append(f"{where}: duplicate question id {item['id']!r}; skipped")
            continue
        seen.add(qid)
        sources = {p["idx"]: _add(corpus, p) for p in item["paragraphs"]}
        report.answers += 1
        fx = _fixture(item, qid, sources, report)
        if fx is not None:
            fixtures.append(fx)
    if not fixtures and not report.skipped:
        raise InputError(Problem(str(file), None, "file", "no MuSiQue questions in the file"))
    write_import(out, corpus, fixtures, None, report)
    return report


def _problem(item: Any) -> str | None:
    """Why an upstream object is not a MuSiQue question (None: it is one)."""
    if not isinstance(item, dict):
        return "not a JSON object"
    for key, kind in (("id", str), ("question", str), ("paragraphs", list)):
        if not isinstance(item.get(key), kind):
            return f"no {kind.__name__} {key!r}"
    for p in item["paragraphs"]:
        if not isinstance(p, dict) or not isinstance(p.get("idx"), int):
            return "a paragraph without an integer 'idx'"
        if not isinstance(p.get("paragraph_text"), str) or not p["paragraph_text"].strip():
            return f"paragraph {p.get('idx')} has no text"
    if item.get("answerable", True) and not isinstance(item.get("question_decomposition"), list):
        return "no 'question_decomposition' list"
    return None


def _add(corpus: Corpus, paragraph: dict) -> Source:
    """The paragraph's document, added once; a title naming two texts gets a numbered suffix."""
    text = paragraph["paragraph_text"]
    base = f"{DATASET}/{_slug(str(paragraph.get('title') or 'untitled'))}"
    doc_id, k = base, 1
    while (existing := corpus.get(doc_id)) is not None:
        if existing.text == text:
            return existing
        k += 1
        doc_id = f"{base}-{k}"
    source = make_source(doc_id, text)
    corpus.add(source)
    return source


def _fixture(item: dict, qid: str, sources: dict[int, Source], report: ImportReport) -> Fixture | None:
    """One question as a fixture: its hops' support sentences jointly one sufficient set."""
    base: dict[str, Any] = {
        "qid": qid,
        "question": item["question"],
        "origin": qid,
        "adjudication": {"state": "draft", "note": "imported from musique, not adjudicated"},
        "stress_set": "representative",
    }
    hops = item.get("question_decomposition") or []
    if not item.get("answerable", True):
        return unanswerable_fixture(
            base, {"doc_ids": sorted({s.doc_id for s in sources.values()}), "hops": len(hops)}
        )
    answer = item.get("answer")
    if not isinstance(answer, str) or not answer.strip():
        report.skipped.append(f"{qid}: no answer; skipped")
        return None
    found = _hop_spans(qid, hops, sources, report)
    if found is None:
        return None
    spans, fallback = found
    expected = answer.strip()
    aliases = tuple(dict.fromkeys(a.strip() for a in item.get("answer_aliases") or [] if str(a).strip()))
    annotations: dict[str, Any] = {
        "segment_inferred": True,
        "segment_rule": SEGMENT_RULE,
        "support_rule": SUPPORT_RULE,
        "hops": len(hops),
    }
    if fallback:
        annotations["support_fallback"] = fallback
    return Fixture(
        segment="number-scope" if _NUMBER.search(expected) else "definition-referent",
        spans=tuple(spans),
        sufficient_sets=(tuple(s.span_id for s in spans),),
        answer=AnswerContract(expected=expected, aliases=tuple(a for a in aliases if a != expected)),
        annotations=annotations,
        **base,
    )


def _hop_spans(
    qid: str, hops: list, sources: dict[int, Source], report: ImportReport
) -> tuple[list[GoldSpan], list[int]] | None:
    """(one span per hop, the first ``primary``, two hops on one sentence sharing it; the hops whose
    paragraph does not state their answer), or None (reported) when a hop names no paragraph."""
    spans: list[GoldSpan] = []
    fallback: list[int] = []
    for h, hop in enumerate(hops):
        source = sources.get(hop.get("paragraph_support_idx")) if isinstance(hop, dict) else None
        if source is None:
            report.skipped.append(f"{qid}: hop {h + 1} names no paragraph of the question; skipped")
            return None
        start, end, found = _hop_interval(source.text, hop)
        if not found:
            fallback.append(h + 1)
        if any(s.doc_id == source.doc_id and (s.start, s.end) == (start, end) for s in spans):
            continue
        prefix, suffix = quote_context(source.text, start, end)
        spans.append(
            GoldSpan(
                f"h{h + 1}",
                source.doc_id,
                start,
                end,
                version=source.version,
                quote=source.text[start:end],
                prefix=prefix,
                suffix=suffix,
                dependency="primary" if not spans else "joint",
                label=f"hop {h + 1}",
            )
        )
    if not spans:
        report.skipped.append(f"{qid}: no hops; skipped")
        return None
    return spans, fallback


def _words(text: str) -> set[str]:
    """Content words cut to five letters (words of four letters or more: names, relations, numbers)."""
    return {w.casefold()[:5] for w in _WORD.findall(text) if len(w) >= 4 or w.isdigit()}


def _hop_interval(text: str, hop: dict) -> tuple[int, int, bool]:
    """(start, end, found): the sentence of the paragraph that states the hop's answer (it shares a word
    with the answer, or holds it whole) and best matches the hop's question and answer; the whole
    paragraph when no sentence states it."""
    answer = str(hop.get("answer") or "").strip()
    wanted = _words(answer)
    if not answer:
        return 0, len(text), False
    asked = _words(re.sub(r"#\d+", " ", str(hop.get("question") or ""))) | wanted
    best: tuple[float, int, int] | None = None
    for start, end in split_sentences(text):
        sentence = text[start:end]
        whole = re.search(re.escape(answer), sentence, re.IGNORECASE) is not None
        words = _words(sentence)
        if not whole and not words & wanted:
            continue
        score = len(words & asked) + (0.5 if whole else 0.0)
        if best is None or score > best[0]:
            best = (score, start, end)
    if best is None:
        return 0, len(text), False
    return best[1], best[2], True
