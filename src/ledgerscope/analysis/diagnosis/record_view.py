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

from typing import TYPE_CHECKING, Any

from ledgerscope.analysis.diagnosis.sql import head_join, heads_table
from ledgerscope.analysis.diagnosis.sql.inputs import (
    ANSWER_UNVERIFIED,
    ORACLE_FEASIBLE,
    ORACLE_ROWS,
    ORACLE_VERDICT,
)
from ledgerscope.analysis.reversals import reversed_questions_sql
from ledgerscope.analysis.validity import TABLE as VALIDITY_TABLE

if TYPE_CHECKING:
    from duckdb import DuckDBPyConnection

VIEW = "record_view"
#: the heads, one row per distinct combination of what they depend on (:func:`heads_table`)
HEADS_TABLE = "record_heads"


def build_record_view(con: DuckDBPyConnection) -> None:
    """Create ``record_view`` on a connection made by :func:`ledgerscope.ledger.read.connect`.

    A view (each query reads the records afresh) over a table of a few hundred heads; both are
    visible to the connection's cursors."""
    heads_table(con, HEADS_TABLE)
    con.execute(
        f"CREATE OR REPLACE VIEW {VIEW} AS "
        f"WITH rev AS ({reversed_questions_sql()}), "
        f"b AS (SELECT r.*, {ORACLE_VERDICT} AS o_verdict, {ORACLE_FEASIBLE} AS o_feasible, "
        f"{ANSWER_UNVERIFIED} AS o_unverified "
        f"FROM records r LEFT JOIN {ORACLE_ROWS} o ON o.arm = r.arm AND o.qid = r.qid "
        f"LEFT JOIN {VALIDITY_TABLE} u ON u.arm = r.arm) "
        "SELECT b.* EXCLUDE (o_verdict, o_feasible, o_unverified), h.step, h.step_name, h.label, h.flags, "
        f"coalesce(v.reversal, false) AS reversal FROM b {head_join('b', HEADS_TABLE)} "
        "LEFT JOIN rev v ON v.arm = b.arm AND v.qid = b.qid"
    )


def ledger_heads(con: DuckDBPyConnection, arm: str | None = None) -> list[dict[str, Any]]:
    """Arm, phase, qid, step and step name of every record (optionally one arm), in ledger order:
    what the ``diagnose`` summary counts. Builds ``record_view``."""
    build_record_view(con)
    where, params = ("WHERE arm = ?", [arm]) if arm is not None else ("", [])
    rows = con.execute(
        f"SELECT arm, CAST(phase AS VARCHAR) AS phase, qid, step, step_name FROM {VIEW} {where} "
        "ORDER BY arm, phase_offset, phase, qid",
        params,
    ).fetchall()
    names = ("arm", "phase", "qid", "step", "step_name")
    return [dict(zip(names, row, strict=True)) for row in rows]
