"""Interval arithmetic over source coordinates (half-open, code points), whitespace-blind.

Coverage questions ("does this stage's set of units keep a gold span?") are
answered on intervals, ignoring whitespace: a span is covered when every
non-whitespace character in it lies inside some interval. Whitespace between
two adjacent units is not evidence, so it never decides support.

The same rule runs in DuckDB for whole ledgers: :data:`WHITESPACE` is
``str.isspace()`` as an RE2 class (``tests/test_units.py`` holds the two together
over every code point).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

#: Python's str.isspace() as an RE2 pattern: a gap whose text fully matches it holds only
#: whitespace and is excused, as :func:`uncovered` excuses a gap whose ``strip()`` is empty
WHITESPACE = r"[\t\n\x0b\x0c\r\x1c-\x1f\x85\p{Z}]*"


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


def uncovered(text: str, start: int, end: int, intervals: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """The parts of ``[start, end)`` holding non-whitespace that no interval covers."""
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
    return [(s, e) for s, e in gaps if text[s:e].strip()]


def covers(text: str, start: int, end: int, intervals: Sequence[tuple[int, int]]) -> bool:
    return not uncovered(text, start, end, intervals)
