"""The ten-step diagnosis of a whole ledger, evidence included, computed inside DuckDB.

:func:`ledgerscope.diagnose.diagnose` is the definition: a pure function of one
record. Running it per record costs ~100 us in Python, which on a million-row
ledger is most of the command's time. This module builds the same rows as set
operations over the candidate table, so the whole ledger is diagnosed in a
handful of vectorised queries:

* the step, label, flags and walk depend only on a record's flags and verdicts
  and its oracle row; the distinct combinations (a few hundred at most) are
  diagnosed by the pure function itself and joined back, so that logic lives
  in one place;
* the evidence (closest sufficient set, uncovered parts of each missing span
  with whitespace excused, the units at the losing stage with their ranks and
  scores in every list shown, packing detail, packed cover, citations) is
  mirrored in SQL here. ``tests/test_diagnose_sql.py`` checks every record of
  real, starved and synthetic ledgers against :func:`diagnose_ledger` (the pure
  function fed from the same ledger).

Everything the JSON holds that came from a document, a fixture or a model is
encoded by DuckDB's JSON writer; the caller still passes each line through
:func:`ledgerscope.safe_text` escaping before it reaches a terminal.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from .diagnose import (
    _TRANSITIONS,
    ANSWER_CHARS,
    STAGE_OF_STEP,
    SUPPORT_WALK,
    UNITS_PER_SPAN,
    diagnose,
)
from .diagnose_ledger import UNIT_WINDOW, _top_n, load_ledger_fixtures
from .fixtures import Fixture

#: the table :func:`build_diagnosis` creates (one row per record)
TABLE = "_ls_diagnosis"
NO_RANK = 1 << 30  # what diagnose._rank reports for a row without a rank
#: Python's str.isspace(), as an RE2 class: gaps holding only these are excused
_WS = r"[\t\n\x0b\x0c\r\x1c-\x1f\x85\p{Z}]*"
_SENTINEL = "\ue000missing\ue000"
_KEY_COLUMNS = (
    "answerable",
    "gold_status",
    *(c for _, c, _ in SUPPORT_WALK),
    "answer_verdict",
    "citation_verdict",
    "single_unit_complete",
)
#: virtual stage -> the candidate lists (or "units") that make it up
_MEMBERS = {
    "chunked": ("units",),
    "exact": ("bm25", "dense_exact"),
    "production": ("bm25", "dense_ann"),
    "union": ("union",),
    "fused": ("fused",),
    "reranked": ("reranked",),
    "packed": ("packed",),
}


# ---------------------------------------------------------------------------
# SQL text helpers


def _lit(value: object) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    return "'" + str(value).replace("'", "''") + "'"


def _j(expr: str) -> str:
    """SQL for the JSON text of a value (``null`` for NULL)."""
    return f"coalesce(CAST(to_json({expr}) AS VARCHAR), 'null')"


def _num(expr: str) -> str:
    """A score as JSON: non-finite values are ``null`` (NaN is not JSON)."""
    return _j(f"CASE WHEN isfinite(CAST({expr} AS DOUBLE)) THEN CAST({expr} AS DOUBLE) END")


def _obj(*fields: tuple) -> str:
    """SQL for a JSON object's text from ``(key, json_sql)`` or ``(key, json_sql, condition)``.

    The first field is always present; a conditional field is left out where its
    condition is not true.
    """
    parts = ["'{'"]
    for i, field in enumerate(fields):
        key, expr = field[0], field[1]
        label = _lit(("" if i == 0 else ", ") + json.dumps(key) + ": ")
        if len(field) > 2:
            assert i > 0, "the first field of an object is unconditional"
            parts.append(f"CASE WHEN {field[2]} THEN concat({label}, {expr}) ELSE '' END")
        else:
            parts.extend((label, expr))
    parts.append("'}'")
    return f"concat({', '.join(parts)})"  # one allocation, where a chain of || copies every prefix


def _arr(item: str, order: str) -> str:
    """SQL aggregate for a JSON array of ``item`` texts in ``order``."""
    return f"concat('[', string_agg({item}, ', ' ORDER BY {order}), ']')"


def _temp(con, name: str, select: str, params: Sequence | None = None) -> None:
    con.execute(f"CREATE OR REPLACE TEMP TABLE {name} AS {select}", params or [])


def _columns(con, name: str, cols: Mapping[str, tuple[str, list]]) -> None:
    """A temp table from Python lists (no pyarrow: its list conversion imports pandas)."""
    select = ", ".join(
        f"CAST(unnest(${i + 1}) AS {typ}) AS {col}"
        for i, (col, (typ, _)) in enumerate(cols.items())
    )
    values = [vals for _, vals in cols.values()]
    if not values[0]:
        select = ", ".join(f"CAST(NULL AS {typ}) AS {col}" for col, (typ, _) in cols.items())
        _temp(con, name, f"SELECT {select} WHERE false")
        return
    _temp(con, name, f"SELECT {select}", values)


# ---------------------------------------------------------------------------
# inputs from Python: fixtures, configured depths, the diagnosis heads


def _register_fixtures(con, fixtures: Mapping[str, Fixture], texts: Mapping[str, str]) -> None:
    from .diagnose import _span_json

    fx = {"qid": ("VARCHAR", []), "n_sets": ("INTEGER", []), "corpus_spans": ("VARCHAR", [])}
    sp = {k: ("VARCHAR", []) for k in ("qid", "span_id", "doc_id")}
    sp |= {
        "s": ("BIGINT", []),
        "e": ("BIGINT", []),
        "span_text": ("VARCHAR", []),
        "base": ("VARCHAR", []),
        "win_lo": ("BIGINT", []),
        "win_hi": ("BIGINT", []),
    }
    st = {
        "qid": ("VARCHAR", []),
        "set_index": ("INTEGER", []),
        "pos": ("INTEGER", []),
        "span_id": ("VARCHAR", []),
        "resolved": ("BOOLEAN", []),
    }
    for qid, f in fixtures.items():
        fx["qid"][1].append(qid)
        fx["n_sets"][1].append(len(f.sufficient_sets))
        fx["corpus_spans"][1].append(
            json.dumps(
                [{**_span_json(s, texts), "doc_in_corpus": s.doc_id in texts} for s in f.spans],
                ensure_ascii=False,
            )
        )
        for s in f.spans:
            text = texts.get(s.doc_id)
            base = json.dumps(_span_json(s, texts), ensure_ascii=False)
            for key, val in (
                ("qid", qid),
                ("span_id", s.span_id),
                ("doc_id", s.doc_id),
                ("s", s.start),
                ("e", s.end),
                ("span_text", None if text is None else text[s.start : s.end]),
                ("base", base[:-1]),
                ("win_lo", s.start - UNIT_WINDOW),
                ("win_hi", s.end + UNIT_WINDOW),
            ):
                sp[key][1].append(val)
        ids = {s.span_id for s in f.spans}
        for i, sset in enumerate(f.sufficient_sets):
            for pos, sid in enumerate(sset):
                for key, val in (
                    ("qid", qid),
                    ("set_index", i),
                    ("pos", pos),
                    ("span_id", sid),
                    ("resolved", sid in ids),
                ):
                    st[key][1].append(val)
    _columns(con, "_ls_fx", fx)
    _columns(con, "_ls_span", sp)
    _columns(con, "_ls_set", st)


def _register_lists(con, ledger: str | Path) -> None:
    """Per step, the lists read for input and output ranks and shown per unit; per arm, top-n."""
    lists = {
        "step": ("INTEGER", []),
        "role": ("VARCHAR", []),
        "name": ("VARCHAR", []),
        "ord": ("INTEGER", []),
    }
    for step, (_, ins, outs, shown) in _TRANSITIONS.items():
        for role, names in (("in", ins), ("out", outs), ("shown", shown)):
            for i, name in enumerate(names):
                for key, val in (("step", step), ("role", role), ("name", name), ("ord", i)):
                    lists[key][1].append(val)
    _columns(con, "_ls_lists", lists)
    members = {"vstage": ("VARCHAR", []), "stage": ("VARCHAR", [])}
    for vstage, names in _MEMBERS.items():
        for name in names:
            members["vstage"][1].append(vstage)
            members["stage"][1].append(name)
    _columns(con, "_ls_members", members)
    top = {"arm": ("VARCHAR", []), "name": ("VARCHAR", []), "n": ("INTEGER", [])}
    for arm, depths in _top_n(ledger).items():
        for name, n in depths.items():
            for key, val in (("arm", arm), ("name", name), ("n", n)):
                top[key][1].append(val)
    _columns(con, "_ls_top", top)


def _register_heads(con) -> None:
    """Step, label, flags and walk per distinct combination of the columns they depend on."""
    cols = ", ".join(f'"{c}"' for c in (*_KEY_COLUMNS, "o_verdict", "o_feasible"))
    heads = {
        "key": ("VARCHAR", []),
        "step": ("INTEGER", []),
        "step_name": ("VARCHAR", []),
        "label": ("VARCHAR", []),
        "flags": ("VARCHAR", []),
        "walk_pre": ("VARCHAR", []),
        "walk_post": ("VARCHAR", []),
    }
    names = (*_KEY_COLUMNS, "oracle_verdict", "oracle_feasible")
    for key, *values in con.execute(f"SELECT DISTINCT key, {cols} FROM _ls_rec").fetchall():
        rec = dict(zip(names, values, strict=True))
        d = diagnose(rec, {}, None, {}, None)
        walk = [dict(w) for w in d.walk]
        pre, post = json.dumps(walk, ensure_ascii=False), None
        if 2 <= d.step <= 8:  # the walk's last detail names the missing spans, known only in SQL
            walk[-1]["detail"] += _SENTINEL
            pre, post = json.dumps(walk, ensure_ascii=False).split(_SENTINEL)
        for k, v in (
            ("key", key),
            ("step", d.step),
            ("step_name", d.step_name),
            ("label", d.label),
            ("flags", json.dumps(list(d.flags))),
            ("walk_pre", pre),
            ("walk_post", post),
        ):
            heads[k][1].append(v)
    _columns(con, "_ls_head", heads)


# ---------------------------------------------------------------------------
# the queries


_RECORD_COLUMNS = (
    "arm",
    "phase",
    "phase_offset",
    "qid",
    "segment",
    *_KEY_COLUMNS,
    "covered_set",
    "evidence_tokens",
    "budget_tokens",
    "rerank_depth",
    "selection_depth",
    "overflow_json",
    "expansion_dropped_json",
    "answer",
    "abstained",
    "citations_json",
    "answer_reason",
    "citation_reason",
    "generator_error",
)


def _records(con, arm: str | None) -> None:
    key = (
        "to_json({"
        + ", ".join(f"'{c}': \"{c}\"" for c in _KEY_COLUMNS)
        + ", 'ov': o_verdict, 'of': o_feasible})"
    )
    cols = ", ".join(f'r."{c}"' for c in _RECORD_COLUMNS)
    where = "" if arm is None else f"WHERE r.arm = {_lit(arm)}"
    con.execute(f"""CREATE OR REPLACE TEMP VIEW _ls_rec AS
        SELECT *, CAST({key} AS VARCHAR) AS key FROM (
            SELECT {cols}, len(r.packed_unit_ids) AS n_ids,
                   CASE WHEN o.arm IS NOT NULL THEN o.o.v ELSE r.oracle_verdict END AS o_verdict,
                   CASE WHEN o.arm IS NOT NULL THEN o.o.f ELSE r.oracle_feasible END AS o_feasible,
                   fx.qid IS NOT NULL AS has_fx, fx.n_sets, fx.corpus_spans
            FROM records r
            LEFT JOIN (SELECT arm, qid, any_value({{'v': answer_verdict, 'f': feasible}}) AS o
                       FROM oracle GROUP BY arm, qid) o ON o.arm = r.arm AND o.qid = r.qid
            LEFT JOIN _ls_fx fx ON fx.qid = r.qid {where})""")


def _records_with_steps(ctes: list[tuple[str, str]]) -> None:
    """``_ls_r``: the records, numbered (``rid``, also the output order), with step and stages read."""
    before = " ".join(f"WHEN {s} THEN {_lit(t[0])}" for s, t in _TRANSITIONS.items())
    after = " ".join(f"WHEN {s} THEN {_lit(st)}" for s, st in STAGE_OF_STEP.items())
    ctes.append(
        (
            "_ls_r",
            f"""
        SELECT x.*, row_number() OVER (ORDER BY x.arm, x.phase_offset, x.phase, x.qid) AS rid,
               h.step, h.step_name, h.label, h.flags, h.walk_pre, h.walk_post,
               CASE WHEN ev THEN CASE h.step {before} END END AS before_v,
               CASE WHEN NOT ev THEN NULL WHEN h.step BETWEEN 2 AND 8 THEN CASE h.step {after} END
                    WHEN h.step IN (0, 9, 10) AND cover_set IS NULL THEN 'packed' END AS after_v
        FROM (SELECT *, has_fx AND answerable IS DISTINCT FROM false
                        AND coalesce(nullif(gold_status, ''), 'ok') = 'ok' AS ev,
                     CASE WHEN covered_set >= 0 AND covered_set < n_sets THEN covered_set END AS cover_set
              FROM _ls_rec) x
        JOIN _ls_head h ON h.key = x.key""",
        )
    )


def _candidate_rows(ctes: list[tuple[str, str]]) -> None:
    """Gold-overlapping rows of every list; packed lists whole; step-8 reranked rows to the cut."""
    ctes.append(
        (
            "_ls_cg",
            f"""
        SELECT r.rid, c.stage, c."rank", coalesce(c."rank", {NO_RANK}) AS rnk, c.unit_id, c.score, c.doc_id,
               c."start", c."end", CASE WHEN c.stage = 'union' THEN c.lineage END AS lineage
        FROM (SELECT * FROM candidates c SEMI JOIN _ls_span s
              ON s.qid = c.qid AND s.doc_id = c.doc_id AND c."start" < s.e AND c."end" > s.s) c
        JOIN _ls_r r ON r.ev AND c.arm = r.arm AND c.phase = r.phase AND c.qid = r.qid""",
        )
    )
    ctes.append(
        (
            "_ls_c8",
            f"""
        SELECT r.rid, c.stage, coalesce(c."rank", {NO_RANK}) AS rnk, c.unit_id, c.doc_id, c."start", c."end"
        FROM candidates c JOIN _ls_r r ON r.ev AND r.step IN (0, 8, 9, 10)
             AND c.arm = r.arm AND c.phase = r.phase AND c.qid = r.qid
        WHERE c.stage = 'packed'
           OR (r.step = 8 AND c.stage = 'reranked' AND c."rank" <= coalesce(r.selection_depth, 0))""",
        )
    )
    ctes.append(
        (
            "_ls_uw",
            """
        SELECT DISTINCT r.rid, u.unit_id, u.doc_id, u."start", u."end"
        FROM _ls_r r JOIN _ls_span s ON s.qid = r.qid
        JOIN units u ON u.arm = r.arm AND u.phase = r.phase AND u.doc_id = s.doc_id
             AND u."end" >= s.win_lo AND u."start" <= s.win_hi
        WHERE r.ev AND r.step IN (2, 3)""",
        )
    )
    ctes.append(
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
        )
    )


def _coverage(ctes: list[tuple[str, str]]) -> None:
    """Per record, stage and gold span: the uncovered parts (whitespace excused), as in diagnose._gaps."""
    ctes.append(
        (
            "_ls_need",
            """
        SELECT rid, qid, before_v AS vstage, rerank_depth, selection_depth FROM _ls_r WHERE before_v IS NOT NULL
        UNION ALL SELECT rid, qid, after_v, rerank_depth, selection_depth FROM _ls_r WHERE after_v IS NOT NULL
        UNION ALL SELECT rid, qid, 'cited', rerank_depth, selection_depth FROM _ls_r WHERE ev AND step = 10""",
        )
    )
    ctes.append(
        (
            "_ls_vrows",
            f"""
        SELECT n.rid, n.vstage, c.unit_id, c.rnk, c.doc_id, c."start" AS vs, c."end" AS ve
        FROM _ls_need n JOIN _ls_members m ON m.vstage = n.vstage
        JOIN _ls_cg c ON c.rid = n.rid AND c.stage = m.stage
        WHERE (c.stage <> 'fused' OR n.rerank_depth IS NULL OR c."rank" <= n.rerank_depth)
          AND (c.stage <> 'reranked' OR n.selection_depth IS NULL OR c."rank" <= n.selection_depth)
        UNION ALL
        SELECT n.rid, n.vstage, u.unit_id, {NO_RANK}, u.doc_id, u."start", u."end"
        FROM _ls_need n JOIN _ls_uw u ON u.rid = n.rid WHERE n.vstage = 'chunked'
        UNION ALL
        SELECT rid, 'cited', NULL, {NO_RANK}, doc_id, "start", "end" FROM _ls_cite
        WHERE doc_id IS NOT NULL AND "start" IS NOT NULL AND "end" IS NOT NULL""",
        )
    )
    ctes.append(
        (
            "_ls_sn",
            """
        SELECT n.rid, n.vstage, s.span_id, s.doc_id, s.s, s.e, s.span_text
        FROM _ls_need n JOIN _ls_span s ON s.qid = n.qid""",
        )
    )
    ctes.append(
        (
            "_ls_gap",
            f"""
        WITH ov AS (
            SELECT sn.rid, sn.vstage, sn.span_id, sn.s, sn.e, v.vs, v.ve
            FROM _ls_sn sn JOIN _ls_vrows v ON v.rid = sn.rid AND v.vstage = sn.vstage
                 AND v.doc_id = sn.doc_id AND v.vs < sn.e AND v.ve > sn.s),
        w AS (
            SELECT *, greatest(s, coalesce(max(ve) OVER (
                PARTITION BY rid, vstage, span_id ORDER BY vs, ve
                ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), s)) AS pos
            FROM ov),
        raw AS (
            SELECT rid, vstage, span_id, pos AS gs, vs AS ge FROM w WHERE vs > pos
            UNION ALL
            SELECT rid, vstage, span_id, greatest(any_value(s), max(ve)), any_value(e) FROM ov
            GROUP BY rid, vstage, span_id HAVING greatest(any_value(s), max(ve)) < any_value(e)
            UNION ALL
            SELECT rid, vstage, span_id, s, e FROM _ls_sn sn
            WHERE s < e AND NOT EXISTS (SELECT 1 FROM ov WHERE ov.rid = sn.rid AND ov.vstage = sn.vstage
                                        AND ov.span_id = sn.span_id)),
        kept AS (
            SELECT g.* FROM raw g JOIN _ls_sn sn USING (rid, vstage, span_id)
            WHERE sn.span_text IS NULL
               OR NOT regexp_full_match(substr(sn.span_text, g.gs - sn.s + 1, g.ge - g.gs), {_lit(_WS)}))
        SELECT sn.rid, sn.vstage, sn.span_id, count(k.gs) AS n_gaps,
               {_arr("concat('[', k.gs, ', ', k.ge, ']')", "k.gs")} AS gaps_json
        FROM _ls_sn sn LEFT JOIN kept k USING (rid, vstage, span_id)
        GROUP BY sn.rid, sn.vstage, sn.span_id""",
        )
    )


def _sets(ctes: list[tuple[str, str]]) -> None:
    """The sufficient set each record's evidence names (diagnose._closest_set, or the covered set)."""
    ctes.append(
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
        )
    )
    ctes.append(
        (
            "_ls_sel",
            """
        SELECT r.rid, r.qid, r.step, r.before_v, r.after_v,
               CASE WHEN r.step IN (0, 9, 10) AND r.cover_set IS NOT NULL THEN r.cover_set
                    ELSE coalesce(c.set_index, -1) END AS sel
        FROM _ls_r r LEFT JOIN _ls_choice c USING (rid) WHERE r.ev AND r.step <> 1""",
        )
    )
    ctes.append(
        (
            "_ls_miss",
            """
        SELECT c.rid, c.step, c.before_v, st.pos, sp.span_id, sp.doc_id, sp.s, sp.e,
               concat(sp.base, ', "uncovered": ', a.gaps_json, '}') AS span_json
        FROM _ls_sel c JOIN _ls_set st ON st.qid = c.qid AND st.set_index = c.sel
        JOIN _ls_span sp ON sp.qid = st.qid AND sp.span_id = st.span_id
        JOIN _ls_gap a ON a.rid = c.rid AND a.vstage = c.after_v AND a.span_id = st.span_id
        WHERE c.step BETWEEN 2 AND 8 AND a.n_gaps > 0""",
        )
    )


