"""Retrieval units: a unit is a slice of one source version, in canonical code points.

Whether a stage's units keep a gold span is interval arithmetic,
:mod:`ledgerscope.common.intervals` (whitespace-blind).
"""

from __future__ import annotations

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
