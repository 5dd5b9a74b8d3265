"""Edge remainders: a span's uncovered remainder of only whitespace and punctuation at either end is
excused, as whitespace is; a punctuation remainder inside the span is not.

Held in the pure rule (:mod:`ledgerscope.common.intervals`), in the sweep's support flags
(:mod:`ledgerscope.rules.support`, which the cascade calls) and in the ingest's (the DuckDB SQL of
:mod:`ledgerscope.ingest.derive.coverage`), case for case, and the SQL character class on every code point.
"""

from __future__ import annotations

from typing import NamedTuple

import duckdb
import pytest

from ledgerscope.common.intervals import covers, edge_char, edge_pattern, excused, uncovered
from ledgerscope.common.sql_tables import columns_table
from ledgerscope.ingest.derive.coverage import kept_sql, single_unit_sql
from ledgerscope.inputs.fixtures import Fixture, GoldSpan
from ledgerscope.rules import support

DOC = "f1.md"
TEXT = "Pérez drove for Force India. «Its limit is 20 MB», said the (team) report."
RULE_S, RULE_E = 0, TEXT.index(".") + 1  # "Pérez drove for Force India."
QUOTE_S, QUOTE_E = TEXT.index("«"), TEXT.index("»") + 1  # «Its limit is 20 MB»


class U(NamedTuple):
    doc_id: str
    version: str
    start: int
    end: int


def test_a_lone_full_stop_left_at_the_end_is_excused():
    """The issue's case: a boundary leaves the span's final full stop in a one-character unit."""
    assert covers(TEXT, RULE_S, RULE_E, [(0, RULE_E - 1)])
    assert uncovered(TEXT, RULE_S, RULE_E, [(0, RULE_E - 1)]) == []


def test_punctuation_at_either_edge_is_excused_and_inside_it_is_not():
    inner = [(QUOTE_S + 1, QUOTE_E - 1)]  # the quotes « » left out: both edges
    assert covers(TEXT, QUOTE_S, QUOTE_E, inner)
    comma = TEXT.index(",")
    whole = (0, len(TEXT))
    # a comma inside the span, between two covered parts, counts
    assert uncovered(TEXT, *whole, [(0, comma), (comma + 1, len(TEXT))]) == [(comma, comma + 1)]
    # whitespace and punctuation together at an end: excused; with a letter: not
    assert covers(TEXT, QUOTE_S, QUOTE_E + 1, [(QUOTE_S, QUOTE_E - 1)])  # "»," left out
    assert not covers(TEXT, QUOTE_S, QUOTE_E, [(QUOTE_S, QUOTE_E - 2)])  # "B»" left out
    # whitespace is excused anywhere, as before
    space = TEXT.index(" ")
    assert covers(TEXT, *whole, [(0, space), (space + 1, len(TEXT))])


def test_the_excuse_itself():
    assert excused("  ", False) and excused("", False)
    assert excused(".", True) and excused(" .", True) and excused("»", True) and excused("\u3002", True)
    assert not excused(".", False)
    assert not excused("a.", True) and not excused("%0", True)
    assert edge_char("%") and edge_char("\u2028") and not edge_char("$") and not edge_char("7")


def test_the_sql_edge_pattern_is_edge_char_on_every_code_point():
    """The RE2 class the ingest and the SQL diagnosis excuse edge gaps with, and :func:`edge_char`,
    agree on every code point but the surrogates."""
    points = [p for p in range(0x110000) if not 0xD800 <= p <= 0xDFFF]
    con = duckdb.connect()
    con.execute("CREATE TABLE cp AS SELECT unnest($1) AS p", [points])
    edge = {
        p
        for (p,) in con.execute(
            "SELECT p FROM cp WHERE regexp_full_match(chr(p), ?)", [edge_pattern()]
        ).fetchall()
    }
    assert edge == {p for p in points if edge_char(chr(p))}
    assert con.execute(
        "SELECT regexp_full_match('', ?), regexp_full_match('.a', ?)", [edge_pattern(), edge_pattern()]
    ).fetchall() == [(True, False)]


