"""The bootstrap's passes and their scheduling: a :class:`Problem` per set of questions, a
:class:`Pass` per group of problems sharing one seeded draw, and :func:`schedule`, which runs
them over threads (the arithmetic, and why every number is exact, is in
:mod:`ledgerscope.analysis.stats.resampling`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future
from typing import Any

import numpy as np

from ledgerscope.analysis.stats.resampling import (
    CACHE_ELEMENTS,
    SUB,
    counts,
    exact_product,
    product,
    question_columns,
    replicate_statistics,
    selection,
    unit_sums,
)


class Problem:
    """One set of questions: per resampling unit the sums and counts of each block, candidate
    block ``2 i`` and baseline ``2 i + 1`` of metric ``i``."""

    def __init__(
        self, mats: Sequence[tuple[np.ndarray, np.ndarray, bool]], unit_of: np.ndarray, n_units: int
    ) -> None:
        q_cols = np.hstack([question_columns(x, h) for c, b, h in mats for x in (c, b)])
        self.hib: np.ndarray = np.repeat([h for _c, _b, h in mats], 2).astype(bool)
        self.n_units = n_units
        self.unit_matrix = unit_sums(q_cols, unit_of, n_units)
        self.exact = exact_product(self.unit_matrix)


class _Draw:
    """One seeded draw's multiplicities, piece by piece, shared by passes that draw the same."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.pieces: list[tuple[int, np.ndarray]] | None = None


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
            problems[0].unit_matrix if len(problems) == 1 else np.hstack([p.unit_matrix for p in problems])
        )
        hib = np.concatenate([p.hib for p in problems])
        order = np.argsort(~hib, kind="stable")  # higher-is-better blocks first
        self.at_row = np.argsort(order)  # block b's row in the replicate arrays
        self.offsets = np.cumsum([0] + [len(p.hib) for p in problems])
        sel, parts = selection(order, n_phases, statistics)
        self.multiply, rows, exact = product(matrix, sel)
        self.chunk = max(1, chunk_elements // self.n_units)
        self.piece = SUB if exact else self.chunk  # an inexact product keeps its chunks: its rounding
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
        self.which: dict[str, np.ndarray] = {
            s: np.empty((len(hib), n_resamples), dtype=np.int64)
            for s in statistics
            if s in ("worst_aggregate", "best_aggregate")
        }

    def _draws(self) -> Iterator[tuple[int, np.ndarray]]:  # (first replicate, multiplicities) piece by piece
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

    def pieces(self, cache: dict[tuple[int, ...], _Draw] | None = None) -> Iterable[tuple[int, np.ndarray]]:
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

    def result(self, i: int) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], dict[str, Any]]:
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


def run_here(fn: Callable[..., Any], *args: Any) -> Future[Any]:
    """``fn(*args)`` now, as a finished future (a ``submit`` that runs everything at once)."""
    future: Future[Any] = Future()
    try:
        future.set_result(fn(*args))
    except Exception as exc:
        future.set_exception(exc)
    return future


def schedule(
    calls: Sequence[tuple[Any, ...] | None],
    then: Callable[[int, Any], Any],
    *,
    statistics: Sequence[str],
    n_resamples: int,
    seed: int,
    chunk_elements: int,
    submit: Callable[..., Future[Any]] = run_here,
    empty: Callable[[], Any] = dict,
) -> list[Future[Any]]:
    """Each call's replicates (``(matrices, unit_of, n_units, n_phases)``, or None: ``empty()``),
    handed to ``then(i, result)`` (:meth:`Pass.result`): one future per call.

    Calls with as many units and phases share the draw, and the exact ones a pass. Tasks, each
    waiting only on tasks submitted before it: per group its problems, passes and draw; two halves
    of each pass; ``then`` per call.
    """
    groups: dict[tuple[Any, ...], list[int]] = {}
    for i, c in enumerate(calls):
        if c is not None:
            groups.setdefault((c[2], c[3]), []).append(i)
    draws: dict[tuple[int, ...], _Draw] = {}
    settings = {
        "statistics": statistics,
        "n_resamples": n_resamples,
        "seed": seed,
        "chunk_elements": chunk_elements,
    }
    prepared = {
        key: submit(_prepare, [calls[i] for i in members], draws, settings) for key, members in groups.items()
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
    calls: list[tuple[Any, ...]], draws: dict[tuple[int, ...], _Draw], settings: dict[str, Any]
) -> list[tuple[Pass, list[int], Iterable[tuple[int, np.ndarray]]]]:
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


def _half(prepared: Future[Any], h: int) -> None:
    """Every other piece of each pass's draw (an unkept draw: all of it, in the first half)."""
    for run, _members, pieces in prepared.result():
        if isinstance(pieces, list):
            run.compute(pieces[h::2])
        elif h == 0:
            run.compute(pieces)


def _then(
    halves: list[Future[Any]], prepared: Future[Any], k: int, then: Callable[[int, Any], Any], i: int
) -> Any:
    for h in halves:
        h.result()
    run, members, _pieces = next(p for p in prepared.result() if k in p[1])
    return then(i, run.result(members.index(k)))
