"""The replicates of the paired bootstrap, exactly and fast (the arithmetic behind
:func:`ledgerscope.analysis.stats.bootstrap.paired_bootstrap_many`; no Textual, no DuckDB).

A *problem* is one set of questions and several metrics. Each (metric, arm) is a *block*;
per resampling unit, a block's columns hold its per-phase sums and counts and its
per-question worst and best sums and counts (:func:`question_columns`): the unit matrix.
A replicate's aggregates are ``W @ unit_matrix`` for its multiplicity row ``W``, and its
statistics follow per block. Problems resampling as many units with one seed draw the same
multiplicities, so a :class:`~ledgerscope.analysis.stats.passes.Pass` takes them together:
one draw, one product, one pass of the statistics over every block.

Every number equals the straightforward per-block computation, bit for bit:

* when every entry of the unit matrix is an integer and no aggregate can reach 2**53, each
  aggregate is an exact integer whatever the order of summation, so identical columns are
  multiplied once and in float32 where no aggregate can pass 2**24 (otherwise the float64
  product of the whole matrix runs in the original chunks, the same rounding);
* the mean over phases sums in numpy's pairwise order (:func:`phase_sum`, checked against
  ``np.add.reduce`` once per number of phases), minima and maxima are order-free, and the
  first phase attaining one is the one ``np.argmin`` returns;
* the draw is ``Generator(PCG64(seed)).integers(0, units, (replicates, units))`` in the
  original chunks; int32 draws below 2**32 are that int64 stream (one 32-bit output per draw).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

#: statistics computed from the per-phase sums and counts
PHASE_STATISTICS = frozenset({"mean", "pooled_mean", "worst_aggregate", "best_aggregate"})

#: replicates per piece: one product and one pass of the statistics, their temporaries in cache
SUB = 1024

#: draws kept for sharing at most (replicates x units), 64 MiB as float32
CACHE_ELEMENTS = 1 << 24


def per_question_extreme(m: np.ndarray, worst: bool, higher_is_better: bool) -> np.ndarray:
    """Each question's worst (or best) applicable phase value; NaN for an all-NaN row."""
    use_min = worst == higher_is_better
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmin(m, axis=1) if use_min else np.nanmax(m, axis=1)


def question_columns(x: np.ndarray, higher_is_better: bool) -> np.ndarray:
    """Per question: phase values (NaN -> 0), phase counts, worst sum/count, best sum/count."""
    valid = ~np.isnan(x)
    worst = per_question_extreme(x, True, higher_is_better)
    best = per_question_extreme(x, False, higher_is_better)
    defined = valid.any(axis=1)
    return np.column_stack(
        [
            np.where(valid, x, 0.0),
            valid.astype(float),
            np.where(defined, worst, 0.0),
            defined.astype(float),
            np.where(defined, best, 0.0),
            defined.astype(float),
        ]
    )


def units(clusters: np.ndarray | None, n_questions: int) -> tuple[np.ndarray, int]:
    """Each question's resampling unit (sorted distinct cluster ids, or the question) and their number."""
    if clusters is None:
        return np.arange(n_questions), n_questions
    cl = np.asarray(clusters, dtype=object)
    if cl.shape != (n_questions,):
        raise ValueError(f"clusters has shape {cl.shape}, expected ({n_questions},)")
    keys, inverse = np.unique(cl.astype(str), return_inverse=True)
    return inverse.ravel(), len(keys)


def unit_sums(rows: np.ndarray, unit_of: np.ndarray, n_units: int) -> np.ndarray:
    """Rows summed per unit: ``np.add.at`` into zeros, bit for bit. Integer rows whose sums stay
    exact are summed segment by segment (any order gives them), others by ``np.add.at``."""
    if np.array_equal(rows, np.round(rows)) and np.abs(rows).sum(axis=0).max(initial=0.0) < 2.0**52:
        order = np.argsort(unit_of, kind="stable")
        starts = np.flatnonzero(np.diff(unit_of[order], prepend=-1))
        return np.add.reduceat(rows[order], starts, axis=0) + 0.0  # + 0.0: no -0.0, as from zeros
    out = np.zeros((n_units, rows.shape[1]))
    np.add.at(out, unit_of, rows)
    return out


