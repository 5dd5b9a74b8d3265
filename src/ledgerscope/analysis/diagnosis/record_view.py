"""``record_view``: one row per record, every ``records`` column plus the diagnosis heads and
``reversal``. The one builder the CLI's ``diagnose`` summary, ``export`` and the TUI share.

The heads (``step``, ``step_name``, ``label``, ``flags``) depend only on a record's flags, verdicts
and oracle row, so they come from :func:`ledgerscope.analysis.diagnosis.sql.heads_table`, which
runs the pure tree (:func:`ledgerscope.analysis.diagnosis.tree.diagnose`) once per distinct
combination: milliseconds, no fixtures, no candidate rows. ``reversal`` is
:data:`ledgerscope.analysis.reversals.REVERSED`. The evidence, which only a selection needs, is
:func:`ledgerscope.analysis.diagnosis.sql.diagnosis_evidence`'s. Nothing is written to disk.
"""

from __future__ import annotations

from typing import Any

from ledgerscope.analysis.diagnosis.sql import heads_table
from ledgerscope.analysis.reversals import reversed_questions_sql

VIEW = "record_view"
#: the heads of every record: an in-memory table (not TEMP), so a cursor of the connection sees it too
DIAGNOSIS_TABLE = "record_diagnosis"
DIAGNOSIS_COLUMNS = ("step", "step_name", "label", "flags", "reversal")


def build_record_view(con) -> None:
    """Create ``record_view`` on a connection made by :func:`ledgerscope.ledger.read.connect`."""
    heads_table(con, DIAGNOSIS_TABLE)
    con.execute(
        f"CREATE OR REPLACE VIEW {VIEW} AS "
        f"WITH rev AS ({reversed_questions_sql()}) "
        "SELECT r.*, d.step, d.step_name, d.label, d.flags, coalesce(v.reversal, false) AS reversal "
        f"FROM records r LEFT JOIN {DIAGNOSIS_TABLE} d "
        "ON d.arm = r.arm AND d.phase = CAST(r.phase AS VARCHAR) AND d.qid = r.qid "
        "LEFT JOIN rev v ON v.arm = r.arm AND v.qid = r.qid")


def ledger_heads(con, arm: str | None = None) -> list[dict[str, Any]]:
    """Arm, phase, qid, step and step name of every record (optionally one arm), in ledger order:
    what the ``diagnose`` summary counts. Builds ``record_view``."""
    build_record_view(con)
    where, params = ("WHERE arm = ?", [arm]) if arm is not None else ("", [])
    rows = con.execute(
        f"SELECT arm, CAST(phase AS VARCHAR) AS phase, qid, step, step_name FROM {VIEW} {where} "
        "ORDER BY arm, phase_offset, phase, qid", params).fetchall()
    names = ("arm", "phase", "qid", "step", "step_name")
    return [dict(zip(names, row, strict=True)) for row in rows]
