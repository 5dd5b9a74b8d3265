"""Retrieval units and interval arithmetic over source coordinates.

A unit is a slice of one source version, in canonical code points. Coverage
questions ("does this stage's set of units keep a gold span?") are answered on
intervals, ignoring whitespace: a span is covered when every non-whitespace
character in it lies inside some unit. Whitespace between two adjacent units
is not evidence, so it never decides support.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Unit:
    """One chunk: a source interval plus the text sliced from it."""

    unit_id: str
    doc_id: str
    version: str
    ordinal: int
    start: int  # code points, half-open
    end: int
    text: str
    token_start: int  # embedding-tokenizer token indices, half-open
    token_end: int
    core_start: int  # the core interval (without overlap), code points
    core_end: int
    access: tuple[str, ...] = ()

    @property
    def interval(self) -> tuple[int, int]:
        return self.start, self.end


def unit_id_for(doc_id: str, start: int, end: int) -> str:
    """Unit ids name their source interval, so identical intervals share an id."""
    return f"{doc_id}@{start}-{end}"


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
