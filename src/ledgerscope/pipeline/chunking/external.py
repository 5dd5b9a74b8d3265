"""External chunkers: the forced-cut phase rule, and every returned unit verified in the source.

A splitter from outside (LangChain, LlamaIndex, chonkie, a Python callable; :mod:`.splitters`)
is a function from a text to :class:`Piece` s: each the text of one unit and, when the splitter
says, its offsets in the text it was handed. Nothing it returns is trusted.

**Phase rule.** Phase ``p`` forces one cut at token ``p`` of the document (the arm's tokenizer:
the cut lies at that token's first code point) and the splitter runs separately on the text before
and the text from there (the *sides*); phase 0, or a ``p`` at or past the document's last token,
runs it on the whole document. The source is never changed: the sides are slices of it, and every
unit is a slice of it.

**Verification**, per side, in the order the splitter returned the units. A unit is *verified*
when its offsets slice to its text and it starts at the first place its text occurs in document
order: after the previous unit's start, or at that start as a longer or shorter interval (units
follow the document; this catches a ``find()`` that landed on a later or an earlier copy of a
repeated passage, and two units given one start). Otherwise it is placed by
:mod:`ledgerscope.inputs.locate`: its exact occurrences, else its whitespace-normalised ones, in
document order after the previous unit, the nearest to the previous unit's start (the first);
when it occurs only before (out of order), the nearest to its given start (or the previous unit's
end), and a tie is *ambiguous*. The status is ``repaired`` when offsets were given, ``located`` /
``located-whitespace`` when the splitter gave none, ``unlocatable`` or ``ambiguous`` when no place
is found; those are dropped. A placed unit is trimmed of surrounding whitespace (as the token
chunker's units are); one left empty (``empty``), or on the interval of an earlier unit of the
document (``duplicate``), is dropped too. Every unit not verified as given is reported
(:class:`ledgerscope.pipeline.contracts.units.OffsetRepair`); nothing is placed silently.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ledgerscope.common.errors import InputError, Problem
from ledgerscope.inputs.locate import EXACT, Haystack, candidates, nearest
from ledgerscope.inputs.sources import Source
from ledgerscope.pipeline.contracts.units import Boundaries, OffsetRepair, Unit, unit_id_for

VERIFIED = "verified"
#: statuses of a unit that ends up in the ledger, and of one that is dropped
PLACED = ("verified", "repaired", "located", "located-whitespace")
DROPPED = ("unlocatable", "ambiguous", "empty", "duplicate")


@dataclass(frozen=True)
class Piece:
    """One unit as a splitter returned it: its text, and its offsets in the text it was handed
    (code points, half-open) when the splitter gives them (``end`` None: start + len(text))."""

    text: str
    start: int | None = None
    end: int | None = None


class SplitterOutputError(ValueError):
    """A splitter returned something that is not a list of units (e.g. intervals out of range)."""


@dataclass(frozen=True)
class Placed:
    """Where one piece lies in its side's text (``start`` None: nowhere), and how that was decided."""

    piece: Piece
    status: str
    start: int | None = None
    end: int | None = None
    note: str = ""


def forced_cut(offsets: Sequence[tuple[int, int]], phase_offset: int, text_len: int) -> int | None:
    """The code point phase ``phase_offset`` forces a cut at (token p's start), or None (no cut)."""
    if phase_offset <= 0 or phase_offset >= len(offsets):
        return None
    cut = offsets[phase_offset][0]
    return cut if 0 < cut < text_len else None


def sides(text_len: int, cut: int | None) -> list[tuple[str, int, int]]:
    """(name, start, end) of the texts the splitter runs on."""
    if cut is None:
        return [("whole", 0, text_len)]
    return [("left", 0, cut), ("right", cut, text_len)]


