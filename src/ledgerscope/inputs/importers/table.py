"""A spreadsheet of questions (CSV or TSV) into canonical fixtures with quote selectors.

What a team usually has is a sheet: a question, the document(s) that answer it, perhaps the answer
and perhaps the sentences it was read from. One row per question; columns (header names, any
order, case-insensitive; unknown columns are an error so a typo is not silently ignored):

* ``question`` (required), ``doc_id`` (required unless ``answerable`` is false; several documents
  separated by ``;``): ids of the corpus given with ``--corpus``;
* ``qid`` (default ``row-N``, N the sheet's line), ``answer`` (the expected answer; empty: the
  question is support-only, its answer not judged), ``aliases`` (``;``-separated),
  ``segment`` (one of the fixture segments; inferred when empty, recorded as inferred),
  ``stress_set`` (``representative`` by default or ``enriched``), ``answerable`` (``false``: an
  unanswerable control);
* ``evidence``: the quoted sentence(s) that justify the answer, several separated by ``||``; each
  must occur verbatim in one of the row's documents and becomes a quote-selector span; together
  they are the one sufficient set (joint evidence). **Without evidence** the answer is located in
  the row's documents (first occurrence, exact, else ignoring case) and the sentence(s) holding it
  become the span, as ``import squad --support sentence`` does; an answer found nowhere is a
  problem naming the row (give the evidence).

Every problem is located ``file:line: column: reason`` and nothing is written unless the whole sheet
converts and the written fixtures validate against the corpus
(:func:`ledgerscope.inputs.validate.validate_fixtures`).
"""

from __future__ import annotations

import csv
import json
import tempfile
from pathlib import Path
from typing import Any

from ledgerscope.common.atomic import atomic_write_text
from ledgerscope.common.errors import InputError, Problem
from ledgerscope.common.sentences import split_sentences
from ledgerscope.inputs.fixtures.model import FORMAT, SEGMENTS, STRESS_SETS
from ledgerscope.inputs.importers import ImportReport
from ledgerscope.inputs.importers.squad import support_interval
from ledgerscope.inputs.sources import Corpus, load_corpus, write_corpus_jsonl

COLUMNS = (
    "qid",
    "question",
    "doc_id",
    "answer",
    "aliases",
    "evidence",
    "segment",
    "stress_set",
    "answerable",
)
EVIDENCE_SEPARATOR = "||"


def _rows(file: Path) -> list[tuple[int, dict[str, str]]]:
    """(line, row) per data row, header names lower-cased; unreadable or unknown columns: InputError."""
    try:
        text = file.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(Problem(str(file), None, "file", f"cannot read as UTF-8 text: {exc}")) from None
    dialect = csv.excel_tab if file.suffix.lower() in (".tsv", ".tab") else csv.excel
    reader = csv.DictReader(text.splitlines(), dialect=dialect)
    header = [h.strip().lower() for h in reader.fieldnames or []]
    unknown = [h for h in header if h not in COLUMNS]
    missing = [h for h in ("question",) if h not in header]
    if unknown or missing:
        why = (f"unknown column(s) {', '.join(unknown)}" if unknown else "") + (
            f"missing column(s) {', '.join(missing)}" if missing else ""
        )
        raise InputError(Problem(str(file), 1, "header", f"{why}; known: {', '.join(COLUMNS)}"))
    reader.fieldnames = header
    return [(reader.line_num, {k: (v or "").strip() for k, v in row.items() if k}) for row in reader]


def _split(value: str, sep: str) -> list[str]:
    return [v.strip() for v in value.split(sep) if v.strip()]


def _locate(answer: str, docs: list[str], corpus: Corpus) -> tuple[str, str] | None:
    """(doc id, the sentence(s) holding the answer's first occurrence) or None."""
    for folded in (False, True):
        for doc in docs:
            text = corpus.get(doc).text
            hay, needle = (text.casefold(), answer.casefold()) if folded else (text, answer)
            at = hay.find(needle)
            if at >= 0:
                s, e = support_interval(split_sentences(text), at, at + len(answer))
                return doc, text[s:e]
    return None


def _segment(row: dict[str, str], n_spans: int, answerable: bool) -> tuple[str, bool]:
    """(segment, inferred): the row's, else unanswerable / joint-evidence / number-scope /
    definition-referent by what the row holds."""
    if row.get("segment"):
        return row["segment"], False
    if not answerable:
        return "unanswerable", True
    if n_spans > 1:
        return "joint-evidence", True
    numeric = any(c.isdigit() for c in row.get("answer", ""))
    return ("number-scope" if numeric else "definition-referent"), True


