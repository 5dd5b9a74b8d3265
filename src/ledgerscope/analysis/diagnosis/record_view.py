"""``record_view`` in SQL: the diagnosis's step, label and flags as a DuckDB view. No Textual.

The filter bar takes the predicate language of ``ledgerscope export --where``
(:mod:`ledgerscope.analysis.diagnosis.query`): one boolean expression over ``record_view``, every
``records`` column plus ``step``, ``step_name``, ``label``, ``flags`` and
``reversal``. :func:`ledgerscope.analysis.diagnosis.query.build_record_view` computes the whole
diagnosis, evidence included (:mod:`ledgerscope.analysis.diagnosis.sql`, about half a
second on a million candidate rows); here the same columns are SQL expressions
over ``records`` alone that mirror
:func:`ledgerscope.analysis.diagnosis.tree.diagnosis_step`, the label rules and the flags of
:func:`ledgerscope.analysis.diagnosis.tree.diagnose` (all of which depend only on a record's
flags and verdicts and its oracle row), so the view is ready in milliseconds.
``tests/test_tui_data.py`` checks the mirror against the Python diagnosis on a
real ledger and on generated records.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ledgerscope.analysis.diagnosis.tree import PASSING_ANSWERS, STEP_LABELS, STEP_NAMES, SUPPORT_WALK

ORACLE_FAILURES = ("critical-condition-error", "abstained", "wrong", "false-assertion")
INFRA = "infrastructure-failure"


def sql_literal(value: str) -> str:
    return "'" + str(value).replace("'", "''") + "'"


def sql_in(values: Iterable[str]) -> str:
    return "(" + ", ".join(sql_literal(v) for v in values) + ")"


def _kept(col: str) -> str:
    return f"coalesce({col}, false)"


def _lost_sql() -> str:
    """The step at which support is lost for good (NULL: the packed context keeps it)."""
    walk = list(SUPPORT_WALK)
    parts = [f"WHEN {_kept(walk[-1][1])} THEN NULL"]
    for i in range(len(walk) - 2, -1, -1):
        parts.append(f"WHEN {_kept(walk[i][1])} THEN {walk[i + 1][0]}")
    return f"CASE {' '.join(parts)} ELSE {walk[0][0]} END"


def _recovered_sql() -> str:
    """Some stage lost support that a later stage (up to the packed context) regains."""
    cols = [c for _, c, _ in SUPPORT_WALK]
    terms = []
    for j in range(1, len(cols)):
        before = " AND ".join(_kept(c) for c in cols[:j])
        terms.append(f"({_kept(cols[j])} AND NOT ({before}))")
    return "(" + " OR ".join(terms) + ")"


def _step_sql() -> str:
    passing = sql_in(sorted(PASSING_ANSWERS))
    return (
        "CASE WHEN answerable = false THEN (CASE WHEN answer_verdict = 'abstained' THEN 0 ELSE 9 END) "
        "WHEN coalesce(nullif(gold_status, ''), 'ok') <> 'ok' THEN 1 "
        "WHEN _lost IS NOT NULL THEN _lost "
        f"WHEN answer_verdict IS NULL OR answer_verdict NOT IN {passing} THEN 9 "
        "WHEN (CASE WHEN answer_verdict = 'not-judged' "
        "THEN coalesce(citation_verdict IN ('unsupported', 'unresolvable'), false) "
        "ELSE citation_verdict IS DISTINCT FROM 'supported' END) THEN 10 "
        "ELSE 0 END"
    )


def _step_case(table: Mapping[int, str]) -> str:
    whens = " ".join(f"WHEN {k} THEN {sql_literal(v)}" for k, v in sorted(table.items()))
    return f"CASE step {whens} END"


def _label_sql() -> str:
    fails = sql_in(ORACLE_FAILURES)
    return (
        "CASE WHEN answerable = false THEN (CASE WHEN step = 0 THEN 'control-abstained' "
        f"WHEN answer_verdict = '{INFRA}' THEN '{INFRA}' ELSE 'control-false-assertion' END) "
        f"WHEN step = 9 AND answer_verdict = '{INFRA}' THEN '{INFRA}' "
        "WHEN step BETWEEN 2 AND 8 AND _ov = 'correct' THEN 'retrieval-failure-oracle-success' "
        f"WHEN step BETWEEN 2 AND 9 AND _ov IN {fails} THEN 'both-fail' "
        "WHEN step = 9 AND _ov = 'correct' THEN 'generator-failure-oracle-success' "
        f"ELSE {_step_case(STEP_LABELS)} END"
    )


def _flags_sql() -> str:
    nc = "answerable IS DISTINCT FROM false"
    fails = sql_in(ORACLE_FAILURES)
    items = [
        (f"answer_verdict = '{INFRA}'", INFRA),
        (f"{nc} AND coalesce(nullif(gold_status, ''), 'ok') = 'ok' AND _rec", "support-recovered"),
        (
            f"{nc} AND step = 0 AND answer_verdict = 'not-judged' "
            "AND citation_verdict IS DISTINCT FROM 'supported'",
            "citations-not-checked",
        ),
        (f"{nc} AND step BETWEEN 1 AND 8 AND answer_verdict = 'correct'", "answer-correct-without-support"),
        (
            f"{nc} AND coalesce(support_packed, false) AND single_unit_complete = false",
            "single-unit-incomplete",
        ),
        (f"{nc} AND _ov IN {fails} AND _of IS DISTINCT FROM false", "annotation-check"),
        (f"{nc} AND _of = false", "budget-infeasible"),
        (f"{nc} AND _ov = '{INFRA}'", "oracle-infrastructure-failure"),
    ]
    cases = ", ".join(f"CASE WHEN {cond} THEN {sql_literal(flag)} END" for cond, flag in items)
    return f"list_filter([{cases}], lambda x: x IS NOT NULL)"


def record_view_sql() -> str:
    """``record_view``: records + step, step_name, label, flags, reversal (same columns as query.py)."""
    return f"""
