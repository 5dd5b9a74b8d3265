"""What a picture of a comparison needs beyond :func:`.compare.compare_arms`'s dict: replicates.

The HTML report draws the paired difference's bootstrap distribution and each arm's per-phase
rate with its interval. Both come from the same definitions and the same draw as the
comparison: the arms are loaded and matched by :func:`.compare.load_arms` and
:func:`.compare.match_arms`, a metric's questions are those where it applies in at least one
arm (its denominator, as in the comparison), clusters are each question's first document, and
the bootstrap is :func:`.bootstrap.paired_bootstrap` with the comparison's seed, replicates and
confidence, so every interval here equals the one the comparison reports for the same statistic.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ledgerscope.analysis.stats.arm_records import load_arm, load_arms
from ledgerscope.analysis.stats.bootstrap import paired_bootstrap
from ledgerscope.analysis.stats.compare import Matched, match_arms
from ledgerscope.analysis.stats.metrics import DEFAULT_STATISTICS, METRICS
from ledgerscope.analysis.stats.resampling import intervals

if TYPE_CHECKING:
    from duckdb import DuckDBPyConnection


def matched_arms(
    con: DuckDBPyConnection,
    candidate: str,
    baseline: str,
    baseline_con: DuckDBPyConnection | None = None,
    metrics: Sequence[str] = ("support", "answer_correct"),
) -> Matched:
    """Both arms on their shared (question, phase label) cells, loaded as the comparison loads them."""
    if baseline_con is None:
        cand, base = load_arms(con, [candidate, baseline])
    else:
        cand, base = load_arm(con, candidate), load_arm(baseline_con, baseline)
    return match_arms(cand, base, metrics)


def matched_with_repeats(
    con: DuckDBPyConnection,
    candidate: str,
    baseline: str,
    baseline_con: DuckDBPyConnection | None,
    metrics: Sequence[str],
) -> tuple[Matched, dict[str, Any] | None]:
    """:func:`matched_arms` and the arms' repeat stacks (``--repeats``; None without repeats)."""
    from ledgerscope.analysis.stats.repeat_noise import repeat_stacks

    if baseline_con is None:
        cand, base = load_arms(con, [candidate, baseline])
    else:
        cand, base = load_arm(con, candidate), load_arm(baseline_con, baseline)
    matched = match_arms(cand, base, metrics)
    return matched, repeat_stacks(con, baseline_con, cand, base, matched, metrics, match_arms)


def _block(matched: Matched, stress_set: str, metric: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The metric's candidate and baseline matrices and clusters over the stress set's questions
    where it applies in at least one arm (the comparison's denominator)."""
    rows = matched.stress_set == stress_set
    c, b = matched.candidate[metric][rows], matched.baseline[metric][rows]
    defined = ~np.isnan(c).all(axis=1) | ~np.isnan(b).all(axis=1)
    return c[defined], b[defined], matched.cluster[rows][defined]


def difference_replicates(
    matched: Matched,
    stress_set: str,
    metric: str,
    statistic: str,
    *,
    n_resamples: int,
    seed: int,
    confidence: float,
    stacks: dict[str, Any] | None = None,
) -> dict[str, Any] | None:
    """The paired difference's replicates for one statistic, with its estimate and interval.

    None when the metric applies to no question of the stress set. ``stacks`` (``--repeats``:
    :func:`matched_with_repeats`): where the answers differ between repeats, the
    replicates resample them, as the comparison's do.
    """
    c, b, clusters = _block(matched, stress_set, metric)
    if not len(c):
        return None
    statistics = tuple(DEFAULT_STATISTICS) + ((statistic,) if statistic not in DEFAULT_STATISTICS else ())
    boot: dict[str, Any] = {
        "n_resamples": n_resamples,
        "seed": seed,
        "confidence": confidence,
        "statistics": statistics,
    }
    from ledgerscope.analysis.stats.repeat_noise import block_repeats

    over = block_repeats(stacks, matched, stress_set, metric)
    if over is not None:
        from ledgerscope.analysis.stats.repeat_bootstrap import paired_bootstrap_repeats

        pairs = {"metric": (*over, METRICS[metric].higher_is_better)}
        res = paired_bootstrap_repeats(
            pairs, clusters, phase_labels=matched.phases, return_replicates=True, **boot
        )["metric"]
    else:
        res = paired_bootstrap(
            c,
            b,
            clusters,
            higher_is_better=METRICS[metric].higher_is_better,
            phase_labels=matched.phases,
            return_replicates=True,
            **boot,
        )
    entry = res["statistics"][statistic]
    reps = np.asarray(res["replicates"][statistic]["difference"], dtype=float)
    return {
        "metric": metric,
        "statistic": statistic,
        "estimate": entry["estimate"],
        "low": entry["low"],
        "high": entry["high"],
        "n_questions": res["n_questions"],
        "n_units": res["n_units"],
        "replicates": reps[~np.isnan(reps)],
    }


def phase_intervals(
    matched: Matched, stress_set: str, metric: str, *, n_resamples: int, seed: int, confidence: float
) -> list[dict[str, Any]]:
    """Per shared phase: each arm's rate with its percentile interval (same draw design as the
    comparison: the phase's column, questions resampled by document), and its denominator."""
    c, b, clusters = _block(matched, stress_set, metric)
    q = np.array([(1 - confidence) / 2, 1 - (1 - confidence) / 2])
    out = []
    for j, label in enumerate(matched.phases):
        entry: dict[str, Any] = {"phase": label}
        col_c, col_b = c[:, j : j + 1], b[:, j : j + 1]
        keep = ~np.isnan(col_c[:, 0]) | ~np.isnan(col_b[:, 0])
        if not keep.any():
            out.append({**entry, "candidate": None, "baseline": None})
            continue
        res = paired_bootstrap(
            col_c[keep],
            col_b[keep],
            clusters[keep],
            n_resamples=n_resamples,
            seed=seed,
            confidence=confidence,
            statistics=("mean",),
            higher_is_better=METRICS[metric].higher_is_better,
            return_replicates=True,
        )
        reps = res["replicates"]["mean"]
        bounds, _se, _n = intervals(np.vstack([reps["candidate"], reps["baseline"]]), q)
        stats = res["statistics"]["mean"]
        for i, (arm, col) in enumerate((("candidate", col_c[keep]), ("baseline", col_b[keep]))):
            n = int((~np.isnan(col)).sum())
            low, high = bounds[i]
            entry[arm] = (
                None
                if not n
                else {
                    "mean": stats[arm],
                    "n": n,
                    "low": None if np.isnan(low) else float(low),
                    "high": None if np.isnan(high) else float(high),
                }
            )
        out.append(entry)
    return out
