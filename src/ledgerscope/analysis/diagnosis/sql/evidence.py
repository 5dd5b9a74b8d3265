"""CTEs: the evidence objects of :mod:`ledgerscope.analysis.diagnosis.tree` (``_evidence_*``) as
JSON text per record.

``_ls_d`` is the last: every record with ``evidence_json`` and ``walk_json``.
"""

from __future__ import annotations

import json
from typing import Any

from ledgerscope.analysis.diagnosis.evidence import ANSWER_CHARS, NO_RANK, TRANSITIONS, UNITS_PER_SPAN
from ledgerscope.analysis.diagnosis.sql.coverage import CTEs
from ledgerscope.analysis.diagnosis.sql.sqltext import arr, j, jlit, num, obj, obj_parts, trunc
from ledgerscope.analysis.diagnosis.tree import STAGE_OF_STEP
from ledgerscope.common.sql_tables import sql_literal


def _in_key(in_rank: str) -> str:
    """A hit's sort key: its best rank in the input lists (diagnose: ``_best(...)[0] or NO_RANK``)."""
    return f"coalesce(nullif({in_rank}, 0), {NO_RANK})"


#: every candidate list a step's evidence reads, each pivoted into its own columns per unit
_LISTS = tuple(dict.fromkeys(name for t in TRANSITIONS.values() for name in (*t[1], *t[2], *t[3])))


def _col(name: str) -> str:
    return name.replace("-", "_")


def _best(names: tuple[str, ...], value: str) -> str:
    """The unit's rank (``value="r"``) or score (``"s"``) in whichever of ``names`` ranks it best;
    on a tie the earlier list (diagnosis_evidence._best). NULL where no list holds it."""
    if not names:
        return "NULL"
    pick = f"{value}_{_col(names[0])}"
    best_rank = f"r_{_col(names[0])}"
    for name in names[1:]:
        better = f"r_{_col(name)} IS NOT NULL AND ({best_rank} IS NULL OR r_{_col(name)} < {best_rank})"
        pick = f"CASE WHEN {better} THEN {value}_{_col(name)} ELSE {pick} END"
        best_rank = f"CASE WHEN {better} THEN r_{_col(name)} ELSE {best_rank} END"
    return pick


def units() -> CTEs:
    """Steps 3-8: the input stage's units over each missing span, their ranks in every list shown,
    the packing log of each (step 8); ``_ls_units_json`` per record."""
    return [("_ls_hit", _hit_sql()), ("_ls_pack_log", _PACK_LOG_SQL), ("_ls_units_json", _units_json_sql())]


def _list_pivot() -> str:
    """Per unit, its best rank and that row's score in each list shown, one column pair a list."""
    return ", ".join(
        f"min(rnk) FILTER (WHERE stage = {sql_literal(n)}) AS r_{_col(n)}, "
        f"arg_min_null(score, rnk) FILTER (WHERE stage = {sql_literal(n)}) AS s_{_col(n)}"
        for n in _LISTS
    )


def _step_picks() -> str:
    """The input and output rank and score of the step's own transition, picked per row by a
    ``CASE h.step`` so one query serves steps 3-8."""
    by_step = {
        "in_rank": {step: _best(t[1], "r") for step, t in TRANSITIONS.items()},
        "in_score": {step: _best(t[1], "s") for step, t in TRANSITIONS.items()},
        "out_rank": {step: _best(t[2], "r") for step, t in TRANSITIONS.items()},
        "out_score": {step: _best(t[2], "s") for step, t in TRANSITIONS.items()},
    }
    return ", ".join(
        f"CASE h.step {' '.join(f'WHEN {step} THEN {sql}' for step, sql in cases.items())} END AS {col}"
        for col, cases in by_step.items()
    )