def _units(ctes: list[tuple[str, str]]) -> None:
    """Steps 3-8: the units of the input stage over each missing span, ranks in every list shown."""
    rank_obj = _obj(("rank", "k.rnk"), ("score", _num("k.score")))
    width = max(len(t[3]) for t in _TRANSITIONS.values())
    shown_cols = ", ".join(
        f"arg_min_null({rank_obj}, k.rnk) FILTER (WHERE k.role = 'shown' AND k.ord = {i}) "
        f"AS shown{i}"
        for i in range(width)
    )
    whens = []
    for step, (_, _, _, shown) in _TRANSITIONS.items():
        parts = ", ".join(
            f"{_lit(('' if i == 0 else ', ') + json.dumps(name) + ': ')}, coalesce(shown{i}, 'null')"
            for i, name in enumerate(shown)
        )
        whens.append(f"WHEN {step} THEN concat('{{', {parts}, '}}')")
    ranks_json = f"CASE step {' '.join(whens)} END"
    ctes.append(
        (
            "_ls_hit",
            f"""
        WITH h AS (
            SELECT m.rid, m.step, m.pos, m.span_id, v.unit_id, arg_min_null(v.doc_id, v.rnk) AS doc_id,
                   arg_min_null(v.vs, v.rnk) AS vs, arg_min_null(v.ve, v.rnk) AS ve
            FROM _ls_miss m JOIN _ls_vrows v ON v.rid = m.rid AND v.vstage = m.before_v
                 AND v.doc_id = m.doc_id AND v.vs < m.e AND v.ve > m.s
            WHERE m.step BETWEEN 3 AND 8
            GROUP BY m.rid, m.step, m.pos, m.span_id, v.unit_id),
        k AS (  -- the unit's best row in each list the step reads
            SELECT h.rid, h.pos, h.unit_id, l.role, l.name, l.ord, min(c.rnk) AS rnk,
                   arg_min_null(c.score, c.rnk) AS score, arg_min_null(c.lineage, c.rnk) AS lineage
            FROM h JOIN _ls_lists l ON l.step = h.step
            JOIN _ls_cg c ON c.rid = h.rid AND c.stage = l.name AND c.unit_id = h.unit_id
            GROUP BY h.rid, h.pos, h.unit_id, l.role, l.name, l.ord),
        x AS (
            SELECT h.rid, h.step, h.pos, h.span_id, h.unit_id, h.doc_id, h.vs, h.ve,
                   arg_min_null(k.rnk, CAST(k.rnk AS BIGINT) * 16 + k.ord) FILTER (WHERE k.role = 'in') AS in_rank,
                   arg_min_null(k.score, CAST(k.rnk AS BIGINT) * 16 + k.ord)
                       FILTER (WHERE k.role = 'in') AS in_score,
                   arg_min_null(k.rnk, CAST(k.rnk AS BIGINT) * 16 + k.ord)
                       FILTER (WHERE k.role = 'out') AS out_rank,
                   arg_min_null(k.score, CAST(k.rnk AS BIGINT) * 16 + k.ord)
                       FILTER (WHERE k.role = 'out') AS out_score,
                   {shown_cols},
                   arg_min_null(k.lineage, k.ord) FILTER (WHERE k.role = 'shown' AND k.name = 'union'
                                                           AND k.lineage IS NOT NULL) AS lineage
            FROM h LEFT JOIN k ON k.rid = h.rid AND k.pos = h.pos AND k.unit_id = h.unit_id
            GROUP BY h.rid, h.step, h.pos, h.span_id, h.unit_id, h.doc_id, h.vs, h.ve)
        SELECT x.*, {ranks_json} AS ranks_json
        FROM x QUALIFY row_number() OVER (
            PARTITION BY rid, pos ORDER BY coalesce(nullif(in_rank, 0), {NO_RANK}), vs, unit_id) <= {UNITS_PER_SPAN}
        """,
        )
    )
    # step 8: what packing said about each unit (overflow log, neighbour expansion drops)
    ctes.append(
        (
            "_ls_pack_log",
            """
        SELECT rid, kind, i, e, json_extract_string(e, '$.unit_id') AS unit_id
        FROM (SELECT rid, kind, unnest(l) AS e, unnest(range(len(l))) AS i
              FROM (SELECT rid, 'overflow' AS kind,
                           CASE WHEN json_valid(overflow_json) AND json_type(overflow_json) = 'ARRAY'
                                THEN json_extract(overflow_json, '$[*]') END AS l FROM _ls_r WHERE step = 8
                    UNION ALL
                    SELECT rid, 'dropped',
                           CASE WHEN json_valid(expansion_dropped_json)
                                     AND json_type(expansion_dropped_json) = 'ARRAY'
                                THEN json_extract(expansion_dropped_json, '$[*]') END FROM _ls_r WHERE step = 8))
        WHERE json_type(e) = 'OBJECT'""",
        )
    )
    entry = _obj(
        ("unit_id", _j("x.unit_id")),
        ("span", _j("x.span_id")),
        ("doc_id", _j("x.doc_id")),
        ("start", _j("x.vs")),
        ("end", _j("x.ve")),
        ("input_rank", _j("x.in_rank")),
        ("input_score", _num("x.in_score")),
        ("output_rank", _j("x.out_rank")),
        ("output_score", _num("x.out_score")),
        ("ranks", "x.ranks_json"),
        ("lineage", _j("x.lineage"), "x.lineage IS NOT NULL"),
        ("overflow", "coalesce(o.overflow, '[]')", "x.step = 8"),
        ("expansion_dropped", "o.dropped", "x.step = 8 AND o.dropped IS NOT NULL"),
    )
    ctes.append(
        (
            "_ls_units_json",
            f"""
        WITH o AS (
            SELECT rid, unit_id,
                   concat('[', string_agg(CAST(e AS VARCHAR), ', ' ORDER BY i) FILTER (WHERE kind = 'overflow'),
                          ']') AS overflow,
                   '[' || string_agg(CAST(e AS VARCHAR), ', ' ORDER BY i) FILTER (WHERE kind = 'dropped')
                       || ']' AS dropped
            FROM _ls_pack_log GROUP BY rid, unit_id)
        SELECT x.rid, {_arr(entry, f"x.pos, coalesce(nullif(x.in_rank, 0), {NO_RANK}), x.vs, x.unit_id")} AS units
        FROM _ls_hit x LEFT JOIN o ON o.rid = x.rid AND o.unit_id = x.unit_id
        GROUP BY x.rid""",
        )
    )


