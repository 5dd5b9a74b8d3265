"""The minimum detectable difference (analysis/stats/power.py) against a simulation, and its arithmetic.

A synthetic paired sample (document clusters with a shared effect, questions, two phases) yields a
reported MDD at 95% confidence and 80% power from the paired, clustered bootstrap's standard error.
Fresh samples from the same process with a true difference equal to that MDD are then significant
(the bootstrap interval's lower end above 0) in about 80% of draws. Tolerance: within 0.07 of 0.80
over 300 simulated samples (binomial noise alone is 0.023; the reported MDD's own sampling error,
with 150 clusters, adds about 0.04; measured: 0.803). An MDD of the confidence quantile alone (no
power term) would give about 0.50, and one with a one-sided quantile about 0.70: both fall outside.
"""

from __future__ import annotations

import numpy as np
import pytest

from ledgerscope.analysis.stats.bootstrap import paired_bootstrap
from ledgerscope.analysis.stats.power import minimum_detectable, questions_needed, z_sum

N_CLUSTERS, PER_CLUSTER, N_PHASES = 150, 2, 2
CONFIDENCE = 0.95
N_SIMULATIONS = 300
TOLERANCE = 0.07


def _sample(rng: np.random.Generator, effect: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Baseline and candidate (questions x phases) and each question's cluster: the candidate's
    difference is ``effect`` plus a cluster effect, a question effect and per-phase noise."""
    n = N_CLUSTERS * PER_CLUSTER
    clusters = np.repeat(np.arange(N_CLUSTERS), PER_CLUSTER)
    base = rng.uniform(0.3, 0.8, size=(n, N_PHASES))
    diff = (
        effect
        + rng.normal(0, 0.15, N_CLUSTERS)[clusters][:, None]
        + rng.normal(0, 0.2, (n, 1))
        + rng.normal(0, 0.1, (n, N_PHASES))
    )
    return base + diff, base, clusters.astype(str).astype(object)


def _mean(cand, base, clusters, n_resamples: int, seed: int) -> dict:
    return paired_bootstrap(
        cand, base, clusters, n_resamples=n_resamples, seed=seed, confidence=CONFIDENCE, statistics=("mean",)
    )["statistics"]["mean"]


def test_share_significant_at_the_reported_mdd_is_close_to_80_percent():
    rng = np.random.default_rng(20261204)
    reported = minimum_detectable(
        _mean(*_sample(rng, 0.0), n_resamples=2000, seed=1)["standard_error"], CONFIDENCE
    )
    assert reported is not None and reported > 0
    significant = 0
    for i in range(N_SIMULATIONS):
        stat = _mean(*_sample(rng, reported), n_resamples=400, seed=100 + i)
        significant += stat["low"] > 0
    share = significant / N_SIMULATIONS
    assert share == pytest.approx(0.80, abs=TOLERANCE), f"share {share:.3f} at MDD {reported:.4f}"


def test_mdd_arithmetic():
    assert z_sum(0.95) == pytest.approx(1.959964 + 0.841621, abs=1e-5)
    assert minimum_detectable(0.01, 0.95) == pytest.approx(0.028016, abs=1e-5)
    assert minimum_detectable(None, 0.95) is None
    # a quarter of the MDD needs sixteen times the questions; a tolerance of 0 or above never shows
    assert questions_needed(40, 0.08, -0.02) == 640
    assert questions_needed(40, 0.01, -0.02) == 10
    assert questions_needed(40, 0.08, 0.0) is None
    with pytest.raises(ValueError):
        z_sum(1.0)


def _comparison(estimate: float, se: float, n: int = 40) -> dict:
    z = 1.959964
    entry = {"estimate": estimate, "low": estimate - z * se, "high": estimate + z * se, "standard_error": se}
    diff = {"n_questions": n, "n_units": 12, "statistics": {"mean": entry}}
    comparison = {
        "format": "ledgerscope-comparison/1",
        "settings": {"confidence": 0.95, "n_resamples": 10000, "seed": 0},
        "candidate": {"arm": "c"},
        "baseline": {"arm": "b"},
        "stress_sets": {"representative": {"metrics": {"support": {"difference": diff}}}},
    }
    from ledgerscope.analysis.stats.power import annotate

    return annotate(comparison)


def _decide(tmp_path, tolerance: float, comparison: dict, extra: str = "") -> dict:
    from ledgerscope.analysis.stats.release import decide, load_rule

    path = tmp_path / "rule.toml"
    path.write_text(f"{extra}max_support_loss = {{ mean = {tolerance} }}\n", encoding="utf-8")
    return decide(load_rule(path), comparison).to_dict()


def test_a_pass_below_the_mdd_is_not_a_clean_accept(tmp_path):
    from ledgerscope.analysis.stats.power import headline

    comparison = _comparison(0.0, 0.01)  # MDD 0.028; the interval [-0.0196, 0.0196]
    clean = _decide(tmp_path, -0.05, comparison)
    assert clean["outcome"] == "accept" and headline(clean) == "ACCEPT"
    assert "detectable at 80% power: 0.0280 with 40 questions in 12 clusters" in clean["reasons"][0]
    small = _decide(tmp_path, -0.02, comparison)
    assert small["outcome"] == "collect-more-evidence"
    assert small["checks"][0]["tolerance"] == "underpowered_is_inconclusive"
    assert "79 questions needed" in small["reasons"][0]  # 40 * (0.028016 / 0.02)^2 = 78.5, rounded up
    lenient = _decide(tmp_path, -0.02, comparison, "underpowered_is_inconclusive = false\n")
    assert lenient["outcome"] == "accept" and headline(lenient).startswith("ACCEPT, but the run is too small")
    assert comparison["stress_sets"]["representative"]["metrics"]["support"]["difference"]["detectable"][
        "mean"
    ]["mdd"] == pytest.approx(0.028016, abs=1e-5)
