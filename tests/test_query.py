"""The record filter language, on a tiny in-memory record_view (no ledger, no model)."""

from __future__ import annotations

import duckdb
import pytest

from ledgerscope.analysis.diagnosis import query
from ledgerscope.analysis.diagnosis.query import count_records, select_records, validate_predicate
from ledgerscope.common.errors import InputError


@pytest.fixture()
def con():
    c = duckdb.connect()
    c.execute("""
        CREATE TABLE rows AS SELECT * FROM (VALUES
            ('candidate', '0', 0, 'q1', 'rule-exception', true,  'correct', 0, 'pass', ['x'], false),
            ('candidate', '1', 1, 'q1', 'rule-exception', false, 'wrong',   8, 'selector-omits-it', [], true),
            ('baseline',  '0', 0, 'q2', 'number-scope',   true,  'correct', 0, 'pass', [], false),
            ('baseline',  '1', 1, 'q2', 'number-scope',   false, 'correct', 7, 'reranker-removes-it',
             ['support-recovered', 'annotation-check'], true)
        ) AS t(arm, phase, phase_offset, qid, segment, support_packed, answer_verdict, step, label, flags,
               reversal)""")
    c.execute("CREATE VIEW record_view AS SELECT * FROM rows")
    c.execute("CREATE TABLE secret AS SELECT 'hidden' AS v")
    return c


def _reason(exc: pytest.ExceptionInfo) -> str:
    (problem,) = exc.value.problems
    assert problem.field == "where"
    assert "\n" not in str(exc.value)
    return problem.reason


@pytest.mark.parametrize(
    ("predicate", "normalised"),
    [
        ("step = 8", "step = 8"),
        ("  step=8  -- a trailing comment", "step = 8"),
        ("/* why */ step = 7 and arm = 'baseline'", "(step = 7) AND (arm = 'baseline')"),
        ("qid IN ('q1', 'q2') AND NOT support_packed", "(qid IN ('q1', 'q2')) AND (NOT support_packed)"),
        ("list_contains(flags, 'annotation-check')", "list_contains(flags, 'annotation-check')"),
        ("reversal", "reversal"),
        ("step BETWEEN 2 AND 8", "step BETWEEN 2 AND 8"),
        ("qid = 'it''s'", "qid = 'it''s'"),
    ],
)
def test_good_predicates_normalise(con, predicate, normalised):
    assert validate_predicate(con, predicate) == normalised
    # the normalised form is itself valid and stable
    assert validate_predicate(con, normalised) == normalised


def test_empty_predicate_selects_everything(con):
    assert validate_predicate(con, "") == ""
    assert validate_predicate(con, "   ") == ""
    assert count_records(con, "") == 4


def test_lambda_parameters_are_not_columns(con):
    p = validate_predicate(con, "len(list_filter(flags, lambda f: f LIKE 'support-%')) > 0")
    assert count_records(con, p) == 1


def test_extract_from_is_allowed(con):
    assert validate_predicate(con, "extract(year FROM DATE '2024-01-02') = 2024")


def test_syntax_error_is_duckdbs_message_shortened(con):
    with pytest.raises(InputError) as exc:
        validate_predicate(con, "step = ")
    reason = _reason(exc)
    assert "syntax error" in reason
    assert "LINE" not in reason and "Parser Error" not in reason


def test_unknown_column_lists_valid_names(con):
    with pytest.raises(InputError) as exc:
        validate_predicate(con, "stpe = 3")
    reason = _reason(exc)
    assert "unknown column 'stpe'" in reason
    assert "did you mean step" in reason
    assert "qid" in reason and "arm" in reason


def test_qualified_reference_to_another_table_is_unknown(con):
    with pytest.raises(InputError) as exc:
        validate_predicate(con, "secret.v = 'hidden'")
    assert "unknown column" in _reason(exc)


def test_multiple_statements_rejected_and_nothing_runs(con):
    with pytest.raises(InputError) as exc:
        validate_predicate(con, "1=1; DROP TABLE secret")
    assert "one expression" in _reason(exc)
    assert con.execute("SELECT count(*) FROM secret").fetchone()[0] == 1


