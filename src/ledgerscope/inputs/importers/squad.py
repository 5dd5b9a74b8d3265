"""Import a SQuAD-format file (SQuAD 1.1/2.0, COVID-QA) as a corpus plus fixtures.

Input: ``{"data": [{"title"?, "paragraphs": [{"context", "document_id"?, "qas":
[{"id", "question", "answers": [{"text", "answer_start"}], "is_impossible"?}]}]}]}``
with ``answer_start`` in code points (Python ``str`` indices).

Output (in ``out``): ``corpus.jsonl`` (one source per distinct context),
``fixtures.jsonl`` (canonical fixtures) and, only with ``repair=True``,
``repairs.jsonl`` (one line per changed offset).

Rules:

* **Document ids.** ``<dataset>/<document_id>`` when the paragraph has a
  ``document_id`` (COVID-QA does), else ``<dataset>/<title slug>/<paragraph
  index>`` when the article has a title, else ``<dataset>/<article
  index>-<paragraph index>``. If one id would name two different texts, the
  later one gets ``-<article index>-<paragraph index>`` appended. ``dataset``
  is ``covidqa`` when the file name says so, else ``squad`` (override with the
  keyword argument).
* **Offsets are verified, never guessed.** For every answer,
  ``context[answer_start:answer_start + len(text)]`` must equal ``text``. Each
  mismatch is one line in ``report.offset_mismatches``. Without ``repair`` a
  question with any mismatching answer is left out (one line in
  ``report.skipped``): dropping only the bad answer would silently remove an
  alternative sufficient set. With ``repair=True`` an answer is moved to the
  nearest exact occurrence of its text within ±3 code points of the declared
  start (smallest ``|shift|``; ties go to the earlier position); every move is
  written to ``repairs.jsonl``. Answers whose text is not within ±3 are never
  repaired and their question is skipped.
* **Support** (``support``, recorded per fixture as ``annotations.support_rule``).
  A SQuAD answer span marks the answer, not the evidence (DESIGN.md, "Support
  for answer-span datasets"):

  - ``sentence`` (the default): the support span is the sentence or sentences
    of the context that contain the answer span: every sentence of
    :func:`~ledgerscope.common.sentences.split_sentences` (the splitter the
    reader uses) that overlaps the answer, joined into one interval from the
    first one's start to the last one's end. One span per distinct interval
    (``s0``, ``s1``, ...), each its own alternative sufficient set; the
    verified answer offsets are kept in ``annotations.answer_spans``
    (``[start, end]`` code points, one per answer) so nothing is lost.
  - ``answer`` (the old rule): one span per distinct (start, end) answer
    (``a0``, ...), offsets exactly as verified (surrounding whitespace
    included; coverage ignores whitespace), each its own sufficient set.

  Dependency ``primary`` either way. Expected answer = first answer text
  (stripped); aliases = the other distinct stripped texts.
* **Segment (inferred, not adjudicated).** ``unanswerable`` for
  ``is_impossible`` questions; else ``number-scope`` when the expected answer
  contains a free-standing number (a digit run not glued to letters or a
  hyphen, so ``12%``, ``3.5 days`` and ``2009`` count but the names ``HIV-1``,
  ``COVID-19`` and ``SARS-CoV-2`` do not); else ``definition-referent``. Recorded as
  ``annotations.segment_inferred = true`` with the rule, so nobody mistakes it
  for a human label. Adjudication state ``draft``; stress set
  ``representative``; origin ``<dataset>:<question id>``.
* **Licences.** A ``License: <x>`` line in a context (COVID-QA articles carry
  one) is recorded per document in ``report.licenses``; ``"not stated"``
  otherwise. Nothing is filtered here: shipping decisions are made elsewhere.
"""

from __future__ import annotations

import contextlib
import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

from ledgerscope.common.atomic import atomic_write_text
from ledgerscope.common.errors import InputError, Problem
from ledgerscope.common.sentences import split_sentences
from ledgerscope.inputs.coords import quote_context
from ledgerscope.inputs.fixtures import AnswerContract, Fixture, GoldSpan, write_fixtures
from ledgerscope.inputs.importers import ImportReport, read_json_file, unanswerable_fixture
from ledgerscope.inputs.sources import Corpus, make_source, write_corpus_jsonl

