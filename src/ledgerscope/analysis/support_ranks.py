"""The rank at which each answerable record's candidate lists first hold support, and recall@k from
those ranks: in Python (the definition) and in one DuckDB query over a whole ledger (what
:func:`.survival.survival` runs); the tests hold the two to each other."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ledgerscope.common.intervals import WHITESPACE, edge_pattern, merge_intervals, uncovered
from ledgerscope.inputs.fixtures import Fixture, GoldSpan

if TYPE_CHECKING:
    from duckdb import DuckDBPyConnection


#: the ranked lists a support rank is read from
RANKED_STAGES = ("bm25", "dense_exact", "dense_ann", "union", "fused", "reranked")
KS = (1, 5, 10, 20, 50)


# ---------------------------------------------------------------------------
# recall@k (pure helpers)


def span_rank(span: GoldSpan, rows: Iterable[Mapping[str, Any]], texts: Mapping[str, str]) -> int | None:
    """The smallest k such that the list's first k rows cover the span (None: never)."""
    hits = sorted(
        (
            r
            for r in rows
            if r.get("doc_id") == span.doc_id
            and r.get("start") is not None
            and int(r["start"]) < span.end
            and int(r["end"]) > span.start
        ),
        key=lambda r: int(r["rank"]),
    )
    text = texts.get(span.doc_id)
    intervals: list[tuple[int, int]] = []
    for r in hits:
        intervals.append((int(r["start"]), int(r["end"])))
        if text is not None:
            if not uncovered(text, span.start, span.end, intervals):
                return int(r["rank"])
        else:
            merged = merge_intervals(intervals)
            if any(s <= span.start and e >= span.end for s, e in merged):
                return int(r["rank"])
    return None


def support_rank(fixture: Fixture, rows: Sequence[Mapping[str, Any]], texts: Mapping[str, str]) -> int | None:
    """The smallest k such that the list cut at k keeps support (joint evidence counts)."""
    by_id = {s.span_id: s for s in fixture.spans}
    cache: dict[str, int | None] = {}
    best: int | None = None
    for sset in fixture.sufficient_sets:
        ks = []
        for sid in sset:
            if sid not in cache:
                cache[sid] = span_rank(by_id[sid], rows, texts) if sid in by_id else None
            ks.append(cache[sid])
        known = [k for k in ks if k is not None]
        if ks and len(known) == len(ks):
            k = max(known)
            best = k if best is None else min(best, k)
    return best


def recall_at_k(
    ranks: Sequence[int | None], n: int, ks: Sequence[int] = KS, depth: int | None = None
) -> dict[str, float | None]:
    """Share of ``n`` records whose support rank is at most k, for each k up to ``depth``."""
    out: dict[str, float | None] = {}
    for k in ks:
        if depth is not None and k > depth and out:
            break
        out[str(k)] = (sum(1 for r in ranks if r is not None and r <= k) / n) if n else None
    return out


def support_ranks(
    con: DuckDBPyConnection, fixtures: Mapping[str, Fixture], texts: Mapping[str, str], arm: str | None = None
) -> dict[tuple[str, str, str], dict[str, int | None]]:
    """(arm, phase, qid) -> stage -> support rank, for answerable records: the definition, one
    query for the rows, then :func:`support_rank` per record and stage in Python (reports use
    :func:`support_ranks_sql`, the same in DuckDB)."""
    from ledgerscope.ledger.fixtures import gold_spans_table

    spans = gold_spans_table(fixtures, answerable_only=True)
    if not spans.num_rows:
        return {}
    where, params = ("AND c.arm = ?", [arm]) if arm is not None else ("", [])
    stages = ", ".join(f"'{s}'" for s in RANKED_STAGES)
    con.register("_ls_surv_spans", spans)
    try:
        rows = (
            con.sql(
                'SELECT DISTINCT c.arm, CAST(c.phase AS VARCHAR) AS phase, c.qid, c.stage, c."rank", '
                "c.doc_id, "
                'c."start", c."end" FROM candidates c JOIN _ls_surv_spans s ON s.qid = c.qid '
                'AND s.doc_id = c.doc_id AND c."start" < s."end" AND c."end" > s."start" '
                f"WHERE c.stage IN ({stages}) {where}",
                params=params,
            )
            .to_arrow_table()
            .to_pylist()
        )
    finally:
        con.unregister("_ls_surv_spans")
    grouped: dict[tuple[str, str, str], dict[str, list[dict[str, Any]]]] = {}
    for r in rows:
        grouped.setdefault((r["arm"], r["phase"], r["qid"]), {}).setdefault(r["stage"], []).append(r)
    out: dict[tuple[str, str, str], dict[str, int | None]] = {}
    for key, by_stage in grouped.items():
        fx = fixtures.get(key[2])
        if fx is None:
            continue
        out[key] = {stage: support_rank(fx, by_stage.get(stage, []), texts) for stage in RANKED_STAGES}
    return out


