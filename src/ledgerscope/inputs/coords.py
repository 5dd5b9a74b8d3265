"""Exact span translation between coordinate systems.

The canonical form inside ledgerscope is ``codepoint-half-open``: Python ``str``
indices. Spans arrive as UTF-8 byte offsets (the seed fixture), code points
(SQuAD, ContractNLI, W3C selectors) or UTF-16 code units (JavaScript, Azure).
Every translation is exact or an error: an offset that falls inside a
multi-byte character (or between the halves of a surrogate pair) is rejected,
never rounded.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass

from ledgerscope.common.errors import CoordinateError

UTF8 = "utf8-byte-half-open"
CODEPOINT = "codepoint-half-open"
UTF16 = "utf16-half-open"
SYSTEMS = (UTF8, CODEPOINT, UTF16)


def _unit_width(ch: str, system: str) -> int:
    cp = ord(ch)
    if system == UTF8:
        return 1 if cp < 0x80 else 2 if cp < 0x800 else 3 if cp < 0x10000 else 4
    if system == UTF16:
        return 2 if cp >= 0x10000 else 1
    return 1


class OffsetTable:
    """Cumulative unit offsets for one text, so many spans translate in O(log n).

    ``starts[i]`` is the offset, in the table's system, where code point ``i``
    begins; ``starts[len(text)]`` is the total length in that system.
    """

    def __init__(self, text: str, system: str):
        if system not in SYSTEMS:
            raise CoordinateError(f"unknown coordinate system {system!r}; known: {', '.join(SYSTEMS)}")
        self.text = text
        self.system = system
        if system == CODEPOINT or text.isascii():
            self.starts: list[int] | None = None
            self.length = len(text)
        else:
            starts = [0] * (len(text) + 1)
            acc = 0
            for i, ch in enumerate(text):
                starts[i] = acc
                acc += _unit_width(ch, system)
            starts[len(text)] = acc
            self.starts = starts
            self.length = acc

    def to_codepoint(self, offset: int) -> int:
        """Translate one offset of this system to a code point index, exactly."""
        if not 0 <= offset <= self.length:
            raise CoordinateError(f"offset {offset} is out of range [0, {self.length}] ({self.system})")
        if self.starts is None:
            return offset
        i = bisect_left(self.starts, offset)
        if self.starts[i] != offset:
            ch = self.text[i - 1]
            raise CoordinateError(
                f"offset {offset} ({self.system}) falls inside the character "
                f"U+{ord(ch):04X} at code point {i - 1}"
            )
        return i

    def from_codepoint(self, index: int) -> int:
        if not 0 <= index <= len(self.text):
            raise CoordinateError(f"code point index {index} is out of range [0, {len(self.text)}]")
        return index if self.starts is None else self.starts[index]


def to_codepoint_span(text: str, start: int, end: int, system: str) -> tuple[int, int]:
    """Translate a half-open span in ``system`` to code points, or raise CoordinateError."""
    if start > end:
        raise CoordinateError(f"span [{start},{end}) has start after end")
    table = OffsetTable(text, system)
    return table.to_codepoint(start), table.to_codepoint(end)


def from_codepoint_span(text: str, start: int, end: int, system: str) -> tuple[int, int]:
    """Translate a code point span to ``system``."""
    if start > end:
        raise CoordinateError(f"span [{start},{end}) has start after end")
    table = OffsetTable(text, system)
    return table.from_codepoint(start), table.from_codepoint(end)


def translate(text: str, start: int, end: int, source: str, target: str) -> tuple[int, int]:
    """Translate a span between any two systems through code points."""
    cs, ce = to_codepoint_span(text, start, end, source)
    return from_codepoint_span(text, cs, ce, target)


def slice_in(text: str, start: int, end: int, system: str) -> str:
    """The exact text a span names in its own system (checked)."""
    cs, ce = to_codepoint_span(text, start, end, system)
    return text[cs:ce]


@dataclass(frozen=True)
class QuoteMatch:
    start: int
    end: int


def resolve_quote(
    text: str, exact: str, prefix: str = "", suffix: str = "", hint: int | None = None
) -> QuoteMatch:
    """Find ``exact`` in ``text`` as a W3C TextQuoteSelector would, by the one locator's rules
    (:mod:`ledgerscope.inputs.locate`): exact occurrences only, those whose surrounding text
    matches ``prefix``/``suffix`` kept; several left: ``hint`` (a code point position, e.g. a
    recorded start) picks the nearest, and without a hint, or with two equally near, the quote is
    ambiguous. Every failure is an error, never a guess.
    """
    from ledgerscope.inputs.locate import Haystack, candidates, nearest, occurrences

    if not exact:
        raise CoordinateError("quote is empty")
    fitting, _ = candidates(Haystack(text), exact, prefix, suffix, levels=())
    if not fitting:
        n = len(occurrences(text, exact))
        if not n:
            raise CoordinateError(f"quote {exact[:60]!r} does not occur in the text")
        raise CoordinateError(
            f"quote {exact[:60]!r} occurs {n} time(s) but never with the given prefix/suffix"
        )
    if len(fitting) > 1:
        if hint is None:
            raise CoordinateError(
                f"quote {exact[:60]!r} is ambiguous: {len(fitting)} occurrences match "
                "prefix and suffix; give more context or a position"
            )
        best, tie = nearest(fitting, hint)
        if tie or best is None:
            raise CoordinateError(
                f"quote {exact[:60]!r} is ambiguous: the two occurrences nearest position {hint} "
                "are equally near"
            )
        return QuoteMatch(*best)
    return QuoteMatch(*fitting[0])


def quote_context(text: str, start: int, end: int, width: int = 32) -> tuple[str, str]:
    """Prefix and suffix around a code point span, for a quote selector."""
    return text[max(0, start - width) : start], text[end : end + width]
