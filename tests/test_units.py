"""Interval arithmetic for coverage: merge, uncovered, covers (whitespace-blind)."""

from __future__ import annotations

from itertools import pairwise

from hypothesis import given, settings
from hypothesis import strategies as st

from ledgerscope.common.intervals import WHITESPACE, covers, edge_char, merge_intervals, uncovered
from ledgerscope.pipeline.contracts.units import Unit, unit_id_for

PROP = settings(max_examples=200, deadline=None)

# ---------------------------------------------------------------------------
# merge_intervals


def test_merge_intervals_examples():
    assert merge_intervals([]) == []
    assert merge_intervals([(5, 7), (0, 2)]) == [(0, 2), (5, 7)]
    assert merge_intervals([(0, 3), (2, 5)]) == [(0, 5)]  # overlapping
    assert merge_intervals([(0, 3), (3, 5)]) == [(0, 5)]  # touching
    assert merge_intervals([(0, 10), (2, 4), (3, 12), (20, 21)]) == [(0, 12), (20, 21)]
    assert merge_intervals([(4, 4), (6, 5), (1, 2)]) == [(1, 2)]  # empty/reversed dropped
    assert merge_intervals(iter([(1, 2), (1, 2)])) == [(1, 2)]  # any iterable, duplicates


intervals = st.lists(st.tuples(st.integers(0, 60), st.integers(0, 60)), max_size=12)


@PROP
@given(intervals)
def test_merge_intervals_preserves_the_point_set(ivs):
    merged = merge_intervals(ivs)
    points = {p for s, e in ivs for p in range(s, e)}
    assert {p for s, e in merged for p in range(s, e)} == points
    # sorted, non-empty, separated by at least one uncovered point
    for s, e in merged:
        assert s < e
    for (_, e1), (s2, _) in pairwise(merged):
        assert e1 < s2
    assert merge_intervals(merged) == merged


# ---------------------------------------------------------------------------
# uncovered / covers

TEXT = "Requests may be retained for 30 days. This limit is 7 days."
#       0         1         2         3         4         5
#       0123456789012345678901234567890123456789012345678901234567890


def test_exact_and_containing_intervals_cover():
    assert covers(TEXT, 0, 37, [(0, 37)])
    assert covers(TEXT, 5, 20, [(0, len(TEXT))])
    assert uncovered(TEXT, 0, 37, [(0, 37)]) == []


def test_two_adjacent_units_with_only_whitespace_between_cover():
    # units end at 37 ("days.") and start at 38 ("This"): the gap is one space
    assert TEXT[37] == " "
    assert covers(TEXT, 0, len(TEXT), [(0, 37), (38, len(TEXT))])
    spaced = "alpha \n\t  beta"
    assert covers(spaced, 0, len(spaced), [(0, 5), (10, len(spaced))])
    # leading/trailing whitespace of the span need not be covered either
    assert covers("  word  ", 0, 8, [(2, 6)])


def test_non_whitespace_gap_is_not_covered():
    assert not covers(TEXT, 0, len(TEXT), [(0, 36), (38, len(TEXT))])  # "." missed
    assert uncovered(TEXT, 0, len(TEXT), [(0, 36), (38, len(TEXT))]) == [(36, 38)]
    assert uncovered(TEXT, 0, 37, []) == [(0, 37)]
    assert uncovered(TEXT, 0, 37, [(10, 20)]) == [(0, 10), (20, 37)]
    assert uncovered(TEXT, 10, 37, [(0, 15), (20, 25), (30, 60)]) == [(15, 20), (25, 30)]


def test_intervals_outside_the_span_do_not_help():
    assert uncovered(TEXT, 10, 20, [(0, 5), (25, 30)]) == [(10, 20)]
    assert uncovered(TEXT, 10, 20, [(0, 10), (20, 30)]) == [(10, 20)]  # touching only
    assert covers(TEXT, 10, 20, [(0, 12), (12, 30)])  # touching units join


def test_zero_width_space_is_not_whitespace():
    text = "a\u200bb"
    assert not covers(text, 0, 3, [(0, 1), (2, 3)])
    assert covers("a\u3000b", 0, 3, [(0, 1), (2, 3)])  # ideographic space is whitespace


