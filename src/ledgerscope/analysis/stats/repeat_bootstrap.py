"""The paired bootstrap when the generator was asked K times per record (``sweep --repeats K``).

A replicate draws the resampling units exactly as :func:`.bootstrap.paired_bootstrap_many` does (the
same seeded stream, in the same chunks), and then, per arm and per question, one of that
question's repeats uniformly (:func:`repeat_draw`, from a second stream of the same seed): every
metric of an arm reads the same repeat of a question (a repeat is one whole answer), the two arms
draw apart (their repeats are independent runs). The replicate's statistics are those of the
resampled questions with the drawn answers, so the interval carries the run-to-run noise of the
answers besides the sampling of questions; the point estimate stays repeat 0's (the ``records``
table's), so it agrees with every phase table.

With one repeat per question the draw picks repeat 0 every time and every number equals
:func:`.bootstrap.paired_bootstrap_many`'s with the same seed (a test holds it, bit for bit, on 0/1
outcomes and counts: their sums are exact in any order). Pure numpy.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from ledgerscope.analysis.stats.bootstrap import check_arguments, summarise
from ledgerscope.analysis.stats.metrics import DEFAULT_STATISTICS
from ledgerscope.analysis.stats.resampling import counts, question_columns, replicate_statistics, selection

#: the repeat draw's stream: the bootstrap's seed with this spawn key (the unit draw keeps its own)
REPEAT_STREAM = 0x7E9EA7

#: replicates per piece of arithmetic (the unit draw keeps its own chunks)
PIECE = 256


def repeat_draw(
    n_repeats: np.ndarray | int, n_questions: int, n_replicates: int, rng: np.random.Generator
) -> np.ndarray:
    """(replicates x questions) repeat indices, each uniform over its question's ``n_repeats``
    (an int, or one per question); all 0 where a question has one repeat."""
    k = np.broadcast_to(np.asarray(n_repeats, dtype=np.int64), (n_questions,))
    if (k < 1).any():
        raise ValueError("every question needs at least one repeat")
    picks = np.floor(rng.random((n_replicates, n_questions)) * k).astype(np.intp)
    return np.minimum(picks, k - 1)  # a draw of exactly 1.0 - ulp times k cannot reach k; kept safe


def pick(stack: np.ndarray, picks: np.ndarray) -> np.ndarray:
    """``stack`` (repeats x questions x phases) read at each replicate's drawn repeat per question:
    (replicates x questions x phases)."""
    return stack[picks, np.arange(stack.shape[1])[None, :]]


def _stacks(
    pairs: Mapping[str, tuple[Any, Any, bool]], n_q: int, n_p: int
) -> tuple[list[np.ndarray], np.ndarray, tuple[int, int]]:
    """Every block's stack (candidate ``2 i``, baseline ``2 i + 1``), its direction, and each arm's K."""
    stacks, hib = [], []
    for name, (c, b, h) in pairs.items():
        for x in (c, b):
            s = np.asarray(x, dtype=float)
            if s.ndim != 3 or s.shape[1:] != (n_q, n_p) or s.shape[0] < 1:
                raise ValueError(f"{name}: repeats must be (K x {n_q} x {n_p}), got {s.shape}")
            stacks.append(s)
        hib += [bool(h), bool(h)]
    ks = tuple({s.shape[0] for s in stacks[arm::2]} for arm in (0, 1))
    if any(len(k) != 1 for k in ks):
        raise ValueError("every metric of an arm must have the same number of repeats")
    return stacks, np.asarray(hib), (ks[0].pop(), ks[1].pop())


def _aggregates(
    q_cols: list[np.ndarray],
    ks: tuple[int, int],
    unit_of: np.ndarray,
    n_units: int,
    *,
    n_resamples: int,
    seed: int,
    chunk: int,
) -> Iterator[tuple[slice, np.ndarray]]:
    """(replicate columns, aggregates x replicates) piece by piece: the units drawn as
    :class:`.passes.Pass` draws them (``chunk``: its ``chunk_elements``), then one repeat per arm and
    question; each block's columns (``q_cols``: repeats x questions x columns, candidate blocks
    even) summed over the questions with the units' multiplicities."""
    n_q = q_cols[0].shape[1]
    units_rng = np.random.Generator(np.random.PCG64(seed))
    repeats_rng = np.random.default_rng([seed, REPEAT_STREAM])
    step = max(1, chunk // n_units)
    for lo in range(0, n_resamples, step):
        hi = min(n_resamples, lo + step)
        idx = units_rng.integers(0, n_units, size=(hi - lo, n_units), dtype=np.int32)  # the unit draw
        for a in range(0, hi - lo, PIECE):
            w: np.ndarray = counts(idx[a : a + PIECE], n_units).astype(np.float64)[:, unit_of]  # per question
            picks = [repeat_draw(k, n_q, len(w), repeats_rng) for k in ks]
            agg = np.concatenate(
                [np.einsum("bq,bqc->cb", w, pick(q, picks[j % 2])) for j, q in enumerate(q_cols)]
            )
            yield slice(lo + a, lo + a + len(w)), agg


def _in_block_order(
    reps: dict[str, Any], which: dict[str, Any], point: tuple[Any, Any], at_row: np.ndarray
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Replicates, their phases and the point statistics with the blocks back in their own order
    (candidate ``2 i``, baseline ``2 i + 1``), as :meth:`.passes.Pass.result` gives them."""
    return (
        {s: v[at_row] for s, v in reps.items()},
        {s: v[at_row] for s, v in which.items()},
        {s: v[at_row, 0] for s, v in point[0].items()},
        {s: v[at_row, 0] for s, v in point[1].items()},
    )


def paired_bootstrap_repeats(
    pairs: Mapping[str, tuple[np.ndarray, np.ndarray, bool]],
    clusters: np.ndarray | None = None,
    *,
    n_resamples: int = 10_000,
    seed: int = 0,
    confidence: float = 0.95,
    statistics: Sequence[str] = DEFAULT_STATISTICS,
    phase_labels: Sequence[str] | None = None,
    chunk_elements: int = 1_000_000,
    return_replicates: bool = False,
) -> dict[str, dict[str, Any]]:
    """:func:`.bootstrap.paired_bootstrap_many` over repeats, a drop-in (its keywords; K = 1 equals it):
    ``pairs`` maps a metric to ``(candidate, baseline, higher_is_better)``, each a (repeats x questions
    x phases) stack (repeat 0 first: the records). Each metric's result adds ``repeats`` (K per arm)."""
    if not pairs:
        return {}
    first = {k: (np.asarray(c)[0], np.asarray(b)[0], h) for k, (c, b, h) in pairs.items()}
    mats, labels, unit_of, n_units = check_arguments(first, clusters, confidence, statistics, phase_labels)
    if n_resamples < 1:
        raise ValueError("n_resamples must be at least 1")
    n_q, n_p = next(iter(mats.values()))[0].shape
    stacks, hib, ks = _stacks(pairs, n_q, n_p)
    order = np.argsort(~hib, kind="stable")  # higher-is-better blocks first, as a Pass orders them
    at_row = np.argsort(order)
    sel, parts = selection(order, n_p, statistics)
    q_cols = [np.stack([question_columns(r, h) for r in s]) for s, h in zip(stacks, hib, strict=True)]
    everything = np.concatenate([q.ravel() for q in q_cols])
    finite = bool(np.isfinite(n_units * np.abs(everything).max(initial=0.0)))
    args = (int(hib.sum()), tuple(statistics), finite, finite and bool(everything.min(initial=0.0) >= 0))
    totals = np.concatenate([q[0].sum(axis=0) for q in q_cols])  # repeat 0: the records
    point = replicate_statistics(totals[sel][:, None], parts, *args)
    reps = {s: np.empty((len(hib), n_resamples)) for s in statistics}
    which: dict[str, np.ndarray] = {s: np.empty((len(hib), n_resamples), dtype=np.int64) for s in point[1]}
    draws = _aggregates(
        q_cols, ks, unit_of, n_units, n_resamples=n_resamples, seed=seed, chunk=chunk_elements
    )
    for cols, agg in draws:
        vals, wh = replicate_statistics(agg[sel], parts, *args)
        for s, v in vals.items():
            reps[s][:, cols] = v
        for s, v in wh.items():
            which[s][:, cols] = v
    result = _in_block_order(reps, which, point, at_row)
    out = summarise(
        mats,
        labels,
        result,
        n_units=n_units,
        clustered=clusters is not None,
        n_resamples=n_resamples,
        seed=seed,
        confidence=confidence,
        statistics=statistics,
        injected=False,
        return_replicates=return_replicates,
    )
    for entry in out.values():
        entry["repeats"] = {"candidate": int(ks[0]), "baseline": int(ks[1])}
    return out
