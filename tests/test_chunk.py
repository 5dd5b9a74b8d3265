"""Phased chunking as DESIGN.md ("Phases") defines it: cuts, cores, overlap, edge policies,
source intervals, and the sentence chunker's perturbation rule."""

from __future__ import annotations

import re
from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledgerscope.common.intervals import covers
from ledgerscope.common.sentences import split_sentences
from ledgerscope.inputs.sources import make_source
from ledgerscope.pipeline.chunking.chunk import (
    Boundaries,
    chunk_sentences,
    chunk_tokens,
    cut_tokens,
    token_ranges,
)

PROP = settings(max_examples=200, deadline=None)
TEXT_PROP = settings(max_examples=50, deadline=None)


def ws_offsets(text: str) -> list[tuple[int, int]]:
    """A whitespace 'tokenizer': one token per run of non-whitespace."""
    return [m.span() for m in re.finditer(r"\S+", text)]


@pytest.fixture(scope="module")
def counter():
    from ledgerscope.pipeline.embedding.encoder import TokenCounter

    return TokenCounter("bundled:all-MiniLM-L6-v2")


# ---------------------------------------------------------------------------
# cut_tokens


def test_cut_tokens_phase_zero_cuts_at_every_stride():
    assert cut_tokens(10, 4, 0) == [4, 8]
    assert cut_tokens(8, 4, 0) == [4]  # no cut at the document end
    assert cut_tokens(4, 4, 0) == []
    assert cut_tokens(3, 4, 0) == []
    assert cut_tokens(0, 4, 0) == []


def test_cut_tokens_phase_p_puts_the_first_cut_at_p():
    assert cut_tokens(10, 4, 1) == [1, 5, 9]
    assert cut_tokens(10, 4, 3) == [3, 7]
    assert cut_tokens(2, 4, 3) == []
    assert cut_tokens(5, 1, 0) == [1, 2, 3, 4]


@pytest.mark.parametrize(("stride", "phase"), [(4, 4), (4, -1), (1, 1), (0, 0), (-2, 0)])
def test_cut_tokens_rejects_phase_outside_the_stride(stride, phase):
    with pytest.raises(ValueError, match=r"stride|phase"):
        cut_tokens(10, stride, phase)


# ---------------------------------------------------------------------------
# token_ranges: examples


def test_token_ranges_no_overlap():
    assert token_ranges(10, 4, 0, 0) == [(0, 4, 0, 4), (4, 8, 4, 8), (8, 10, 8, 10)]
    assert token_ranges(10, 4, 0, 1) == [(0, 1, 0, 1), (1, 5, 1, 5), (5, 9, 5, 9), (9, 10, 9, 10)]


def test_token_ranges_overlap_extends_cores_by_following_tokens():
    # C=4, O=1, S=3
    assert token_ranges(10, 4, 1, 0) == [(0, 4, 0, 3), (3, 7, 3, 6), (6, 10, 6, 9), (9, 10, 9, 10)]
    assert token_ranges(10, 4, 1, 2) == [(0, 3, 0, 2), (2, 6, 2, 5), (5, 9, 5, 8), (8, 10, 8, 10)]
    # up to O tokens: the unit before a short tail gets only what is left
    assert token_ranges(10, 4, 3, 0) == [(i, min(i + 4, 10), i, i + 1) for i in range(10)]


def test_token_ranges_empty_and_tiny_documents():
    assert token_ranges(0, 4, 1, 0) == []
    assert token_ranges(1, 4, 1, 2) == [(0, 1, 0, 1)]
    assert token_ranges(3, 4, 0, 0) == [(0, 3, 0, 3)]
    assert token_ranges(3, 4, 0, 0, "merge-short") == [(0, 3, 0, 3)]  # nothing to fold into


def test_token_ranges_rejects_overlap_not_below_capacity():
    with pytest.raises(ValueError, match="stride"):
        token_ranges(10, 4, 4, 0)


def test_keep_short_keeps_short_edges():
    assert token_ranges(10, 4, 0, 1, "keep-short")[0] == (0, 1, 0, 1)
    assert token_ranges(10, 4, 0, 1, "keep-short")[-1] == (9, 10, 9, 10)


