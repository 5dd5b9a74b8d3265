"""The paired bootstrap of candidate minus baseline: clustered by document, phase vectors together.

The definitions (metrics, statistics, worst phase) are :mod:`ledgerscope.analysis.stats.metrics`'s;
the replicates are computed by :mod:`ledgerscope.analysis.stats.resampling`. Pure numpy, no
DuckDB, no Textual.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from typing import Any

import numpy as np

from ledgerscope.analysis.stats.metrics import (
    DEFAULT_STATISTICS,
    STATISTICS,
    WORST_PHASE_NOTE,
    direction_label,
    finite_or_none,
)
from ledgerscope.analysis.stats.passes import Pass, Problem, run_here, schedule
from ledgerscope.analysis.stats.resampling import intervals, units


def _problem(
    pairs: Mapping[str, tuple[np.ndarray, np.ndarray, bool]],
    clusters: np.ndarray | None,
    confidence: float,
    statistics: Sequence[str],
    phase_labels: Sequence[str] | None,
) -> tuple[dict[str, tuple[np.ndarray, np.ndarray, bool]], list[str], np.ndarray, int]:
    """Check one call's arguments: its metrics' matrices, phase labels, units and their number."""
    mats = {
        k: (np.asarray(c, dtype=float), np.asarray(b, dtype=float), bool(h)) for k, (c, b, h) in pairs.items()
    }
    shapes = {c.shape for c, b, _ in mats.values()} | {b.shape for c, b, _ in mats.values()}
    if len(shapes) != 1 or len(next(iter(shapes))) != 2:
        raise ValueError(f"candidate and baseline matrices must share one 2-D shape, got {sorted(shapes)}")
    n_q, n_p = next(iter(shapes))
    if n_q == 0:
        raise ValueError("no questions to resample")
    if not 0 < confidence < 1:
        raise ValueError("confidence must lie strictly between 0 and 1")
    labels = [str(p) for p in phase_labels] if phase_labels is not None else [str(i) for i in range(n_p)]
    if len(labels) != n_p:
        raise ValueError(f"{len(labels)} phase labels for {n_p} phases")
    for s in statistics:
        if s not in STATISTICS:
            raise ValueError(f"unknown statistic {s!r}; known: {', '.join(STATISTICS)}")
    unit_of, n_units = units(clusters, n_q)
    return mats, labels, unit_of, n_units


def _summary(
    mats: dict[str, Any],
    labels: list[str],
    result: tuple[Any, ...],
    *,
    n_units: int,
    clustered: bool,
    n_resamples: int,
    seed: int,
    confidence: float,
    statistics: Sequence[str],
    injected: bool,
    return_replicates: bool = False,
) -> dict[str, dict[str, Any]]:
    """Per metric: estimates, percentile intervals and the phases attaining the aggregates."""
    reps, which_reps, point, point_which = result
    n_q, n_p = next(iter(mats.values()))[0].shape
    q = np.array([(1 - confidence) / 2, 1 - (1 - confidence) / 2])
    diffs = {s: reps[s][0::2] - reps[s][1::2] for s in statistics}  # candidate minus baseline, per metric
    spread = {s: intervals(d, q) for s, d in diffs.items()}
    results: dict[str, dict[str, Any]] = {}
    for i, (name, (_c, _b, h)) in enumerate(mats.items()):
        stats_out: dict[str, dict[str, Any]] = {}
        replicates: dict[str, dict[str, Any]] = {}
        for s in statistics:
            entry = _stat_entry(spread[s], point[s], i)
            if s in ("worst_aggregate", "best_aggregate"):
                entry.update(_attaining_phases(point_which[s], which_reps[s], i, labels, n_p, n_resamples))
            stats_out[s] = entry
            if return_replicates:
                replicates[s] = {
                    "candidate": reps[s][2 * i],
                    "baseline": reps[s][2 * i + 1],
                    "difference": diffs[s][i],
                }
        results[name] = {
            "statistics": stats_out,
            "direction": direction_label(h),
            "n_questions": int(n_q),
            "n_units": int(n_units),
            "n_phases": int(n_p),
            "resampling_unit": "cluster" if clustered else "question",
            "n_resamples": int(n_resamples),
            "seed": int(seed),
            "confidence": float(confidence),
            "method": "percentile",
            "injected_indices": injected,
            "note": WORST_PHASE_NOTE,
        }
        if return_replicates:
            results[name]["replicates"] = replicates
    return results


def _stat_entry(spread: tuple[Any, ...], point: np.ndarray, i: int) -> dict[str, Any]:
    """Metric ``i``'s difference, both arms' estimates and the interval; the bounds stay None
    when no replicate was valid and the standard error when only one was (it needs two)."""
    bounds, se, n_ok = (x[i] for x in spread)
    est_c, est_b = float(point[2 * i]), float(point[2 * i + 1])
    entry = {
        "estimate": finite_or_none(est_c - est_b),
        "candidate": finite_or_none(est_c),
        "baseline": finite_or_none(est_b),
        "low": None,
        "high": None,
        "standard_error": None,
        "n_valid_replicates": int(n_ok),
    }
    if n_ok:
        entry.update(
            low=float(bounds[0]),
            high=float(bounds[1]),
            standard_error=float(se) if n_ok > 1 else None,
        )
    return entry


def _attaining_phases(
    point_which: np.ndarray, which_reps: np.ndarray, i: int, labels: list[str], n_p: int, n_resamples: int
) -> dict[str, Any]:
    """For a worst/best-phase aggregate, per arm: the phase attaining it on the data and how often
    each phase attains it across replicates (how stable "the worst phase" is)."""
    out: dict[str, Any] = {}
    for arm, j in {"candidate": 2 * i, "baseline": 2 * i + 1}.items():
        k = int(point_which[j])
        out[f"{arm}_phase"] = labels[k] if k >= 0 else None
        w = which_reps[j]
        freq = np.bincount(w[w >= 0], minlength=n_p) / n_resamples
        out[f"{arm}_phase_frequency"] = {labels[t]: float(freq[t]) for t in range(n_p) if freq[t] > 0}
    return out


def paired_bootstrap_many(
    pairs: Mapping[str, tuple[np.ndarray, np.ndarray, bool]],
    clusters: np.ndarray | None = None,
    *,
    n_resamples: int = 10_000,
    seed: int = 0,
    confidence: float = 0.95,
    statistics: Sequence[str] = DEFAULT_STATISTICS,
    phase_labels: Sequence[str] | None = None,
    indices: np.ndarray | None = None,
    chunk_elements: int = 1_000_000,
    return_replicates: bool = False,
) -> dict[str, dict[str, Any]]:
    """:func:`paired_bootstrap` for several metrics at once, every metric on the same draws.

    ``pairs`` maps a metric name to ``(candidate, baseline, higher_is_better)``,
    every matrix questions x phases with the same questions in the same rows.
    The result per metric is what :func:`paired_bootstrap` returns for it with
    the same seed.
    """
    if not pairs:
        return {}
    mats, labels, unit_of, n_units = _problem(pairs, clusters, confidence, statistics, phase_labels)
    if indices is not None:
        indices = np.asarray(indices)
        if indices.ndim != 2 or indices.shape[1] != n_units:
            raise ValueError(f"indices must be (replicates x {n_units}) resampling-unit indices")
        if indices.size and (indices.min() < 0 or indices.max() >= n_units):
            raise ValueError("indices out of range")
        n_resamples = indices.shape[0]
    if n_resamples < 1:
        raise ValueError("n_resamples must be at least 1")
    run = Pass(
        [Problem(list(mats.values()), unit_of, n_units)],
        len(labels),
        statistics,
        n_resamples=n_resamples,
        seed=seed,
        chunk_elements=chunk_elements,
        indices=indices,
    )
    run.compute(run.pieces())
    return _summary(
        mats,
        labels,
        run.result(0),
        n_units=n_units,
        clustered=clusters is not None,
        n_resamples=n_resamples,
        seed=seed,
        confidence=confidence,
        statistics=statistics,
        injected=indices is not None,
        return_replicates=return_replicates,
    )


def paired_bootstrap_batch(
    calls: Sequence[tuple[Mapping[str, tuple[np.ndarray, np.ndarray, bool]], np.ndarray | None]],
    *,
    n_resamples: int = 10_000,
    seed: int = 0,
    confidence: float = 0.95,
    statistics: Sequence[str] = DEFAULT_STATISTICS,
    phase_labels: Sequence[str] | None = None,
    chunk_elements: int = 1_000_000,
    submit: Callable[..., Future[Any]] | None = None,
) -> list[Future[Any]]:
    """:func:`paired_bootstrap_many` for each ``(pairs, clusters)`` call: one future per call (a
    :class:`concurrent.futures.Future`), whose result is that call's result exactly.

    Calls resampling as many units draw the same multiplicities (one seed): the draw is made
    once, and calls whose sums are exact share one pass
    (:func:`ledgerscope.analysis.stats.passes.schedule`).
    ``submit`` (an executor's ``submit``) runs the work as tasks, each waiting only on tasks
    submitted before it; without it all runs here. Arguments are checked here, in order, as
    each call would.
    """
    checked: list[tuple[dict[str, Any], list[str], np.ndarray, int] | None] = []
    for pairs, clusters in calls:  # each call's checks, in order, as the call would make them
        checked.append(_problem(pairs, clusters, confidence, statistics, phase_labels) if pairs else None)
        if pairs and n_resamples < 1:
            raise ValueError("n_resamples must be at least 1")

    def summary(i: int, result: tuple[Any, ...]) -> dict[str, Any]:
        entry = checked[i]
        assert entry is not None  # a call without pairs has no summary
        mats, labels, _unit_of, n_units = entry
        return _summary(
            mats,
            labels,
            result,
            n_units=n_units,
            clustered=calls[i][1] is not None,
            n_resamples=n_resamples,
            seed=seed,
            confidence=confidence,
            statistics=statistics,
            injected=False,
        )

    return schedule(
        [None if c is None else (list(c[0].values()), c[2], c[3], len(c[1])) for c in checked],
        summary,
        statistics=statistics,
        n_resamples=n_resamples,
        seed=seed,
        chunk_elements=chunk_elements,
        submit=submit or run_here,
        empty=dict,
    )


def paired_bootstrap(
    cand: np.ndarray,
    base: np.ndarray,
    clusters: np.ndarray | None = None,
    n_resamples: int = 10_000,
    seed: int = 0,
    confidence: float = 0.95,
    statistics: Sequence[str] = DEFAULT_STATISTICS,
    *,
    higher_is_better: bool = True,
    phase_labels: Sequence[str] | None = None,
    indices: np.ndarray | None = None,
    chunk_elements: int = 1_000_000,
    return_replicates: bool = False,
) -> dict[str, Any]:
    """Candidate minus baseline with a paired (optionally clustered) percentile bootstrap.

    ``cand`` and ``base`` are questions x phases on matched (question, phase
    label) cells, ``NaN`` where the metric does not apply (nan-aware means).
    ``clusters`` (one id per question, e.g. its document) makes the cluster the
    resampling unit; without it the question is. Each question's phase vector
    moves as a whole and every statistic (see :data:`STATISTICS`) is recomputed
    per replicate for both arms on the same draw. ``indices`` injects the draw: a
    (replicates x units) array of unit indices (units = sorted distinct cluster
    ids, or questions), replacing the seeded generator.

    Returns ``statistics[name] = {estimate, candidate, baseline, low, high,
    standard_error, n_valid_replicates}`` (the ``*_aggregate`` statistics add
    the phase that attains it per arm and how often each phase did across
    replicates), plus the design (``n_questions``, ``n_units``,
    ``resampling_unit``, ``n_resamples``, ``seed``, ``confidence``, ``method``).
    With ``return_replicates`` the raw replicate arrays are under
    ``replicates`` (not JSON).
    """
    res = paired_bootstrap_many(
        {"metric": (cand, base, higher_is_better)},
        clusters,
        n_resamples=n_resamples,
        seed=seed,
        confidence=confidence,
        statistics=statistics,
        phase_labels=phase_labels,
        indices=indices,
        chunk_elements=chunk_elements,
        return_replicates=return_replicates,
    )
    return res["metric"]


#: the argument checks and the per-metric summary, shared with the bootstrap over repeats
#: (:mod:`.repeat_bootstrap`), which draws the same units and summarises the same way
check_arguments, summarise = _problem, _summary