def support_ranks_sql(
    con: DuckDBPyConnection, fixtures: Mapping[str, Fixture], texts: Mapping[str, str], arm: str | None = None
) -> dict[tuple[str, str, str], dict[str, int | None]]:
    """:func:`support_ranks` computed in DuckDB: the same ranks (``tests/test_survival.py``
    compares them on real and synthetic ledgers), without a Python loop per record and stage.

    A span's rank is the smallest threshold k (among its elementary segments' first covering ranks
    and its first row's) at which every elementary segment (the pieces between every clipped row
    edge) is covered by a row of rank <= k, or excused by the remainder rule of
    :mod:`ledgerscope.common.intervals` (whitespace anywhere; edge characters when the uncovered
    run holding it reaches the span's start or end, i.e. no segment between it and that end is
    covered at k); none when no threshold works: what :func:`span_rank` finds by adding rows one
    at a time.
    """
    from ledgerscope.common.sql_tables import columns_table, drop_tables

    spans, sets = _gold_columns(fixtures, texts)
    if not spans["qid"][1]:
        return {}
    columns_table(con, "_ls_surv_span", spans)
    columns_table(con, "_ls_surv_set", sets)
    where, params = ("AND c.arm = ?", [arm]) if arm is not None else ("", [])
    try:
        rows = con.execute(_support_ranks_query(where), params).fetchall()
    finally:
        drop_tables(con, "_ls_surv_span", "_ls_surv_set")
    out: dict[tuple[str, str, str], dict[str, int | None]] = {}
    for a, p, q, stage, r in rows:
        ranks = out.setdefault((a, p, q), dict.fromkeys(RANKED_STAGES))
        if stage is not None:
            ranks[stage] = int(r)
    return out


def _gold_columns(
    fixtures: Mapping[str, Fixture], texts: Mapping[str, str]
) -> tuple[dict[str, tuple[str, list[Any]]], dict[str, tuple[str, list[Any]]]]:
    """The answerable fixtures' gold spans (numbered ``sid``, with their text for the whitespace
    test) and sufficient sets (``resolved`` is false for a set naming a span the fixture lacks), as
    column lists for :func:`columns_table`: two bulk inserts instead of a row at a time."""
    spans: dict[str, tuple[str, list[Any]]] = {
        "sid": ("INTEGER", []),
        "qid": ("VARCHAR", []),
        "span_id": ("VARCHAR", []),
        "doc_id": ("VARCHAR", []),
        "s": ("BIGINT", []),
        "e": ("BIGINT", []),
        "span_text": ("VARCHAR", []),
    }
    sets: dict[str, tuple[str, list[Any]]] = {
        "qid": ("VARCHAR", []),
        "set_index": ("INTEGER", []),
        "span_id": ("VARCHAR", []),
        "resolved": ("BOOLEAN", []),
    }
    for qid, fx in fixtures.items():
        if not fx.answerable:
            continue
        for sp in fx.spans:
            text = texts.get(sp.doc_id)
            values: tuple[object, ...] = (
                len(spans["sid"][1]),
                qid,
                sp.span_id,
                sp.doc_id,
                sp.start,
                sp.end,
                None if text is None else text[sp.start : sp.end],
            )
            for col, value in zip(spans, values, strict=True):
                spans[col][1].append(value)
        ids = {sp.span_id for sp in fx.spans}
        for i, sset in enumerate(fx.sufficient_sets):
            for sid in sset:
                for col, value in zip(sets, (qid, i, sid, sid in ids), strict=True):
                    sets[col][1].append(value)
    return spans, sets


def _hit_cte(where: str) -> str:
    """``hit``: each row of a ranked list over a gold span, clipped to it; ``g`` numbers each
    (record, stage, span) so the windows and joins after it key on one integer."""
    stages = ", ".join(f"'{s}'" for s in RANKED_STAGES)
    return f"""hit AS (  -- each row of a ranked list over a gold span, clipped to it
            SELECT *, dense_rank() OVER (ORDER BY arm, phase, qid, stage, sid) AS g FROM (
                SELECT c.arm, CAST(c.phase AS VARCHAR) AS phase, c.qid, c.stage, sp.sid, sp.s, sp.e,
                       c."rank" AS r, greatest(c."start", sp.s) AS a, least(c."end", sp.e) AS b
                FROM candidates c JOIN _ls_surv_span sp ON sp.qid = c.qid AND sp.doc_id = c.doc_id
                     AND c."start" < sp.e AND c."end" > sp.s
                WHERE c.stage IN ({stages}) AND c."rank" IS NOT NULL {where}))"""