def _hit_sql() -> str:
    """``_ls_hit``: each missing span's units in the step's input list (``h``), their best row in
    every list (``p``), the step's picks and union lineage, capped at UNITS_PER_SPAN per span."""
    with_union = [step for step, t in TRANSITIONS.items() if "union" in t[3]]
    return f"""
        WITH h AS (
            SELECT m.rid, m.step, m.pos, m.span_id, o.unit_id, any_value(m.doc_id) AS doc_id,
                   arg_min_null(o.vs, o.rnk) AS vs, arg_min_null(o.ve, o.rnk) AS ve
            FROM _ls_miss m JOIN _ls_ov o ON o.rid = m.rid AND o.vstage = m.before_v AND o.span_id = m.span_id
            WHERE m.step BETWEEN 3 AND 8
            GROUP BY m.rid, m.step, m.pos, m.span_id, o.unit_id),
        p AS (  -- per unit and list: its best row (whole lists, no cutoff)
            SELECT rid, span_id, unit_id, {_list_pivot()},
                   arg_min_null(lineage, rnk) FILTER (WHERE stage = 'union') AS union_lineage
            FROM _ls_cp c SEMI JOIN h USING (rid, span_id, unit_id)
            GROUP BY rid, span_id, unit_id)
        SELECT h.*, p.* EXCLUDE (rid, span_id, unit_id), {_step_picks()},
               CASE WHEN h.step IN ({", ".join(map(str, with_union))}) THEN p.union_lineage END AS lineage
        FROM h LEFT JOIN p USING (rid, span_id, unit_id)
        QUALIFY row_number() OVER (PARTITION BY h.rid, h.pos ORDER BY {_in_key("in_rank")}, h.vs, h.unit_id)
                <= {UNITS_PER_SPAN}"""


# ``_ls_pack_log``: step 8's overflow and expansion-dropped logs, one row per JSON object entry
# (malformed or non-array logs yield none rather than failing the query).
_PACK_LOG_SQL = """
        SELECT rid, kind, i, e, json_extract_string(e, '$.unit_id') AS unit_id
        FROM (SELECT rid, kind, unnest(l) AS e, unnest(range(len(l))) AS i
              FROM (SELECT rid, 'overflow' AS kind,
                           CASE WHEN json_valid(overflow_json) AND json_type(overflow_json) = 'ARRAY'
                                THEN json_extract(overflow_json, '$[*]') END AS l FROM _ls_r WHERE step = 8
                    UNION ALL
                    SELECT rid, 'dropped',
                           CASE WHEN json_valid(expansion_dropped_json)
                                     AND json_type(expansion_dropped_json) = 'ARRAY'
                                THEN json_extract(expansion_dropped_json, '$[*]') END
                    FROM _ls_r WHERE step = 8))
        WHERE json_type(e) = 'OBJECT'"""


def _ranks_case() -> str:
    """A unit's ``ranks`` object: its rank and score in each list its step shows, ``null`` where
    absent, keyed by list name in the step's order (so the JSON matches the Python path)."""
    whens = []
    for step, (_, _, _, names) in TRANSITIONS.items():
        parts = []
        for i, name in enumerate(names):
            rank = obj(("rank", f"x.r_{_col(name)}"), ("score", num(f"x.s_{_col(name)}")))
            parts.append(sql_literal(("" if i == 0 else ", ") + json.dumps(name) + ": "))
            parts.append(f"CASE WHEN x.r_{_col(name)} IS NULL THEN 'null' ELSE {rank} END")
        whens.append(f"WHEN {step} THEN concat('{{', {', '.join(parts)}, '}}')")
    return f"CASE x.step {' '.join(whens)} END"


def _units_json_sql() -> str:
    """``_ls_units_json``: each record's unit entries as one JSON array, with the packing log of
    each unit at step 8."""
    entry = obj(
        ("unit_id", j("x.unit_id")),
        ("span", j("x.span_id")),
        ("doc_id", j("x.doc_id")),
        ("start", j("x.vs")),
        ("end", j("x.ve")),
        ("input_rank", j("x.in_rank")),
        ("input_score", num("x.in_score")),
        ("output_rank", j("x.out_rank")),
        ("output_score", num("x.out_score")),
        ("ranks", _ranks_case()),
        ("lineage", j("x.lineage"), "x.lineage IS NOT NULL"),
        ("overflow", "coalesce(o.overflow, '[]')", "x.step = 8"),
        ("expansion_dropped", "o.dropped", "x.step = 8 AND o.dropped IS NOT NULL"),
    )
    return f"""
        WITH o AS (
            SELECT rid, unit_id,
                   {arr("CAST(e AS VARCHAR)", "i", "kind = 'overflow'")} AS overflow,
                   {arr("CAST(e AS VARCHAR)", "i", "kind = 'dropped'")} AS dropped
            FROM _ls_pack_log GROUP BY rid, unit_id)
        SELECT x.rid, {arr(entry, f"x.pos, {_in_key('x.in_rank')}, x.vs, x.unit_id")} AS units
        FROM _ls_hit x LEFT JOIN o ON o.rid = x.rid AND o.unit_id = x.unit_id
        GROUP BY x.rid"""


