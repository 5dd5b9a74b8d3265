"""What Python hands DuckDB before the diagnosis query: fixtures, list names, depths, heads, records.

Small temp tables, built from Python lists (never through pyarrow: its list
conversion imports pandas, a quarter of a second). The heads are the one place
the pure tree runs: once per distinct combination of the columns a record's
step, label, flags and walk depend on, never per record.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ledgerscope.analysis.diagnosis.evidence import UNIT_WINDOW, depths_by_arm, span_json
from ledgerscope.analysis.diagnosis.span_fates import document_title, fate_table
from ledgerscope.analysis.diagnosis.tree import SUPPORT_WALK, diagnose, recorded_stages
from ledgerscope.analysis.validity import register_answer_side
from ledgerscope.common.sql_tables import columns_table, sql_literal

if TYPE_CHECKING:
    from duckdb import DuckDBPyConnection

    from ledgerscope.inputs.fixtures import Fixture

#: the record columns a diagnosis head depends on (with the oracle's verdict and feasibility)
KEY_COLUMNS = (
    "answerable",
    "gold_status",
    *(c for _, c, _ in SUPPORT_WALK),
    "answer_verdict",
    "citation_verdict",
    "single_unit_complete",
    "unverifiable_stages",
)
RECORD_COLUMNS = (
    *("arm", "phase", "phase_offset", "qid", "segment", *KEY_COLUMNS, "covered_set"),
    *("evidence_tokens", "budget_tokens", "rerank_depth", "selection_depth", "overflow_json"),
    *("expansion_dropped_json", "answer", "abstained", "citations_json", "answer_reason"),
    *("citation_reason", "generator_error"),
)
#: the columns a head depends on: :data:`KEY_COLUMNS` of a record, its oracle verdict and feasibility, and
#: whether its arm's answer side is unverified (:mod:`ledgerscope.analysis.validity`)
HEAD_COLUMNS = (*KEY_COLUMNS, "o_verdict", "o_feasible", "o_unverified")
#: SQL: whether record ``r``'s arm's answer side is unverified (joined to ``u``, the validity table)
ANSWER_UNVERIFIED = "coalesce(u.unverified, false)"
#: SQL: one oracle row per question (any one: they agree), to join to records ``r`` as ``o``
ORACLE_ROWS = (
    "(SELECT arm, qid, any_value({'v': answer_verdict, 'f': feasible}) AS o FROM oracle GROUP BY arm, qid)"
)
#: SQL: the oracle verdict and feasibility of record ``r`` (the oracle table's, else its own columns)
ORACLE_VERDICT = "CASE WHEN o.arm IS NOT NULL THEN o.o.v ELSE r.oracle_verdict END"
ORACLE_FEASIBLE = "CASE WHEN o.arm IS NOT NULL THEN o.o.f ELSE r.oracle_feasible END"
#: virtual stage -> the candidate lists (or "units") whose union it is
MEMBERS = {
    "chunked": ("units",),
    "exact": ("bm25", "dense_exact"),
    "production": ("bm25", "dense_ann"),
    "union": ("union",),
    "fused": ("fused",),
    "reranked": ("reranked",),
    "packed": ("packed",),
}
#: stands in the walk's last detail for the missing spans, which only the query knows
SENTINEL = "\ue000missing\ue000"
TABLES = (
    "_ls_fx",
    "_ls_fates",
    "_ls_span",
    "_ls_set",
    "_ls_members",
    "_ls_top",
    "_ls_head",
    "_ls_order",
    "_ls_weight",
    "_ls_combo",
    "_ls_head_n",
)
VIEWS = ("_ls_rec", "_ls_rec_all", "_ls_cand", "_ls_unit")


def _table(**types: str) -> dict[str, tuple[str, list[Any]]]:
    return {col: (typ, []) for col, typ in types.items()}


def _add(table: dict[str, tuple[str, list[Any]]], **values: Any) -> None:
    for col, value in values.items():
        table[col][1].append(value)


def register_fixtures(
    con: DuckDBPyConnection, fixtures: Mapping[str, Fixture], texts: Mapping[str, str], fates: bool = True
) -> None:
    """``_ls_fx`` (per question), ``_ls_span`` (per gold span), ``_ls_set`` (per set member), and
    ``_ls_fates`` unless ``fates`` is False (the heads, which read no span, go without it).

    A span's JSON (``base``, without its closing brace) and its text (for the
    whitespace test on gaps) are computed here, once per span, not per record.
    """
    fx = _table(qid="VARCHAR", n_sets="INTEGER", corpus_spans="VARCHAR")
    sp = _table(
        qid="VARCHAR",
        span_id="VARCHAR",
        doc_id="VARCHAR",
        s="BIGINT",
        e="BIGINT",
        span_text="VARCHAR",
        base="VARCHAR",
        win_lo="BIGINT",
        win_hi="BIGINT",
        title="VARCHAR",
    )
    st = _table(qid="VARCHAR", set_index="INTEGER", pos="INTEGER", span_id="VARCHAR", resolved="BOOLEAN")
    for qid, f in fixtures.items():
        corpus = [{**span_json(s, texts), "doc_in_corpus": s.doc_id in texts} for s in f.spans]
        _add(
            fx,
            qid=qid,
            n_sets=len(f.sufficient_sets),
            corpus_spans=json.dumps(corpus, ensure_ascii=False),
        )
        for s in f.spans:
            text = texts.get(s.doc_id)
            _add(
                sp,
                qid=qid,
                span_id=s.span_id,
                doc_id=s.doc_id,
                s=s.start,
                e=s.end,
                span_text=None if text is None else text[s.start : s.end],
                base=json.dumps(span_json(s, texts), ensure_ascii=False)[:-1],
                win_lo=s.start - UNIT_WINDOW,
                win_hi=s.end + UNIT_WINDOW,
                title=document_title(s.doc_id, text),
            )
        ids = {s.span_id for s in f.spans}
        for i, sset in enumerate(f.sufficient_sets):
            for pos, sid in enumerate(sset):
                _add(st, qid=qid, set_index=i, pos=pos, span_id=sid, resolved=sid in ids)
    if fates:
        table = _table(marks="VARCHAR", fate="VARCHAR")
        for marks, fate in fate_table().items():  # the span fates' pure function, on every marks string
            _add(table, marks=marks, fate=json.dumps(fate)[1:-1])
        columns_table(con, "_ls_fates", table)
    columns_table(con, "_ls_fx", fx)
    columns_table(con, "_ls_span", sp)
    columns_table(con, "_ls_set", st)


def register_lists(con: DuckDBPyConnection, ledger: str | Path) -> None:
    """``_ls_members`` (virtual stage -> lists), ``_ls_top`` (per arm, configured first-stage depths)."""
    from ledgerscope.ledger.verify import load_manifest  # pyarrow, for the schemas: only when run

    members = _table(vstage="VARCHAR", stage="VARCHAR")
    for vstage, names in MEMBERS.items():
        for name in names:
            _add(members, vstage=vstage, stage=name)
    columns_table(con, "_ls_members", members)
    top = _table(arm="VARCHAR", name="VARCHAR", n="INTEGER")
    for arm, depths in depths_by_arm(load_manifest(ledger)).items():
        for name, n in depths.items():
            _add(top, arm=arm, name=name, n=n)
    columns_table(con, "_ls_top", top)


def register_records(con: DuckDBPyConnection, arm: str | None, keys: str | None = None) -> None:
    """The view ``_ls_rec_all``: the record columns the diagnosis reads, the oracle's verdict and
    feasibility (``_ls_rec``, which the query reads, is its current slice: :func:`select_slice`).
    ``keys``: a table of (arm, phase, qid) the records are limited to (a selection)."""
    cols = ", ".join(f'r."{c}"' for c in RECORD_COLUMNS)
    validity = register_answer_side(con)
    where = "" if arm is None else f"WHERE r.arm = {sql_literal(arm)}"
    semi = (
        ""
        if keys is None
        else (f"SEMI JOIN {keys} k ON k.arm = r.arm AND k.phase = CAST(r.phase AS VARCHAR) AND k.qid = r.qid")
    )
    con.execute(f"""CREATE OR REPLACE TEMP VIEW _ls_rec_all AS
        SELECT {cols}, len(r.packed_unit_ids) AS n_ids,
               {ORACLE_VERDICT} AS o_verdict, {ORACLE_FEASIBLE} AS o_feasible,
               {ANSWER_UNVERIFIED} AS o_unverified,
               fx.qid IS NOT NULL AS has_fx, fx.n_sets, fx.corpus_spans
        FROM records r LEFT JOIN {ORACLE_ROWS} o ON o.arm = r.arm AND o.qid = r.qid
        LEFT JOIN {validity} u ON u.arm = r.arm
        LEFT JOIN _ls_fx fx ON fx.qid = r.qid {semi} {where}""")


def register_heads(con: DuckDBPyConnection) -> None:
    """``_ls_head``: one row per distinct combination of :data:`HEAD_COLUMNS` in ``_ls_rec_all`` (a
    few hundred at most), those columns with the step, step name, label, flags (JSON text) and walk
    the pure tree gives it; a record finds its row with :func:`head_match`.

    The walk is split around :data:`SENTINEL` for steps 2-8, whose last detail
    the query completes with the missing span ids.
    """
    cols = ", ".join(f'"{c}"' for c in HEAD_COLUMNS)
    con.execute(
        "CREATE OR REPLACE TEMP TABLE _ls_combo AS SELECT row_number() OVER () AS n, * "
        f"FROM (SELECT DISTINCT {cols} FROM _ls_rec_all)"
    )
    names = (*KEY_COLUMNS, "oracle_verdict", "oracle_feasible", "answer_unverified")
    heads = _table(
        n="BIGINT",
        step="INTEGER",
        step_name="VARCHAR",
        label="VARCHAR",
        flags="VARCHAR",
        walk_pre="VARCHAR",
        walk_post="VARCHAR",
        recorded="VARCHAR",
        not_recorded="VARCHAR",
    )
    for n, *values in con.execute(f"SELECT n, {cols} FROM _ls_combo").fetchall():
        d = diagnose(dict(zip(names, values, strict=True)), {}, None, {}, None)
        walk = [dict(w) for w in d.walk]
        if 2 <= d.step <= 8:
            walk[-1]["detail"] += SENTINEL
        pre, _, post = json.dumps(walk, ensure_ascii=False).partition(SENTINEL)
        rec = dict(zip(names, values, strict=True))
        stages = recorded_stages(rec) if "stages-not-recorded" in d.flags else None
        _add(
            heads,
            n=n,
            step=d.step,
            step_name=d.step_name,
            label=d.label,
            flags=json.dumps(list(d.flags)),
            walk_pre=pre,
            walk_post=post if 2 <= d.step <= 8 else None,
            recorded=None if stages is None else json.dumps(stages[0]),
            not_recorded=None if stages is None else json.dumps(stages[1]),
        )
    columns_table(con, "_ls_head_n", heads)
    con.execute(
        "CREATE OR REPLACE TEMP TABLE _ls_head AS "
        "SELECT c.* EXCLUDE (n), h.* EXCLUDE (n) FROM _ls_combo c JOIN _ls_head_n h USING (n)"
    )
    con.execute("DROP TABLE _ls_combo")
    con.execute("DROP TABLE _ls_head_n")


def head_match(record: str, head: str = "h") -> str:
    """SQL: the join condition of record ``record`` (an alias whose columns include
    :data:`HEAD_COLUMNS`) and its row ``head`` of :func:`register_heads`' table; NULL matches NULL."""
    return " AND ".join(f'{record}."{c}" IS NOT DISTINCT FROM {head}."{c}"' for c in HEAD_COLUMNS)


