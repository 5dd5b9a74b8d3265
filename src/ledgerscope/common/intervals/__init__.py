"""Interval arithmetic over source coordinates (half-open, code points), whitespace-blind.

Coverage questions ("does this stage's set of units keep a gold span?") are
answered on intervals. A span is covered when no part of it that the intervals
leave uncovered (a *remainder*) counts:

* a remainder of only whitespace is excused anywhere in the span: whitespace
  between two adjacent units is not evidence, so it never decides support;
* a remainder at either end of the span (it starts where the span starts or
  ends where it ends) made only of whitespace and punctuation (Unicode
  categories Z and P: the span's final full stop left alone in a one-character
  unit, a closing quote, a leading bracket) is excused too; a punctuation
  remainder inside the span (between two covered parts) is never excused.

The same rule runs in DuckDB for whole ledgers: :data:`WHITESPACE` is
``str.isspace()`` as an RE2 class and :func:`edge_pattern` adds the punctuation
(``tests/test_units.py`` holds both to the Python rule over every code point).
"""

from __future__ import annotations

import functools
import sys
import unicodedata
from collections.abc import Iterable, Sequence

#: Python's str.isspace() as an RE2 pattern: a gap whose text fully matches it holds only
#: whitespace and is excused, as :func:`uncovered` excuses a gap whose ``strip()`` is empty
WHITESPACE = r"[\t\n\x0b\x0c\r\x1c-\x1f\x85\p{Z}]*"


def edge_char(ch: str) -> bool:
    """A character an edge remainder may hold and still be excused: whitespace or punctuation
    (Unicode categories Z and P)."""
    return ch.isspace() or unicodedata.category(ch)[0] in "PZ"


@functools.cache
def edge_pattern() -> str:
    """:func:`edge_char` as an RE2 pattern: an edge gap whose text fully matches it is excused. A class
    of explicit code point ranges built from this Python's Unicode tables (so the SQL twin never
    disagrees with it over a Unicode version), once, when first asked for (a tenth of a second)."""
    ranges: list[list[int]] = []
    for p in range(sys.maxunicode + 1):
        if 0xD800 <= p <= 0xDFFF or not edge_char(chr(p)):
            continue
        if ranges and ranges[-1][1] == p - 1:
            ranges[-1][1] = p
        else:
            ranges.append([p, p])
    body = "".join(f"\\x{{{a:x}}}" if a == b else f"\\x{{{a:x}}}-\\x{{{b:x}}}" for a, b in ranges)
    return f"[{body}]*"


def merge_intervals(intervals: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sorted, merged (overlapping or touching) half-open intervals."""
    out: list[list[int]] = []
    for s, e in sorted(intervals):
        if s >= e:
            continue
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def excused(gap: str, at_edge: bool) -> bool:
    """Whether an uncovered remainder of a span does not count (rules in the module docstring)."""
    if not gap.strip():
        return True
    return at_edge and all(edge_char(ch) for ch in gap)


def uncovered(text: str, start: int, end: int, intervals: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """The parts of ``[start, end)`` no interval covers that count (not :func:`excused`)."""
    gaps = []
    pos = start
    for s, e in merge_intervals(intervals):
        if e <= pos:
            continue
        if s >= end:
            break
        if s > pos:
            gaps.append((pos, min(s, end)))
        pos = max(pos, e)
        if pos >= end:
            break
    if pos < end:
        gaps.append((pos, end))
    return [(s, e) for s, e in gaps if not excused(text[s:e], s == start or e == end)]


def covers(text: str, start: int, end: int, intervals: Sequence[tuple[int, int]]) -> bool:
    return not uncovered(text, start, end, intervals)
