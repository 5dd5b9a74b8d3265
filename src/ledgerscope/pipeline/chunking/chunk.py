"""Phased chunking, exactly as DESIGN.md defines phases.

Token window (capacity C, overlap O, stride S = C - O): phase ``p`` in
``[0, S)`` puts the first interior cut at token ``p`` (at ``S`` when
``p = 0``), later cuts every ``S`` tokens. Each core interval between cuts and
the document edges is extended by up to ``O`` following tokens. Interior
units have ``C`` tokens; shorter edge units are kept (``keep-short``) or
folded into their neighbour when shorter than half a stride (``merge-short``).

Tokens come from the embedding model's tokenizer with code point offsets into
the source. A unit's source interval runs from its first token to the start
of the token after its last (so characters the tokenizer drops stay inside a
unit), with surrounding whitespace trimmed; its text is that slice.

Structural (sentence) chunker: whole sentences packed greedily up to
``capacity`` tokens; a sentence longer than ``capacity`` is split by token
window. Its declared perturbation rule: phase ``k`` puts the first ``k``
sentences of each document into a unit of their own (packed by the same rule,
so into more than one unit only when they exceed ``capacity`` tokens); no unit
ever exceeds ``capacity`` tokens.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

from ledgerscope.common.sentences import split_sentences
from ledgerscope.inputs.sources import Source
from ledgerscope.pipeline.contracts.units import Boundaries, Unit, unit_id_for


def cut_tokens(n_tokens: int, stride: int, phase: int) -> list[int]:
    """Interior cut positions (token indices) for one document."""
    if stride < 1:
        raise ValueError("stride must be at least 1")
    if not 0 <= phase < stride:
        raise ValueError(f"phase {phase} must lie in [0, {stride})")
    first = phase if phase > 0 else stride
    return list(range(first, n_tokens, stride))


def token_ranges(
    n_tokens: int, capacity: int, overlap: int, phase: int, edge_policy: str = "keep-short"
) -> list[tuple[int, int, int, int]]:
    """(unit_start, unit_end, core_start, core_end) token ranges for one document."""
    if n_tokens == 0:
        return []
    stride = capacity - overlap
    bounds = [0, *cut_tokens(n_tokens, stride, phase), n_tokens]
    cores = [(a, b) for a, b in pairwise(bounds) if b > a]
    if edge_policy == "merge-short" and len(cores) > 1:
        # "shorter than half a stride": 2 * length < stride (exact for odd strides too)
        if 2 * (cores[0][1] - cores[0][0]) < stride:
            cores[1] = (cores[0][0], cores[1][1])
            cores.pop(0)
        if len(cores) > 1 and 2 * (cores[-1][1] - cores[-1][0]) < stride:
            cores[-2] = (cores[-2][0], cores[-1][1])
            cores.pop()
    return [(a, min(b + overlap, n_tokens), a, b) for a, b in cores]


def _char_bounds(text: str, offsets: Sequence[tuple[int, int]], a: int, b: int) -> tuple[int, int]:
    """Code point interval for tokens [a, b): to the next token's start, whitespace trimmed."""
    start = 0 if a == 0 else offsets[a][0]
    end = len(text) if b >= len(offsets) else offsets[b][0]
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _make_units(
    source: Source, offsets: Sequence[tuple[int, int]], ranges: list[tuple[int, int, int, int]]
) -> list[Unit]:
    # Several tokens can share one code point start (a Hangul syllable yields up to three), so
    # a tiny token range can map to an empty interval, or to the same interval as a neighbour.
    # Those are skipped; ordinals count the units actually emitted (neighbour expansion indexes
    # a document's units by ordinal) and unit ids stay unique within a document and phase.
    units: list[Unit] = []
    seen: set[tuple[int, int]] = set()
    for a, b, ca, cb in ranges:
        s, e = _char_bounds(source.text, offsets, a, b)
        cs, ce = _char_bounds(source.text, offsets, ca, cb)
        if s >= e or (s, e) in seen:
            continue
        seen.add((s, e))
        units.append(
            Unit(
                unit_id_for(source.doc_id, s, e),
                source.doc_id,
                source.version,
                len(units),
                s,
                e,
                source.text[s:e],
                a,
                b,
                cs,
                ce,
                source.access,
            )
        )
    return units