def selection(order: np.ndarray, n_phases: int, wanted: Iterable[str]) -> tuple[np.ndarray, dict[str, Any]]:
    """The unit-matrix columns the statistics read, phase-major, and each part's positions in them.

    A block owns ``2 p + 4`` columns: phase sums, phase counts, worst sum/count, best
    sum/count. Parts: ``sums``, ``counts`` (phases x blocks), ``worst``, ``best`` (sum, count
    x blocks), each ``(positions, shape)``; the blocks in ``order``.
    """
    p, w = n_phases, 2 * n_phases + 4
    start = np.asarray(order) * w
    cols = {
        "sums": np.arange(p)[:, None] + start,
        "counts": p + np.arange(p)[:, None] + start,
        "worst": 2 * p + np.arange(2)[:, None] + start,
        "best": 2 * p + 2 + np.arange(2)[:, None] + start,
    }
    names = (["sums", "counts"] if set(wanted) & PHASE_STATISTICS else []) + [
        k for k in ("worst", "best") if f"{k}_per_question" in wanted
    ]
    parts, at = {}, 0
    for k in names:
        parts[k] = (np.arange(at, at + cols[k].size), cols[k].shape)
        at += cols[k].size
    return np.concatenate([cols[k].ravel() for k in names] or [np.zeros(0, dtype=int)]), parts


def _pairwise(x: np.ndarray) -> np.ndarray:
    """Sum over axis 0 in numpy's pairwise order (``pairwise_sum`` in numpy's loops_utils)."""
    n = x.shape[0]
    if n < 8:
        res = x[0].copy()
        for i in range(1, n):
            res += x[i]
        return res
    if n <= 128:
        r = [x[j] for j in range(8)]
        i = 8
        if n >= 16:
            r = [a.copy() for a in r]
        while i < n - n % 8:
            for j in range(8):
                r[j] += x[i + j]
            i += 8
        res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
        for k in range(i, n):
            res += x[k]
        return res
    half = n // 2 - (n // 2) % 8
    return _pairwise(x[:half]) + _pairwise(x[half:])


#: per number of phases, whether the pairwise sum matches numpy's (one bool per length ever seen)
_SAME_ORDER: dict[int, bool] = {}


def phase_sum(x: np.ndarray) -> np.ndarray:
    """``np.add.reduce`` over the phases (axis 0) with the rounding of a reduce over a contiguous
    last axis (as ``np.nanmean`` of a questions x phases matrix sums), checked once per length."""
    n = x.shape[0]
    if n not in _SAME_ORDER:
        probe = np.random.Generator(np.random.PCG64(n)).standard_normal((n, 64)) * np.logspace(-9, 9, 64)
        _SAME_ORDER[n] = np.array_equal(_pairwise(probe), np.add.reduce(probe.T.copy(), axis=1))
    return _pairwise(x) if _SAME_ORDER[n] else np.add.reduce(np.moveaxis(x, 0, -1).copy(), axis=-1)


def _extreme(
    per_phase: np.ndarray,
    low: slice,
    high: slice,
    fill: np.ndarray | None,
    out: np.ndarray,
    which: np.ndarray,
) -> None:
    """``out``: the minimum over the phases (NaN ignored) of the blocks in ``low``, the maximum of
    those in ``high``; ``which``: the first phase attaining it (as ``np.argmin`` of the values,
    NaN filled with ``fill``), -1 where every phase is NaN."""
    for blocks, extreme in ((low, np.fmin), (high, np.fmax)):
        if blocks.start != blocks.stop:
            o = out[blocks]
            np.copyto(o, per_phase[0, blocks])
            for j in range(1, len(per_phase)):
                extreme(o, per_phase[j, blocks], out=o)
    key = per_phase if fill is None else np.where(np.isnan(per_phase), fill, per_phase)
    which.fill(-1)
    for j in range(len(per_phase) - 1, -1, -1):
        np.putmask(which, key[j] == out, j)


