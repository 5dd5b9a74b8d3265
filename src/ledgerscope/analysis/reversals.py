"""Reversals: questions whose verdict differs between phases of the same arm.

A *support reversal*: ``support_packed`` is true at some phases and false at
others (unanswerable controls, whose support is null, never reverse on
support). An *answer reversal*: more than one answer verdict across the
phases (``infrastructure-failure`` counts as a verdict and shows in the map,
so a generator outage is visible rather than silently dropped). Phases are
listed by phase offset, then label, as strings (the views may type hive
partition labels as integers).

The rule is written twice, for speed: :data:`REVERSED` in SQL (``record_view``'s ``reversal``
column, and the filter that keeps all but the questions that reverse out of Python) and
:func:`reversals_from_rows` in Python (which also says which phases lie on each side);
``tests/test_reversals.py`` holds the two together.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from duckdb import DuckDBPyConnection

#: SQL: one question's records in one arm (a group) reverse, on support or on the answer
REVERSED = "count(DISTINCT support_packed) > 1 OR count(DISTINCT coalesce(answer_verdict, '')) > 1"


def reversed_questions_sql() -> str:
    """SQL: arm, qid and ``reversal`` (:data:`REVERSED`) of every question in ``records``."""
    return f"SELECT arm, qid, ({REVERSED}) AS reversal FROM records GROUP BY arm, qid"


def reversals_from_rows(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Reversals from record rows (arm, qid, phase, phase_offset, segment, support_packed, answer_verdict)."""
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["arm"], r["qid"]), []).append(r)
    out: list[dict[str, Any]] = []
    for (arm, qid), recs in sorted(groups.items()):
        recs = sorted(
            recs,
            key=lambda r: (
                r.get("phase_offset") if r.get("phase_offset") is not None else 0,
                str(r["phase"]),
            ),
        )
        segment = recs[0].get("segment")
        phases = [str(r["phase"]) for r in recs]
        kept = [str(r["phase"]) for r in recs if r.get("support_packed") is True]
        lost = [str(r["phase"]) for r in recs if r.get("support_packed") is False]
        if kept and lost:
            out.append(
                {
                    "qid": qid,
                    "arm": arm,
                    "kind": "support",
                    "segment": segment,
                    "phases": {"kept": kept, "lost": lost},
                    "n_phases": len(phases),
                }
            )
        verdicts: dict[str, list[str]] = {}
        for r in recs:
            verdicts.setdefault(str(r.get("answer_verdict")), []).append(str(r["phase"]))
        if len(verdicts) > 1:
            out.append(
                {
                    "qid": qid,
                    "arm": arm,
                    "kind": "answer",
                    "segment": segment,
                    "phases": verdicts,
                    "n_phases": len(phases),
                }
            )
    return out


def find_reversals(con: DuckDBPyConnection, arm: str | None = None) -> list[dict[str, Any]]:
    """Support and answer reversals over the ledger's records (optionally one arm)."""
    where, params = ("WHERE arm = ?", [arm]) if arm is not None else ("", [])
    # only questions with more than one distinct verdict reach Python
    rows = (
        con.sql(
            "WITH r AS (SELECT arm, qid, CAST(phase AS VARCHAR) AS phase, phase_offset, segment, "
            "support_packed, "
            f"answer_verdict FROM records {where}), "
            f"q AS (SELECT arm, qid FROM r GROUP BY arm, qid HAVING {REVERSED}) "
            "SELECT r.* FROM r SEMI JOIN q ON r.arm = q.arm AND r.qid = q.qid",
            params=params,
        )
        .to_arrow_table()
        .to_pylist()
    )
    return reversals_from_rows(rows)