def test_empty_span_is_covered_by_nothing():
    assert covers(TEXT, 5, 5, [])


# ---------------------------------------------------------------------------
# properties

_alphabet = st.sampled_from(list("ab é😀\n\t\r\u200b\u3000.,"))
texts = st.text(alphabet=_alphabet, min_size=1, max_size=40)


@st.composite
def text_and_span(draw):
    text = draw(texts)
    s = draw(st.integers(0, len(text)))
    e = draw(st.integers(s, len(text)))
    return text, s, e


@PROP
@given(text_and_span())
def test_a_span_covers_itself(case):
    text, s, e = case
    assert covers(text, s, e, [(s, e)])
    assert uncovered(text, s, e, [(s, e)]) == []


@PROP
@given(text_and_span())
def test_removing_any_non_whitespace_position_uncovers(case):
    """...unless it is punctuation at an end of the span (an edge remainder)."""
    text, s, e = case
    for p in range(s, e):
        holed = [(s, p), (p + 1, e)]
        if text[p].isspace() or (edge_char(text[p]) and p in (s, e - 1)):
            assert covers(text, s, e, holed)
        else:
            assert not covers(text, s, e, holed)
            assert any(a <= p < b for a, b in uncovered(text, s, e, holed))


@PROP
@given(text_and_span(), intervals)
def test_uncovered_matches_a_pointwise_definition(case, ivs):
    text, s, e = case
    ivs = [(min(a, len(text)), min(b, len(text))) for a, b in ivs]
    gaps = uncovered(text, s, e, ivs)
    inside = {p for a, b in ivs for p in range(a, b)}
    # an edge remainder: the uncovered run from the span's start or back from its end
    head = next((p for p in range(s, e) if p in inside), e)
    tail = next((p + 1 for p in range(e - 1, s - 1, -1) if p in inside), s)
    edge = set(range(s, head)) | set(range(tail, e))
    edge_excused = {p for p in edge if all(edge_char(text[q]) for q in _run(edge, p, text))}
    missing = {p for p in range(s, e) if p not in inside and not text[p].isspace() and p not in edge_excused}
    # every reported gap lies in the span, outside all intervals, and holds what is not excused
    reported = set()
    for a, b in gaps:
        assert s <= a < b <= e
        assert not any(p in inside for p in range(a, b))
        assert text[a:b].strip()
        assert not (a in edge and all(edge_char(ch) for ch in text[a:b]))
        reported.update(range(a, b))
    assert missing <= reported
    assert covers(text, s, e, ivs) == (not missing)


def _run(edge: set[int], p: int, text: str) -> list[int]:
    """The positions of the edge remainder holding ``p``."""
    lo = hi = p
    while lo - 1 in edge:
        lo -= 1
    while hi + 1 in edge:
        hi += 1
    return list(range(lo, hi + 1))


def test_unit_interval_and_id():
    u = Unit("d@0-5", "d", "sha256:x", 0, 0, 5, "hello", 0, 1, 0, 5)
    assert u.interval == (0, 5)
    assert unit_id_for("docs/a.md", 3, 9) == "docs/a.md@3-9"
    assert unit_id_for("d", 0, 5) == u.unit_id


def test_the_sql_whitespace_pattern_is_str_isspace_on_every_code_point():
    """WHITESPACE (the SQL diagnosis and survival excuse gaps with it) and ``str.isspace`` (which
    :func:`uncovered` excuses gaps with) agree on every code point but the surrogates."""
    import duckdb

    points = [p for p in range(0x110000) if not 0xD800 <= p <= 0xDFFF]
    con = duckdb.connect()
    con.execute("CREATE TABLE cp AS SELECT unnest($1) AS p", [points])
    blank = {
        p
        for (p,) in con.execute(
            "SELECT p FROM cp WHERE regexp_full_match(chr(p), ?)", [WHITESPACE]
        ).fetchall()
    }
    assert blank == {p for p in points if chr(p).isspace()}
    assert con.execute(
        "SELECT regexp_full_match('', ?), regexp_full_match(' a', ?)", [WHITESPACE, WHITESPACE]
    ).fetchall() == [(True, False)]