def replicate_statistics(
    agg: np.ndarray,
    parts: dict[str, Any],
    n_higher: int,
    wanted: Iterable[str],
    finite: bool = True,
    nonneg: bool = False,
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Statistics of every block per replicate column of ``agg`` (aggregates x replicates; ``parts``:
    the rows and shape of each part, as :func:`selection`): ``{name: (blocks x replicates)}``,
    plus the phase index (-1: none) that attains each ``*_aggregate``. The first ``n_higher``
    blocks are higher-is-better. Each equals the per-block computation on a replicates x phases
    matrix (``np.nanmean``, ``np.nanmin``/``np.nanmax``, ``np.argmin`` of the NaN-filled), bit for
    bit. ``finite``: no aggregate is infinite (a phase is NaN exactly when its count is 0);
    ``nonneg``: no sum is negative.
    """
    f8 = np.float64
    part = {k: agg[rows].reshape(*shape, agg.shape[1]) for k, (rows, shape) in parts.items()}
    out: dict[str, np.ndarray] = {}
    which: dict[str, np.ndarray] = {}
    with np.errstate(divide="ignore", invalid="ignore"):
        if "sums" in part:
            sums, counts = part["sums"], part["counts"]
            per_phase = np.divide(sums, counts, dtype=f8)  # phases x blocks x replicates, NaN: no record
            n_blocks = per_phase.shape[1]
        for name in wanted:
            if name == "mean":
                out[name] = _phase_mean(per_phase, sums, counts, finite, nonneg)
            elif name == "pooled_mean":
                out[name] = phase_sum(sums.astype(f8)) / phase_sum(counts.astype(f8))
            elif name in ("worst_aggregate", "best_aggregate"):
                higher, lower = slice(0, n_higher), slice(n_higher, n_blocks)
                low, high = (higher, lower) if name == "worst_aggregate" else (lower, higher)
                fill = None
                if not finite:  # NaN phases rank after an infinite value
                    fill = np.full((n_blocks, 1), -np.inf)
                    fill[low] = np.inf
                out[name] = np.empty(per_phase.shape[1:])
                which[name] = np.empty(per_phase.shape[1:], dtype=np.int64)
                _extreme(per_phase, low, high, fill, out[name], which[name])
            elif name in ("worst_per_question", "best_per_question"):
                total, n = part[name.split("_", 1)[0]]
                out[name] = np.divide(total, n, dtype=f8)
            else:
                raise ValueError(f"unknown statistic {name!r}")
    return out, which


def _phase_mean(
    per_phase: np.ndarray, sums: np.ndarray, counts: np.ndarray, finite: bool, nonneg: bool
) -> np.ndarray:
    """The mean over phases per (block, replicate): NaN phases are 0 in the sum and left out of the
    count. With few phases and finite aggregates the count is summed as uint8 rows and the values
    taken without a NaN mask (the same numbers, less memory traffic)."""
    if finite and len(counts) < 256:
        has = (counts > 0).view(np.uint8)
        n_ok = has[0].copy()
        for j in range(1, len(has)):
            n_ok += has[j]
        values = (
            np.fmax(per_phase, 0.0) if nonneg else np.divide(sums, np.maximum(counts, 1), dtype=np.float64)
        )
    else:
        missing = np.isnan(per_phase)
        n_ok = np.add.reduce(~missing, axis=0, dtype=np.intp)
        values = np.where(missing, 0.0, per_phase)
    return phase_sum(values) / n_ok


def counts(idx: np.ndarray, n_units: int) -> np.ndarray:
    """(replicates x draws) unit indices -> (replicates x units) multiplicities (float32: exact to 2**24)."""
    b = idx.shape[0]
    flat = (np.arange(b, dtype=np.int64)[:, None] * n_units + idx).ravel()
    out = np.bincount(flat, minlength=b * n_units).reshape(b, n_units)
    return out.astype(np.float32 if n_units <= 1 << 24 else np.float64)


def exact_product(unit_matrix: np.ndarray, cols: np.ndarray | None = None) -> bool:
    """Whether every aggregate of ``W @ unit_matrix[:, cols]`` is an exact integer in any order."""
    m = unit_matrix if cols is None else unit_matrix[:, cols]
    bound = float(unit_matrix.shape[0] * np.abs(m).max(initial=0.0))
    return bound <= 2.0**53 and np.array_equal(unit_matrix, np.round(unit_matrix))


def product(
    unit_matrix: np.ndarray, sel: np.ndarray
) -> tuple[Callable[[np.ndarray], np.ndarray], np.ndarray, bool]:
    """``(multiply, rows, exact)``: row ``rows[i]`` of ``multiply(W)`` is column ``sel[i]`` of
    ``W @ unit_matrix``; ``exact``: its sums are exact, so any split of the replicates gives them.
    Exact: once per distinct selected column, in float32 when no aggregate can pass 2**24;
    otherwise the float64 product of every column.
    """
    n_units = unit_matrix.shape[0]
    if not exact_product(unit_matrix, sel):
        return (lambda w: (w.astype(np.float64) @ unit_matrix).T), sel, False
    first: dict[bytes, int] = {}
    rows = np.array(
        [first.setdefault(unit_matrix[:, c].tobytes(), len(first)) for c in sel.tolist()],
        dtype=np.intp,
    )
    distinct = sel[np.flatnonzero(np.diff(np.maximum.accumulate(rows), prepend=-1) > 0)]
    if n_units * np.abs(unit_matrix[:, distinct]).max(initial=0.0) <= 2.0**24 and n_units <= 1 << 24:
        u32: np.ndarray = unit_matrix[:, distinct].T.astype(np.float32)
        return (lambda w: u32 @ w.astype(np.float32, copy=False).T), rows, True
    u64 = unit_matrix[:, distinct].T.copy()
    return (lambda w: u64 @ w.astype(np.float64).T), rows, True


def quantiles(x: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``np.quantile(x, q)`` (method "linear") along the last axis of a float array without NaN,
    by the same arithmetic (``_get_indexes``, ``_get_gamma``, ``_lerp`` of numpy's function base);
    each row's values as ``np.quantile`` of that row, the quantiles last."""
    n = x.shape[-1]
    virtual = (n - 1) * q
    before = np.floor(virtual)
    after = before + 1
    top = virtual >= n - 1
    before[top] = after[top] = -1
    before, after = before.astype(np.intp), after.astype(np.intp)
    ordered = np.partition(x, sorted({0, -1, *before.tolist(), *after.tolist()}), axis=-1)  # numpy's kth
    a, b = ordered[..., before], ordered[..., after]
    t = virtual - before
    diff = b - a
    out = a + diff * t
    np.subtract(b, diff * (1 - t), out=out, where=t >= 0.5)
    return out


def intervals(diffs: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row of ``diffs`` (NaN: no value): its valid values' quantiles ``q`` (NaN when none),
    standard deviation (ddof 1; NaN below two values) and number, as computed row by row."""
    ok = ~np.isnan(diffs)
    n_ok = ok.sum(axis=1)
    bounds = np.full((len(diffs), len(q)), np.nan)
    se = np.full(len(diffs), np.nan)
    full = n_ok == diffs.shape[1]
    if full.any() and diffs.shape[1]:
        rows = diffs[full]
        bounds[full] = quantiles(rows, q)
        if rows.shape[1] > 1:
            se[full] = np.std(rows, axis=1, ddof=1)
    for i in np.flatnonzero(~full & (n_ok > 0)):
        values = diffs[i][ok[i]]
        bounds[i] = quantiles(values, q)
        se[i] = np.std(values, ddof=1) if len(values) > 1 else np.nan
    return bounds, se, n_ok
