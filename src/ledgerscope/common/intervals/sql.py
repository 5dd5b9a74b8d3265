"""Interval coverage as DuckDB SQL: the uncovered parts of gold spans under a stage's intervals.

The set-at-a-time twin of :func:`ledgerscope.common.intervals.covers`, shared by the ingest's
support flags and the diagnosis's SQL walk (both tie it to the Python rule by tests).
"""

from __future__ import annotations

from ledgerscope.common.intervals import WHITESPACE, edge_pattern
from ledgerscope.common.sql_tables import sql_literal

#: Python's str.isspace() as an SQL literal: a gap holding only these characters is excused
WHITESPACE_SQL = sql_literal(WHITESPACE)


def gap_counts(text: str, gs: str, ge: str, s: str, e: str) -> str:
    """SQL: whether the gap [``gs``, ``ge``) of a span [``s``, ``e``) whose text is ``text`` counts
    (:func:`ledgerscope.common.intervals.excused`: whitespace anywhere, whitespace and punctuation
    at either end of the span, are excused)."""
    gap = f"substr({text}, {gs} - {s} + 1, {ge} - {gs})"
    return (
        f"NOT (regexp_full_match({gap}, {WHITESPACE_SQL}) OR (({gs} = {s} OR {ge} = {e}) "
        f"AND regexp_full_match({gap}, {edge_sql()})))"
    )


def edge_sql() -> str:
    """:func:`ledgerscope.common.intervals.edge_pattern` as an SQL literal (an edge remainder of
    these characters only is excused)."""
    return sql_literal(edge_pattern())


def gap_ctes(key: str, spans: str) -> str:
    """The CTEs ``whole``, ``part``, ``w`` and ``raw`` over a CTE ``ov`` (``key``, vstage, span_id, s, e,
    vs, ve: each interval of a stage over a span) and the table or CTE ``spans`` (``key``, vstage,
    span_id, s, e: the spans to cover): ``raw`` holds every uncovered part (``gs``, ``ge``) of each
    span, whitespace not yet excused (the caller decides what a gap counts as). Shared by the ingest's
    support flags (:mod:`ledgerscope.ingest.derive.coverage`) and the diagnosis's SQL walk
    (:mod:`ledgerscope.analysis.diagnosis.sql.coverage`)."""
    k = f"{key}, vstage, span_id"
    return f"""
    whole AS (  -- one row covers the span: no gap, no window needed
        SELECT DISTINCT {k} FROM ov WHERE vs <= s AND ve >= e),
    part AS (SELECT * FROM ov ANTI JOIN whole USING ({k})),
    w AS (
        SELECT *, greatest(s, coalesce(max(ve) OVER (
            PARTITION BY {k} ORDER BY vs, ve
            ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), s)) AS pos
        FROM part),
    raw AS (
        SELECT {k}, pos AS gs, vs AS ge FROM w WHERE vs > pos
        UNION ALL
        SELECT {k}, greatest(any_value(s), max(ve)), any_value(e) FROM part
        GROUP BY {k} HAVING greatest(any_value(s), max(ve)) < any_value(e)
        UNION ALL
        SELECT sn.{key}, sn.vstage, sn.span_id, sn.s, sn.e FROM {spans} sn
        ANTI JOIN (SELECT DISTINCT {k} FROM ov) o USING ({k})
        WHERE sn.s < sn.e)"""
