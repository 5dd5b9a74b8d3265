"""Retrieval units and the cuts that make them: a unit is a slice of one source version, in
canonical code points; a phase and a document's boundaries say where the cuts fell.

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


@dataclass(frozen=True)
class Phase:
    """A preregistered phase: a label shared across arms and this arm's offset in tokens."""

    label: str
    offset: int


@dataclass(frozen=True)
class OffsetRepair:
    """One unit an external chunker returned whose offsets were not verified as given
    (:mod:`ledgerscope.pipeline.chunking.external`): repaired, located, or dropped, and why. Recorded in the
    ``repairs`` table."""

    position: int  # the unit's place in the splitter's output for the document (left side first)
    side: str  # "whole" (no forced cut), "left" or "right" of the phase's forced cut
    status: str
    text: str  # the text the splitter returned
    given_start: int | None  # the splitter's offsets in the document (None: it gave none)
    given_end: int | None
    start: int | None  # where the unit was placed (None: dropped)
    end: int | None
    note: str


@dataclass(frozen=True)
class Boundaries:
    """The actual cuts for one document at one phase (recorded in the ledger).

    ``checked`` and ``repairs``: for a chunker whose units are verified by slicing (the external
    kinds), how many units it returned and each one not verified as given.
    """

    doc_id: str
    cut_tokens: tuple[int, ...]
    cut_chars: tuple[int, ...]
    n_tokens: int
    checked: int = 0
    repairs: tuple[OffsetRepair, ...] = ()
