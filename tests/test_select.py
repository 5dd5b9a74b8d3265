"""Packing under a budget or a top-k (pipeline/select.py), on hand-built units and a word counter.

The counter counts whitespace-separated words, so a block ``[n] (doc)\\ntext`` costs 2 words plus its
text's and the separator between blocks costs nothing: every cost below is exact arithmetic. Two of
the declared packing rules are pinned here because nothing else failed when they broke: overflow is
first fit (a block that does not fit is skipped and logged, later blocks that fit are still packed;
no block is admitted over the budget to be shed at the end), and a source interval is packed once
(duplicates reach the packer through neighbour expansion).
"""

from __future__ import annotations

import pytest

from ledgerscope.pipeline.contracts.prompt import BLOCK_SEPARATOR, ContextBlock
from ledgerscope.pipeline.contracts.units import Unit
from ledgerscope.pipeline.ranking.select import expand, pack, visible


def words(text: str) -> int:
    return len(text.split())


def unit(
    ordinal: int, n_words: int, doc: str = "d", version: str = "v1", access: tuple[str, ...] = ()
) -> Unit:
    """A unit of ``n_words`` words (cost ``n_words + 2`` as a block) at a distinct interval."""
    start = ordinal * 100
    text = " ".join(f"w{ordinal}" for _ in range(n_words))
    return Unit(
        f"{doc}@{start}-{start + 50}",
        doc,
        version,
        ordinal,
        start,
        start + 50,
        text,
        ordinal * 10,
        ordinal * 10 + n_words,
        start,
        start + 50,
        access,
    )


def ids(units) -> list[str]:
    return [u.unit_id for u in units]


# ---------------------------------------------------------------------------
# overflow: first fit in rank order


def test_a_block_over_the_budget_is_skipped_and_later_blocks_that_fit_are_packed():
    a, b, c = unit(0, 8), unit(1, 12), unit(2, 4)  # blocks of 10, 14 and 6 words
    p = pack([a, b, c], words, budget=20)
    assert ids(p.units) == ids([a, c])  # b would end at 24 > 20: skipped, c still fits (16)
    assert p.overflow == [{"unit_id": b.unit_id, "tokens": 14, "remaining": 10}]
    assert p.evidence_tokens == 16
    assert p.blocks == [ContextBlock("1", a.unit_id, "d", a.text), ContextBlock("2", c.unit_id, "d", c.text)]


def test_a_first_block_slightly_over_the_budget_is_never_packed_then_shed():
    a, b = unit(0, 20), unit(1, 3)  # 22 words: 2 over a budget of 20; then 5 words
    p = pack([a, b], words, budget=20)
    assert ids(p.units) == [b.unit_id]
    assert p.overflow == [{"unit_id": a.unit_id, "tokens": 22, "remaining": 20}]  # skipped, not re-measured
    assert p.evidence_tokens == 5


def test_a_block_that_fills_the_budget_exactly_is_packed():
    a, b, c = unit(0, 8), unit(1, 8), unit(2, 8)  # 10 + 10 = 20, then nothing is left
    p = pack([a, b, c], words, budget=20)
    assert ids(p.units) == ids([a, b]) and p.evidence_tokens == 20
    assert p.overflow == [{"unit_id": c.unit_id, "tokens": 10, "remaining": 0}]
    p = pack([a, b], words, budget=19)
    assert ids(p.units) == [a.unit_id]
    assert p.overflow == [{"unit_id": b.unit_id, "tokens": 10, "remaining": 9}]


def test_separators_are_counted_between_blocks_not_before_the_first():
    def counted_separators(text: str) -> int:  # a separator costs one token
        return words(text) + text.count("\n\n")

    a, b = unit(0, 8), unit(1, 8)
    assert ids(pack([a, b], counted_separators, budget=21).units) == ids([a, b])  # 10 + 1 + 10
    p = pack([a, b], counted_separators, budget=20)
    assert ids(p.units) == [a.unit_id]
    assert p.overflow == [{"unit_id": b.unit_id, "tokens": 11, "remaining": 10}]
    assert pack([a], counted_separators, budget=10).evidence_tokens == 10


def test_the_separator_is_measured_between_two_one_token_texts():
    asked: list[str] = []

    def two_per_word(text: str) -> int:  # "x" is 2 tokens, a separator 1
        asked.append(text)
        return 2 * words(text) + text.count("\n\n")

    a, b = unit(0, 3), unit(1, 3)  # blocks of 2 * 5 = 10 tokens
    assert ids(pack([a, b], two_per_word, budget=21).units) == ids([a, b])
    assert asked[:2] == ["x" + BLOCK_SEPARATOR + "x", "x"]
    p = pack([a, b], two_per_word, budget=20)
    assert ids(p.units) == [a.unit_id] and p.overflow[0]["tokens"] == 11


def test_the_rendered_context_is_re_measured_and_shed_from_the_tail():
    def merging(text: str) -> int:  # separators cost more together than one at a time
        return words(text) + text.count("\n\n") ** 2

    a, b, c = unit(0, 3), unit(1, 3), unit(2, 3)  # 5 words each; one separator measures 1
    p = pack([a, b, c], merging, budget=17)  # 5 + 6 + 6 fits as measured, but renders at 19
    assert ids(p.units) == ids([a, b])
    assert p.overflow == [{"unit_id": c.unit_id, "tokens": None, "remaining": None, "reason": "re-measure"}]
    assert p.evidence_tokens == 11 and len(p.blocks) == 2


