"""Support flags in DuckDB, by the definitions of :mod:`ledgerscope.rules.support`.

A stage *keeps* support when some sufficient set has every span covered by the
union of the stage's intervals, whitespace excused, and punctuation at either end
of the span too (:func:`ledgerscope.common.intervals.covers`, whose docstring
states the rule). Here the same test runs as set
operations over every (trace, stage, span) at once: only intervals that overlap
a span can cover any of it, so the candidate rows are joined to the gold spans
first; the uncovered parts of each span are the gaps between the running
maximum end of the sorted intervals; a gap counts unless its text is only
whitespace, or only whitespace and punctuation at an end of the span
(:func:`ledgerscope.common.intervals.sql.gap_counts`; both RE2 classes are checked
by a test against every code point).

Inputs (temp tables the caller builds): ``_ig_span`` (qid, span_id, doc_id, s,
e, span_text), ``_ig_set`` (qid, set_index, span_id), ``_ig_need`` (key, qid,
vstage: the stages to decide) and ``_ig_iv`` (key, vstage, doc_id, vs, ve: the
stages' intervals). Output: ``_ig_kept`` (key, vstage, kept, first_set).
"""

from __future__ import annotations

from ledgerscope.common.intervals.sql import edge_sql, gap_counts, gap_ctes


def kept_sql(out: str = "_ig_kept", need: str = "_ig_need", iv: str = "_ig_iv") -> str:
    """``out``: per (key, vstage) of ``need`` whether some sufficient set is covered by the intervals
    ``iv`` holds for it, and the first such set."""
    return f"""
    CREATE OR REPLACE TABLE {out} AS
    WITH sn AS (
        SELECT n.key, n.vstage, s.span_id, s.doc_id, s.s, s.e, s.span_text
        FROM {need} n JOIN _ig_span s ON s.qid = n.qid),
    ov AS (
        SELECT sn.key, sn.vstage, sn.span_id, sn.s, sn.e, i.vs, i.ve
        FROM sn JOIN {iv} i ON i.key = sn.key AND i.vstage = sn.vstage AND i.doc_id = sn.doc_id
             AND i.vs < sn.e AND i.ve > sn.s),
    {gap_ctes("key", "sn")},
    bad AS (
        SELECT DISTINCT g.key, g.vstage, g.span_id FROM raw g JOIN sn USING (key, vstage, span_id)
        WHERE {gap_counts("sn.span_text", "g.gs", "g.ge", "sn.s", "sn.e")}),
    sets AS (
        SELECT n.key, n.vstage, st.set_index, count(b.span_id) = 0 AND count(*) = count(sp.span_id) AS ok
        FROM {need} n JOIN _ig_set st ON st.qid = n.qid
        LEFT JOIN _ig_span sp ON sp.qid = st.qid AND sp.span_id = st.span_id
        LEFT JOIN bad b ON b.key = n.key AND b.vstage = n.vstage AND b.span_id = st.span_id
        GROUP BY n.key, n.vstage, st.set_index)
    SELECT n.key, n.vstage, coalesce(bool_or(s.ok), false) AS kept,
           min(s.set_index) FILTER (WHERE s.ok) AS first_set
    FROM {need} n LEFT JOIN sets s ON s.key = n.key AND s.vstage = n.vstage
    GROUP BY n.key, n.vstage"""


def single_unit_sql() -> str:
    """``_ig_single``: per key, whether some sufficient set lies inside one interval of ``packed``
    (:func:`ledgerscope.rules.support.single_unit_complete`)."""
    edge = edge_sql()  # the two gaps a unit leaves of a span are at its ends
    return f"""
    CREATE OR REPLACE TABLE _ig_single AS
    WITH u AS (
        SELECT i.key, n.qid, i.doc_id, i.vs, i.ve, row_number() OVER () AS uid
        FROM _ig_iv i JOIN (SELECT DISTINCT key, qid FROM _ig_need) n USING (key)
        WHERE i.vstage = 'packed'),
    us AS (  -- every packed interval against every span of its question: the two gaps it leaves
        SELECT u.key, u.uid, sp.span_id, sp.doc_id = u.doc_id AS same_doc, sp.s, sp.e, sp.span_text,
               CASE WHEN u.vs > sp.s THEN least(u.vs, sp.e) ELSE sp.s END AS head_end,
               CASE WHEN u.ve < sp.e THEN greatest(u.ve, sp.s) ELSE sp.e END AS tail_start
        FROM u JOIN _ig_span sp ON sp.qid = u.qid),
    ok AS (
        SELECT key, uid, span_id,
               same_doc AND regexp_full_match(substr(span_text, 1, head_end - s), {edge})
               AND regexp_full_match(substr(span_text, tail_start - s + 1, e - tail_start),
                                     {edge}) AS inside
        FROM us),
    per_set AS (
        SELECT u.key, u.uid, st.set_index, bool_and(coalesce(ok.inside, false)) AS inside
        FROM u JOIN _ig_set st ON st.qid = u.qid
        LEFT JOIN ok ON ok.key = u.key AND ok.uid = u.uid AND ok.span_id = st.span_id
        GROUP BY u.key, u.uid, st.set_index)
    SELECT n.key, coalesce(bool_or(p.inside), false) AS single
    FROM (SELECT DISTINCT key FROM _ig_need) n LEFT JOIN per_set p USING (key)
    GROUP BY n.key"""
