"""Exports of a selection of ledger records, for re-annotation and for other tools.

``export(ledger, where, fmt, out)`` selects the records of ``record_view``
(:func:`ledgerscope.analysis.diagnosis.build_record_view`) that the predicate ``where`` accepts and writes
them in one of four formats. The ledger is only read. Every output is written
to a temporary path beside ``out`` and renamed into place (a directory is
built beside it and renamed whole), so a failure leaves no partial output and
an earlier ``out`` untouched. ``out`` may not lie inside the ledger.

Each format lives in its own module, whose docstring gives the layout:

``fixtures`` (:mod:`.fixtures`)
    canonical fixtures of the selected questions, flagged for re-annotation;
``label-studio`` (:mod:`.label_studio`)
    Label Studio tasks (gold and retrieved regions) plus their labeling config;
``label-studio-tasks`` (:mod:`.reannotation`)
    Label Studio tasks for re-annotating gold, one per question (or per (question, document)), plus
    their labeling config; read back by ``ledgerscope import label-studio``;
``trec`` (:mod:`.trec`)
    a directory of run and qrels files per (arm, phase);
``jsonl`` (:mod:`.jsonl`)
    one self-contained line per record: columns, candidates, diagnosis.

Restricted source text (documents with access labels) is withheld unless
``include_restricted`` is set (:mod:`.redaction`): ids, offsets and digests
stay, the text reads ``[redacted: restricted source text]``, and
``ExportResult.redacted`` counts what was withheld.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ledgerscope.common.errors import InputError, Problem
from ledgerscope.common.out_dirs import refuse_foreign_directory, refuse_inside
from ledgerscope.export._common import ExportRequest, atomic_dir
from ledgerscope.export.fixtures import export_fixtures
from ledgerscope.export.jsonl import JSONL_FORMAT, export_jsonl
from ledgerscope.export.label_studio import MODEL_VERSION, export_label_studio, label_config
from ledgerscope.export.reannotation import export_reannotation
from ledgerscope.export.trec import TIE_EPSILON, TREC_FILE_NAME, export_trec, trec_scores

if TYPE_CHECKING:
    from duckdb import DuckDBPyConnection

__all__ = [
    "FORMATS",
    "JSONL_FORMAT",
    "MODEL_VERSION",
    "TIE_EPSILON",
    "ExportResult",
    "atomic_dir",
    "export",
    "label_config",
    "trec_scores",
]

FORMATS = ("fixtures", "label-studio", "label-studio-tasks", "trec", "jsonl")
_WRITERS = {
    "fixtures": export_fixtures,
    "label-studio": export_label_studio,
    "label-studio-tasks": export_reannotation,
    "trec": export_trec,
    "jsonl": export_jsonl,
}


@dataclass(frozen=True)
class ExportResult:
    """What an export selected and wrote, for the summary the CLI and the TUI show."""

    count: int  # records selected
    paths: list[Path]  # what was written
    questions: int = 0  # distinct questions written
    format: str = ""
    redacted: dict[str, Any] | None = None  # what restricted text was withheld (Redactor.summary), if any


def export(
    ledger: str | Path, where: str, fmt: str, out: str | Path, *, include_restricted: bool = False
) -> ExportResult:
    """Write the records ``where`` selects from ``ledger`` to ``out`` in format ``fmt``; restricted
    source text only with ``include_restricted``."""
    from ledgerscope.analysis.diagnosis import build_record_view, validate_predicate
    from ledgerscope.export.redaction import Redactor
    from ledgerscope.ledger.fixtures import load_ledger_fixtures
    from ledgerscope.ledger.read import connect
    from ledgerscope.ledger.verify import load_manifest

    ledger, out = Path(ledger), Path(out)
    if fmt not in FORMATS:
        raise InputError(
            Problem("--format", None, "format", f"unknown format {fmt!r}; known: {', '.join(FORMATS)}")
        )
    _check_out(ledger, out, fmt)
    manifest = load_manifest(ledger)
    con = connect(ledger)
    loaded = load_ledger_fixtures(con, ledger)  # once: the view, the evidence and the writers use it
    build_record_view(con)
    predicate = validate_predicate(con, where or "")
    rows = _selection(con, ledger, predicate, loaded)
    redactor = Redactor.from_connection(con, include_restricted)
    if redactor.active:
        rows = [redactor.record(r) for r in rows]
    # no redactor when nothing is withheld: the writers as they always were, byte for byte
    request = ExportRequest(
        con, ledger, manifest, predicate, rows, out, loaded, redactor if redactor.active else None
    )
    paths, questions = _WRITERS[fmt](request)
    return ExportResult(
        count=len(rows),
        paths=paths,
        questions=questions,
        format=fmt,
        redacted=redactor.summary() if redactor.any() else None,
    )


def _check_out(ledger: Path, out: Path, fmt: str) -> None:
    """Refuse, before reading the ledger, an ``out`` inside it or one where the wrong kind is in the way."""
    refuse_inside(ledger, out, "the export must be written outside the ledger (the ledger is never modified)")
    dst = out.resolve()
    if fmt == "trec":
        if dst.exists() and not dst.is_dir():
            raise InputError(
                Problem(str(out), None, "out", "a trec export is a directory; a file is in the way")
            )
        refuse_foreign_directory(
            out, lambda p: p.is_file() and bool(TREC_FILE_NAME.match(p.name)), "a trec export"
        )
    else:
        paths = [dst, dst.with_name(dst.name + ".config.xml")] if fmt.startswith("label-studio") else [dst]
        for p in paths:
            if p.is_dir():
                raise InputError(
                    Problem(str(p), None, "out", f"a {fmt} export is a file; a directory is in the way")
                )


def _selection(
    con: DuckDBPyConnection, ledger: Path, predicate: str, loaded: tuple[Any, ...]
) -> list[dict[str, Any]]:
    """The selected rows (record_view plus the diagnosis' evidence and walk), in a total order.

    Evidence is computed for the selected records only, from the partitions holding them.
    """
    from ledgerscope.analysis.diagnosis import VIEW, diagnosis_evidence, fetch_dicts, run_query, where_sql

    sql = (
        f"SELECT * FROM {VIEW}{where_sql(predicate)} ORDER BY arm, phase_offset, CAST(phase AS VARCHAR), qid"
    )
    rows = fetch_dicts(run_query(con, sql))
    for r in rows:
        r["phase"] = str(r["phase"])
    evidence = diagnosis_evidence(
        con, ledger, [(r["arm"], r["phase"], r["qid"]) for r in rows], fixtures=loaded
    )
    for i, r in enumerate(rows):
        evidence_json, walk_json = evidence.get((r["arm"], r["phase"], r["qid"]), (None, None))
        r["_ord"] = i
        r["_evidence"] = json.loads(evidence_json or "{}")
        r["_walk"] = json.loads(walk_json or "[]")
    return rows