def _around(ctes: list[tuple[str, str]]) -> None:
    """Step 2: the units over each missing span and, where none reaches an edge, the nearest one."""
    entry = _obj(
        ("unit_id", _j("unit_id")),
        ("span", _j("span_id")),
        ("doc_id", _j("doc_id")),
        ("start", _j('"start"')),
        ("end", _j('"end"')),
        ("relation", _j("rel")),
    )
    ctes.append(
        (
            "_ls_around_json",
            f"""
        WITH u AS (
            SELECT m.rid, m.pos, m.span_id, m.s, m.e, w.unit_id, w.doc_id, w."start", w."end"
            FROM _ls_miss m JOIN _ls_uw w ON w.rid = m.rid AND w.doc_id = m.doc_id
            WHERE m.step = 2),
        ov AS (
            SELECT *, 1 AS kind,
                   CASE WHEN "start" <= s AND "end" >= e THEN 'contains'
                        WHEN "start" > s AND "end" < e THEN 'inside'
                        WHEN "start" <= s THEN 'overlaps-start' ELSE 'overlaps-end' END AS rel
            FROM u WHERE "start" < e AND "end" > s),
        edge AS (
            SELECT rid, pos, bool_or("start" <= s) AS lo, bool_or("end" >= e) AS hi FROM ov GROUP BY rid, pos),
        bef AS (
            SELECT u.*, 0 AS kind, 'before' AS rel FROM u LEFT JOIN edge g USING (rid, pos)
            WHERE u."end" <= u.s AND NOT coalesce(g.lo, false)
            QUALIFY row_number() OVER (PARTITION BY u.rid, u.pos ORDER BY u."start" DESC, u.unit_id DESC) = 1),
        aft AS (
            SELECT u.*, 2 AS kind, 'after' AS rel FROM u LEFT JOIN edge g USING (rid, pos)
            WHERE u."start" >= u.e AND NOT coalesce(g.hi, false)
            QUALIFY row_number() OVER (PARTITION BY u.rid, u.pos ORDER BY u."start", u.unit_id) = 1),
        a AS (SELECT * FROM ov UNION ALL SELECT * FROM bef UNION ALL SELECT * FROM aft)
        SELECT rid, {_arr(entry, 'pos, kind, "start", unit_id')} AS units FROM a GROUP BY rid""",
        )
    )


