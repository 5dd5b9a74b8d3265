"""The replicates of the paired bootstrap, exactly and fast (the arithmetic behind
:func:`ledgerscope.analysis.stats.bootstrap.paired_bootstrap_many`; no Textual, no DuckDB).

A *problem* is one set of questions and several metrics. Each (metric, arm) is a *block*;
per resampling unit, a block's columns hold its per-phase sums and counts and its
per-question worst and best sums and counts (:func:`question_columns`): the unit matrix.
A replicate's aggregates are ``W @ unit_matrix`` for its multiplicity row ``W``, and its
statistics follow per block. Problems resampling as many units with one seed draw the same
multiplicities, so a :class:`Pass` takes them together: one draw, one product, one pass of
the statistics over every block.

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

import threading
import warnings
from collections.abc import Iterable, Sequence
from concurrent.futures import Future

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


def selection(order: np.ndarray, n_phases: int, wanted: Iterable[str]) -> tuple[np.ndarray, dict]:
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


_SAME_ORDER: dict[int, bool] = {}


def phase_sum(x: np.ndarray) -> np.ndarray:
    """``np.add.reduce`` over the phases (axis 0) with the rounding of a reduce over a contiguous
    last axis (as ``np.nanmean`` of a questions x phases matrix sums), checked once per length."""
    n = x.shape[0]
    if n not in _SAME_ORDER:
        probe = np.random.Generator(np.random.PCG64(n)).standard_normal((n, 64)) * np.logspace(
            -9, 9, 64
        )
        _SAME_ORDER[n] = np.array_equal(_pairwise(probe), np.add.reduce(probe.T.copy(), axis=1))
    return _pairwise(x) if _SAME_ORDER[n] else np.add.reduce(np.moveaxis(x, 0, -1).copy(), axis=-1)


def _extreme(
    per_phase: np.ndarray, low: slice, high: slice, fill, out: np.ndarray, which: np.ndarray
):
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
    parts: dict,
    n_higher: int,
    wanted: Iterable[str],
    finite: bool = True,
    nonneg: bool = False,
):
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
            per_phase = np.divide(
                sums, counts, dtype=f8
            )  # phases x blocks x replicates, NaN: no record
            n_blocks = per_phase.shape[1]
        for name in wanted:
            if name == "mean":  # NaN phases: 0 in the sum, left out of the count
                if finite and len(counts) < 256:
                    has = (counts > 0).view(np.uint8)
                    n_ok = has[0].copy()
                    for j in range(1, len(has)):
                        n_ok += has[j]
                    values = (
                        np.fmax(per_phase, 0.0)
                        if nonneg
                        else np.divide(sums, np.maximum(counts, 1), dtype=f8)
                    )
                else:
                    missing = np.isnan(per_phase)
                    n_ok = np.add.reduce(~missing, axis=0, dtype=np.intp)
                    values = np.where(missing, 0.0, per_phase)
                out[name] = phase_sum(values) / n_ok
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


def product(unit_matrix: np.ndarray, sel: np.ndarray):
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
    if (
        n_units * np.abs(unit_matrix[:, distinct]).max(initial=0.0) <= 2.0**24
        and n_units <= 1 << 24
    ):
        u32 = unit_matrix[:, distinct].T.astype(np.float32)
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
    ordered = np.partition(
        x, sorted({0, -1, *before.tolist(), *after.tolist()}), axis=-1
    )  # numpy's kth
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


class Problem:
    """One set of questions: per resampling unit the sums and counts of each block, candidate
    block ``2 i`` and baseline ``2 i + 1`` of metric ``i``."""

    def __init__(
        self, mats: Sequence[tuple[np.ndarray, np.ndarray, bool]], unit_of: np.ndarray, n_units: int
    ) -> None:
        q_cols = np.hstack([question_columns(x, h) for c, b, h in mats for x in (c, b)])
        self.hib = np.repeat([h for _c, _b, h in mats], 2).astype(bool)
        self.n_units = n_units
        self.unit_matrix = unit_sums(q_cols, unit_of, n_units)
        self.exact = exact_product(self.unit_matrix)


class _Draw:
    """One seeded draw's multiplicities, piece by piece, shared by passes that draw the same."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.pieces: list[np.ndarray] | None = None


