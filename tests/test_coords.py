"""Exact span translation between UTF-8 bytes, code points and UTF-16 units."""

from __future__ import annotations

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from ledgerscope.common.errors import CoordinateError
from ledgerscope.inputs import coords
from ledgerscope.inputs.coords import (
    CODEPOINT,
    SYSTEMS,
    UTF8,
    UTF16,
    OffsetTable,
    from_codepoint_span,
    quote_context,
    resolve_quote,
    slice_in,
    to_codepoint_span,
    translate,
)

# Characters that make offset arithmetic interesting: astral-plane emoji (4 UTF-8
# bytes, 2 UTF-16 units), combining marks, CRLF, zero-width characters, a BOM,
# 2- and 3-byte letters.
SPECIALS = [
    "\U0001f600",  # 😀
    "\U0001f469\u200d\U0001f4bb",  # 👩‍💻 (ZWJ sequence)
    "\U0001d11e",  # 𝄞 musical symbol
    "e\u0301",  # e + combining acute
    "\u0308",  # lone combining diaeresis
    "\r\n",
    "\r",
    "\n",
    "\u200b",  # zero-width space
    "\u200c",  # zero-width non-joiner
    "\u200d",  # zero-width joiner
    "\ufeff",  # BOM / zero-width no-break space
    "é",
    "ß",
    "€",
    "中",
    "\u2028",
    " ",
    "a",
]

_chars = st.characters(blacklist_categories=("Cs",))  # any code point but lone surrogates
_piece = st.one_of(st.sampled_from(SPECIALS), st.text(alphabet=_chars, max_size=4))
texts = st.lists(_piece, max_size=25).map("".join)

PROP = settings(max_examples=200, deadline=None)


def _encoded(text: str, system: str) -> bytes:
    return text.encode("utf-8") if system == UTF8 else text.encode("utf-16-le")


def _unit_bytes(system: str) -> int:
    return 2 if system == UTF16 else 1