def _packed(ctes: list[tuple[str, str]]) -> None:
    """Steps 0, 8, 9, 10: the packed context, its cover of the chosen set, the citations."""
    ctes.append(
        ("_ls_npk", "SELECT rid, count(*) AS n FROM _ls_c8 WHERE stage = 'packed' GROUP BY rid")
    )
    item = _obj(("unit_id", _j("p.unit_id")), ("rank", "p.rnk"), ("reranked_rank", _j("rr.rnk")))
    ctes.append(
        (
            "_ls_packed_json",
            f"""
        WITH r8 AS (SELECT rid, selection_depth FROM _ls_r WHERE step = 8 AND ev),
        rr AS (
            SELECT rid, unit_id, min(rnk) AS rnk
            FROM (SELECT c.rid, c.unit_id, c.rnk FROM _ls_c8 c SEMI JOIN r8 USING (rid) WHERE c.stage = 'reranked'
                  UNION ALL
                  SELECT g.rid, g.unit_id, g.rnk FROM _ls_cg g JOIN r8 USING (rid)
                  WHERE g.stage = 'reranked' AND (r8.selection_depth IS NULL OR g."rank" <= r8.selection_depth))
            GROUP BY rid, unit_id)
        SELECT p.rid, {_arr(item, "p.rnk, p.unit_id")} AS packed
        FROM _ls_c8 p SEMI JOIN r8 USING (rid)
        LEFT JOIN rr ON rr.rid = p.rid AND rr.unit_id = p.unit_id
        WHERE p.stage = 'packed'
        GROUP BY p.rid""",
        )
    )
    unit = _obj(("unit_id", _j("p.unit_id")), ("rank", "p.rnk"))
    ctes.append(
        (
            "_ls_cover_json",
            f"""
        WITH spans AS (
            SELECT c.rid, c.step, st.pos, sp.span_id, sp.doc_id, sp.s, sp.e, sp.base, g.n_gaps
            FROM _ls_sel c JOIN _ls_set st ON st.qid = c.qid AND st.set_index = c.sel
            JOIN _ls_span sp ON sp.qid = st.qid AND sp.span_id = st.span_id
            LEFT JOIN _ls_gap g ON g.rid = c.rid AND g.vstage = 'cited' AND g.span_id = st.span_id
            WHERE c.step IN (0, 9, 10)),
        pu AS (
            SELECT s.rid, s.pos, {_arr(unit, "p.rnk, p.unit_id")} AS units
            FROM spans s JOIN _ls_c8 p ON p.rid = s.rid AND p.stage = 'packed' AND p.doc_id = s.doc_id
                 AND p."start" < s.e AND p."end" > s.s
            GROUP BY s.rid, s.pos),
        j AS (
            SELECT s.rid, s.pos, concat(s.base, ', "packed_units": ', coalesce(pu.units, '[]'),
                   CASE WHEN s.step = 10 THEN concat(', "cited": ', CASE WHEN coalesce(s.n_gaps, 0) = 0
                                                                  THEN 'true' ELSE 'false' END) END,
                   '}}') AS span_json
            FROM spans s LEFT JOIN pu USING (rid, pos))
        SELECT rid, {_arr("span_json", "pos")} AS spans FROM j GROUP BY rid""",
        )
    )
    ctes.append(
        (
            "_ls_cites_json",
            f"""
        SELECT rid, {_arr("CAST(e AS VARCHAR)", "i")} AS citations FROM _ls_cite GROUP BY rid""",
        )
    )
    ctes.append(
        (
            "_ls_cut",
            f"""
        SELECT r.rid, concat('{{', string_agg(concat(to_json(l.name), ': ', {_j("coalesce(t.n, m.rnk)")}),
                                               ', ' ORDER BY l.ord), '}}') AS cutoff
        FROM _ls_r r
        JOIN (SELECT 3 AS step, 'bm25' AS name, 0 AS ord UNION ALL SELECT 3, 'dense_exact', 1
              UNION ALL SELECT 4, 'dense_exact', 0 UNION ALL SELECT 4, 'dense_ann', 1) l ON l.step = r.step
        LEFT JOIN _ls_top t ON t.arm = r.arm AND t.name = l.name
        LEFT JOIN (SELECT c.rid, c.stage, max(c.rnk) AS rnk FROM _ls_cg c
                   SEMI JOIN (SELECT rid FROM _ls_r WHERE step IN (3, 4)) s USING (rid)
                   GROUP BY c.rid, c.stage) m ON m.rid = r.rid AND m.stage = l.name
        GROUP BY r.rid""",
        )
    )