class Pass:
    """The replicates of problems resampling as many units (several only when all are exact).

    ``pieces(cache)`` draws the multiplicities (``cache``: a dict shared by passes of one seed),
    ``compute(pieces)`` runs a subset of them (subsets may run on several threads), and
    ``result(i)`` gives problem ``i``'s replicates, phases and point statistics, blocks in order.
    """

    def __init__(
        self,
        problems: Sequence[Problem],
        n_phases: int,
        statistics: Sequence[str],
        *,
        n_resamples: int,
        seed: int,
        chunk_elements: int,
        indices: np.ndarray | None = None,
    ):
        self.problems, self.statistics = list(problems), tuple(statistics)
        self.n_units, self.n_resamples = problems[0].n_units, n_resamples
        self.seed, self.indices = seed, indices
        matrix = (
            problems[0].unit_matrix
            if len(problems) == 1
            else np.hstack([p.unit_matrix for p in problems])
        )
        hib = np.concatenate([p.hib for p in problems])
        order = np.argsort(~hib, kind="stable")  # higher-is-better blocks first
        self.at_row = np.argsort(order)  # block b's row in the replicate arrays
        self.offsets = np.cumsum([0] + [len(p.hib) for p in problems])
        sel, parts = selection(order, n_phases, statistics)
        self.multiply, rows, exact = product(matrix, sel)
        self.chunk = max(1, chunk_elements // self.n_units)
        self.piece = (
            SUB if exact else self.chunk
        )  # an inexact product keeps its chunks: its rounding
        self.parts = {k: (rows[at], shape) for k, (at, shape) in parts.items()}
        finite = bool(np.isfinite(self.n_units * np.abs(matrix).max(initial=0.0)))
        self.args = (
            int(hib.sum()),
            self.statistics,
            finite,
            finite and bool(matrix.min(initial=0.0) >= 0),
        )
        self.point = replicate_statistics(matrix.sum(axis=0)[sel][:, None], parts, *self.args)
        self.reps = {s: np.empty((len(hib), n_resamples)) for s in statistics}
        self.which = {
            s: np.empty((len(hib), n_resamples), dtype=np.int64)
            for s in statistics
            if s in ("worst_aggregate", "best_aggregate")
        }

    def _draws(self):  # (first replicate, multiplicities) piece by piece
        rng = np.random.Generator(np.random.PCG64(self.seed))
        for lo in range(0, self.n_resamples, self.chunk):
            hi = min(self.n_resamples, lo + self.chunk)
            idx = (
                self.indices[lo:hi]
                if self.indices is not None
                else rng.integers(0, self.n_units, size=(hi - lo, self.n_units), dtype=np.int32)
            )
            for a in range(0, hi - lo, self.piece):
                yield lo + a, counts(idx[a : a + self.piece], self.n_units)

    def pieces(self, cache: dict | None = None):
        """The draw's pieces: a list when kept (shared through ``cache``), else an iterator."""
        if self.indices is not None or self.n_resamples * self.n_units > CACHE_ELEMENTS:
            return self._draws()
        if cache is None:
            return list(self._draws())
        key = (int(self.seed), self.n_units, self.n_resamples, self.chunk, self.piece)
        entry = cache.setdefault(key, _Draw())
        with entry.lock:  # the first pass draws, the others (on other threads too) reuse
            if entry.pieces is None:
                entry.pieces = list(self._draws())
        return entry.pieces

    def compute(self, pieces: Iterable[tuple[int, np.ndarray]]) -> None:
        # statistics on pieces whose phases x blocks x replicates stay near 1 MiB: larger temporaries
        # would go back to the system and fault in again each time
        shape = self.parts["sums"][1] if "sums" in self.parts else (1, 1)
        step = max(64, min(SUB, (1 << 17) // (shape[0] * shape[1])))
        for at, w in pieces:
            agg = self.multiply(w)
            for b in range(0, agg.shape[1], step):
                part = agg[:, b : b + step]
                vals, which = replicate_statistics(part, self.parts, *self.args)
                cols = slice(at + b, at + b + part.shape[1])
                for s, v in vals.items():
                    self.reps[s][:, cols] = v
                for s, v in which.items():
                    self.which[s][:, cols] = v

    def result(self, i: int) -> tuple[dict, dict, dict, dict]:
        """Problem ``i``: replicates and phase indices per statistic (blocks x replicates), and the
        point statistics and phases (blocks)."""
        rows = self.at_row[self.offsets[i] : self.offsets[i + 1]]
        vals, which = self.point
        return (
            {s: v[rows] for s, v in self.reps.items()},
            {s: v[rows] for s, v in self.which.items()},
            {s: v[rows, 0] for s, v in vals.items()},
            {s: v[rows, 0] for s, v in which.items()},
        )


def run_here(fn, *args) -> Future:
    """``fn(*args)`` now, as a finished future (a ``submit`` that runs everything at once)."""
    future: Future = Future()
    try:
        future.set_result(fn(*args))
    except Exception as exc:
        future.set_exception(exc)
    return future


def schedule(
    calls: Sequence[tuple | None],
    then,
    *,
    statistics: Sequence[str],
    n_resamples: int,
    seed: int,
    chunk_elements: int,
    submit=run_here,
    empty=dict,
) -> list[Future]:
    """Each call's replicates (``(matrices, unit_of, n_units, n_phases)``, or None: ``empty()``),
    handed to ``then(i, result)`` (:meth:`Pass.result`): one future per call.

    Calls with as many units and phases share the draw, and the exact ones a pass. Tasks, each
    waiting only on tasks submitted before it: per group its problems, passes and draw; two halves
    of each pass; ``then`` per call.
    """
    groups: dict[tuple, list[int]] = {}
    for i, c in enumerate(calls):
        if c is not None:
            groups.setdefault((c[2], c[3]), []).append(i)
    draws: dict = {}
    settings = {
        "statistics": statistics,
        "n_resamples": n_resamples,
        "seed": seed,
        "chunk_elements": chunk_elements,
    }
    prepared = {
        key: submit(_prepare, [calls[i] for i in members], draws, settings)
        for key, members in groups.items()
    }  # every draw first, then the passes
    halves = {key: [submit(_half, prepared[key], h) for h in (0, 1)] for key in groups}
    futures = []
    for i, c in enumerate(calls):
        if c is None:
            futures.append(submit(empty))
            continue
        key = (c[2], c[3])
        futures.append(submit(_then, halves[key], prepared[key], groups[key].index(i), then, i))
    return futures


def _prepare(
    calls: list[tuple], draws: dict, settings: dict
) -> list[tuple[Pass, list[int], object]]:
    """The passes of calls with as many units: the exact ones together, any other alone; each
    with its members and its drawn pieces."""
    problems = [Problem(mats, unit_of, n_units) for mats, unit_of, n_units, _n_phases in calls]
    exact = [k for k, p in enumerate(problems) if p.exact]
    members = ([exact] if exact else []) + [[k] for k, p in enumerate(problems) if not p.exact]
    passes = []
    for ks in members:
        run = Pass(
            [problems[k] for k in ks],
            calls[0][3],
            settings["statistics"],
            n_resamples=settings["n_resamples"],
            seed=settings["seed"],
            chunk_elements=settings["chunk_elements"],
        )
        passes.append((run, ks, run.pieces(draws)))
    return passes


def _half(prepared: Future, h: int) -> None:
    """Every other piece of each pass's draw (an unkept draw: all of it, in the first half)."""
    for run, _members, pieces in prepared.result():
        if isinstance(pieces, list):
            run.compute(pieces[h::2])
        elif h == 0:
            run.compute(pieces)


def _then(halves: list[Future], prepared: Future, k: int, then, i: int):
    for h in halves:
        h.result()
    run, members, _pieces = next(p for p in prepared.result() if k in p[1])
    return then(i, run.result(members.index(k)))
