"""The ``jsonl`` export: one self-contained line per selected record, for tools that want everything.

One line per selected record: every ``records`` column as stored (``*_json``
columns stay JSON text), ``reversal``, ``candidates`` (every stage of
:data:`ledgerscope.ledger.schema.STAGES`, each a list of ``{rank, unit_id,
doc_id, start, end, score, lineage}`` in rank order) and ``diagnosis``
(``step``, ``step_name``, ``label``, ``evidence``, ``flags``, ``walk``). A record whose
restricted source text was withheld also has ``redacted``: the fields that read
``[redacted: restricted source text]``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ledgerscope.export._common import (
    CANDIDATE_COLUMNS,
    count_questions,
    json_line,
    publish_mode,
    stream_candidates,
)

if TYPE_CHECKING:
    from ledgerscope.export._common import ExportRequest

JSONL_FORMAT = "ledgerscope-record-view/1"


def export_jsonl(req: ExportRequest) -> tuple[list[Path], int]:
    """Write one line per record to ``out``, candidates streamed alongside the rows; (paths, questions)."""
    con, rows, out = req.con, req.rows, req.out
    from ledgerscope.common.atomic import atomic_path
    from ledgerscope.ledger import schema

    record_cols = schema.RECORDS.names
    stream = stream_candidates(con, rows)
    pending = next(stream, None)
    with atomic_path(out) as tmp, tmp.open("w", encoding="utf-8") as fh:
        for r in rows:
            cands: list[dict[str, Any]] = []
            if pending is not None and pending[0] == r["_ord"]:
                cands = pending[1]
                pending = next(stream, None)
            fh.write(json_line(_jsonl_row(r, cands, record_cols, schema.STAGES)))
        publish_mode(tmp)
    return [out], count_questions(rows)


def _jsonl_row(
    r: dict[str, Any], cands: list[dict[str, Any]], record_cols: list[str], stages: tuple[str, ...]
) -> dict[str, Any]:
    """One record's line: its columns, its candidates by stage in rank order, its diagnosis."""
    by_stage: dict[str, list[dict[str, Any]]] = {s: [] for s in stages}
    for c in cands:
        by_stage.setdefault(c["stage"], []).append({k: c[k] for k in CANDIDATE_COLUMNS})
    for lst in by_stage.values():
        lst.sort(key=lambda c: c["rank"])
    row: dict[str, Any] = {"format": JSONL_FORMAT}
    row.update({k: r.get(k) for k in record_cols})
    row["reversal"] = r.get("reversal")
    row["candidates"] = by_stage
    row["diagnosis"] = {
        "step": r.get("step"),
        "step_name": r.get("step_name"),
        "label": r.get("label"),
        "evidence": r["_evidence"],
        "flags": list(r.get("flags") or []),
        "walk": r["_walk"],
    }
    if r.get("_redacted"):  # restricted source text withheld (see ledgerscope.export.redaction)
        row["redacted"] = r["_redacted"]
    return row
