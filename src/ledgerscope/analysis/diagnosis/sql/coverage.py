"""CTEs: records with their step, the candidate rows over gold spans, coverage per stage, the set named.

Mirrors of :mod:`ledgerscope.analysis.diagnosis.evidence`: ``stage_rows`` (virtual stages and
their cutoffs), ``span_gaps`` (uncovered parts, whitespace and edge punctuation excused) and
``_closest_set``. Every record gets an integer ``rid`` (its output position);
after the first joins everything is keyed by it.
"""

from __future__ import annotations

from ledgerscope.analysis.diagnosis.evidence import NO_RANK, TRANSITIONS
from ledgerscope.analysis.diagnosis.span_fates import FATE_WALK
from ledgerscope.analysis.diagnosis.sql.inputs import head_match
from ledgerscope.analysis.diagnosis.sql.sqltext import arr, j, obj_parts
from ledgerscope.analysis.diagnosis.tree import STAGE_OF_STEP
from ledgerscope.common.intervals.sql import gap_counts, gap_ctes
from ledgerscope.common.sql_tables import sql_literal

CTEs = list[tuple[str, str]]


def records() -> CTEs:
    """``_ls_r``: numbered records with head, the stages their evidence compares, the covered set."""
    before = " ".join(f"WHEN {s} THEN {sql_literal(t[0])}" for s, t in TRANSITIONS.items())
    after = " ".join(f"WHEN {s} THEN {sql_literal(st)}" for s, st in STAGE_OF_STEP.items())
    return [
        (
            "_ls_r",
            f"""
        SELECT x.*, row_number() OVER (ORDER BY x.arm, x.phase_offset, x.phase, x.qid) AS rid,
               h.step, h.step_name, h.label, h.flags, h.walk_pre, h.walk_post,
               h.recorded AS h_recorded, h.not_recorded AS h_not_recorded,
               CASE WHEN ev THEN CASE h.step {before} END END AS before_v,
               CASE WHEN NOT ev THEN NULL WHEN h.step BETWEEN 2 AND 8 THEN CASE h.step {after} END
                    WHEN h.step IN (0, 9, 10) AND cover_set IS NULL THEN 'packed' END AS after_v
        FROM (SELECT *, has_fx AND answerable IS DISTINCT FROM false
                        AND coalesce(nullif(gold_status, ''), 'ok') = 'ok' AS ev,
                     CASE WHEN covered_set >= 0 AND covered_set < n_sets THEN covered_set END AS cover_set
              FROM _ls_rec) x
        JOIN _ls_head h ON {head_match("x")}""",
        )
    ]


def candidate_rows() -> CTEs:
    """``_ls_rs`` record x gold span; ``_ls_cp`` candidate rows x the gold spans they overlap;
    ``_ls_c8`` packed lists whole and step-8 reranked lists to the cut; ``_ls_up`` units near
    gold spans (steps 2 and 3); ``_ls_cite`` the cited intervals (step 10)."""
    return [
        (
            "_ls_rs",
            """
        SELECT r.rid, r.arm, r.phase, r.step, s.qid, s.span_id, s.doc_id, s.s, s.e, s.win_lo, s.win_hi
        FROM _ls_r r JOIN _ls_span s ON s.qid = r.qid WHERE r.ev""",
        ),
        (
            "_ls_cp",
            f"""
        SELECT rs.rid, rs.span_id, c.stage, coalesce(c."rank", {NO_RANK}) AS rnk, c.unit_id, c.score,
               c."start", c."end",
               CASE WHEN c.stage = 'union' THEN c.lineage END AS lineage
        FROM _ls_cand c JOIN _ls_rs rs ON c.qid = rs.qid AND c.doc_id = rs.doc_id AND c.arm = rs.arm
             AND c.phase = rs.phase AND c."start" < rs.e AND c."end" > rs.s""",
        ),
        (
            "_ls_c8",
            f"""
        SELECT r.rid, c.stage, coalesce(c."rank", {NO_RANK}) AS rnk, c.unit_id
        FROM _ls_cand c JOIN _ls_r r ON r.ev AND r.step IN (0, 8, 9, 10)
             AND c.arm = r.arm AND c.phase = r.phase AND c.qid = r.qid
        WHERE (c.stage = 'packed' AND (r.step = 8 OR coalesce(r.n_ids, 0) = 0))
           OR (r.step = 8 AND c.stage = 'reranked' AND c."rank" <= coalesce(r.selection_depth, 0))""",
        ),
        (
            "_ls_up",
            """
        SELECT rs.rid, rs.span_id, rs.s, rs.e, u.unit_id, u.doc_id, u."start", u."end"
        FROM _ls_unit u JOIN _ls_rs rs ON u.arm = rs.arm AND u.phase = rs.phase AND u.doc_id = rs.doc_id
             AND u."end" >= rs.win_lo AND u."start" <= rs.win_hi
        WHERE rs.step BETWEEN 2 AND 8""",
        ),
        (
            "_ls_cite",
            """
        SELECT rid, json_extract_string(e, '$.doc_id') AS doc_id,
               TRY_CAST(json_extract(e, '$.start') AS BIGINT) AS "start",
               TRY_CAST(json_extract(e, '$.end') AS BIGINT) AS "end", e, i
        FROM (SELECT rid, unnest(l) AS e, unnest(range(len(l))) AS i
              FROM (SELECT rid, CASE WHEN json_valid(citations_json) AND json_type(citations_json) = 'ARRAY'
                                     THEN json_extract(citations_json, '$[*]') END AS l
                    FROM _ls_r WHERE step = 10 AND answerable IS DISTINCT FROM false))
        WHERE json_type(e) = 'OBJECT'""",
        ),
    ]


