"""The cascade's vectorised and memoised paths give the very bits of the loops they replace."""

from __future__ import annotations

import gc

import numpy as np

from ledgerscope.common.pair_memo import PairMemo
from ledgerscope.pipeline.generation.reader import sentence_similarities
from ledgerscope.pipeline.ranking.lexical import top_k
from ledgerscope.pipeline.ranking.rerank import column_means, maxsim_many


def _tokens(rng: np.random.Generator, n: int) -> np.ndarray:
    x = rng.standard_normal((n, 32)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_column_means_match_mean_bit_for_bit() -> None:
    rng = np.random.default_rng(0)
    for m in (1, 2, 7, 8, 9, 15, 16, 17, 127, 128, 129, 300):
        maxes = (rng.standard_normal((m, 5)) ** 3).astype(np.float32)
        want = np.array([maxes[:, j].mean() for j in range(5)])
        assert np.array_equal(column_means(maxes), want)


def test_maxsim_many_matches_the_per_unit_loop() -> None:
    rng = np.random.default_rng(1)
    q = _tokens(rng, 13)
    units = [_tokens(rng, int(n)) for n in rng.integers(1, 60, 20)] + [np.zeros((0, 32), np.float32)]
    want = np.array([np.dot(q, t.T).max(axis=1).mean() if len(t) else 0.0 for t in units])
    got = maxsim_many(q, units)
    assert got.dtype == np.float64 and np.array_equal(got, want)


def test_sentence_similarities_match_the_per_sentence_loop() -> None:
    rng = np.random.default_rng(2)
    q, tokens = _tokens(rng, 9), _tokens(rng, 40)
    for ranges in ([(0, 5), (5, 5), (7, 12), (12, 40)], [(0, 40)], [(3, 3)], [(0, 10), (10, 20)], []):
        r = np.array(ranges, dtype=np.int64).reshape(-1, 2)
        want = np.zeros(len(r))
        for k, (a, b) in enumerate(r):
            if b > a:
                want[k] = (q @ tokens.T)[:, a:b].max(axis=1).mean()
        assert np.array_equal(sentence_similarities(q, tokens, r), want)


def test_top_k_matches_a_full_sort_with_ties() -> None:
    rng = np.random.default_rng(3)
    for scores in (rng.integers(0, 4, 500).astype(float), rng.standard_normal(800), np.zeros(300)):
        for k in (1, 10, 50):
            order = np.lexsort((np.arange(len(scores)), -scores))[:k]
            order = order[scores[order] > 0]
            idx, s = top_k(scores, k, drop_nonpositive=True)
            assert np.array_equal(idx, order) and np.array_equal(s, scores[order])


def test_pair_memo_counts_only_for_the_same_live_arrays() -> None:
    memo = PairMemo()
    a, b = np.ones(3), np.ones(3)
    memo.put("q", "t", a, b, 1.5)
    assert memo.get("q", "t", a, b) == 1.5
    assert memo.get("q", "t", a, np.ones(3)) is None  # re-encoded: computed afresh
    del b
    gc.collect()
    assert memo.get("q", "t", a, np.ones(3)) is None


def test_a_memo_entry_leaves_when_its_arrays_are_freed() -> None:
    """A sweep drops each partition's vectors once it is written; the memos must not keep the
    pairs of every partition (165k dead entries per arm over the 10 x bench corpus)."""
    memo = PairMemo()
    q = np.ones(3)
    units = [np.ones(3) for _ in range(5)]
    for i, u in enumerate(units):
        memo.put("q", f"t{i}", q, u, float(i))
    newer = np.ones(3)
    memo.put("q", "t0", q, newer, 9.0)  # re-encoded t0: the old array's death must not remove it
    del units[:3], u
    gc.collect()
    assert len(memo) == 3 and memo.get("q", "t0", q, newer) == 9.0
    assert [memo.get("q", f"t{i}", q, units[i - 3]) for i in (3, 4)] == [3.0, 4.0]