def test_merge_short_folds_short_edges_into_their_neighbours():
    # cores (0,1) (1,5) (5,9) (9,10): both edges are shorter than S/2 = 2
    assert token_ranges(10, 4, 0, 1, "merge-short") == [(0, 5, 0, 5), (5, 10, 5, 10)]
    # cores (0,2) (2,6) (6,10): an edge of exactly half a stride is not shorter: kept
    assert token_ranges(10, 4, 0, 2, "merge-short") == [(0, 2, 0, 2), (2, 6, 2, 6), (6, 10, 6, 10)]
    # with overlap the merged core still extends by O
    assert token_ranges(10, 4, 1, 1, "merge-short") == [(0, 5, 0, 4), (4, 8, 4, 7), (7, 10, 7, 10)]


def test_merge_short_threshold_is_half_a_stride_for_odd_strides():
    # S = 5: a 2-token edge core is shorter than 2.5 tokens, so it is folded
    assert token_ranges(12, 5, 0, 2, "merge-short") == [(0, 7, 0, 7), (7, 12, 7, 12)]
    # a 3-token edge core is not
    assert token_ranges(13, 5, 0, 3, "merge-short") == [(0, 3, 0, 3), (3, 8, 3, 8), (8, 13, 8, 13)]
    # S = 3: a 1-token tail is folded, cores (0,3) (3,6) (6,7)
    assert token_ranges(7, 3, 0, 0, "merge-short") == [(0, 3, 0, 3), (3, 7, 3, 7)]


def test_merge_short_two_short_cores_become_one():
    assert token_ranges(5, 8, 0, 1, "merge-short") == [(0, 5, 0, 5)]
    assert token_ranges(3, 8, 0, 1, "merge-short") == [(0, 3, 0, 3)]  # still short: nothing left to join


def test_merge_short_keeps_a_tail_of_exactly_half_a_stride():
    # cores (0,2) (2,6) (6,8) with S = 4: both edges are exactly S/2, neither is shorter
    assert token_ranges(8, 4, 0, 2, "merge-short") == [(0, 2, 0, 2), (2, 6, 2, 6), (6, 8, 6, 8)]


def test_cut_tokens_says_what_is_wrong():
    with pytest.raises(ValueError, match=r"^stride must be at least 1$"):
        cut_tokens(10, 0, 0)
    with pytest.raises(ValueError, match=r"^phase 4 must lie in \[0, 4\)$"):
        cut_tokens(10, 4, 4)


def test_leading_whitespace_is_trimmed_from_the_first_unit():
    src = make_source("w.md", "  \n ab cd")
    units, _ = chunk_tokens(src, ws_offsets(src.text), 4, 0, 0)
    assert [(u.start, u.end, u.text) for u in units] == [(4, 9, "ab cd")]


# ---------------------------------------------------------------------------
# token_ranges: properties


@st.composite
def window_params(draw):
    n = draw(st.integers(0, 300))
    capacity = draw(st.integers(1, 40))
    overlap = draw(st.integers(0, capacity - 1))
    phase = draw(st.integers(0, capacity - overlap - 1))
    policy = draw(st.sampled_from(["keep-short", "merge-short"]))
    return n, capacity, overlap, phase, policy


@PROP
@given(window_params())
def test_token_ranges_properties(params):
    n, capacity, overlap, phase, policy = params
    stride = capacity - overlap
    ranges = token_ranges(n, capacity, overlap, phase, policy)
    if n == 0:
        assert ranges == []
        return
    cores = [(cs, ce) for _, _, cs, ce in ranges]
    # cores tile [0, n) exactly, without overlap or gaps
    assert cores[0][0] == 0 and cores[-1][1] == n
    for (_, e1), (s2, _) in pairwise(cores):
        assert e1 == s2
    assert all(cs < ce for cs, ce in cores)
    # units: core extended by up to O following tokens, never past the document
    for us, ue, cs, ce in ranges:
        assert us == cs
        assert ue == min(ce + overlap, n)
        assert 0 <= us < ue <= n
    # every token lies in some unit
    assert set().union(*(range(us, ue) for us, ue, _, _ in ranges)) == set(range(n))
    cuts = [cs for _, _, cs, _ in ranges[1:]]
    all_cuts = cut_tokens(n, stride, phase)
    if policy == "keep-short":
        assert cuts == all_cuts
        assert cores[0][1] - cores[0][0] == min(phase or stride, n)
        for i, (us, ue, cs, ce) in enumerate(ranges):
            assert ue - us <= capacity
            if 0 < i < len(ranges) - 1:
                assert ce - cs == stride
            if ce - cs == stride and ce + overlap <= n:
                assert ue - us == capacity  # interior units have exactly C tokens
    else:
        assert set(cuts) <= set(all_cuts)
        if len(cores) > 1:
            assert 2 * (cores[0][1] - cores[0][0]) >= stride
            assert 2 * (cores[-1][1] - cores[-1][0]) >= stride
        for i, (us, ue, cs, ce) in enumerate(ranges):
            if 0 < i < len(ranges) - 1:
                assert ce - cs == stride
                if ce + overlap <= n:
                    assert ue - us == capacity