MAX_SHIFT = 3
REPAIR_RULE = "nearest exact occurrence within ±3 code points"
SEGMENT_RULE = (
    "is_impossible -> unanswerable; expected answer contains a free-standing number "
    "(not part of a name like HIV-1) -> number-scope; else definition-referent"
)
SUPPORT_RULES = {
    "sentence": "sentence: the sentence(s) of the context containing the answer span "
    "(ledgerscope.common.sentences.split_sentences), joined into one interval",
    "answer": "answer: the answer span itself",
}
_NUMBER = re.compile(r"(?<![A-Za-z0-9-])\d+(?:[.,]\d+)*(?![A-Za-z0-9]|-[A-Za-z0-9])")
_LICENSE = re.compile(r"^License:\s*(\S.*?)\s*$", re.MULTILINE)


def _short(text: str, n: int = 60) -> str:
    return repr(text if len(text) <= n else text[: n - 1] + "…")


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "untitled"


def _find_shift(context: str, text: str, start: int) -> int | None:
    """The smallest shift in [-3, +3] (ties: earlier) at which ``text`` occurs exactly."""
    for shift in sorted(range(-MAX_SHIFT, MAX_SHIFT + 1), key=lambda k: (abs(k), k)):
        pos = start + shift
        if pos >= 0 and context[pos : pos + len(text)] == text:
            return shift
    return None


def _load(file: Path) -> list[dict]:
    data = read_json_file(file)
    articles = data.get("data") if isinstance(data, dict) else None
    if not isinstance(articles, list):
        raise InputError(Problem(str(file), None, "data", "expected a SQuAD object with a 'data' list"))
    return articles


def import_squad(
    file: Path,
    out: Path,
    repair: bool = False,
    *,
    dataset: str | None = None,
    support: str = "sentence",
) -> ImportReport:
    """Import a SQuAD-format JSON file into ``out`` (see the module docstring for the rules)."""
    if support not in SUPPORT_RULES:
        raise InputError(
            Problem(
                "--support", None, "support", f"must be one of {', '.join(SUPPORT_RULES)}, not {support!r}"
            )
        )
    file, out = Path(file), Path(out)
    if dataset is None:
        dataset = "covidqa" if "covidqa" in file.name.lower().replace("-", "") else "squad"
    articles = _load(file)
    report = ImportReport(dataset=dataset)
    corpus = Corpus()
    fixtures: list[Fixture] = []
    repairs: list[dict[str, Any]] = []
    seen_qids: set[str] = set()
    sentence_cache: dict[str, list[tuple[int, int]]] = {}

    for ai, article in enumerate(articles):
        if not isinstance(article, dict) or not isinstance(article.get("paragraphs"), list):
            report.skipped.append(f"data[{ai}]: no 'paragraphs' list; article skipped")
            continue
        title = article.get("title")
        for pi, para in enumerate(article["paragraphs"]):
            where = f"data[{ai}].paragraphs[{pi}]"
            context = para.get("context") if isinstance(para, dict) else None
            if not isinstance(context, str) or not context:
                report.skipped.append(f"{where}: no context; paragraph and its questions skipped")
                continue
            source = make_source(_doc_id(dataset, para, title, ai, pi, corpus, context), context)
            if source.doc_id not in corpus:
                corpus.add(source)
                lic = _LICENSE.search(context)
                report.licenses[source.doc_id] = lic.group(1) if lic else "not stated"
            for qi, qa in enumerate(para.get("qas") or []):
                fx = _question(qa, f"{where}.qas[{qi}]", dataset, source, repair, report, repairs, seen_qids)
                if fx is not None:
                    fx = _with_support(fx, source, support, sentence_cache)
                if fx is not None:
                    fixtures.append(fx)

    write_import(out, corpus, fixtures, repairs if repair else None, report)
    return report