def _quotes(
    line: int, row: dict[str, str], docs: list[str], corpus: Corpus, where: str, problems: list[Problem]
) -> list[tuple[str, str]]:
    """An answerable row's evidence as (document, quote): the evidence column's quotes, each found
    verbatim in one of the row's documents, else the answer located in them; problems appended."""
    answer = row.get("answer", "")
    quotes: list[tuple[str, str]] = []
    for q in _split(row.get("evidence", ""), EVIDENCE_SEPARATOR):
        doc = next((d for d in docs if q in corpus.get(d).text), None)
        if doc is None:
            problems.append(
                Problem(where, line, "evidence", f"quote not found verbatim in {', '.join(docs)}: {q[:60]!r}")
            )
        quotes.append((doc or "", q))
    if not quotes and answer:
        found = _locate(answer, docs, corpus)
        if found is None:
            problems.append(
                Problem(
                    where,
                    line,
                    "answer",
                    f"{answer[:60]!r} occurs in none of {', '.join(docs)}; give the evidence column",
                )
            )
        else:
            quotes.append(found)
    if not quotes and not answer:
        problems.append(Problem(where, line, "evidence", "empty, and no answer to locate it by"))
    return quotes


def _fixture(
    line: int, row: dict[str, str], corpus: Corpus, where: str, problems: list[Problem]
) -> dict[str, Any] | None:
    """One row as a canonical fixture (a dict), or None with the reasons in ``problems``."""
    n0 = len(problems)
    question, answer = row.get("question", ""), row.get("answer", "")
    answerable = row.get("answerable", "true").lower() not in ("false", "no", "0")
    docs = _split(row.get("doc_id", ""), ";")
    if not question:
        problems.append(Problem(where, line, "question", "empty"))
    if answerable and not docs:
        problems.append(Problem(where, line, "doc_id", "empty (an answerable question needs its documents)"))
    for doc in docs:
        if doc not in corpus:
            problems.append(Problem(where, line, "doc_id", f"{doc!r} is not in the corpus"))
    if len(problems) > n0:
        return None
    quotes = _quotes(line, row, docs, corpus, where, problems) if answerable else []
    if len(problems) > n0:
        return None
    segment, inferred = _segment(row, len(quotes), answerable)
    spans = [
        {"id": f"e{i + 1}", "doc_id": d, "quote": q, "dependency": "primary" if i == 0 else "joint"}
        for i, (d, q) in enumerate(quotes)
    ]
    fx: dict[str, Any] = {
        "format": FORMAT,
        "qid": row.get("qid") or f"row-{line}",
        "question": question,
        "segment": segment,
        "stress_set": row.get("stress_set") or "representative",
        "answerable": answerable,
        "support_only": answerable and not answer,
        "answer": {"expected": answer or None, "aliases": _split(row.get("aliases", ""), ";")},
        "spans": spans,
        "sufficient_sets": [[s["id"] for s in spans]] if spans else [],
        "origin": f"{where}:{line}",
    }
    if inferred:
        fx["annotations"] = {"segment_inferred": True}
    if fx["segment"] not in SEGMENTS:
        problems.append(Problem(where, line, "segment", f"unknown; known: {', '.join(SEGMENTS)}"))
    if fx["stress_set"] not in STRESS_SETS:
        problems.append(Problem(where, line, "stress_set", f"unknown; known: {', '.join(STRESS_SETS)}"))
    return None if len(problems) > n0 else fx


def import_table(file: Path, corpus_path: Path, out: Path) -> ImportReport:
    """Convert the sheet ``file`` over the corpus at ``corpus_path`` into ``out`` (module docstring)."""
    from ledgerscope.inputs.validate import validate_fixtures

    file, out = Path(file), Path(out)
    corpus = load_corpus(corpus_path)
    problems: list[Problem] = []
    fixtures, seen = [], set()
    for line, row in _rows(file):
        fx = _fixture(line, row, corpus, str(file), problems)
        if fx is not None and fx["qid"] in seen:
            problems.append(Problem(str(file), line, "qid", f"duplicate {fx['qid']!r}"))
        elif fx is not None:
            seen.add(fx["qid"])
            fixtures.append(fx)
    if problems:
        raise InputError(problems)
    text = "".join(json.dumps(fx, ensure_ascii=False) + "\n" for fx in fixtures)
    with tempfile.TemporaryDirectory() as tmp:  # validated before anything reaches ``out``
        (Path(tmp) / "fixtures.jsonl").write_text(text, encoding="utf-8")
        _, _, invalid = validate_fixtures(Path(tmp) / "fixtures.jsonl", corpus_path)
    if invalid:
        raise InputError(invalid)
    out.mkdir(parents=True, exist_ok=True)
    corpus_out, fixtures_out = out / "corpus.jsonl", out / "fixtures.jsonl"
    write_corpus_jsonl(corpus, corpus_out)  # the whole corpus: retrieval needs its distractors
    atomic_write_text(fixtures_out, text)
    report = ImportReport(
        dataset="table",
        documents=len(corpus),
        questions=len(fixtures),
        spans=sum(len(fx["spans"]) for fx in fixtures),
        answers=len(fixtures),
    )
    report.corpus_path, report.fixtures_path = str(corpus_out), str(fixtures_out)
    return report