# ---------------------------------------------------------------------------
# chunk_tokens with hand-made offsets


def check_units(src, offsets, units, bounds: Boundaries, *, capacity: int | None = None):
    text = src.text
    assert covers(text, 0, len(text), [u.interval for u in units])
    assert len({u.unit_id for u in units}) == len(units)
    assert [u.ordinal for u in units] == list(range(len(units)))
    for u in units:
        assert 0 <= u.start < u.end <= len(text)
        assert u.text == text[u.start : u.end]
        assert u.text == u.text.strip()
        assert u.doc_id == src.doc_id and u.version == src.version and u.access == src.access
        assert u.start <= u.core_start <= u.core_end <= u.end
        assert 0 <= u.token_start <= u.token_end <= len(offsets)
        if capacity is not None:
            assert u.token_end - u.token_start <= capacity
    assert bounds.doc_id == src.doc_id
    assert bounds.n_tokens == len(offsets)
    assert bounds.cut_chars == tuple(offsets[c][0] for c in bounds.cut_tokens)
    assert list(bounds.cut_tokens) == sorted(set(bounds.cut_tokens))


def test_chunk_tokens_whitespace_example():
    src = make_source("d", "a b c d e f g h i j", access=["x"])
    offs = ws_offsets(src.text)
    units, bounds = chunk_tokens(src, offs, 4, 1, 2)
    assert [u.text for u in units] == ["a b c", "c d e f", "f g h i", "i j"]
    assert [(u.token_start, u.token_end) for u in units] == [(0, 3), (2, 6), (5, 9), (8, 10)]
    assert [u.unit_id for u in units] == ["d@0-5", "d@4-11", "d@10-17", "d@16-19"]
    assert [(u.core_start, u.core_end) for u in units] == [(0, 3), (4, 9), (10, 15), (16, 19)]
    assert all(u.access == ("x",) for u in units)
    assert bounds == Boundaries("d", (2, 5, 8), (4, 10, 16), 10)
    check_units(src, offs, units, bounds)


def test_chunk_tokens_keeps_dropped_characters_inside_units():
    # the "tokenizer" drops the zero-width space and the trailing ornament
    text = "ab\u200bcd ef \u2060"
    src = make_source("z", text)
    offs = [(0, 2), (3, 5), (6, 8)]
    units, bounds = chunk_tokens(src, offs, 1, 0, 0)
    assert [u.text for u in units] == ["ab\u200b", "cd", "ef \u2060"]
    assert bounds.cut_tokens == (1, 2) and bounds.cut_chars == (3, 6)
    check_units(src, offs, units, bounds)
    # leading characters before the first token belong to the first unit
    src2 = make_source("z2", "\u200b\u200bab cd")
    units2, _ = chunk_tokens(src2, [(2, 4), (5, 7)], 1, 0, 0)
    assert [u.text for u in units2] == ["\u200b\u200bab", "cd"]


def test_chunk_tokens_whitespace_only_document_has_no_units(counter):
    for text in ["", "   ", " \r\n\t\n "]:
        src = make_source("w", text)
        offs = counter.offsets(text)
        assert offs == []
        assert chunk_tokens(src, offs, 8, 2, 1) == ([], Boundaries("w", (), (), 0))
        assert chunk_sentences(src, offs, 8, 1) == ([], Boundaries("w", (), (), 0))


def test_chunk_tokens_document_of_dropped_characters_is_one_unit(counter):
    text = "\u200b\u200b"
    src = make_source("zw", text)
    offs = counter.offsets(text)
    assert offs == []  # the tokenizer keeps nothing
    for units, bounds in (chunk_tokens(src, offs, 8, 2, 1), chunk_sentences(src, offs, 8, 1)):
        assert [(u.start, u.end, u.text) for u in units] == [(0, 2, text)]
        assert bounds == Boundaries("zw", (), (), 0)
        check_units(src, offs, units, bounds)
    units, _ = chunk_tokens(make_source("zw2", " \u200b\u200b \n"), [], 8, 0, 0)
    assert [(u.start, u.end) for u in units] == [(1, 3)]