def _trunc_sql(expr: str, n: int) -> str:
    return f"CASE WHEN length({expr}) <= {n} THEN {expr} ELSE substr({expr}, 1, {n - 1}) || '…' END"


def _evidence_sql() -> str:
    """One CASE over the step building the evidence object (diagnose._evidence_* in SQL)."""
    oracle = (
        "oracle",
        _obj(("verdict", _j("r.o_verdict")), ("feasible", _j("r.o_feasible"))),
        "r.o_verdict IS NOT NULL",
    )
    answer = [
        ("answer", _j(_trunc_sql("r.answer", ANSWER_CHARS))),
        ("abstained", _j("r.abstained")),
        ("answer_verdict", _j("r.answer_verdict")),
        ("answer_reason", _j("r.answer_reason")),
        ("generator_error", _j("r.generator_error")),
    ]
    n_packed = (
        "n_packed",
        "CAST(CASE WHEN coalesce(r.n_ids, 0) > 0 THEN r.n_ids "
        "ELSE coalesce(npk.n, 0) END AS VARCHAR)",
    )
    cover = [
        ("sufficient_set", "CAST(sel.sel AS VARCHAR)", "r.has_fx"),
        ("spans", "coalesce(cov.spans, '[]')", "r.has_fx"),
    ]
    note = ("note", _lit(json.dumps("no fixture for this question")))
    spans = ("spans", "coalesce(mj.spans, '[]')")
    chosen = ("sufficient_set", "CAST(sel.sel AS VARCHAR)")
    inputs = " ".join(f"WHEN {s} THEN {_lit(json.dumps(t[0]))}" for s, t in _TRANSITIONS.items())
    cutoff = (
        "CASE r.step WHEN 6 THEN {rd} WHEN 7 THEN {sd} WHEN 8 THEN {bt} WHEN 5 THEN 'null' "
        "ELSE coalesce(cut.cutoff, 'null') END"
    ).format(rd=_j("r.rerank_depth"), sd=_j("r.selection_depth"), bt=_j("r.budget_tokens"))
    stage = ("stage", _j("r.after_stage"))
    support_head = [stage, ("input_stage", f"CASE r.step {inputs} END"), ("cutoff", cutoff)]
    return f"""CASE
        WHEN r.answerable = false THEN {_obj(("stage", _lit(json.dumps("control"))), *answer)}
        WHEN r.step = 1 THEN {
        _obj(
            ("stage", _lit(json.dumps("corpus"))),
            ("gold_status", _j("r.gold_status")),
            ("spans", "r.corpus_spans", "r.has_fx"),
            oracle,
        )
    }
        WHEN r.step = 2 AND r.has_fx THEN {
        _obj(stage, chosen, spans, ("units", "coalesce(aj.units, '[]')"), oracle)
    }
        WHEN r.step = 2 THEN {_obj(stage, note, oracle)}
        WHEN r.step BETWEEN 3 AND 8 AND r.has_fx THEN {
        _obj(
            *support_head,
            chosen,
            spans,
            ("units", "coalesce(uj.units, '[]')"),
            ("budget_tokens", _j("r.budget_tokens"), "r.step = 8"),
            ("evidence_tokens", _j("r.evidence_tokens"), "r.step = 8"),
            ("selection_depth", _j("r.selection_depth"), "r.step = 8"),
            ("packed", "coalesce(pj.packed, '[]')", "r.step = 8"),
            oracle,
        )
    }
        WHEN r.step BETWEEN 3 AND 8 THEN {_obj(*support_head, note, oracle)}
        WHEN r.step = 9 THEN {
        _obj(("stage", _lit(json.dumps("answer"))), *answer, n_packed, *cover, oracle)
    }
        WHEN r.step = 10 THEN {
        _obj(
            ("stage", _lit(json.dumps("citations"))),
            ("citation_verdict", _j("r.citation_verdict")),
            ("citation_reason", _j("r.citation_reason")),
            ("citations", "coalesce(cj.citations, '[]')"),
            ("answer", _j(_trunc_sql("r.answer", ANSWER_CHARS))),
            n_packed,
            *cover,
            oracle,
        )
    }
        ELSE {
        _obj(
            ("stage", _lit(json.dumps("pass"))),
            ("answer_verdict", _j("r.answer_verdict")),
            ("citation_verdict", _j("r.citation_verdict")),
            n_packed,
            *cover,
            oracle,
        )
    }
    END"""