def coverage() -> CTEs:
    """``_ls_ov`` rows of each virtual stage over each span; ``_ls_gap`` per record, stage and span:
    the uncovered parts holding non-whitespace (``n_gaps``, ``gaps_json``)."""
    return [
        (
            "_ls_need",
            """
        SELECT rid, qid, before_v AS vstage, rerank_depth, selection_depth FROM _ls_r
        WHERE before_v IS NOT NULL
        UNION SELECT rid, qid, after_v, rerank_depth, selection_depth FROM _ls_r WHERE after_v IS NOT NULL
        UNION SELECT rid, qid, 'cited', rerank_depth, selection_depth FROM _ls_r
        WHERE ev AND step = 10
        UNION SELECT r.rid, r.qid, m.vstage, r.rerank_depth, r.selection_depth  -- the span fates
        FROM _ls_r r CROSS JOIN (SELECT DISTINCT vstage FROM _ls_members) m
        WHERE r.ev AND r.step BETWEEN 2 AND 8""",
        ),
        (
            "_ls_ov",
            f"""
        SELECT n.rid, n.vstage, p.span_id, p.unit_id, p.rnk, p."start" AS vs, p."end" AS ve
        FROM _ls_need n JOIN _ls_members m ON m.vstage = n.vstage
        JOIN _ls_cp p ON p.rid = n.rid AND p.stage = m.stage
        WHERE (p.stage <> 'fused' OR n.rerank_depth IS NULL OR p.rnk <= n.rerank_depth)
          AND (p.stage <> 'reranked' OR n.selection_depth IS NULL OR p.rnk <= n.selection_depth)
        UNION ALL
        SELECT n.rid, 'chunked', u.span_id, u.unit_id, {NO_RANK}, u."start", u."end"
        FROM _ls_need n JOIN _ls_up u ON u.rid = n.rid
        WHERE n.vstage = 'chunked' AND u."start" < u.e AND u."end" > u.s
        UNION ALL
        SELECT c.rid, 'cited', rs.span_id, NULL, {NO_RANK}, c."start", c."end"
        FROM _ls_cite c JOIN _ls_rs rs ON rs.rid = c.rid AND rs.doc_id = c.doc_id
             AND c."start" < rs.e AND c."end" > rs.s
        WHERE c."end" IS NOT NULL""",
        ),
        (
            "_ls_sn",
            """
        SELECT n.rid, n.vstage, s.span_id, s.s, s.e, s.span_text
        FROM _ls_need n JOIN _ls_span s ON s.qid = n.qid""",
        ),
        (
            "_ls_gap",
            f"""
        WITH ov AS (
            SELECT o.rid, o.vstage, o.span_id, sn.s, sn.e, o.vs, o.ve
            FROM _ls_ov o JOIN _ls_sn sn USING (rid, vstage, span_id)),
        {gap_ctes("rid", "_ls_sn")},
        kept AS (
            SELECT g.* FROM raw g JOIN _ls_sn sn USING (rid, vstage, span_id)
            WHERE sn.span_text IS NULL OR {gap_counts("sn.span_text", "g.gs", "g.ge", "sn.s", "sn.e")}),
        agg AS (
            SELECT rid, vstage, span_id, count(*) AS n_gaps,
                   {arr("concat('[', gs, ', ', ge, ']')", "gs")} AS gaps_json
            FROM kept GROUP BY rid, vstage, span_id)
        SELECT sn.rid, sn.vstage, sn.span_id, coalesce(a.n_gaps, 0) AS n_gaps, a.gaps_json
        FROM _ls_sn sn LEFT JOIN agg a USING (rid, vstage, span_id)""",
        ),
    ]