SPANS = (
    GoldSpan("rule", DOC, RULE_S, RULE_E, version="v1"),
    GoldSpan("quote", DOC, QUOTE_S, QUOTE_E, version="v1", dependency="exception"),
)
FIXTURE = Fixture("q", "Who?", "rule-exception", SPANS, (("rule", "quote"),))
CASES = {
    "whole": [(0, len(TEXT))],
    "final stop apart": [(0, RULE_E - 1), (RULE_E, len(TEXT))],
    "quotes apart": [(0, QUOTE_S), (QUOTE_S + 1, QUOTE_E - 1), (QUOTE_E, len(TEXT))],
    "one unit short of the stop": [(0, RULE_E - 1), (QUOTE_S, QUOTE_E)],
    "a letter short": [(0, RULE_E - 2), (QUOTE_S, QUOTE_E)],
    "an inner comma apart": [(0, RULE_E), (QUOTE_S, TEXT.index("20")), (TEXT.index("20") + 1, QUOTE_E)],
    "the stop alone": [(RULE_E - 1, RULE_E), (QUOTE_S, QUOTE_E)],
}


def _ingest_flags(units_by_case: dict[str, list[tuple[int, int]]]) -> dict[str, tuple[bool, bool]]:
    """(kept, single unit complete) per case, by the ingest's SQL over hand-built input tables."""
    con = duckdb.connect()
    columns_table(
        con,
        "_ig_span",
        {
            "qid": ("VARCHAR", ["q"] * len(SPANS)),
            "span_id": ("VARCHAR", [s.span_id for s in SPANS]),
            "doc_id": ("VARCHAR", [DOC] * len(SPANS)),
            "s": ("BIGINT", [s.start for s in SPANS]),
            "e": ("BIGINT", [s.end for s in SPANS]),
            "span_text": ("VARCHAR", [TEXT[s.start : s.end] for s in SPANS]),
        },
    )
    columns_table(
        con,
        "_ig_set",
        {
            "qid": ("VARCHAR", ["q", "q"]),
            "set_index": ("INTEGER", [0, 0]),
            "span_id": ("VARCHAR", ["rule", "quote"]),
        },
    )
    keys = list(units_by_case)
    columns_table(
        con,
        "_ig_need",
        {
            "key": ("BIGINT", list(range(len(keys)))),
            "qid": ("VARCHAR", ["q"] * len(keys)),
            "vstage": ("VARCHAR", ["packed"] * len(keys)),
        },
    )
    iv = {
        "key": ("BIGINT", []),
        "vstage": ("VARCHAR", []),
        "doc_id": ("VARCHAR", []),
        "vs": ("BIGINT", []),
        "ve": ("BIGINT", []),
    }
    for k, name in enumerate(keys):
        for s, e in units_by_case[name]:
            for col, value in zip(iv, (k, "packed", DOC, s, e), strict=True):
                iv[col][1].append(value)
    columns_table(con, "_ig_iv", iv)
    con.execute(kept_sql())
    con.execute(single_unit_sql())
    kept = dict(con.execute("SELECT key, kept FROM _ig_kept").fetchall())
    single = dict(con.execute("SELECT key, single FROM _ig_single").fetchall())
    return {name: (kept[k], single[k]) for k, name in enumerate(keys)}


@pytest.mark.parametrize("name", list(CASES))
def test_the_sweep_and_the_ingest_decide_support_alike(name):
    units = [U(DOC, "v1", s, e) for s, e in CASES[name]]
    texts = {DOC: TEXT}
    sweep = (support.keeps(FIXTURE, units, texts), support.single_unit_complete(FIXTURE, units, texts))
    assert _ingest_flags({name: CASES[name]})[name] == sweep
    expected_kept = name in ("whole", "final stop apart", "quotes apart", "one unit short of the stop")
    assert sweep[0] is expected_kept
