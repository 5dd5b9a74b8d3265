"""What a comparison could have detected: the minimum detectable difference (MDD) beside every
paired difference, and the questions a rule's tolerance would need.

Seed 000: a candidate should not be called safe merely because a small sample produces an
inconclusive comparison. An ACCEPT over 40 questions in 6 documents and one over 2,000 questions
are different claims; the MDD says which.

The MDD of a paired difference at two-sided confidence ``c`` and power ``1 - beta`` is
``(z_{1-(1-c)/2} + z_{1-beta}) * SE``, with ``SE`` the paired, document-clustered bootstrap's
standard error of that statistic (so it is for this number of questions *and* of clusters: a
clustered sample's SE is larger than its questions alone would say). Under the rule's conservative
handling a check passes when the interval's lower end clears the tolerance, so a candidate no
worse than the baseline passes with probability ``1 - beta`` exactly when the tolerance's size is
the MDD. The questions needed to make the MDD equal to a tolerance ``t`` assume the standard error
falls as ``1/sqrt(n)`` with the questions spread over proportionally more clusters:
``n * (MDD / |t|)^2``. Pure functions; scipy for the normal quantiles.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # types only: the release rule's package imports this module when it loads
    from ledgerscope.analysis.stats.release.rule import Check, Rule

#: the power every MDD is reported at
POWER = 0.8


def z_sum(confidence: float, power: float = POWER) -> float:
    """``z_{1-(1-c)/2} + z_{power}``: how many standard errors the MDD is."""
    from scipy.stats import norm

    if not 0 < confidence < 1 or not 0 < power < 1:
        raise ValueError("confidence and power must lie strictly between 0 and 1")
    return float(norm.ppf(1 - (1 - confidence) / 2) + norm.ppf(power))


def minimum_detectable(standard_error: float | None, confidence: float, power: float = POWER) -> float | None:
    """The smallest true difference this run finds with probability ``power`` (None without an SE)."""
    if standard_error is None or not math.isfinite(standard_error):
        return None
    return z_sum(confidence, power) * standard_error


def questions_needed(n_questions: int, mdd: float | None, tolerance: float) -> int | None:
    """Questions for the MDD to shrink to ``|tolerance|``; None for a tolerance of 0 or above (a
    candidate equal to the baseline never shows a gain) or without an MDD."""
    if mdd is None or tolerance >= 0 or n_questions <= 0:
        return None
    if mdd == 0:
        return n_questions
    return max(1, math.ceil(n_questions * (mdd / -tolerance) ** 2))


def _differences(comparison: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every paired difference block of a comparison (stress sets and their segments)."""
    for block in (comparison.get("stress_sets") or {}).values():
        for scope in (block, *((block.get("segments") or {}).values())):
            for metric in (scope.get("metrics") or {}).values():
                if metric.get("difference"):
                    yield metric["difference"]


def annotate(comparison: dict[str, Any], power: float = POWER) -> dict[str, Any]:
    """Beside every paired difference of a :func:`..compare.compare_arms` result, in place:
    ``difference["detectable"][statistic] = {mdd, power, confidence, n_questions, n_clusters}``
    (``statistics`` stays exactly the bootstrap's). Returns the comparison."""
    confidence = float((comparison.get("settings") or {}).get("confidence", 0.95))
    for diff in _differences(comparison):
        diff["detectable"] = {
            stat: {
                "mdd": minimum_detectable(entry.get("standard_error"), confidence, power),
                "power": power,
                "confidence": confidence,
                "n_questions": diff.get("n_questions"),
                "n_clusters": diff.get("n_units"),
            }
            for stat, entry in (diff.get("statistics") or {}).items()
        }
    return comparison


def detectable(difference: dict[str, Any] | None, statistic: str = "mean") -> float | None:
    """The MDD :func:`annotate` put beside one statistic of a difference (None if none)."""
    return (((difference or {}).get("detectable") or {}).get(statistic) or {}).get("mdd")