def around() -> CTEs:
    """Step 2: the units over each missing span and, where none reaches an edge, the nearest one."""
    entry = obj(
        ("unit_id", j("unit_id")),
        ("span", j("span_id")),
        ("doc_id", j("doc_id")),
        ("start", j('"start"')),
        ("end", j('"end"')),
        ("relation", j("rel")),
    )
    return [
        (
            "_ls_around_json",
            f"""
        WITH near AS (SELECT DISTINCT rid, unit_id, doc_id, "start", "end" FROM _ls_up),
        u AS (
            SELECT m.rid, m.pos, m.span_id, m.s, m.e, n.unit_id, n.doc_id, n."start", n."end"
            FROM _ls_miss m JOIN near n ON n.rid = m.rid AND n.doc_id = m.doc_id
            WHERE m.step = 2),
        ov AS (
            SELECT *, 1 AS kind,
                   CASE WHEN "start" <= s AND "end" >= e THEN 'contains'
                        WHEN "start" > s AND "end" < e THEN 'inside'
                        WHEN "start" <= s THEN 'overlaps-start' ELSE 'overlaps-end' END AS rel
            FROM u WHERE "start" < e AND "end" > s),
        edge AS (
            SELECT rid, pos, bool_or("start" <= s) AS lo, bool_or("end" >= e) AS hi FROM ov
            GROUP BY rid, pos),
        bef AS (
            SELECT u.*, 0 AS kind, 'before' AS rel FROM u LEFT JOIN edge g USING (rid, pos)
            WHERE u."end" <= u.s AND NOT coalesce(g.lo, false)
            QUALIFY row_number() OVER (PARTITION BY u.rid, u.pos
                                       ORDER BY u."start" DESC, u.unit_id DESC) = 1),
        aft AS (
            SELECT u.*, 2 AS kind, 'after' AS rel FROM u LEFT JOIN edge g USING (rid, pos)
            WHERE u."start" >= u.e AND NOT coalesce(g.hi, false)
            QUALIFY row_number() OVER (PARTITION BY u.rid, u.pos ORDER BY u."start", u.unit_id) = 1),
        a AS (SELECT * FROM ov UNION ALL SELECT * FROM bef UNION ALL SELECT * FROM aft)
        SELECT rid, {arr(entry, 'pos, kind, "start", unit_id')} AS units FROM a GROUP BY rid""",
        )
    ]


def packed() -> CTEs:
    """Steps 0, 8, 9, 10: the packed list (step 8), its cover of the named set, the citations, cutoffs."""
    return [
        ("_ls_npk", "SELECT rid, count(*) AS n FROM _ls_c8 WHERE stage = 'packed' GROUP BY rid"),
        ("_ls_packed_json", _packed_json_sql()),
        ("_ls_cover_json", _cover_json_sql()),
        (
            "_ls_cites_json",
            f"SELECT rid, {arr('CAST(e AS VARCHAR)', 'i')} AS citations FROM _ls_cite GROUP BY rid",
        ),
        ("_ls_cut", _cutoff_sql()),
    ]


