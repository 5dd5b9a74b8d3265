"""fuse.py: RRF, CombSUM and CombMNZ on hand-built ranked lists."""

from __future__ import annotations

import pytest

from ledgerscope.pipeline.ranking.fuse import fuse

#: the best unit is not the lowest index, and RRF ranks 4 above 1 where CombSUM ties them (1 first)
RUNS = {"bm25": [(7, 9.0), (3, 5.0), (1, 1.0)], "dense": [(3, 0.9), (4, 0.8)]}


def test_rrf_sums_reciprocal_ranks_from_one():
    got = fuse(RUNS, "rrf", k=60)
    assert [i for i, _ in got] == [3, 7, 4, 1]
    assert dict(got) == pytest.approx({3: 1 / 62 + 1 / 61, 7: 1 / 61, 4: 1 / 62, 1: 1 / 63})
    assert fuse(RUNS) == got  # rrf with k = 60 by default


def test_rrf_weights_and_k():
    got = dict(fuse(RUNS, "rrf", k=0, weights={"dense": 2.0}))
    assert got == pytest.approx({3: 1 / 2 + 2 / 1, 7: 1.0, 1: 1 / 3, 4: 2 / 2})


def test_ties_break_by_unit_index():
    runs = {"a": [(5, 1.0), (2, 0.5)], "b": [(2, 1.0), (5, 0.5)]}
    assert [i for i, _ in fuse(runs, "rrf")] == [2, 5]
    assert [i for i, _ in fuse(runs, "combsum")] == [2, 5]
    assert [i for i, _ in fuse({"a": [(9, 1.0)], "b": [(4, 1.0)]}, "rrf")] == [4, 9]


def test_combsum_adds_min_max_normalised_scores():
    got = fuse(RUNS, "combsum")
    assert [i for i, _ in got] == [3, 7, 1, 4]
    assert dict(got) == pytest.approx({3: 0.5 + 1.0, 7: 1.0, 1: 0.0, 4: 0.0})


def test_combsum_of_equal_scores_and_weights():
    got = dict(fuse({"a": [(1, 2.0), (2, 2.0)], "b": [(2, 4.0), (3, 1.0)]}, "combsum", weights={"b": 3.0}))
    assert got == pytest.approx({1: 0.0, 2: 3.0, 3: 0.0})  # a's span is 0: divided by 1


def test_combmnz_multiplies_by_the_number_of_runs_that_returned_the_unit():
    sums, mnz = dict(fuse(RUNS, "combsum")), dict(fuse(RUNS, "combmnz"))
    assert mnz == pytest.approx({3: 2 * sums[3], 7: sums[7], 1: 0.0, 4: 0.0})
    assert mnz[3] == pytest.approx(3.0)


def test_empty_runs_fuse_to_nothing():
    assert fuse({}, "rrf") == []
    assert fuse({"a": []}, "combsum") == []
    assert fuse({"a": [], "b": [(1, 0.5)]}, "combmnz") == [(1, 0.0)]


NAN = float("nan")


def test_nan_scores_keep_a_deterministic_order():
    # a run whose scores are all NaN keeps the retriever's own order
    got = fuse({"a": [(2, NAN), (1, NAN)]}, "combsum")
    assert [i for i, _ in got] == [2, 1] and all(v != v for _, v in got)
    # beside a NaN, the other units still rank by score, ties by unit index
    got = fuse({"a": [(5, 0.5), (4, 0.5), (6, 0.9), (8, 0.1)], "b": [(7, NAN)]}, "combsum")
    assert [i for i, _ in got][:4] == [6, 4, 5, 8]
    assert got[4][0] == 7 and got[4][1] != got[4][1]
