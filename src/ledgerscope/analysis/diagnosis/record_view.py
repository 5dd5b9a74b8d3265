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

from ledgerscope.analysis.diagnosis.tree import (
    NOT_RECORDED,
    PASSING_ANSWERS,
    STEP_LABELS,
    STEP_NAMES,
    SUPPORT_WALK,
)

ORACLE_FAILURES = ("critical-condition-error", "abstained", "wrong", "false-assertion")
INFRA = "infrastructure-failure"


def sql_literal(value: str) -> str:
    return "'" + str(value).replace("'", "''") + "'"


def sql_in(values: Iterable[str]) -> str:
    return "(" + ", ".join(sql_literal(v) for v in values) + ")"


def _kept(col: str) -> str:
    return f"coalesce({col}, false)"


# A NULL flag is a stage not recorded (ingested traces): only the recorded stages walk
# (ledgerscope.analysis.diagnosis.tree.support_loss, not_recorded, collapsed).
def _last(cond: str) -> str:
    """The last support step whose flag satisfies ``cond`` (``{c}`` is the flag), NULL if none."""
    steps = ", ".join(f"CASE WHEN {cond.format(c=c)} THEN {s} END" for s, c, _ in SUPPORT_WALK)
    return f"list_max([{steps}])"


def _lost_sql() -> str:
    """The step at which support is lost for good (NULL: the last recorded stage keeps it)."""
    final = "CASE _last_rec " + " ".join(f"WHEN {s} THEN {c}" for s, c, _ in SUPPORT_WALK) + " END"
    after = ", ".join(f"CASE WHEN {c} IS NOT NULL AND {s} > coalesce(_last_kept, 0) THEN {s} END"
                      for s, c, _ in SUPPORT_WALK)
    return f"CASE WHEN _last_rec IS NULL OR {final} THEN NULL ELSE list_min([{after}]) END"


def _recovered_sql() -> str:
    """Some recorded stage lost support that a later recorded stage regains."""
    terms = " OR ".join(f"({c} = false AND {s} < coalesce(_last_kept, -1))" for s, c, _ in SUPPORT_WALK)
    return f"({terms})"


def _first_sql() -> str:
    """The first step a loss at ``step`` may lie in: back over the unrecorded steps just before it
    (the smallest ``s`` whose steps ``s`` to ``step - 1`` are all NULL)."""
    flag = {s: c for s, c, _ in SUPPORT_WALK}
    cases = []
    for lost in flag:
        whens = [f"WHEN {' AND '.join(f'{flag[t]} IS NULL' for t in range(s, lost))} THEN {s}"
                 for s in range(min(flag), lost)]
        first = f"CASE {' '.join(whens)} ELSE {lost} END" if whens else str(lost)
        cases.append(f"WHEN {lost} THEN {first}")
    return f"CASE step {' '.join(cases)} END"


def _unrecorded_sql() -> str:
    """The record does not record some stage (a NULL flag, or citations not recorded)."""
    nulls = " OR ".join(f"{c} IS NULL" for _, c, _ in SUPPORT_WALK)
    return f"({nulls} OR citation_verdict = {sql_literal(NOT_RECORDED)})"


def _step_sql() -> str:
    passing = sql_in(sorted(PASSING_ANSWERS))
    return (
        "CASE WHEN answerable = false THEN (CASE WHEN answer_verdict = 'abstained' THEN 0 ELSE 9 END) "
        "WHEN coalesce(nullif(gold_status, ''), 'ok') <> 'ok' THEN 1 "
        "WHEN _lost IS NOT NULL THEN _lost "
        f"WHEN answer_verdict IS NULL OR answer_verdict NOT IN {passing} THEN 9 "
        "WHEN (CASE WHEN answer_verdict = 'not-judged' "
        "THEN coalesce(citation_verdict IN ('unsupported', 'unresolvable'), false) "
        f"ELSE citation_verdict IS DISTINCT FROM 'supported' "
        f"AND citation_verdict IS DISTINCT FROM {sql_literal(NOT_RECORDED)} END) THEN 10 "
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
        "WHEN step BETWEEN 2 AND 8 AND _first < step THEN 'lost-in-steps-' || _first || '-' || step "
        f"ELSE {_step_case(STEP_LABELS)} END"
    )


def _step_name_sql() -> str:
    return (f"CASE WHEN step BETWEEN 2 AND 8 AND _first < step THEN "
            f"'support lost in steps ' || _first || '-' || step ELSE {_step_case(STEP_NAMES)} END")


def _flags_sql() -> str:
    nc = "answerable IS DISTINCT FROM false"
    ok = "coalesce(nullif(gold_status, ''), 'ok') = 'ok'"
    fails = sql_in(ORACLE_FAILURES)
    items = [
        (f"answer_verdict = '{INFRA}'", INFRA),
        (f"{nc} AND coalesce(nullif(gold_status, ''), 'ok') = 'ok' AND _rec", "support-recovered"),
        (f"{nc} AND {ok} AND _lost IS NULL AND step = 0 AND citation_verdict = {sql_literal(NOT_RECORDED)}",
         "citations-not-recorded"),
        (
            f"{nc} AND step = 0 AND answer_verdict = 'not-judged' "
            f"AND citation_verdict IS DISTINCT FROM 'supported' "
            f"AND citation_verdict IS DISTINCT FROM {sql_literal(NOT_RECORDED)}",
            "citations-not-checked",
        ),
        (f"{nc} AND step BETWEEN 1 AND 8 AND answer_verdict = 'correct'", "answer-correct-without-support"),
        (
            f"{nc} AND coalesce(support_packed, false) AND single_unit_complete = false",
            "single-unit-incomplete",
        ),
        (f"{nc} AND {ok} AND {_unrecorded_sql()}", "stages-not-recorded"),
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
           {_last("{c}")} AS _last_kept, {_last("{c} IS NOT NULL")} AS _last_rec
    FROM records r LEFT JOIN rev v ON v.arm = r.arm AND v.qid = r.qid
    LEFT JOIN orc o ON o.arm = r.arm AND o.qid = r.qid),
l AS (SELECT *, {_lost_sql()} AS _lost, {_recovered_sql()} AS _rec FROM b),
s AS (SELECT *, CAST({_step_sql()} AS INTEGER) AS step FROM l),
f AS (SELECT *, {_first_sql()} AS _first FROM s)
SELECT * EXCLUDE (_reversal, _ov, _of, _lost, _rec, _last_kept, _last_rec, _first, step), step,
       {_step_name_sql()} AS step_name, {_label_sql()} AS label, {_flags_sql()} AS flags,
       _reversal AS reversal
FROM f"""


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