def place_pieces(text: str, pieces: Sequence[Piece], base: int = 0) -> list[Placed]:
    """The verification rule of the module docstring over one side's text, in the splitter's order.

    Positions are in ``text``; the notes give them in the document (``base``: where ``text`` starts).
    """
    hay = Haystack(text)
    prev: tuple[int, int] | None = None
    out: list[Placed] = []
    for piece in pieces:
        placed = _place(hay, piece, prev, base)
        out.append(placed)
        if placed.start is not None:
            prev = (placed.start, placed.end)
    return out


def _given(piece: Piece) -> tuple[int, int] | None:
    if piece.start is None:
        return None
    return piece.start, piece.end if piece.end is not None else piece.start + len(piece.text)


def in_document(start: int, end: int, base: int) -> tuple[int, int]:
    """A splitter's offsets into a side (which starts at ``base``) as document offsets; a negative
    start (LangChain's -1: not found) is kept as the splitter gave it."""
    return (start + base, end + base) if start >= 0 else (start, end)


def _follows(interval: tuple[int, int], prev: tuple[int, int] | None) -> bool:
    """Document order: after the previous unit's start, or at it as a different interval (a
    splitter's overlapping units may share a start)."""
    return prev is None or interval[0] > prev[0] or (interval[0] == prev[0] and interval[1] != prev[1])


def _first_following(text: str, needle: str, prev: tuple[int, int] | None) -> int:
    """Where ``needle`` first occurs in document order after ``prev`` (-1: nowhere)."""
    if prev is None:
        return text.find(needle)
    pos = text.find(needle, prev[0])
    if pos == prev[0] and pos + len(needle) == prev[1]:
        pos = text.find(needle, prev[0] + 1)
    return pos


def _place(hay: Haystack, piece: Piece, prev: tuple[int, int] | None, base: int) -> Placed:
    text = hay.text
    if not piece.text.strip():
        return Placed(piece, "empty", note="the splitter returned a unit with no text")
    given = _given(piece)
    why = ""
    if given is not None:
        s, e = given
        if 0 <= s <= e <= len(text) and text[s:e] == piece.text:
            first = _first_following(text, piece.text, prev)
            if first == s:
                return Placed(piece, VERIFIED, s, e)
            why = (
                f"offsets [{s + base}, {e + base}) slice to its text but in document order it first "
                f"occurs at {first + base}"
                if first != -1
                else f"offsets [{s + base}, {e + base}) do not follow the previous unit"
            )
        elif 0 <= s <= e <= len(text):
            why = f"offsets [{s + base}, {e + base}) slice {text[s:e][:40]!r}"
        else:
            ds, de = in_document(s, e, base)
            why = f"offsets [{ds}, {de}) are outside the text the splitter was given"
    found, how = candidates(hay, piece.text)
    after = [c for c in found if _follows(c, prev)]
    if after:
        best, tie = nearest(after, prev[0] if prev else 0)
        order = ""
    else:
        hint = given[0] if given is not None else (prev[1] if prev else 0)
        best, tie = nearest(found, hint)
        order = "; out of document order (its text occurs only before the previous unit)"
    if best is None:
        reason = (
            "its text occurs nowhere in the text it was split from, exactly or with whitespace normalised"
        )
        return Placed(piece, "unlocatable", note=f"{why}; {reason}" if why else reason)
    if tie:
        return Placed(
            piece,
            "ambiguous",
            note=(f"{why}; " if why else "") + f"its text occurs "
            f"{len(found)} times and the two nearest are equally near{order}",
        )
    s, e = best
    match = "exact match" if how == EXACT else "whitespace-normalised match"
    at = f"placed at [{s + base}, {e + base}) ({match}){order}"
    if given is not None:
        return Placed(piece, "repaired", s, e, f"{why}; {at}")
    return Placed(piece, "located" if how == EXACT else "located-whitespace", s, e, f"no offsets given; {at}")


def _trim(text: str, s: int, e: int) -> tuple[int, int]:
    while s < e and text[s].isspace():
        s += 1
    while e > s and text[e - 1].isspace():
        e -= 1
    return s, e