@pytest.mark.parametrize(
    "predicate",
    [
        "qid IN (SELECT * FROM read_csv('x'))",
        "EXISTS (SELECT 1 FROM secret)",
        "qid = (SELECT v FROM secret)",
        "qid IN (FROM secret)",
        "qid IN (SELECT v FROM secret UNION SELECT 'q1')",
    ],
)
def test_subqueries_rejected(con, predicate):
    with pytest.raises(InputError) as exc:
        validate_predicate(con, predicate)
    assert "subqueries are not allowed" in _reason(exc)


def test_parser_check_stands_without_the_denylist(con, monkeypatch):
    """The denylist only backs up the parse-tree check."""
    monkeypatch.setattr(query, "_DENY_KEYWORDS", frozenset())
    monkeypatch.setattr(query, "_DENY_FUNCTION", __import__("re").compile(r"^$"))
    for predicate in ("EXISTS (SELECT 1 FROM secret)", "qid IN (SELECT * FROM read_csv('x'))"):
        with pytest.raises(InputError) as exc:
            validate_predicate(con, predicate)
        assert "subqueries are not allowed" in _reason(exc)


@pytest.mark.parametrize(
    ("predicate", "needle"),
    [
        ("read_text('/etc/passwd') IS NOT NULL", "read_text() is not allowed"),
        ("len(glob('*')) > 0", "glob() is not allowed"),
        ("qid = getenv('HOME')", "getenv() is not allowed"),
        ("qid = current_setting('threads')", "current_setting() is not allowed"),
        ("COPY secret TO 'x.csv'", "COPY is not allowed"),
        ("ATTACH 'x.db'", "ATTACH is not allowed"),
        ("INSTALL httpfs", "INSTALL is not allowed"),
        ("LOAD httpfs", "LOAD is not allowed"),
        ("PRAGMA version", "PRAGMA is not allowed"),
        ("SET threads = 1", "SET is not allowed"),
        ("step = 1 ORDER BY qid", "ORDER is not allowed"),
        ("step = ?", "parameters"),
        ("step = $1", "parameters"),
        ("1=1) OR (1=1", "unbalanced ')'"),
        ("(step = 1", "unbalanced '('"),
        ("step", "must be a boolean expression"),
        ("count(*) > 1", "aggregates"),
        ("row_number() OVER () = 1", "window functions"),
        ("main.lower(qid) = 'q1'", "qualified function"),
    ],
)
def test_rejected_predicates(con, predicate, needle):
    with pytest.raises(InputError) as exc:
        validate_predicate(con, predicate)
    assert needle in _reason(exc)


def test_string_contents_are_not_keywords(con):
    assert validate_predicate(con, "qid <> 'SELECT * FROM secret; DROP TABLE secret'")
    assert count_records(con, "qid <> 'SELECT * FROM secret; DROP TABLE secret'") == 4


def test_select_and_count(con):
    rows = select_records(con, "step > 0")
    assert [(r["arm"], r["qid"], r["step"]) for r in rows] == [("baseline", "q2", 7), ("candidate", "q1", 8)]
    assert rows[1]["flags"] == []
    assert count_records(con, "step > 0") == 2
    assert count_records(con, "arm = 'candidate'") == 2
    assert [r["phase"] for r in select_records(con, "", limit=3)] == ["0", "1", "0"]
    assert select_records(con, "", order="step DESC", limit=1)[0]["step"] == 8


def test_bad_order_is_refused(con):
    with pytest.raises(InputError):
        select_records(con, "", order="step; DROP TABLE secret")
    with pytest.raises(InputError):
        select_records(con, "", order="nosuch")


def test_an_error_found_only_at_evaluation_is_an_input_error(con):
    with pytest.raises(InputError) as exc:
        count_records(con, "CAST(qid AS INTEGER) = 1")
    assert "convert" in str(exc.value).lower()


def test_source_names_the_caller(con):
    with pytest.raises(InputError) as exc:
        validate_predicate(con, "nosuch", source="--where")
    assert str(exc.value).startswith("--where: where: ")