def write_import(
    out: Path,
    corpus: Corpus,
    fixtures: list[Fixture],
    repairs: list[dict[str, Any]] | None,
    report: ImportReport,
) -> None:
    """Count what was imported into ``report`` and write it: corpus, fixtures, and the repairs
    (``None``: not a repair run, so a repairs file an earlier run left is removed)."""
    used = {d for fx in fixtures for d in fx.doc_ids}
    report.documents = len(corpus)
    report.questions = len(fixtures)
    report.spans = sum(len(fx.spans) for fx in fixtures)
    if len(used) < len(corpus):
        report.notes.append(
            f"{len(corpus) - len(used)} document(s) are in the corpus without any written question"
        )
    out.mkdir(parents=True, exist_ok=True)
    corpus_path, fixtures_path = out / "corpus.jsonl", out / "fixtures.jsonl"
    write_corpus_jsonl(corpus, corpus_path)
    write_fixtures(fixtures, fixtures_path)
    report.corpus_path, report.fixtures_path = str(corpus_path), str(fixtures_path)
    repairs_path = out / "repairs.jsonl"
    if repairs is not None:
        atomic_write_text(
            repairs_path,
            "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in repairs),
        )
        report.repairs_path = str(repairs_path)
    else:
        # A repairs file left by an earlier repair run would describe fixtures not written now.
        with contextlib.suppress(FileNotFoundError):
            repairs_path.unlink()


def _doc_id(dataset: str, para: dict, title: Any, ai: int, pi: int, corpus: Corpus, context: str) -> str:
    if para.get("document_id") is not None:
        doc_id = f"{dataset}/{_slug(str(para['document_id']))}"
    elif isinstance(title, str) and title.strip():
        doc_id = f"{dataset}/{_slug(title)}/{pi}"
    else:
        doc_id = f"{dataset}/{ai}-{pi}"
    existing = corpus.get(doc_id)
    if existing is not None and existing.text != context:
        doc_id = f"{doc_id}-{ai}-{pi}"
    return doc_id


def _question(
    qa: Any,
    where: str,
    dataset: str,
    source: Any,
    repair: bool,
    report: ImportReport,
    repairs: list[dict[str, Any]],
    seen_qids: set[str],
) -> Fixture | None:
    """One SQuAD question as a fixture: unanswerable when marked impossible, else over its located
    answers; None (reported) when it has no id, repeats one, or an answer cannot be placed."""
    if not isinstance(qa, dict) or qa.get("id") is None or not isinstance(qa.get("question"), str):
        report.skipped.append(f"{where}: question without 'id' or 'question' text; skipped")
        return None
    raw_id = str(qa["id"])
    qid = f"{dataset}:{raw_id}"
    if qid in seen_qids:
        report.skipped.append(f"{qid}: duplicate question id ({where}); skipped")
        return None
    seen_qids.add(qid)
    answers = qa.get("answers") or []
    base = {
        "qid": qid,
        "question": qa["question"],
        "origin": f"{dataset}:{raw_id}",
        "adjudication": {"state": "draft", "note": f"imported from {dataset}, not adjudicated"},
        "stress_set": "representative",
    }
    if qa.get("is_impossible"):
        return unanswerable_fixture(
            base, {"segment_inferred": True, "segment_rule": SEGMENT_RULE, "doc_id": source.doc_id}
        )
    if not isinstance(answers, list) or not answers:
        report.skipped.append(f"{qid}: no answers and not marked is_impossible; skipped")
        return None

    report.answers += len(answers)
    located = _locate_answers(qid, answers, source, repair, report, repairs)
    if located is None:
        return None
    return _answer_fixture(located, source, base)