def test_chunk_tokens_merge_short_units():
    src = make_source("m", " ".join(f"t{i}" for i in range(10)))
    offs = ws_offsets(src.text)
    units, bounds = chunk_tokens(src, offs, 4, 0, 1, "merge-short")
    assert [(u.token_start, u.token_end) for u in units] == [(0, 5), (5, 10)]
    assert units[0].text == "t0 t1 t2 t3 t4"
    assert bounds.cut_tokens == (5,)
    check_units(src, offs, units, bounds)


def test_chunk_tokens_multi_token_characters_keep_ids_unique(counter):
    # a Hangul syllable yields up to three tokens sharing one start offset, so tiny
    # strides give token ranges with empty or repeated source intervals
    text = "한국어 텍스트"
    src = make_source("k", text)
    offs = counter.offsets(text)
    assert len(offs) > len({s for s, _ in offs})
    for capacity, overlap in [(1, 0), (2, 1), (3, 2), (2, 0)]:
        for phase in range(capacity - overlap):
            units, bounds = chunk_tokens(src, offs, capacity, overlap, phase)
            check_units(src, offs, units, bounds)


UNICODE_DOC = (
    "Caf\u00e9 cre\u0301me br\u00fbl\u00e9e \u2014 na\u00efve r\u00e9sum\u00e9.\r\n"
    "Emoji: \U0001f600\U0001f44d\U0001f3fd and \U0001f469\u200d\U0001f469\u200d\U0001f467 family!\r\n\r\n"
    "Zero\u200bwidth\u200c joiners\u2060here; soft\u00adhyphen, BOM\ufeffinside.\n"
    "\u6771\u4eac \u0645\u0631\u062d\u0628\u0627 \u05e9\u05dc\u05d5\u05dd "
    "\u00a0nbsp\u2028line-sep x\u0301\u0301\n"
)


def test_chunk_tokens_real_tokenizer_unicode(counter):
    src = make_source("u", UNICODE_DOC)
    offs = counter.offsets(src.text)
    assert all(0 <= s < e <= len(src.text) for s, e in offs)
    for capacity, overlap in [(4, 1), (7, 0), (16, 5)]:
        stride = capacity - overlap
        for phase in range(stride):
            for policy in ("keep-short", "merge-short"):
                units, bounds = chunk_tokens(src, offs, capacity, overlap, phase, policy)
                check_units(src, offs, units, bounds)
                if policy == "keep-short":
                    assert list(bounds.cut_tokens) == cut_tokens(len(offs), stride, phase)
                    assert all(u.token_end - u.token_start <= capacity for u in units)
    # dropped characters (combining marks, zero-width, BOM, soft hyphen) are inside some unit
    units, _ = chunk_tokens(src, offs, 3, 0, 1)
    for ch in ["\u0301", "\u200b", "\u200c", "\u2060", "\u00ad", "\ufeff", "\u200d"]:
        i = UNICODE_DOC.index(ch)
        assert any(u.start <= i < u.end for u in units), repr(ch)


# ---------------------------------------------------------------------------
# properties over real text and the real tokenizer

PIECES = [
    "word",
    "Ledger",
    "naïve",
    "Straße",
    "résumé",
    "e\u0301",
    "x\u0301\u0308",
    "東京",
    "한국",
    "مرحبا",
    "\U0001f600",
    "\U0001f44d\U0001f3fd",
    "\U0001f469\u200d\U0001f467",
    "\u200b",
    "\u200c",
    "\u2060",
    "\ufeff",
    "\u00ad",
    "3.5",
    "e.g.",
    "U.S.",
    "1.",
    "-",
    "•",
    "#",
    ".",
    "!",
    "?",
    ",",
    ";",
    '"',
    "”",
    "(",
    ")",
    "…",
    " ",
    " ",
    " ",
    "  ",
    "\t",
    "\n",
    "\r\n",
    "\n\n",
    "\r\n\r\n",
    "\u00a0",
    "\u2028",
]
texts = st.lists(st.sampled_from(PIECES), max_size=60).map("".join)