def sets() -> CTEs:
    """``_ls_sel`` the sufficient set each record's evidence names; ``_ls_miss`` its spans missing at
    the losing stage (steps 2-8), in set order, with their JSON."""
    return [
        (
            "_ls_choice",
            """
        WITH sc AS (
            SELECT r.rid, st.set_index, bool_and(st.resolved) AS ok,
                   bool_and(r.before_v IS NULL OR r.n_sets = 1 OR coalesce(b.n_gaps, 0) = 0) AS kept_before,
                   count(*) FILTER (WHERE a.n_gaps > 0) AS n_missing
            FROM _ls_r r JOIN _ls_set st ON st.qid = r.qid
            LEFT JOIN _ls_gap b ON b.rid = r.rid AND b.vstage = r.before_v AND b.span_id = st.span_id
            LEFT JOIN _ls_gap a ON a.rid = r.rid AND a.vstage = r.after_v AND a.span_id = st.span_id
            WHERE r.after_v IS NOT NULL
            GROUP BY r.rid, st.set_index)
        SELECT rid, arg_min(set_index, (CASE WHEN kept_before THEN 0 ELSE 1 END) * 1000000000000
                                       + n_missing * 1000000 + set_index) AS set_index
        FROM sc WHERE ok GROUP BY rid""",
        ),
        (
            "_ls_sel",
            """
        SELECT r.rid, r.qid, r.step, r.before_v, r.after_v,
               CASE WHEN r.step IN (0, 9, 10) AND r.cover_set IS NOT NULL THEN r.cover_set
                    ELSE coalesce(c.set_index, -1) END AS sel
        FROM _ls_r r LEFT JOIN _ls_choice c USING (rid) WHERE r.ev AND r.step <> 1""",
        ),
        (
            "_ls_miss",
            """
        SELECT c.rid, c.step, c.before_v, st.pos, sp.span_id, sp.doc_id, sp.s, sp.e,
               concat(sp.base, ', "uncovered": ', a.gaps_json, '}') AS span_json
        FROM _ls_sel c JOIN _ls_set st ON st.qid = c.qid AND st.set_index = c.sel
        JOIN _ls_span sp ON sp.qid = st.qid AND sp.span_id = st.span_id
        JOIN _ls_gap a ON a.rid = c.rid AND a.vstage = c.after_v AND a.span_id = st.span_id
        WHERE c.step BETWEEN 2 AND 8 AND a.n_gaps > 0""",
        ),
        ("_ls_fate_json", _fates_sql()),
    ]


def _fates_sql() -> str:
    """``_ls_fate_json``: per record at steps 2-8, each span of the named set with its document,
    title and fate (:mod:`ledgerscope.analysis.diagnosis.span_fates`): its marks per stage of the
    walk, looked up in ``_ls_fates`` (every marks string with its fate, from the pure function)."""
    not_recorded = " ".join(
        f"WHEN {sql_literal(stage)} THEN r.{flag} IS NULL" for _, flag, stage in FATE_WALK
    )
    order = " ".join(f"WHEN {sql_literal(stage)} THEN {i}" for i, (_, _, stage) in enumerate(FATE_WALK))
    head = obj_parts(("span", j("m.span_id")), ("doc_id", j("m.doc_id")), ("title", j("m.title")))[:-1]
    entry = f"concat({', '.join([*head, sql_literal(', '), 'm.fate', sql_literal('}')])})"
    return f"""
        WITH w AS (
            SELECT c.rid, st.pos, st.span_id, sp.doc_id, sp.title,
                   string_agg(CASE WHEN CASE v.vstage {not_recorded} END THEN 'N'
                                   WHEN coalesce(g.n_gaps, 1) = 0 THEN 'K' ELSE 'L' END, ''
                              ORDER BY CASE v.vstage {order} END) AS marks
            FROM _ls_sel c JOIN _ls_r r USING (rid)
            JOIN _ls_set st ON st.qid = c.qid AND st.set_index = c.sel
            JOIN _ls_span sp ON sp.qid = st.qid AND sp.span_id = st.span_id
            CROSS JOIN (SELECT DISTINCT vstage FROM _ls_members) v
            LEFT JOIN _ls_gap g ON g.rid = c.rid AND g.vstage = v.vstage AND g.span_id = st.span_id
            WHERE c.step BETWEEN 2 AND 8
            GROUP BY c.rid, st.pos, st.span_id, sp.doc_id, sp.title),
        m AS (SELECT w.*, f.fate FROM w JOIN _ls_fates f USING (marks))
        SELECT rid, {arr(entry, "pos")} AS fates FROM m GROUP BY rid"""