def _assemble(ctes: list[tuple[str, str]]) -> None:
    """The last CTE, ``_ls_d``: every record with its evidence and walk as JSON text."""
    stages = " ".join(f"WHEN {s} THEN {_lit(st)}" for s, st in STAGE_OF_STEP.items())
    missing = "CAST(to_json(' (missing: ' || mj.missing || ')') AS VARCHAR)"
    walk = (
        f"CASE WHEN r.walk_post IS NULL THEN r.walk_pre ELSE r.walk_pre "
        f"|| coalesce(substr({missing}, 2, length({missing}) - 2), '') || r.walk_post END"
    )
    ctes.append(
        (
            "_ls_mj",
            f"""
        SELECT rid, {_arr("span_json", "pos")} AS spans, string_agg(span_id, ', ' ORDER BY pos) AS missing
        FROM _ls_miss GROUP BY rid""",
        )
    )
    ctes.append(
        (
            "_ls_d",
            f"""
        SELECT r.*, {_evidence_sql()} AS evidence_json, {walk} AS walk_json
        FROM (SELECT r.*, CASE r.step {stages} END AS after_stage FROM _ls_r r) r
        LEFT JOIN _ls_mj mj USING (rid)
        LEFT JOIN _ls_sel sel USING (rid)
        LEFT JOIN _ls_units_json uj USING (rid)
        LEFT JOIN _ls_around_json aj USING (rid)
        LEFT JOIN _ls_packed_json pj USING (rid)
        LEFT JOIN _ls_cover_json cov USING (rid)
        LEFT JOIN _ls_cites_json cj USING (rid)
        LEFT JOIN _ls_npk npk USING (rid)
        LEFT JOIN _ls_cut cut USING (rid)""",
        )
    )