def _packed_json_sql() -> str:
    """``_ls_packed_json``: step 8's packed units in order, each with its rank in the selection's
    input (the reranked list up to the selection depth), to show what packing dropped."""
    item = obj(("unit_id", j("p.unit_id")), ("rank", "p.rnk"), ("reranked_rank", j("rr.rnk")))
    return f"""
        WITH r8 AS (SELECT rid, selection_depth FROM _ls_r WHERE step = 8 AND ev),
        rr AS (  -- rank in the selection's input (the reranked list to its cut)
            SELECT rid, unit_id, min(rnk) AS rnk
            FROM (SELECT rid, unit_id, rnk FROM _ls_c8 WHERE stage = 'reranked'
                  UNION ALL
                  SELECT g.rid, g.unit_id, g.rnk FROM _ls_cp g JOIN r8 USING (rid)
                  WHERE g.stage = 'reranked'
                    AND (r8.selection_depth IS NULL OR g.rnk <= r8.selection_depth))
            GROUP BY rid, unit_id)
        SELECT p.rid, {arr(item, "p.rnk, p.unit_id")} AS packed
        FROM _ls_c8 p SEMI JOIN r8 USING (rid)
        LEFT JOIN rr ON rr.rid = p.rid AND rr.unit_id = p.unit_id
        WHERE p.stage = 'packed'
        GROUP BY p.rid"""


def _cover_json_sql() -> str:
    """``_ls_cover_json``: per record at steps 0, 9, 10, each span of the named set with the packed
    units over it (and, at step 10, whether the citations cover it without a gap)."""
    unit = obj(("unit_id", j("unit_id")), ("rank", "rnk"))
    cited = "CASE WHEN coalesce(s.n_gaps, 0) = 0 THEN 'true' ELSE 'false' END"
    return f"""
        WITH spans AS (
            SELECT c.rid, c.step, st.pos, sp.span_id, sp.base, g.n_gaps
            FROM _ls_sel c JOIN _ls_set st ON st.qid = c.qid AND st.set_index = c.sel
            JOIN _ls_span sp ON sp.qid = st.qid AND sp.span_id = st.span_id
            LEFT JOIN _ls_gap g ON g.rid = c.rid AND g.vstage = 'cited' AND g.span_id = st.span_id
            WHERE c.step IN (0, 9, 10)),
        pu AS (
            SELECT rid, span_id, {arr(unit, "rnk, unit_id")} AS units FROM _ls_cp WHERE stage = 'packed'
            GROUP BY rid, span_id),
        js AS (
            SELECT s.rid, s.pos, concat(s.base, ', "packed_units": ', coalesce(pu.units, '[]'),
                                        CASE WHEN s.step = 10 THEN concat(', "cited": ', {cited}) END,
                                        '}}') AS span_json
            FROM spans s LEFT JOIN pu USING (rid, span_id))
        SELECT rid, {arr("span_json", "pos")} AS spans FROM js GROUP BY rid"""


def _cutoff_sql() -> str:
    """``_ls_cut``: at steps 3 and 4, each first-stage list's cutoff: its configured top-k, else the
    deepest rank the record's list reached."""
    return f"""
        SELECT r.rid, concat('{{', string_agg(concat(to_json(l.name), ': ', {j("coalesce(t.n, m.rnk)")}),
                                               ', ' ORDER BY l.ord), '}}') AS cutoff
        FROM _ls_r r
        JOIN (SELECT 3 AS step, 'bm25' AS name, 0 AS ord UNION ALL SELECT 3, 'dense_exact', 1
              UNION ALL SELECT 4, 'dense_exact', 0 UNION ALL SELECT 4, 'dense_ann', 1) l ON l.step = r.step
        LEFT JOIN _ls_top t ON t.arm = r.arm AND t.name = l.name
        LEFT JOIN (SELECT c.rid, c.stage, max(c.rnk) AS rnk FROM _ls_cp c
                   SEMI JOIN (SELECT rid FROM _ls_r WHERE step IN (3, 4)) s USING (rid)
                   GROUP BY c.rid, c.stage) m ON m.rid = r.rid AND m.stage = l.name
        GROUP BY r.rid"""


