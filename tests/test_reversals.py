"""Reversals: support or answer verdicts that differ between phases of one arm."""

from __future__ import annotations

import duckdb
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from ledgerscope.analysis.reversals import find_reversals, reversals_from_rows, reversed_questions_sql
from ledgerscope.ledger import schema


def rec(arm, phase, offset, qid, packed, verdict, segment="rule-exception"):
    return {
        "arm": arm,
        "phase": phase,
        "phase_offset": offset,
        "qid": qid,
        "segment": segment,
        "support_packed": packed,
        "answer_verdict": verdict,
    }


ROWS = [
    # q1: support kept at phases 0 and 3, lost at 1 and 2; answer flips too
    rec("a", "1", 1, "q1", False, "critical-condition-error"),
    rec("a", "0", 0, "q1", True, "correct"),
    rec("a", "3", 3, "q1", True, "correct"),
    rec("a", "2", 2, "q1", False, "critical-condition-error"),
    # q2: stable
    rec("a", "0", 0, "q2", True, "correct"),
    rec("a", "1", 1, "q2", True, "correct"),
    # q3: unanswerable control (support null): only the answer can reverse
    rec("a", "0", 0, "q3", None, "abstained", "unanswerable"),
    rec("a", "1", 1, "q3", None, "false-assertion", "unanswerable"),
    # another arm, same question, stable: never paired with arm a
    rec("b", "0", 0, "q1", False, "wrong"),
    rec("b", "1", 1, "q1", False, "wrong"),
    # phase 10 sorts after 2 by offset, not by label
    rec("c", "10", 10, "q1", True, "correct"),
    rec("c", "2", 2, "q1", False, "correct"),
]


def test_reversals_from_rows():
    revs = reversals_from_rows(ROWS)
    got = {(r["arm"], r["qid"], r["kind"]): r for r in revs}
    assert set(got) == {
        ("a", "q1", "support"),
        ("a", "q1", "answer"),
        ("a", "q3", "answer"),
        ("c", "q1", "support"),
    }
    assert got[("a", "q1", "support")]["phases"] == {"kept": ["0", "3"], "lost": ["1", "2"]}
    assert got[("a", "q1", "answer")]["phases"] == {
        "correct": ["0", "3"],
        "critical-condition-error": ["1", "2"],
    }
    assert got[("a", "q1", "support")]["segment"] == "rule-exception"
    assert got[("a", "q3", "answer")]["segment"] == "unanswerable"
    assert got[("c", "q1", "support")]["phases"] == {"kept": ["10"], "lost": ["2"]}
    assert got[("a", "q1", "answer")]["n_phases"] == 4
    assert got[("a", "q1", "support")]["n_phases"] == 4 and got[("c", "q1", "support")]["n_phases"] == 2


def test_phases_are_listed_by_offset_then_label_and_a_missing_offset_is_zero():
    rows = [
        rec("a", "9", 1, "q", True, "correct"),
        rec("a", "b", None, "q", False, "wrong"),
        rec("a", "7", 1, "q", False, "wrong"),
        rec("a", "a", 0, "q", True, "correct"),
        rec("a", "12", 12, "q", True, "correct"),
        rec("a", "1", 1, "q", True, "correct"),
    ]
    (support, answer) = reversals_from_rows(rows)
    assert support["phases"] == {"kept": ["a", "1", "9", "12"], "lost": ["b", "7"]}  # 1 and 9 share offset 1
    assert answer["phases"] == {"correct": ["a", "1", "9", "12"], "wrong": ["b", "7"]}


def test_a_single_phase_reverses_nothing():
    assert reversals_from_rows([rec("a", "0", 0, "q", True, "correct")]) == []


def test_find_reversals_over_duckdb():
    con = duckdb.connect()
    con.register("_r", pa.Table.from_pylist(ROWS, schema=schema.RECORDS))
    con.execute("CREATE TABLE records AS SELECT * FROM _r")
    assert find_reversals(con) == reversals_from_rows(ROWS)
    only_b = find_reversals(con, arm="b")
    assert only_b == []
    assert {r["kind"] for r in find_reversals(con, arm="c")} == {"support"}


_VERDICTS = st.sampled_from(["correct", "wrong", "abstained", "not-judged", "infrastructure-failure", None])


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from("ab"),
            st.sampled_from(["q1", "q2", "q3"]),
            st.integers(0, 3),
            st.sampled_from([True, False, None]),
            _VERDICTS,
        ),
        max_size=30,
    )
)
def test_the_sql_rule_and_the_python_rule_name_the_same_questions(draws):
    """REVERSED (record_view's ``reversal``) and reversals_from_rows agree on which questions reverse."""
    rows = list(
        {
            (arm, qid, phase): rec(arm, str(phase), phase, qid, packed, verdict)
            for arm, qid, phase, packed, verdict in draws
        }.values()
    )
    con = duckdb.connect()
    con.register("_r", pa.Table.from_pylist(rows, schema=schema.RECORDS))
    con.execute("CREATE TABLE records AS SELECT * FROM _r")
    in_sql = {(a, q) for a, q, rev in con.execute(reversed_questions_sql()).fetchall() if rev}
    assert in_sql == {(r["arm"], r["qid"]) for r in reversals_from_rows(rows)}
    assert {(r["arm"], r["qid"]) for r in find_reversals(con)} == in_sql