def chunk_tokens(
    source: Source,
    offsets: Sequence[tuple[int, int]],
    capacity: int,
    overlap: int,
    phase: int,
    edge_policy: str = "keep-short",
) -> tuple[list[Unit], Boundaries]:
    """Token-window units of one document at one phase."""
    n = len(offsets)
    if n == 0:
        # Nothing the tokenizer keeps: one unit holds whatever non-whitespace there is.
        units = _make_units(source, offsets, [(0, 0, 0, 0)]) if source.text.strip() else []
        return units, Boundaries(source.doc_id, (), (), 0)
    ranges = token_ranges(n, capacity, overlap, phase, edge_policy)
    units = _make_units(source, offsets, ranges)
    cuts = tuple(r[2] for r in ranges[1:])
    return units, Boundaries(source.doc_id, cuts, tuple(offsets[c][0] for c in cuts), n)


def chunk_sentences(
    source: Source, offsets: Sequence[tuple[int, int]], capacity: int, phase: int
) -> tuple[list[Unit], Boundaries]:
    """Sentence-packing units of one document; phase k isolates the first k sentences."""
    n = len(offsets)
    if n == 0:
        return chunk_tokens(source, offsets, capacity, 0, 0)
    starts = [o[0] for o in offsets]
    # token index ranges per sentence
    sent_ranges: list[tuple[int, int]] = []
    for s, e in split_sentences(source.text):
        a = bisect.bisect_left(starts, s)
        b = bisect.bisect_left(starts, e)
        if b > a:
            sent_ranges.append((a, b))
    # merge gaps: make the sentence ranges tile [0, n)
    tiled: list[list[int]] = []
    for a, b in sent_ranges:
        if tiled and a < tiled[-1][1]:
            a = tiled[-1][1]
        if tiled and a > tiled[-1][1]:
            tiled[-1][1] = a
        if b > a:
            tiled.append([a, b])
    if not tiled:
        tiled = [[0, n]]
    tiled[0][0], tiled[-1][1] = 0, n
    # Phase k: the first k sentences are packed on their own, so a cut always falls after
    # sentence k (they share the first unit whenever they fit in `capacity` tokens).
    k = min(phase, len(tiled))
    groups = _pack(tiled[:k], capacity) + _pack(tiled[k:], capacity)
    ranges = [(a, b, a, b) for a, b in groups]
    units = _make_units(source, offsets, ranges)
    cuts = tuple(r[0] for r in ranges[1:])
    return units, Boundaries(source.doc_id, cuts, tuple(offsets[c][0] for c in cuts), n)


def _pack(sentences: Sequence[Sequence[int]], capacity: int) -> list[tuple[int, int]]:
    """Token ranges of whole sentences packed greedily up to ``capacity`` tokens; a longer
    sentence is split into ``capacity``-token windows."""
    groups: list[tuple[int, int]] = []
    cur: list[int] | None = None
    for a, b in sentences:
        if b - a > capacity:
            if cur:
                groups.append((cur[0], cur[1]))
                cur = None
            groups.extend((x, min(x + capacity, b)) for x in range(a, b, capacity))
            continue
        if cur and b - cur[0] <= capacity:
            cur[1] = b
        else:
            if cur:
                groups.append((cur[0], cur[1]))
            cur = [a, b]
    if cur:
        groups.append((cur[0], cur[1]))
    return groups


@dataclass(frozen=True)
class TokenChunker:
    """``chunker.kind = "token"``: windows of ``capacity`` tokens, ``overlap`` into the next core."""

    capacity: int
    overlap: int
    edge_policy: str = "keep-short"

    def chunk(
        self, source: Source, offsets: Sequence[tuple[int, int]], phase_offset: int
    ) -> tuple[list[Unit], Boundaries]:
        return chunk_tokens(source, offsets, self.capacity, self.overlap, phase_offset, self.edge_policy)


@dataclass(frozen=True)
class SentenceChunker:
    """``chunker.kind = "sentence"``: whole sentences packed up to ``capacity`` tokens."""

    capacity: int

    def chunk(
        self, source: Source, offsets: Sequence[tuple[int, int]], phase_offset: int
    ) -> tuple[list[Unit], Boundaries]:
        return chunk_sentences(source, offsets, self.capacity, phase_offset)