def _branches() -> list[tuple[str, list[tuple[Any, ...]]]]:
    """(condition, evidence object fields) per kind of record, in CASE order
    (diagnosis_evidence.evidence_*)."""
    oracle = (
        "oracle",
        obj(("verdict", j("r.o_verdict")), ("feasible", j("r.o_feasible"))),
        "r.o_verdict IS NOT NULL",
    )
    answer = _answer_fields()
    n_packed = (
        "n_packed",
        "CAST(CASE WHEN coalesce(r.n_ids, 0) > 0 THEN r.n_ids ELSE coalesce(npk.n, 0) END AS VARCHAR)",
    )
    cover = [
        ("sufficient_set", "CAST(sel.sel AS VARCHAR)", "r.has_fx"),
        ("spans", "coalesce(cov.spans, '[]')", "r.has_fx"),
    ]
    note = ("note", jlit("no fixture for this question"))
    spans = ("spans", "coalesce(mj.spans, '[]')")
    chosen = ("sufficient_set", "CAST(sel.sel AS VARCHAR)")
    stage = ("stage", j("r.after_stage"))
    fates = ("span_fates", "coalesce(fj.fates, '[]')")
    head = _loss_head(stage)
    citations, passed, corpus = _late_stage_fields()
    # where a stage is not recorded (ingested traces), after the branch's own fields
    stages = [
        ("stages_recorded", "r.h_recorded", "r.h_recorded IS NOT NULL"),
        ("stages_not_recorded", "r.h_not_recorded", "r.h_not_recorded IS NOT NULL"),
    ]
    tail = (*stages, oracle)
    return [
        ("r.answerable = false", [("stage", jlit("control")), *answer]),
        ("r.step = 1", [*corpus, oracle]),
        (
            "r.step = 2 AND r.has_fx",
            [stage, chosen, spans, ("units", "coalesce(aj.units, '[]')"), fates, *tail],
        ),
        ("r.step = 2", [stage, note, *tail]),
        (
            "r.step BETWEEN 3 AND 8 AND r.has_fx",
            [*head, chosen, spans, ("units", "coalesce(uj.units, '[]')"), *_step8_fields(), fates, *tail],
        ),
        ("r.step BETWEEN 3 AND 8", [*head, note, *tail]),
        ("r.step = 9", [("stage", jlit("answer")), *answer, n_packed, *cover, *tail]),
        ("r.step = 10", [*citations, n_packed, *cover, *tail]),
        ("true", [*passed, n_packed, *cover, *tail]),
    ]


def _answer_fields() -> list[tuple[Any, ...]]:
    """The generator's answer (truncated as in the Python path), verdict and error."""
    return [
        ("answer", j(trunc("r.answer", ANSWER_CHARS))),
        ("abstained", j("r.abstained")),
        ("answer_verdict", j("r.answer_verdict")),
        ("answer_reason", j("r.answer_reason")),
        ("generator_error", j("r.generator_error")),
    ]