@TEXT_PROP
@given(texts, st.integers(1, 12), st.data())
def test_token_chunker_properties_on_real_text(counter, text, capacity, data):
    overlap = data.draw(st.integers(0, capacity - 1))
    src = make_source("doc", text, access=["a"])
    offs = counter.offsets(text)
    stride = capacity - overlap
    for phase in range(stride):
        for policy in ("keep-short", "merge-short"):
            units, bounds = chunk_tokens(src, offs, capacity, overlap, phase, policy)
            check_units(src, offs, units, bounds)
            if policy == "keep-short":
                assert list(bounds.cut_tokens) == cut_tokens(len(offs), stride, phase)
            else:
                assert set(bounds.cut_tokens) <= set(cut_tokens(len(offs), stride, phase))
            if not text.strip():
                assert units == []


@TEXT_PROP
@given(texts, st.integers(1, 12))
def test_sentence_chunker_properties_on_real_text(counter, text, capacity):
    src = make_source("doc", text)
    offs = counter.offsets(text)
    for phase in range(4):
        units, bounds = chunk_sentences(src, offs, capacity, phase)
        check_units(src, offs, units, bounds, capacity=capacity)
        # the recorded cuts tile the tokens into groups of at most `capacity`; each unit is one
        # group (a group whose interval is empty or repeats the previous one is skipped)
        if offs:
            edges = [0, *bounds.cut_tokens, len(offs)]
            groups = list(pairwise(edges))
            assert all(0 < b - a <= capacity for a, b in groups)
            assert {(u.token_start, u.token_end) for u in units} <= set(groups)
            assert units[-1].token_end == len(offs)


# ---------------------------------------------------------------------------
# sentence chunker

SENT_DOC = "One two three. Four five. Six seven eight nine. Ten."  # 3, 2, 4, 1 tokens


def sentence_units(text, capacity, phase):
    src = make_source("s", text)
    offs = ws_offsets(text)
    units, bounds = chunk_sentences(src, offs, capacity, phase)
    check_units(src, offs, units, bounds, capacity=capacity)
    return [u.text for u in units], bounds


def test_sentence_chunker_packs_whole_sentences_greedily():
    texts_, bounds = sentence_units(SENT_DOC, 6, 0)
    assert texts_ == ["One two three. Four five.", "Six seven eight nine. Ten."]
    assert bounds.cut_tokens == (5,) and bounds.cut_chars == (SENT_DOC.index("Six"),)
    assert sentence_units(SENT_DOC, 100, 0)[0] == [SENT_DOC]


@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_sentence_phase_k_isolates_the_first_k_sentences(k):
    sents = [SENT_DOC[s:e] for s, e in split_sentences(SENT_DOC)]
    assert len(sents) == 4
    texts_, _ = sentence_units(SENT_DOC, 100, k)
    assert texts_[0] == " ".join(sents[:k])
    assert " ".join(texts_) == SENT_DOC


def test_sentence_phase_beyond_the_sentence_count_is_the_whole_document():
    assert sentence_units(SENT_DOC, 100, 9)[0] == [SENT_DOC]


def test_sentence_phases_shift_the_packing():
    assert sentence_units(SENT_DOC, 6, 1)[0] == ["One two three.", "Four five. Six seven eight nine.", "Ten."]
    assert sentence_units(SENT_DOC, 6, 2)[0] == ["One two three. Four five.", "Six seven eight nine. Ten."]
    # the first three sentences (9 tokens) exceed capacity: packed on their own, cut after them
    assert sentence_units(SENT_DOC, 6, 3)[0] == ["One two three. Four five.", "Six seven eight nine.", "Ten."]


def test_long_sentence_is_split_by_token_window():
    text = "Short one. a b c d e f g h i j. Tail."
    texts_, bounds = sentence_units(text, 4, 0)
    assert texts_ == ["Short one.", "a b c d", "e f g h", "i j.", "Tail."]
    assert bounds.cut_tokens == (2, 6, 10, 12)


def test_isolated_first_sentences_never_exceed_capacity():
    # the first two sentences hold 6 tokens, more than capacity 4: they are packed on
    # their own (one unit each here), and a cut still falls after sentence 2
    text = "a b c. d e f. g h."
    texts_, bounds = sentence_units(text, 4, 2)
    assert texts_ == ["a b c.", "d e f.", "g h."]
    assert 6 in bounds.cut_tokens
    texts_, _ = sentence_units("a b c d e f g. h i.", 4, 1)
    assert texts_ == ["a b c d", "e f g.", "h i."]