def slices(
    con: DuckDBPyConnection, arm: str | None, max_rows: int, selected: bool = False
) -> list[tuple[int, int] | None]:
    """Consecutive ranges of ledger order (first and last record number), as many as it takes
    for each to hold about ``max_rows`` candidate rows, of about equal size; ``[None]`` when
    the whole ledger is one. Record numbers are kept in ``_ls_order`` (arm, phase, qid, rid);
    a slice selects its records by key, which :func:`ledgerscope.ledger.read.connect`'s row
    checks make unique. A ``selected`` set of records is always sliced, so that its queries
    read only the partitions holding it (no slice at all when it is empty).

    A record's share is its partition's candidate rows over the partition's records: the
    sizes come from two small counts, not a pass grouping every candidate row by question.
    """
    where = "" if arm is None else f"WHERE arm = {sql_literal(arm)}"
    if not selected:
        total = con.execute(f"SELECT count(*) FROM candidates {where}").fetchall()[0][0]
        if total <= max_rows:
            return [None]
    con.execute("""CREATE OR REPLACE TEMP TABLE _ls_order AS
        SELECT arm, phase, qid, row_number() OVER (ORDER BY arm, phase_offset, phase, qid) AS rid
        FROM _ls_rec_all""")
    con.execute(f"""CREATE OR REPLACE TEMP TABLE _ls_weight AS
        WITH n AS (SELECT arm, phase, count(*) AS n FROM candidates {where} GROUP BY ALL),
        m AS (SELECT arm, phase, count(*) AS m FROM records {where} GROUP BY ALL),
        w AS (SELECT o.rid, coalesce(n.n, 0) / m.m AS w
              FROM _ls_order o JOIN m USING (arm, phase) LEFT JOIN n USING (arm, phase))
        SELECT rid, sum(w) OVER (ORDER BY rid) - w AS before, sum(w) OVER () AS total FROM w""")
    total = con.execute("SELECT max(total) FROM _ls_weight").fetchall()[0][0]
    if total is None:
        return []
    count = max(1, math.ceil(total / max_rows))
    rows = con.execute(f"""SELECT min(rid), max(rid) FROM _ls_weight
        GROUP BY least({count - 1}, floor(before * {count} / {total or 1})) ORDER BY 1""").fetchall()
    return [(int(lo), int(hi)) for lo, hi in rows]