def _loss_head(stage: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    """Steps 3-8: the losing stage, the stage it read from and the cutoff that applied there
    (rerank depth, selection depth, token budget, none for the union, else the list's own)."""
    inputs = " ".join(f"WHEN {s} THEN {jlit(t[0])}" for s, t in TRANSITIONS.items())
    cutoff = (
        f"CASE r.step WHEN 6 THEN {j('r.rerank_depth')} WHEN 7 THEN {j('r.selection_depth')} "
        f"WHEN 8 THEN {j('r.budget_tokens')} WHEN 5 THEN 'null' ELSE coalesce(cut.cutoff, 'null') END"
    )
    return [stage, ("input_stage", f"CASE r.step {inputs} END"), ("cutoff", cutoff)]


def _step8_fields() -> list[tuple[Any, ...]]:
    """Step 8 (packing) only: the budget, what the evidence cost and what was packed."""
    return [
        ("budget_tokens", j("r.budget_tokens"), "r.step = 8"),
        ("evidence_tokens", j("r.evidence_tokens"), "r.step = 8"),
        ("selection_depth", j("r.selection_depth"), "r.step = 8"),
        ("packed", "coalesce(pj.packed, '[]')", "r.step = 8"),
    ]


def _late_stage_fields() -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """The fields of a citation failure (step 10), a pass, and a corpus failure (step 1)."""
    citations = [
        ("stage", jlit("citations")),
        ("citation_verdict", j("r.citation_verdict")),
        ("citation_reason", j("r.citation_reason")),
        ("citations", "coalesce(cj.citations, '[]')"),
        ("answer", j(trunc("r.answer", ANSWER_CHARS))),
    ]
    passed = [
        ("stage", jlit("pass")),
        ("answer_verdict", j("r.answer_verdict")),
        ("citation_verdict", j("r.citation_verdict")),
    ]
    corpus = [
        ("stage", jlit("corpus")),
        ("gold_status", j("r.gold_status")),
        ("spans", "r.corpus_spans", "r.has_fx"),
    ]
    return citations, passed, corpus


def _case(before: list[str], after: list[str]) -> str:
    """CASE over the branches: ``concat(*before, <evidence object>, *after)`` (one copy per record)."""
    whens = " ".join(
        f"WHEN {cond} THEN concat({', '.join([*before, *obj_parts(*fields), *after])})"
        for cond, fields in _branches()
    )
    return f"CASE {whens} END"


_MISSING = "CAST(to_json(' (missing: ' || mj.missing || ')') AS VARCHAR)"
#: the walk's text after ``walk_pre``: for steps 2-8 the missing spans, then the rest
_WALK_TAIL = (
    f"CASE WHEN r.walk_post IS NULL THEN '' "
    f"ELSE concat(substr({_MISSING}, 2, length({_MISSING}) - 2), r.walk_post) END"
)
#: one JSON line of ``diagnose --json`` (the keys of diagnose_ledger's rows, in order), newline ended
_LINE_BEFORE = obj_parts(
    ("qid", j("r.qid")),
    ("arm", j("r.arm")),
    ("phase", j("CAST(r.phase AS VARCHAR)")),
    ("phase_offset", j("r.phase_offset")),
    ("segment", j("r.segment")),
    ("step", "CAST(r.step AS VARCHAR)"),
    ("step_name", j("r.step_name")),
    ("label", j("r.label")),
    ("evidence", "''"),
)[:-1]
_LINE_AFTER = [
    """', "flags": '""",
    "r.flags",
    """', "walk": '""",
    "r.walk_pre",
    _WALK_TAIL,
    *(
        part
        for key, expr in (
            ("answer_verdict", j("r.answer_verdict")),
            ("citation_verdict", j("r.citation_verdict")),
            ("support_packed", j("r.support_packed")),
            ("oracle_verdict", j("r.o_verdict")),
        )
        for part in (sql_literal(f', "{key}": '), expr)
    ),
    "'}'",
    "chr(10)",
]


def assemble() -> CTEs:
    """``_ls_d``: every record with its evidence and walk as JSON text, and its whole JSON line
    (each computed only where a query reads it)."""
    stages = " ".join(f"WHEN {s} THEN {sql_literal(st)}" for s, st in STAGE_OF_STEP.items())
    return [
        (
            "_ls_mj",
            f"""
        SELECT rid, {arr("span_json", "pos")} AS spans, string_agg(span_id, ', ' ORDER BY pos) AS missing
        FROM _ls_miss GROUP BY rid""",
        ),
        (
            "_ls_d",
            f"""
        SELECT r.*, {_case([], [])} AS evidence_json, concat(r.walk_pre, {_WALK_TAIL}) AS walk_json,
               {_case(_LINE_BEFORE, _LINE_AFTER)} AS line
        FROM (SELECT r.*, CASE r.step {stages} END AS after_stage FROM _ls_r r) r
        LEFT JOIN _ls_mj mj USING (rid)
        LEFT JOIN _ls_sel sel USING (rid)
        LEFT JOIN _ls_units_json uj USING (rid)
        LEFT JOIN _ls_around_json aj USING (rid)
        LEFT JOIN _ls_packed_json pj USING (rid)
        LEFT JOIN _ls_cover_json cov USING (rid)
        LEFT JOIN _ls_cites_json cj USING (rid)
        LEFT JOIN _ls_npk npk USING (rid)
        LEFT JOIN _ls_cut cut USING (rid)
        LEFT JOIN _ls_fate_json fj USING (rid)""",
        ),
    ]