def test_sentence_chunker_real_tokenizer_unicode(counter):
    src = make_source("u", UNICODE_DOC)
    offs = counter.offsets(src.text)
    for capacity in (3, 8, 64):
        for phase in range(5):
            units, bounds = chunk_sentences(src, offs, capacity, phase)
            check_units(src, offs, units, bounds, capacity=capacity)


# ---------------------------------------------------------------------------
# tokenizers that emit whitespace tokens, and the chunkers an arm names


def test_a_trailing_whitespace_token_alone_in_a_window_makes_no_unit():
    # a tokenizer that keeps the final newline as a token: the last window holds only it
    text = "a b c\n"
    src = make_source("nl", text)
    offs = [(0, 1), (2, 3), (4, 5), (5, 6)]
    units, bounds = chunk_tokens(src, offs, 3, 0, 0)
    assert [u.text for u in units] == ["a b c"]
    assert bounds == Boundaries("nl", (3,), (5,), 4)
    check_units(src, offs, units, bounds)


def test_a_whitespace_token_between_sentences_joins_the_sentence_before_it():
    # "\n\n" is a token of its own, lying between two sentences: the sentence ranges still
    # tile every token, the units are still whole sentences, and the blank line counts
    # against the first sentence's capacity
    text = "One two.\n\nThree four."
    src = make_source("gap", text)
    offs = [(0, 3), (4, 7), (7, 8), (8, 10), (10, 15), (16, 20), (20, 21)]
    units, bounds = chunk_sentences(src, offs, 4, 0)
    assert [(u.token_start, u.token_end, u.text) for u in units] == [
        (0, 4, "One two."),
        (4, 7, "Three four."),
    ]
    assert bounds == Boundaries("gap", (4,), (10,), 7)
    check_units(src, offs, units, bounds, capacity=4)
    # capacity 3 cannot hold the first sentence with its blank line: it is split by window
    units, bounds = chunk_sentences(src, offs, 3, 0)
    assert [(u.token_start, u.token_end) for u in units] == [(0, 3), (4, 7)]
    assert bounds.cut_tokens == (3, 4)


def test_a_document_whose_only_token_starts_in_whitespace_is_one_unit():
    # a leading-space token (" x.") starts before the only sentence: no sentence holds a token start
    text = " x."
    src = make_source("lead", text)
    for phase in (0, 1):
        units, bounds = chunk_sentences(src, [(0, 3)], 4, phase)
        assert [(u.start, u.end, u.text, u.token_start, u.token_end) for u in units] == [(1, 3, "x.", 0, 1)]
        assert bounds == Boundaries("lead", (), (), 1)


def test_the_arm_chunkers_apply_their_settings():
    from ledgerscope.pipeline.chunking.chunk import SentenceChunker, TokenChunker

    src = make_source("d", " ".join(f"t{i}" for i in range(10)), access=["x"])
    offs = ws_offsets(src.text)
    units, bounds = TokenChunker(4, 1).chunk(src, offs, 2)
    assert [(u.token_start, u.token_end) for u in units] == [(0, 3), (2, 6), (5, 9), (8, 10)]
    assert bounds == Boundaries("d", (2, 5, 8), tuple(offs[c][0] for c in (2, 5, 8)), 10)
    assert all(u.access == ("x",) for u in units)
    units, _ = TokenChunker(4, 0, "merge-short").chunk(src, offs, 1)
    assert [(u.token_start, u.token_end) for u in units] == [(0, 5), (5, 10)]
    assert TokenChunker(4, 0).edge_policy == "keep-short"
    units, _ = TokenChunker(4, 0).chunk(src, offs, 1)
    assert [(u.token_start, u.token_end) for u in units] == [(0, 1), (1, 5), (5, 9), (9, 10)]

    sents = make_source("s", SENT_DOC)
    offs = ws_offsets(SENT_DOC)
    units, bounds = SentenceChunker(6).chunk(sents, offs, 1)
    assert [u.text for u in units] == ["One two three.", "Four five. Six seven eight nine.", "Ten."]
    assert bounds == Boundaries("s", (3, 9), (SENT_DOC.index("Four"), SENT_DOC.index("Ten")), 10)
