"""The deterministic sentence splitter: where it cuts, where it must not, and its intervals."""

from __future__ import annotations

from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledgerscope.common.intervals import covers
from ledgerscope.common.sentences import split_sentences


def sents(text: str, start: int = 0, end: int | None = None) -> list[str]:
    return [text[s:e] for s, e in split_sentences(text, start, end)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("First one. Second one! Third one? Fourth", ["First one.", "Second one!", "Third one?", "Fourth"]),
        ("Wait... What?! Yes\u2026 ok.", ["Wait...", "What?!", "Yes\u2026", "ok."]),
        ("No final punctuation", ["No final punctuation"]),
        ("", []),
        (" \n\t\r\n ", []),
    ],
)
def test_splits_after_terminal_punctuation_followed_by_whitespace(text, expected):
    assert sents(text) == expected


def test_no_split_without_following_whitespace():
    assert sents("See example.com/a.b and v1.2.3 now.") == ["See example.com/a.b and v1.2.3 now."]


@pytest.mark.parametrize(
    "text",
    [
        "Use a tool, e.g. this one, and i.e. that one.",
        "Apples, pears etc. are fruit.",
        "Dr. Smith met Mr. Jones and Mrs. Brown.",
        "Made in the U.S. and the U.K. by Acme Inc. today.",
        "See Fig. 3 and Sec. 4.2, cf. pp. 10-12.",
        "Cats vs. dogs.",
    ],
)
def test_never_splits_after_common_abbreviations(text):
    assert sents(text) == [text]


def test_abbreviation_match_is_case_insensitive_and_needs_a_bare_period():
    assert sents("Call DR. Who. Then E.G. this.") == ["Call DR. Who.", "Then E.G. this."]
    # "etc.)" closes a parenthesis: a sentence end
    assert sents("(Bread, milk, etc.) Next one.") == ["(Bread, milk, etc.)", "Next one."]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("It took 3.5 days. Then it ended.", ["It took 3.5 days.", "Then it ended."]),
        ("Pi is 3.14159 and e is 2.718.", ["Pi is 3.14159 and e is 2.718."]),
        ("Costs rose 4.5%. Profits fell.", ["Costs rose 4.5%.", "Profits fell."]),
        ("It was 1999. Then 2000 came.", ["It was 1999.", "Then 2000 came."]),
    ],
)
def test_decimals_are_not_sentence_ends(text, expected):
    assert sents(text) == expected


def test_blank_lines_end_sentences():
    text = "Heading without stop\n\nA paragraph\nwrapped over lines\n \n\t\nLast"
    assert sents(text) == ["Heading without stop", "A paragraph\nwrapped over lines", "Last"]
    assert sents("One\r\n\r\nTwo.\r\nThree") == ["One", "Two.", "Three"]


def test_bullet_and_heading_lines_start_new_sentences():
    text = "Items:\n- first\n- second\n* third\n\u2022 fourth\n# Heading\n  - indented\n1. fifth\n2) sixth"
    assert sents(text) == [
        "Items:",
        "- first",
        "- second",
        "* third",
        "\u2022 fourth",
        "# Heading",
        "- indented",
        "1. fifth",
        "2) sixth",
    ]


def test_numbered_list_markers_stay_with_their_item():
    text = "Steps:\n1. Open the file.\n2. Edit it.\n10. Save."
    assert sents(text) == ["Steps:", "1. Open the file.", "2. Edit it.", "10. Save."]
    assert sents("1. Only item") == ["1. Only item"]
    assert sents("Line\r\n  3. Indented item") == ["Line", "3. Indented item"]
    # a number ending a sentence mid-line is still a sentence end
    assert sents("We counted 12. Then we stopped.") == ["We counted 12.", "Then we stopped."]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('He said "Stop." Then he left.', ['He said "Stop."', "Then he left."]),
        ("She asked \u201cWhy?\u201d And waited.", ["She asked \u201cWhy?\u201d", "And waited."]),
        ("It's \u2018done.\u2019 Next.", ["It's \u2018done.\u2019", "Next."]),
        ("(See above.) Then [this.] Done.", ["(See above.)", "Then [this.]", "Done."]),
        ('"Quoted start." Plain end.', ['"Quoted start."', "Plain end."]),
    ],
)
def test_closing_quotes_and_brackets_stay_with_their_sentence(text, expected):
    assert sents(text) == expected


def test_start_and_end_restrict_the_range_and_offsets_stay_absolute():
    text = "Skip this. Keep one. Keep two. Skip that."
    s, e = text.index("Keep one"), text.index(" Skip that")
    got = split_sentences(text, s, e)
    assert [text[a:b] for a, b in got] == ["Keep one.", "Keep two."]
    assert all(s <= a < b <= e for a, b in got)
    # a range ending inside a sentence cuts it there
    assert sents(text, 0, text.index("one")) == ["Skip this.", "Keep"]


# ---------------------------------------------------------------------------
# properties

PIECES = [
    "word",
    "Alpha",
    "naïve",
    "東京",
    "e\u0301",
    "\U0001f600",
    "\u200b",
    "3.5",
    "12",
    "e.g.",
    "etc.",
    "Dr.",
    "U.S.",
    "1.",
    "2)",
    "-",
    "*",
    "•",
    "#",
    ".",
    "!",
    "?",
    "…",
    '"',
    "”",
    "’",
    ")",
    "]",
    "(",
    ",",
    " ",
    " ",
    " ",
    "\t",
    "\n",
    "\r\n",
    "\n\n",
    "\u00a0",
    "\u2028",
    "\x85",
]
texts = st.lists(st.sampled_from(PIECES), max_size=60).map("".join)


@settings(max_examples=300, deadline=None)
@given(texts, st.data())
def test_intervals_are_stripped_ordered_and_cover_all_non_whitespace(text, data):
    start = data.draw(st.integers(0, len(text)))
    end = data.draw(st.integers(start, len(text)))
    for lo, hi in ((0, len(text)), (start, end)):
        got = split_sentences(text, lo, hi if hi != len(text) else None)
        for s, e in got:
            assert lo <= s < e <= hi
            assert not text[s].isspace() and not text[e - 1].isspace()
        for (_, e1), (s2, _) in pairwise(got):
            assert e1 <= s2
        assert covers(text, lo, hi, got)

        # the sentences partition the range's non-whitespace: only whitespace lies between them
        def visible(chunk: str) -> str:
            return "".join(ch for ch in chunk if not ch.isspace())

        assert "".join(visible(text[s:e]) for s, e in got) == visible(text[lo:hi])
