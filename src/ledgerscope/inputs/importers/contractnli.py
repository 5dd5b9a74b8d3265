"""Import a ContractNLI split (e.g. ``dev.json``) as a corpus plus support-only fixtures.

Input: ``{"documents": [{"id", "file_name", "text", "spans": [[start, end], ...],
"annotation_sets": [{"annotations": {"nda-N": {"choice", "spans": [index, ...]}}}]}],
"labels": {"nda-N": {"short_description", "hypothesis"}}}``; span offsets are
half-open code point ranges into ``text``.

Rules:

* **Documents.** One source per document, doc id ``contractnli/<id>``.
* **Entailment / Contradiction** with evidence: one fixture per (document,
  hypothesis), qid = origin = ``contractnli:<id>:<nda-N>``, question = the
  hypothesis, ``support_only: true`` (the answer judge does not grade NLI;
  ``answer.expected`` keeps the label, e.g. ``"Entailment"``). Spans are the
  evidence spans with their upstream offsets unchanged (span id ``s<index>``,
  the index into the document's ``spans`` list). Trailing whitespace and
  newlines inside upstream spans are kept: coverage ignores whitespace, and
  exact offsets stay comparable with the dataset. A span that is empty or
  whitespace only is skipped with a reason; a hypothesis left without evidence
  is skipped. The sufficient set is all evidence spans jointly (one set). Note
  that ContractNLI marks redundant evidence comprehensively, so this set can be
  stricter than necessary; ``annotations.evidence_may_be_redundant`` says so
  when there is more than one span.
* **NotMentioned**: ``answerable: false``, segment ``unanswerable``, no spans
  and no sets (``answer.expected = "NotMentioned"`` for reference). These are
  *not* support-only: as unanswerable controls they are scored by abstention
  and false assertion.
* **Qualifier cues**: ``except``, ``unless``, ``provided that``,
  ``notwithstanding``, ``subject to`` as whole words, case-insensitive. Every
  cue inside an evidence span is listed in ``annotations.qualifier_cues`` as
  ``{span_id, cue}``; that span gets dependency ``exception``. The first
  evidence span without a cue is ``primary`` and the others ``joint``. Cues in
  the document spans right before or after an evidence span (not themselves
  evidence) are listed in ``annotations.adjacent_qualifier_cues`` for review;
  they are not added as gold, because the annotators chose not to mark them.
* **Segment** (inferred, ``annotations.segment_inferred = true``):
  ``rule-exception`` when a cue lies inside the evidence; else
  ``joint-evidence`` when there are two or more evidence spans; else
  ``definition-referent``. Adjudication state ``draft``; stress set
  ``representative``.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

from ledgerscope.common.errors import InputError, Problem
from ledgerscope.inputs.coords import quote_context
from ledgerscope.inputs.fixtures import AnswerContract, Fixture, GoldSpan, write_fixtures
from ledgerscope.inputs.importers import ImportReport, read_json_file, unanswerable_fixture
from ledgerscope.inputs.sources import Corpus, make_source, write_corpus_jsonl

CUES = ("except", "unless", "provided that", "notwithstanding", "subject to")
_CUE = re.compile(r"\b(" + "|".join(c.replace(" ", r"\s+") for c in CUES) + r")\b", re.IGNORECASE)
SEGMENT_RULE = (
    "qualifier cue inside the evidence -> rule-exception; two or more evidence spans -> "
    "joint-evidence; else definition-referent; NotMentioned -> unanswerable"
)
LABELS = ("Entailment", "Contradiction", "NotMentioned")


def _cues(text: str) -> list[str]:
    """The distinct cues in ``text``, normalised to the spelling in :data:`CUES`."""
    return list(dict.fromkeys(" ".join(m.group(1).lower().split()) for m in _CUE.finditer(text)))


def _load(file: Path) -> dict:
    data = read_json_file(file)
    if not isinstance(data, dict) or not isinstance(data.get("documents"), list):
        raise InputError(Problem(str(file), None, "documents", "expected an object with a 'documents' list"))
    if not isinstance(data.get("labels"), dict):
        raise InputError(Problem(str(file), None, "labels", "expected a 'labels' object"))
    return data


def import_contractnli(file: Path, out: Path) -> ImportReport:
    """Import a ContractNLI JSON file into ``out`` (see the module docstring for the rules)."""
    file, out = Path(file), Path(out)
    data = _load(file)
    labels: dict[str, Any] = data["labels"]
    report = ImportReport(dataset="contractnli")
    corpus = Corpus()
    fixtures: list[Fixture] = []
    adjacent_only = 0

    for di, doc in enumerate(data["documents"]):
        where = f"documents[{di}]"
        if not isinstance(doc, dict) or doc.get("id") is None or not isinstance(doc.get("text"), str):
            report.skipped.append(f"{where}: no 'id' or 'text'; document skipped")
            continue
        raw_id = str(doc["id"])
        text: str = doc["text"]
        doc_id = f"contractnli/{raw_id}"
        if doc_id in corpus:
            report.skipped.append(f"{where}: duplicate document id {raw_id}; document skipped")
            continue
        source = make_source(doc_id, text)
        corpus.add(source)
        doc_spans = doc.get("spans") or []
        sets = doc.get("annotation_sets") or []
        annotations = sets[0].get("annotations") if sets and isinstance(sets[0], dict) else None
        if not isinstance(annotations, dict):
            report.skipped.append(f"{doc_id}: no annotation_sets[0].annotations; no questions")
            continue
        if len(sets) > 1:
            report.notes.append(f"{doc_id}: {len(sets)} annotation sets; only the first is used")
        for key in sorted(annotations, key=_nda_order):
            report.answers += 1
            fx = _fixture(key, annotations[key], labels, source, doc_spans, report)
            if fx is None:
                continue
            if fx.annotations.get("adjacent_qualifier_cues") and fx.segment != "rule-exception":
                adjacent_only += 1
            fixtures.append(fx)

    report.documents = len(corpus)
    report.questions = len(fixtures)
    report.spans = sum(len(fx.spans) for fx in fixtures)
    report.licenses = {s.doc_id: "CC-BY-4.0 (dataset licence)" for s in corpus}
    if adjacent_only:
        report.notes.append(
            f"{adjacent_only} evidence set(s) have a qualifier cue only in an adjacent, "
            "non-evidence sentence (listed in annotations.adjacent_qualifier_cues, not gold)"
        )
    out.mkdir(parents=True, exist_ok=True)
    corpus_path, fixtures_path = out / "corpus.jsonl", out / "fixtures.jsonl"
    write_corpus_jsonl(corpus, corpus_path)
    write_fixtures(fixtures, fixtures_path)
    report.corpus_path, report.fixtures_path = str(corpus_path), str(fixtures_path)
    return report


def _nda_order(key: str) -> tuple[int, str]:
    m = re.fullmatch(r"nda-(\d+)", key)
    return (int(m.group(1)), key) if m else (1 << 30, key)


def _fixture(
    key: str, ann: Any, labels: dict[str, Any], source: Any, doc_spans: list, report: ImportReport
) -> Fixture | None:
    raw_doc = source.doc_id.split("/", 1)[1]
    qid = f"contractnli:{raw_doc}:{key}"
    label = labels.get(key)
    hypothesis = label.get("hypothesis") if isinstance(label, dict) else None
    if not isinstance(hypothesis, str) or not hypothesis.strip():
        report.skipped.append(f"{qid}: no hypothesis text in labels[{key!r}]; skipped")
        return None
    choice = ann.get("choice") if isinstance(ann, dict) else None
    if choice not in LABELS:
        report.skipped.append(f"{qid}: unknown choice {choice!r}; skipped")
        return None
    base: dict[str, Any] = {
        "qid": qid,
        "question": hypothesis,
        "support_only": True,
        "adjudication": {"state": "draft", "note": "imported from ContractNLI, not adjudicated"},
        "stress_set": "representative",
        "origin": qid,
    }
    short = label.get("short_description")
    extra: dict[str, Any] = {"nli_label": choice, "hypothesis_key": key}
    if isinstance(short, str) and short:
        extra["short_description"] = short
    if choice == "NotMentioned":
        if ann.get("spans"):
            report.notes.append(f"{qid}: NotMentioned with evidence spans; the spans are ignored")
        # An unanswerable control is scored by abstention / false assertion, so not support-only.
        base["support_only"] = False
        annotations = {
            "segment_inferred": True,
            "segment_rule": SEGMENT_RULE,
            "doc_id": source.doc_id,
            **extra,
        }
        return unanswerable_fixture(base, annotations, expected=choice)

    indices = ann.get("spans") or []
    spans, cues_found, adjacent = _evidence(
        qid, indices if isinstance(indices, list) else [indices], source, doc_spans, report
    )
    if not spans:
        report.skipped.append(f"{qid}: {choice} without any usable evidence span; skipped")
        return None
    return _evidence_fixture(choice, spans, cues_found, adjacent, extra, base)


def _evidence(
    qid: str, indices: list, source: Any, doc_spans: list, report: ImportReport
) -> tuple[list[GoldSpan], list[dict[str, str]], list[dict[str, Any]]]:
    """The evidence spans an annotation names (each bad index, range or empty span skipped, said in
    the report), the qualifier cues inside them, and those in the sentences next to them."""
    text = source.text
    spans: list[GoldSpan] = []
    cues_found: list[dict[str, str]] = []
    adjacent: list[dict[str, Any]] = []
    evidence = {i for i in indices if isinstance(i, int) and not isinstance(i, bool)}
    for idx in [i for n, i in enumerate(indices) if i not in indices[:n]]:
        sid = f"s{idx}"
        if not isinstance(idx, int) or isinstance(idx, bool) or not 0 <= idx < len(doc_spans):
            report.skipped.append(
                f"{qid}: evidence index {idx!r} is not a span of the document; span skipped"
            )
            continue
        rng = doc_spans[idx]
        if (
            not isinstance(rng, list | tuple)
            or len(rng) != 2
            or not all(isinstance(v, int) for v in rng)
            or not 0 <= rng[0] <= rng[1] <= len(text)
        ):
            report.skipped.append(f"{qid}: {sid} has range {rng!r} outside [0, {len(text)}]; span skipped")
            continue
        start, end = rng
        quote = text[start:end]
        if not quote.strip():
            report.skipped.append(f"{qid}: {sid} [{start},{end}) is empty or whitespace only; span skipped")
            continue
        found = _cues(quote)
        cues_found.extend({"span_id": sid, "cue": c} for c in found)
        adjacent.extend(_adjacent_cues(idx, sid, evidence, doc_spans, text))
        prefix, suffix = quote_context(text, start, end)
        spans.append(
            GoldSpan(
                sid,
                source.doc_id,
                start,
                end,
                version=source.version,
                quote=quote,
                prefix=prefix,
                suffix=suffix,
                dependency="exception" if found else "joint",
            )
        )
    return spans, cues_found, adjacent


def _adjacent_cues(
    idx: int, sid: str, evidence: set[int], doc_spans: list, text: str
) -> list[dict[str, Any]]:
    """Qualifier cues in the non-evidence spans either side of evidence span ``idx``."""
    found = []
    for j in (idx - 1, idx + 1):
        if j in evidence or not 0 <= j < len(doc_spans):
            continue
        js, je = doc_spans[j]
        found.extend(
            {"span_index": j, "start": js, "end": je, "next_to": sid, "cue": c} for c in _cues(text[js:je])
        )
    return found


def _evidence_fixture(
    choice: str,
    spans: list[GoldSpan],
    cues_found: list[dict[str, str]],
    adjacent: list[dict[str, Any]],
    extra: dict[str, Any],
    base: dict[str, Any],
) -> Fixture:
    """An Entailment or Contradiction: its first joint span is primary; the segment follows the
    cues (a qualifier: rule-exception) and the span count (joint-evidence, or definition-referent)."""
    for i, s in enumerate(spans):
        if s.dependency == "joint":
            spans[i] = replace(s, dependency="primary")
            break
    if cues_found:
        segment = "rule-exception"
    elif len(spans) > 1:
        segment = "joint-evidence"
    else:
        segment = "definition-referent"
    notes: dict[str, Any] = {
        "segment_inferred": True,
        "segment_rule": SEGMENT_RULE,
        **extra,
        "qualifier_cues": cues_found,
    }
    if adjacent:
        notes["adjacent_qualifier_cues"] = list({json.dumps(a, sort_keys=True): a for a in adjacent}.values())
    if len(spans) > 1:
        notes["evidence_may_be_redundant"] = True
    return Fixture(
        segment=segment,
        spans=tuple(spans),
        sufficient_sets=(tuple(s.span_id for s in spans),),
        answer=AnswerContract(expected=choice),
        annotations=notes,
        **base,
    )