def _segment_ctes() -> list[str]:
    """``cut``, ``seg``, ``seg_t``, ``seg_b``: the elementary segments between every clipped row
    edge, the first rank covering each, and whether it is whitespace only (excused, as in
    diagnose), which is what makes a span's rank exact rather than a row-count guess."""
    from ledgerscope.common.sql_tables import sql_literal

    return [
        "cut AS (SELECT DISTINCT g, sid, s, unnest([a, b, s, e]) AS x FROM hit)",
        "seg AS (SELECT *, lead(x) OVER (PARTITION BY g ORDER BY x) AS y FROM cut)",
        """seg_t AS (  -- each elementary segment between row edges: the first rank covering it
            SELECT g.g, any_value(g.sid) AS sid, any_value(g.s) AS s, g.x, g.y, min(h.r) AS t
            FROM seg g LEFT JOIN hit h ON h.g = g.g AND h.a <= g.x AND h.b >= g.y
            WHERE g.y IS NOT NULL
            GROUP BY g.g, g.x, g.y)""",
        f"""seg_b AS (  -- whether it holds only whitespace (excused anywhere, as in diagnose), and
                        -- whether the span's text from its start to the segment's end (left) or from the
                        -- segment's start to its end (right) holds only edge characters
            SELECT t.*,
                   sp.span_text IS NOT NULL AND regexp_full_match(
                       substr(sp.span_text, t.x - t.s + 1, t.y - t.x), {sql_literal(WHITESPACE)}) AS blank,
                   sp.span_text IS NOT NULL AND regexp_full_match(
                       substr(sp.span_text, 1, t.y - t.s), {sql_literal(edge_pattern())}) AS left_ok,
                   sp.span_text IS NOT NULL AND regexp_full_match(
                       substr(sp.span_text, t.x - t.s + 1), {sql_literal(edge_pattern())}) AS right_ok
            FROM seg_t t JOIN _ls_surv_span sp USING (sid))""",
        """seg_m AS (  -- the first rank covering any segment before (after) it: while a threshold is
                       -- below it, the segment's remainder reaches the span's edge
            SELECT *, min(t) OVER (PARTITION BY g ORDER BY x ROWS BETWEEN UNBOUNDED PRECEDING
                                   AND 1 PRECEDING) AS m_left,
                      min(t) OVER (PARTITION BY g ORDER BY x ROWS BETWEEN 1 FOLLOWING
                                   AND UNBOUNDED FOLLOWING) AS m_right
            FROM seg_b)""",
    ]


# A span's rank (none if a non-blank segment is never covered), then a sufficient set's (its
# worst span's, if every span is resolved and ranked).
_RANK_CTES = [
    """cand AS (  -- the thresholds to try per span: every segment's first covering rank, and the first row's
            SELECT g, t AS r FROM seg_m WHERE t IS NOT NULL
            UNION SELECT g, min(r) FROM hit GROUP BY g)""",
    """kept AS (  -- the thresholds at which every segment is covered or excused (whitespace anywhere;
                  -- edge characters when the remainder holding it reaches the span's start or end)
            SELECT c.g, min(c.r) AS r
            FROM cand c LEFT JOIN seg_m m ON m.g = c.g  -- an empty span has no segment: its first row
            GROUP BY c.g, c.r
            HAVING coalesce(bool_and(coalesce(m.t <= c.r, false) OR m.blank
                            OR (m.left_ok AND (m.m_left IS NULL OR c.r < m.m_left))
                            OR (m.right_ok AND (m.m_right IS NULL OR c.r < m.m_right))), true))""",
    """span_rank AS (
            SELECT h.arm, h.phase, h.qid, h.stage, sp.span_id, k.r
            FROM (SELECT g, any_value(arm) AS arm, any_value(phase) AS phase, any_value(qid) AS qid,
                         any_value(stage) AS stage, any_value(sid) AS sid
                  FROM hit GROUP BY g) h
            JOIN _ls_surv_span sp USING (sid)
            LEFT JOIN (SELECT g, min(r) AS r FROM kept GROUP BY g) k USING (g))""",
    """set_rank AS (
            SELECT k.arm, k.phase, k.qid, k.stage, st.set_index, max(sr.r) AS r,
                   bool_and(st.resolved AND sr.r IS NOT NULL) AS ok
            FROM (SELECT DISTINCT arm, phase, qid, stage FROM span_rank) k
            JOIN _ls_surv_set st ON st.qid = k.qid
            LEFT JOIN span_rank sr ON sr.arm = k.arm AND sr.phase = k.phase AND sr.qid = k.qid
                 AND sr.stage = k.stage AND sr.span_id = st.span_id
            GROUP BY ALL)""",
]

# Per record and stage, the best sufficient set's rank; a record with no ranked set keeps a row
# (stage NULL) so it still gets its all-None ranks.
_RANKS_SELECT = """
        SELECT k.arm, k.phase, k.qid, s.stage, s.r
        FROM (SELECT DISTINCT arm, phase, qid FROM span_rank) k
        LEFT JOIN (SELECT arm, phase, qid, stage, min(r) AS r FROM set_rank WHERE ok GROUP BY ALL) s
             USING (arm, phase, qid)"""


def _support_ranks_query(where: str) -> str:
    """The whole query, CTE by CTE; ``where`` optionally restricts the candidates to one arm."""
    ctes = [_hit_cte(where), *_segment_ctes(), *_RANK_CTES]
    return "\n        WITH " + ",\n        ".join(ctes) + _RANKS_SELECT