def _native_offsets(text: str, system: str) -> list[int]:
    """Offset of every code point boundary, computed independently of coords."""
    out = [0]
    for ch in text:
        if system == UTF8:
            out.append(out[-1] + len(ch.encode("utf-8")))
        elif system == UTF16:
            out.append(out[-1] + len(ch.encode("utf-16-le")) // 2)
        else:
            out.append(out[-1] + 1)
    return out


@st.composite
def text_and_span(draw):
    text = draw(texts)
    a = draw(st.integers(0, len(text)))
    b = draw(st.integers(0, len(text)))
    return text, min(a, b), max(a, b)


# ---------------------------------------------------------------------------
# round trips over every valid boundary


@PROP
@given(texts)
def test_every_boundary_round_trips(text):
    for system in SYSTEMS:
        table = OffsetTable(text, system)
        native = _native_offsets(text, system)
        assert table.length == native[-1]
        if system != CODEPOINT:
            assert table.length == len(_encoded(text, system)) // _unit_bytes(system)
        for i, off in enumerate(native):
            assert table.from_codepoint(i) == off
            assert table.to_codepoint(off) == i


@PROP
@given(text_and_span())
def test_span_round_trips_through_each_system(case):
    text, cs, ce = case
    for system in (UTF8, UTF16):
        s, e = from_codepoint_span(text, cs, ce, system)
        assert to_codepoint_span(text, s, e, system) == (cs, ce)
    u8 = from_codepoint_span(text, cs, ce, UTF8)
    u16 = from_codepoint_span(text, cs, ce, UTF16)
    assert translate(text, *u8, UTF8, UTF16) == u16
    assert translate(text, *u16, UTF16, UTF8) == u8
    assert translate(text, cs, ce, CODEPOINT, CODEPOINT) == (cs, ce)


@PROP
@given(text_and_span())
def test_utf8_slice_of_bytes_is_the_codepoint_slice(case):
    text, cs, ce = case
    bs, be = from_codepoint_span(text, cs, ce, UTF8)
    assert text.encode("utf-8")[bs:be].decode("utf-8") == text[cs:ce]
    assert slice_in(text, bs, be, UTF8) == text[cs:ce]


@PROP
@given(text_and_span())
def test_utf16_slice_of_units_is_the_codepoint_slice(case):
    text, cs, ce = case
    us, ue = from_codepoint_span(text, cs, ce, UTF16)
    raw = text.encode("utf-16-le")
    assert raw[2 * us : 2 * ue].decode("utf-16-le") == text[cs:ce]
    assert slice_in(text, us, ue, UTF16) == text[cs:ce]


# ---------------------------------------------------------------------------
# offsets that do not name a character boundary


@PROP
@given(texts)
def test_offsets_inside_a_character_are_rejected_naming_offset_and_character(text):
    for system in (UTF8, UTF16):
        native = _native_offsets(text, system)
        table = OffsetTable(text, system)
        for i, ch in enumerate(text):
            for off in range(native[i] + 1, native[i + 1]):
                with pytest.raises(CoordinateError) as info:
                    table.to_codepoint(off)
                message = str(info.value)
                assert str(off) in message
                assert f"U+{ord(ch):04X}" in message
                with pytest.raises(CoordinateError):
                    to_codepoint_span(text, native[i], off, system)
                with pytest.raises(CoordinateError):
                    to_codepoint_span(text, off, native[-1], system)


@PROP
@given(texts, st.integers(1, 10))
def test_out_of_range_offsets_raise(text, beyond):
    for system in SYSTEMS:
        table = OffsetTable(text, system)
        with pytest.raises(CoordinateError, match=str(-beyond)):
            table.to_codepoint(-beyond)
        with pytest.raises(CoordinateError, match="out of range"):
            table.to_codepoint(table.length + beyond)
        with pytest.raises(CoordinateError):
            table.from_codepoint(len(text) + beyond)
        with pytest.raises(CoordinateError):
            table.from_codepoint(-beyond)
        with pytest.raises(CoordinateError):
            to_codepoint_span(text, 0, table.length + beyond, system)


def test_emoji_between_surrogate_halves_names_the_emoji():
    text = "ok \U0001f600 done"
    with pytest.raises(CoordinateError) as info:
        to_codepoint_span(text, 0, 4, UTF16)  # unit 4 is the low surrogate of 😀
    assert "offset 4" in str(info.value)
    assert "U+1F600" in str(info.value)
    assert to_codepoint_span(text, 3, 5, UTF16) == (3, 4)


@pytest.mark.parametrize("inside", [4, 5, 6])
def test_utf8_offset_inside_four_byte_emoji(inside):
    text = "abc\U0001f600"  # emoji occupies bytes 3..7
    with pytest.raises(CoordinateError) as info:
        to_codepoint_span(text, 3, inside, UTF8)
    assert f"offset {inside}" in str(info.value)
    assert "U+1F600" in str(info.value)
    assert to_codepoint_span(text, 3, 7, UTF8) == (3, 4)


def test_known_values_mixed_text():
    text = "a\u00e9\u4e2d\U0001f600\r\n"
    # code points: a é 中 😀 \r \n
    assert from_codepoint_span(text, 0, 6, UTF8) == (0, 1 + 2 + 3 + 4 + 2)
    assert from_codepoint_span(text, 3, 4, UTF8) == (6, 10)
    assert from_codepoint_span(text, 3, 4, UTF16) == (3, 5)
    assert from_codepoint_span(text, 4, 6, UTF16) == (5, 7)
    assert slice_in(text, 3, 6, UTF8) == "中"


def test_reversed_span_and_unknown_system_raise():
    with pytest.raises(CoordinateError, match="start after end"):
        to_codepoint_span("abc", 2, 1, CODEPOINT)
    with pytest.raises(CoordinateError, match="start after end"):
        from_codepoint_span("abc", 2, 1, UTF8)
    with pytest.raises(CoordinateError, match="unknown coordinate system"):
        OffsetTable("abc", "utf32-half-open")
    with pytest.raises(CoordinateError):
        to_codepoint_span("abc", 0, 1, "bytes")


def test_coordinate_error_is_a_value_error():
    assert issubclass(CoordinateError, ValueError)
    with pytest.raises(ValueError):
        coords.to_codepoint_span("é", 0, 1, UTF8)


# ---------------------------------------------------------------------------
# quote selectors


REPEATED = (
    "Section A. Requests may be retained for 30 days. See below.\n"
    "Section B. Requests may be retained for 30 days. Except temporary ones.\n"
)
QUOTE = "Requests may be retained for 30 days."


def test_resolve_quote_unique():
    m = resolve_quote("alpha beta gamma", "beta")
    assert (m.start, m.end) == (6, 10)


def test_resolve_quote_repeated_without_context_is_ambiguous():
    with pytest.raises(CoordinateError, match="ambiguous"):
        resolve_quote(REPEATED, QUOTE)


def test_resolve_quote_prefix_and_suffix_tell_repeats_apart():
    first = REPEATED.index(QUOTE)
    second = REPEATED.index(QUOTE, first + 1)
    m = resolve_quote(REPEATED, QUOTE, prefix="Section A. ")
    assert (m.start, m.end) == (first, first + len(QUOTE))
    m = resolve_quote(REPEATED, QUOTE, prefix="Section B. ")
    assert m.start == second
    m = resolve_quote(REPEATED, QUOTE, suffix=" Except")
    assert m.start == second
    m = resolve_quote(REPEATED, QUOTE, suffix=" See below.")
    assert m.start == first
    assert REPEATED[m.start : m.end] == QUOTE


def test_resolve_quote_hint_picks_nearest():
    first = REPEATED.index(QUOTE)
    second = REPEATED.index(QUOTE, first + 1)
    assert resolve_quote(REPEATED, QUOTE, hint=0).start == first
    assert resolve_quote(REPEATED, QUOTE, hint=second - 3).start == second
    assert resolve_quote(REPEATED, QUOTE, hint=len(REPEATED)).start == second
    # equidistant: ambiguous (the one tie rule of inputs/locate.py), never the earlier by default
    text = "xx ab  ab"
    assert resolve_quote(text, "ab", hint=4).start == 3
    with pytest.raises(CoordinateError, match="equally near"):
        resolve_quote(text, "ab", hint=5)


def test_resolve_quote_errors():
    with pytest.raises(CoordinateError, match="does not occur"):
        resolve_quote(REPEATED, "retained for 31 days")
    with pytest.raises(CoordinateError, match="never with the given prefix"):
        resolve_quote(REPEATED, QUOTE, prefix="Section C. ")
    with pytest.raises(CoordinateError, match="empty"):
        resolve_quote(REPEATED, "")


def test_resolve_quote_finds_overlapping_occurrences():
    text = "aaaa"
    with pytest.raises(CoordinateError, match="3 occurrences"):
        resolve_quote(text, "aa")
    assert resolve_quote(text, "aa", prefix="a", suffix="a").start == 1


@PROP
@given(text_and_span())
def test_quote_context_resolves_back_to_the_span(case):
    text, cs, ce = case
    assume(ce > cs)
    prefix, suffix = quote_context(text, cs, ce, width=len(text))
    m = resolve_quote(text, text[cs:ce], prefix=prefix, suffix=suffix)
    assert (m.start, m.end) == (cs, ce)