def _entry(
    comparison: dict[str, Any], stress_set: str, metric: str, statistic: str
) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    block = (comparison.get("stress_sets") or {}).get(stress_set) or {}
    diff = ((block.get("metrics") or {}).get(metric) or {}).get("difference")
    return diff, ((diff or {}).get("statistics") or {}).get(statistic)


def check_power(rule: Rule, comparison: dict[str, Any], check: Check) -> dict[str, Any] | None:
    """For a difference check: its MDD at the rule's confidence, the questions its tolerance needs,
    and whether the tolerance is smaller than the MDD (``underpowered``)."""
    tol = next((t for t in rule.differences if f"{t.key}.{t.statistic}" == check.tolerance), None)
    if tol is None:
        return None
    diff, entry = _entry(comparison, check.stress_set, tol.metric, tol.statistic)
    if entry is None:
        return None
    mdd = minimum_detectable(entry.get("standard_error"), rule.confidence)
    n = int((diff or {}).get("n_questions") or 0)
    needed = questions_needed(n, mdd, tol.limit)
    return {
        "mdd": mdd,
        "power": POWER,
        "confidence": rule.confidence,
        "n_questions": n,
        "n_clusters": (diff or {}).get("n_units"),
        "tolerance": tol.limit,
        "questions_needed": needed,
        "underpowered": mdd is not None and tol.limit < 0 and -tol.limit < mdd,
    }


def _power_words(p: dict[str, Any]) -> str:
    needed = p["questions_needed"]
    need = (
        f"about {needed} questions would detect the tolerance {abs(p['tolerance']):.4f}"
        if needed
        else "no number of questions shows a tolerance of 0 or above for an unchanged candidate"
    )
    return (
        f"; detectable at {p['power']:.0%} power: {p['mdd']:.4f} with {p['n_questions']} questions in "
        f"{p['n_clusters']} clusters ({need})"
    )


def with_power(rule: Rule, comparison: dict[str, Any], checks: Sequence[Check]) -> list[Check]:
    """The checks with their MDD in the reason (difference checks with a standard error)."""
    out = []
    for c in checks:
        p = check_power(rule, comparison, c)
        out.append(
            c if p is None or p["mdd"] is None else dataclasses.replace(c, reason=c.reason + _power_words(p))
        )
    return out


def underpowered_passes(
    rule: Rule, comparison: dict[str, Any], checks: Sequence[Check]
) -> list[tuple[Check, dict[str, Any]]]:
    """Passing difference checks whose tolerance is smaller than what this run could detect."""
    found = []
    for c in checks:
        if c.status != "pass":
            continue
        p = check_power(rule, comparison, c)
        if p is not None and p["underpowered"]:
            found.append((c, p))
    return found


def too_small_reason(found: Sequence[tuple[Check, dict[str, Any]]], becomes: str) -> str:
    """The line a decision carries when its ACCEPT rests on tolerances below the MDD."""
    worst = max(found, key=lambda cp: cp[1]["mdd"] / -cp[1]["tolerance"])
    c, p = worst
    what = "collect more evidence" if becomes == "collect-more-evidence" else "accepted with this warning"
    return (
        f"the run is too small to show the candidate is safe: {len(found)} passing check(s) have a "
        f"tolerance below the minimum detectable difference (worst: {c.stress_set} {c.tolerance}, "
        f"tolerance {abs(p['tolerance']):.4f} < MDD {p['mdd']:.4f} at {p['power']:.0%} power; "
        f"{p['questions_needed']} questions needed): {what} (rule key underpowered_is_inconclusive)"
    )


#: the tolerance name of the check a decision carries when its ACCEPT rests on tolerances below the MDD
UNDERPOWERED = "underpowered_is_inconclusive"


def headline(decision: dict[str, Any]) -> str:
    """The decision's outcome as a headline: an ACCEPT below the MDD is never shown as a clean pass."""
    outcome = str(decision.get("outcome", "")).upper()
    if outcome == "ACCEPT" and any(c.get("tolerance") == UNDERPOWERED for c in decision.get("checks", [])):
        return "ACCEPT, but the run is too small to show the candidate is safe"
    return outcome