def select_slice(con: DuckDBPyConnection, part: tuple[int, int] | None) -> None:
    """The views the query reads: ``_ls_rec`` (the records of ``part``), ``_ls_cand`` and
    ``_ls_unit`` (candidates and units, cut to the arms and phases holding them, so that a
    slice reads only its partitions' files)."""
    if part is None:
        con.execute("CREATE OR REPLACE TEMP VIEW _ls_rec AS SELECT * FROM _ls_rec_all")
        con.execute("CREATE OR REPLACE TEMP VIEW _ls_cand AS SELECT * FROM candidates")
        con.execute("CREATE OR REPLACE TEMP VIEW _ls_unit AS SELECT * FROM units")
        return
    lo, hi = part
    keys = f"SELECT arm, phase, qid FROM _ls_order WHERE rid BETWEEN {int(lo)} AND {int(hi)}"
    pairs = con.execute(f"SELECT DISTINCT arm, phase FROM ({keys})").fetchall()
    arms = ", ".join(sorted({sql_literal(a) for a, _ in pairs}))
    phases = ", ".join(sorted({sql_literal(p) for _, p in pairs}))
    con.execute(f"""CREATE OR REPLACE TEMP VIEW _ls_rec AS SELECT * FROM _ls_rec_all r
        SEMI JOIN ({keys}) k ON k.arm = r.arm AND k.phase = r.phase AND k.qid = r.qid""")
    for view, table in (("_ls_cand", "candidates"), ("_ls_unit", "units")):
        con.execute(
            f"CREATE OR REPLACE TEMP VIEW {view} AS SELECT * FROM {table} "
            f"WHERE arm IN ({arms}) AND phase IN ({phases})"
        )


def drop(con: DuckDBPyConnection) -> None:
    """Remove what the register_* and slice functions created."""
    for name in VIEWS:
        con.execute(f"DROP VIEW IF EXISTS {name}")
    for name in TABLES:
        con.execute(f"DROP TABLE IF EXISTS {name}")