#: one JSON line of ``diagnose --json`` (the keys of diagnose_ledger's rows, in order)
_LINE = _obj(
    ("qid", _j("qid")),
    ("arm", _j("arm")),
    ("phase", _j("CAST(phase AS VARCHAR)")),
    ("phase_offset", _j("phase_offset")),
    ("segment", _j("segment")),
    ("step", "CAST(step AS VARCHAR)"),
    ("step_name", _j("step_name")),
    ("label", _j("label")),
    ("evidence", "evidence_json"),
    ("flags", "flags"),
    ("walk", "walk_json"),
    ("answer_verdict", _j("answer_verdict")),
    ("citation_verdict", _j("citation_verdict")),
    ("support_packed", _j("support_packed")),
    ("oracle_verdict", _j("o_verdict")),
)
#: the record_view columns (query.build_record_view)
VIEW_COLUMNS = (
    "arm, CAST(phase AS VARCHAR) AS phase, qid, CAST(step AS INTEGER) AS step, step_name, label, "
    "CAST(from_json(flags, '[\"VARCHAR\"]') AS VARCHAR[]) AS flags, evidence_json, walk_json"
)
_ORDER = "ORDER BY rid"
_TABLES = ("_ls_fx", "_ls_span", "_ls_set", "_ls_lists", "_ls_members", "_ls_top", "_ls_head")