@dataclass
class ExternalChunker:
    """``chunker.kind`` langchain | llamaindex | chonkie | python: a splitter under the phase rule.

    ``split`` maps a text to pieces; it may raise :class:`SplitterOutputError` (or anything, from
    a library): either becomes an :class:`InputError` naming ``where`` (the arm file) and ``key``.
    """

    split: Callable[[str], Sequence[Piece]]
    where: str
    key: str
    info: dict = field(default_factory=dict)

    def describe(self) -> dict:
        return dict(self.info)

    def chunk(
        self, source: Source, offsets: Sequence[tuple[int, int]], phase_offset: int
    ) -> tuple[list[Unit], Boundaries]:
        text = source.text
        placed: list[tuple[str, int, Placed]] = []
        for side, a, b in sides(len(text), forced_cut(offsets, phase_offset, len(text))):
            for p in place_pieces(text[a:b], self._split(text[a:b], source, phase_offset, side), a):
                placed.append((side, a, p))
        return _units(source, offsets, placed)

    def _split(self, text: str, source: Source, phase_offset: int, side: str) -> list[Piece]:
        try:
            pieces = list(self.split(text))
        except Exception as exc:  # a third-party splitter or user code: named, with where it happened
            where = f"document {source.doc_id!r}, phase offset {phase_offset}" + (
                f", {side} of the forced cut" if side != "whole" else ""
            )
            kind = "" if isinstance(exc, SplitterOutputError) else f"raised {type(exc).__name__}: "
            raise InputError(Problem(self.where, None, self.key, f"{where}: {kind}{exc}")) from None
        bad = next((p for p in pieces if not isinstance(p, Piece)), None)
        if bad is not None:  # an adapter bug, not the user's
            raise TypeError(f"splitter adapter returned {type(bad).__name__}, not Piece")
        return pieces


def _units(
    source: Source, offsets: Sequence[tuple[int, int]], placed: list[tuple[str, int, Placed]]
) -> tuple[list[Unit], Boundaries]:
    """Units (sorted, trimmed, deduplicated) and the document's boundaries with its repairs."""
    text = source.text
    intervals: list[tuple[int, int]] = []
    seen: set[tuple[int, int]] = set()
    repairs: list[OffsetRepair] = []
    for position, (side, base, p) in enumerate(placed):
        given = _given(p.piece)
        gs, ge = in_document(*given, base) if given is not None else (None, None)
        status, note = p.status, p.note
        span = None
        if p.start is not None:
            span = _trim(text, p.start + base, p.end + base)
            if span[0] >= span[1]:
                status, note, span = "empty", "only whitespace at its place", None
            elif span in seen:
                note = f"the interval [{span[0]}, {span[1]}) of an earlier unit"
                status, span = "duplicate", None
        if span is not None:
            seen.add(span)
            intervals.append(span)
        if status != VERIFIED:
            repairs.append(
                OffsetRepair(
                    position,
                    side,
                    status,
                    p.piece.text,
                    gs,
                    ge,
                    span[0] if span else None,
                    span[1] if span else None,
                    note,
                )
            )
    starts = [o[0] for o in offsets]
    units = []
    for ordinal, (s, e) in enumerate(sorted(intervals)):
        a, b = bisect.bisect_left(starts, s), bisect.bisect_left(starts, e)
        units.append(
            Unit(
                unit_id_for(source.doc_id, s, e),
                source.doc_id,
                source.version,
                ordinal,
                s,
                e,
                text[s:e],
                a,
                b,
                s,
                e,
                source.access,
            )
        )
    cut_chars = tuple(u.start for u in units[1:])
    cut_tokens = tuple(bisect.bisect_left(starts, c) for c in cut_chars)
    return units, Boundaries(source.doc_id, cut_tokens, cut_chars, len(offsets), len(placed), tuple(repairs))