def test_no_budget_packs_everything_and_top_k_stops_after_k():
    us = [unit(i, 5) for i in range(4)]
    assert ids(pack(us, words, budget=None).units) == ids(us)
    p = pack(us, words, budget=None, top_k=2)
    assert ids(p.units) == ids(us[:2]) and p.overflow == [] and p.evidence_tokens == 14
    assert pack(us, words, budget=None, top_k=0).units == []
    assert pack([], words, budget=10).evidence_tokens == 0
    assert ids(pack(us, words, budget=None).considered) == ids(us)


# ---------------------------------------------------------------------------
# dedup: a source interval is packed once


def test_neighbour_expansion_duplicates_are_packed_once():
    doc = [unit(i, 4) for i in range(4)]  # blocks of 6 words
    expanded, dropped = expand([doc[1], doc[2]], {"d": doc}, 1, frozenset())
    assert ids(expanded) == ids([doc[0], doc[1], doc[2], doc[1], doc[2], doc[3]]) and dropped == []
    p = pack(expanded, words, budget=24)  # room for the four distinct units exactly
    assert ids(p.units) == ids(doc) and p.evidence_tokens == 24
    assert p.overflow == []  # a duplicate is not an overflow
    assert [blk.label for blk in p.blocks] == ["1", "2", "3", "4"]
    assert ids(pack(expanded, words, budget=None, top_k=4).units) == ids(doc)  # duplicates take no slot


def test_dedup_is_by_version_and_interval():
    old, new = unit(0, 4, version="v1"), unit(0, 4, version="v2")  # same offsets, another version
    same = unit(0, 4, version="v1")  # an equal interval from another list
    assert ids(pack([old, new, same], words, budget=None).units) == [old.unit_id, new.unit_id]
    assert len(pack([old, new, same], words, budget=None).blocks) == 2


# ---------------------------------------------------------------------------
# expansion


def test_expansion_stays_inside_the_document_and_drops_other_versions_and_hidden_units():
    doc = [unit(0, 2), unit(1, 2, version="v0"), unit(2, 2), unit(3, 2, access=("legal",)), unit(4, 2)]
    out, dropped = expand([doc[0]], {"d": doc}, 1, frozenset())
    assert ids(out) == [doc[0].unit_id]
    assert dropped == [{"unit_id": doc[1].unit_id, "reason": "version differs from the hit"}]
    out, dropped = expand([doc[4]], {"d": doc}, 2, frozenset())
    assert ids(out) == ids([doc[2], doc[4]])
    assert dropped == [{"unit_id": doc[3].unit_id, "reason": "access label not held by reader"}]
    out, _ = expand([doc[4]], {"d": doc}, 1, frozenset({"legal"}))
    assert ids(out) == ids(doc[3:])
    out, dropped = expand([doc[2]], {"d": doc}, 1, frozenset({"legal"}))  # a dropped unit, then more
    assert ids(out) == ids(doc[2:4])
    assert dropped == [{"unit_id": doc[1].unit_id, "reason": "version differs from the hit"}]
    assert expand([doc[2]], {"d": doc}, 0, frozenset()) == ([doc[2]], [])
    assert expand([unit(9, 1, doc="other")], {"d": doc}, 1, frozenset()) == ([], [])


@pytest.mark.parametrize(
    ("access", "clearance", "seen"),
    [
        ((), frozenset(), True),
        (("legal",), frozenset(), False),
        (("legal",), frozenset({"legal", "hr"}), True),
        (("legal", "hr"), frozenset({"legal"}), False),
    ],
)
def test_visible_needs_every_label(access, clearance, seen):
    assert visible(unit(0, 1, access=access), clearance) is seen


# ---------------------------------------------------------------------------
# what the packed context spends on characters it already holds (overlapping units)

DOC_TEXT = "abcdefghijklmnopqrstuvwxyz"


def span_unit(start: int, end: int, doc: str = "d", version: str = "v1") -> Unit:
    return Unit(f"{doc}@{start}-{end}", doc, version, 0, start, end, DOC_TEXT[start:end], 0, 0, start, end)


def test_repeated_source_tokens_counts_each_overlap_once_per_document_version():
    from ledgerscope.pipeline.ranking.select import repeated_source_tokens

    a, b, inner = span_unit(0, 10), span_unit(5, 15), span_unit(12, 14)
    other_doc, other_version = span_unit(0, 10, doc="e"), span_unit(3, 8, version="v2")
    touching = span_unit(15, 20)
    # b repeats 5 characters of a; inner lies inside b (2); the rest repeat nothing
    units = [touching, inner, other_doc, b, other_version, a]
    assert repeated_source_tokens(units, len) == 7
    assert repeated_source_tokens([a, b], len) == 5
    assert repeated_source_tokens([b, a], len) == 5  # order in the context does not matter
    assert repeated_source_tokens([a, touching, other_doc, other_version], len) == 0
    assert repeated_source_tokens([span_unit(0, 4), span_unit(0, 4)], len) == 4  # a duplicate repeats all
    assert repeated_source_tokens([], len) == 0


def test_pack_itself_withholds_nothing_by_access():
    p = pack([unit(0, 3), unit(1, 3)], words, budget=None)
    assert p.dropped_access == [] and [u.unit_id for u in p.considered] == ids([unit(0, 3), unit(1, 3)])