def _escaped(expr: str) -> str:
    """``expr`` with every character safe_text escapes as \\uXXXX (only lines holding one pay)."""
    from .safe_text import _UNSAFE

    codes = [c for c in range(0x2070) if _UNSAFE.match(chr(c))]
    out = expr
    for code in codes:
        escape = _lit("\\u%04x" % code)
        out = f"replace({out}, chr({code}), {escape})"
    ranges: list[list[int]] = []
    for code in codes:
        if ranges and ranges[-1][1] == code - 1:
            ranges[-1][1] = code
        else:
            ranges.append([code, code])
    pattern = (
        "["
        + "".join("\\x{%x}" % a if a == b else "\\x{%x}-\\x{%x}" % (a, b) for a, b in ranges)
        + "]"
    )
    # ASCII without DEL (byte length = character length) holds none of them: no regex to run
    return (
        f"CASE WHEN strlen({expr}) = length({expr}) AND NOT contains({expr}, chr(127)) THEN {expr} "
        f"WHEN regexp_matches({expr}, {_lit(pattern)}) THEN {out} ELSE {expr} END"
    )


def diagnosis_query(con, ledger: str | Path, arm: str | None, columns: str) -> str:
    """SQL selecting ``columns`` (over the _ls_d CTE) for every record, in ledger order.

    Registers the small inputs (fixtures, list names, depths, heads) as temp
    tables first; :func:`drop_inputs` removes them.
    """
    fixtures, texts = load_ledger_fixtures(con, ledger)
    _register_fixtures(con, fixtures, texts)
    _register_lists(con, ledger)
    _records(con, arm)
    _register_heads(con)
    ctes: list[tuple[str, str]] = []
    for part in (
        _records_with_steps,
        _candidate_rows,
        _coverage,
        _sets,
        _units,
        _around,
        _packed,
        _assemble,
    ):
        part(ctes)
    final = f"SELECT {columns} FROM _ls_d {_ORDER}"
    texts = [sql for _, sql in ctes] + [final]

    def uses(name: str) -> int:
        return sum(len(re.findall(rf"\b{name}\b", t)) for t in texts)

    # a CTE read once is inlined (pipelined); one read more often is computed once
    body = ",\n".join(
        f"{name} AS {'MATERIALIZED' if uses(name) > 1 else 'NOT MATERIALIZED'} ({sql})"
        for name, sql in ctes
    )
    return f"WITH {body}\n{final}"


def drop_inputs(con) -> None:
    con.execute("DROP VIEW IF EXISTS _ls_rec")
    for name in _TABLES:
        con.execute(f"DROP TABLE IF EXISTS {name}")


def diagnosis_lines(con, ledger: str | Path, arm: str | None = None) -> list[str]:
    """The JSON lines of ``diagnose --json`` (escaped for a terminal), in ledger order."""
    try:
        q = diagnosis_query(con, ledger, arm, f"{_escaped(_LINE)} AS line")
        return [r[0] for r in con.execute(q).fetchall()]
    finally:
        drop_inputs(con)


def write_json_lines(con, ledger: str | Path, out, arm: str | None = None) -> int:
    """Write ``diagnose --json`` to the binary stream ``out``; return the number of lines.

    The lines are built and escaped in DuckDB and copied from Arrow's buffers
    (no Python string per record); nothing is written unless every line was built.
    """
    try:
        q = diagnosis_query(con, ledger, arm, f"{_escaped(_LINE)} || chr(10) AS line")
        table = con.sql(q).to_arrow_table()
    finally:
        drop_inputs(con)
    for chunk in table.column(0).chunks:
        out.write(_string_bytes(chunk))
    return table.num_rows


def _string_bytes(arr) -> bytes | memoryview:
    """The concatenated UTF-8 of a string Arrow array without building Python strings."""
    import numpy as np
    import pyarrow as pa

    if arr.null_count or not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)):
        return "".join(v for v in arr.to_pylist() if v is not None).encode()
    _, offsets, data = arr.buffers()
    width = np.int64 if pa.types.is_large_string(arr.type) else np.int32
    offs = np.frombuffer(offsets, dtype=width)[arr.offset : arr.offset + len(arr) + 1]
    if len(offs) == 0 or data is None:
        return b""
    return memoryview(data)[int(offs[0]) : int(offs[-1])]


def diagnosis_rows(con, ledger: str | Path, arm: str | None = None) -> list[dict]:
    """The rows of ``diagnose --json`` as dicts (for tables and views), in ledger order."""
    return [json.loads(line) for line in diagnosis_lines(con, ledger, arm)]