CREATE OR REPLACE VIEW record_view AS
WITH rev AS (
    SELECT arm, qid, (count(DISTINCT support_packed) > 1
                      OR count(DISTINCT coalesce(answer_verdict, '')) > 1) AS reversal
    FROM records GROUP BY arm, qid),
orc AS (
    SELECT arm, qid, any_value({{'v': answer_verdict, 'f': feasible}}) AS o FROM oracle GROUP BY arm, qid),
b AS (
    SELECT r.*, coalesce(v.reversal, false) AS _reversal,
           CASE WHEN o.arm IS NOT NULL THEN o.o.v ELSE r.oracle_verdict END AS _ov,
           CASE WHEN o.arm IS NOT NULL THEN o.o.f ELSE r.oracle_feasible END AS _of,
           {_lost_sql()} AS _lost, {_recovered_sql()} AS _rec
    FROM records r LEFT JOIN rev v ON v.arm = r.arm AND v.qid = r.qid
    LEFT JOIN orc o ON o.arm = r.arm AND o.qid = r.qid),
s AS (SELECT *, CAST({_step_sql()} AS INTEGER) AS step FROM b)
SELECT * EXCLUDE (_reversal, _ov, _of, _lost, _rec, step), step,
       {_step_case(STEP_NAMES)} AS step_name, {_label_sql()} AS label, {_flags_sql()} AS flags,
       _reversal AS reversal
FROM s"""


def create_record_view(con) -> None:
    con.execute(record_view_sql())


def materialise_empty_views(con) -> None:
    """Views over connection-local registered (empty) tables become real tables, visible to cursors."""
    rows = con.execute("SELECT view_name, sql FROM duckdb_views() WHERE NOT internal").fetchall()
    for name, sql in rows:
        marker = f"_{name}_empty"
        if marker in (sql or ""):
            con.execute(f"CREATE OR REPLACE TABLE {marker}_t AS SELECT * FROM {marker}")
            con.execute(f"CREATE OR REPLACE VIEW {name} AS SELECT * FROM {marker}_t")