def _locate_answers(
    qid: str, answers: list, source: Any, repair: bool, report: ImportReport, repairs: list[dict[str, Any]]
) -> list[tuple[int, int, str]] | None:
    """Each answer's (start, end, upstream text) in the context; an offset off by a few code points
    is repaired (with ``repair``, recorded in ``repairs``) or fails the question (None, reported)."""
    context = source.text
    located: list[tuple[int, int, str]] = []  # (start, end, upstream text)
    failures: list[str] = []
    for k, ans in enumerate(answers):
        text = ans.get("text") if isinstance(ans, dict) else None
        start = ans.get("answer_start") if isinstance(ans, dict) else None
        if not isinstance(text, str) or not text.strip():
            failures.append(f"answer {k} has no text")
            continue
        if not isinstance(start, int) or isinstance(start, bool):
            failures.append(f"answer {k} has no integer answer_start")
            continue
        if start >= 0 and context[start : start + len(text)] == text:
            located.append((start, start + len(text), text))
            continue
        sliced = context[max(0, start) : max(0, start) + len(text)]
        shift = _find_shift(context, text, start)
        found = (
            f"text found at {start + shift} (shift {shift:+d})"
            if shift is not None
            else f"text not found within ±{MAX_SHIFT}"
        )
        report.offset_mismatches.append(
            f"{qid}: answer {k}: declared start {start} slices {_short(sliced)} "
            f"instead of {_short(text)}; {found}"
        )
        if shift is None:
            failures.append(
                f"answer {k} does not slice at {start} and its text is not within ±{MAX_SHIFT} code points"
            )
        elif not repair:
            failures.append(f"answer {k} is off by {shift:+d} (not repaired without the repair option)")
        else:
            new = start + shift
            repairs.append(
                {
                    "qid": qid,
                    "doc_id": source.doc_id,
                    "answer": k,
                    "old_start": start,
                    "new_start": new,
                    "shift": shift,
                    "text": text,
                    "rule": REPAIR_RULE,
                }
            )
            report.repaired += 1
            located.append((new, new + len(text), text))
    if failures:
        report.skipped.append(f"{qid}: left out of the fixtures: {'; '.join(failures)}")
        return None
    return located


def _context_span(span_id: str, source: Any, context: str, start: int, end: int, label: str = "") -> GoldSpan:
    """A primary gold span over ``context[start:end]`` of ``source``, with the quote and its context."""
    prefix, suffix = quote_context(context, start, end)
    return GoldSpan(
        span_id,
        source.doc_id,
        start,
        end,
        version=source.version,
        quote=context[start:end],
        prefix=prefix,
        suffix=suffix,
        dependency="primary",
        label=label,
    )


def _answer_fixture(located: list[tuple[int, int, str]], source: Any, base: dict[str, Any]) -> Fixture:
    """One span per distinct located answer, each a sufficient set alone; the first answer's text is
    expected, the others aliases; a number in it makes the segment number-scope."""
    context = source.text
    spans: list[GoldSpan] = []
    for start, end, _text in located:
        if any(s.start == start and s.end == end for s in spans):
            continue
        spans.append(_context_span(f"a{len(spans)}", source, context, start, end))
    texts = list(dict.fromkeys(t.strip() for _s, _e, t in located))
    expected = texts[0]
    segment = "number-scope" if _NUMBER.search(expected) else "definition-referent"
    return Fixture(
        segment=segment,
        spans=tuple(spans),
        sufficient_sets=tuple((s.span_id,) for s in spans),
        answer=AnswerContract(expected=expected, aliases=tuple(texts[1:])),
        annotations={"segment_inferred": True, "segment_rule": SEGMENT_RULE},
        **base,
    )


def support_interval(sentences: list[tuple[int, int]], start: int, end: int) -> tuple[int, int]:
    """The sentence(s) overlapping ``[start, end)`` as one interval (the answer itself if none does)."""
    hit = [(s, e) for s, e in sentences if s < end and e > start]
    if not hit:
        return start, end
    return min(start, hit[0][0]), max(end, hit[-1][1])


def _with_support(fx: Fixture, source: Any, support: str, cache: dict) -> Fixture:
    """Apply the declared support rule to an imported question (its spans are its answers)."""
    annotations = {**fx.annotations, "support_rule": SUPPORT_RULES[support]}
    if support == "answer" or not fx.spans:
        return replace(fx, annotations=annotations)
    context = source.text
    sentences = cache.get(source.doc_id)
    if sentences is None:
        sentences = cache[source.doc_id] = split_sentences(context)
    intervals = list(dict.fromkeys(support_interval(sentences, s.start, s.end) for s in fx.spans))
    spans = []
    for k, (start, end) in enumerate(intervals):
        spans.append(_context_span(f"s{k}", source, context, start, end, "support sentence(s)"))
    annotations["answer_spans"] = [[s.start, s.end] for s in fx.spans]
    return replace(
        fx, spans=tuple(spans), sufficient_sets=tuple((s.span_id,) for s in spans), annotations=annotations
    )
