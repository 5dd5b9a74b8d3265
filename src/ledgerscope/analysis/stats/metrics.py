"""Statistics over a boundary ledger: phase tables, segments, and the paired bootstrap.

Pure numpy functions do the arithmetic (:func:`phase_table`,
:func:`segment_breakdown`; the paired bootstrap in :mod:`.bootstrap`, its replicates in
:mod:`.resampling`); :mod:`.compare` pulls the arrays from
a DuckDB connection whose ``records`` view comes from
:func:`ledgerscope.ledger.read.connect`. Nothing here imports Textual.

Outcome metrics (one value per record, ``NaN`` = not applicable)
----------------------------------------------------------------
A *record* is one (arm, phase, question). Each metric is 0/1 (tokens: a count)
over its own denominator; a record outside the denominator is ``NaN`` and is
left out of every mean, so no metric silently counts easy questions of another
kind. ``infrastructure-failure`` records (the generator errored) are outside
every answer denominator and are counted separately (``counts``), never scored
as wrong or retried away.

* ``support``: ``support_packed`` (the packed context covers a sufficient set).
  Denominator: answerable questions with a support flag, support-only and
  budget-infeasible ones included.
* ``answer_correct``: ``answer_verdict == "correct"``. Denominator: answer-judged
  answerable records (answerable, not support-only, verdict neither
  ``not-judged`` nor ``infrastructure-failure``).
* ``critical``: ``critical-condition-error``; same denominator.
* ``abstained``: ``answer_verdict == "abstained"``; same denominator (lost
  coverage, not a critical error).
* ``false_assertion``: ``answer_verdict == "false-assertion"``. Denominator:
  answer-judged unanswerable controls (verdict abstained or false-assertion).
* ``citation_supported``: ``citation_verdict == "supported"``. Denominator:
  answer-judged answerable records that answered (``correct``,
  ``critical-condition-error`` or ``wrong``) and whose citations were
  recorded (an ingested trace without citations is ``not-recorded``: no
  figure, never 0); it varies by arm and phase.
* ``prompt_tokens``, ``evidence_tokens``: the record's counts; records with a count.

Higher is better for ``support``, ``answer_correct`` and ``citation_supported``;
lower is better for the others, so "worst phase" is the maximum for critical
errors, abstentions, false assertions and tokens.

Phases and worst phase
----------------------
A metric over one arm is a matrix: questions x phase labels. Per phase, the
mean over the applicable cells (``n`` = its denominator); the phase average
two ways (the mean of the per-phase means, each phase weighted equally, and the
pooled mean over all applicable cells); the **worst phase** two ways: (a) the
worst per-phase aggregate (and which phase) and (b) each question's worst phase
first, then averaged over questions, which is more adversarial; the best phase
likewise. Worst-phase figures are stress-test statistics over the declared
phases, never an estimated production frequency (:data:`WORST_PHASE_NOTE`
travels with every table).

Paired bootstrap
----------------
Candidate minus baseline on matched (question, phase label) records. A
replicate draws resampling units with replacement (documents when clusters are
given, so questions sharing a document move together; questions otherwise) and
carries each question's whole phase vector; every statistic, the worst-phase
minimum included, is recomputed inside the replicate for both arms with the
same draw. Percentile intervals; the point estimate is the statistic on the full
data. The draw is ``numpy.random.Generator(PCG64(seed)).integers(0, n_units,
(replicates, n_units))`` in chunks, the same stream ``scipy.stats.bootstrap``
draws with ``paired=True`` and that generator, so an unclustered mean
difference reproduces SciPy's percentile interval.

Vectorised: per resampling unit the per-phase sums and counts (and the
per-question worst/best sums and counts) are precomputed as a (units x K)
matrix; a chunk of replicates is a (chunk x units) multiplicity matrix ``W``
and its aggregates are ``W @ unit_matrix``. With 0/1 outcomes (and token
counts) every sum is an integer, so the result is exactly the direct
computation on the resampled rows; :mod:`ledgerscope.analysis.stats.resampling` says how the
fast paths keep every number bit for bit.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

FORMAT = "ledgerscope-comparison/1"

WORST_PHASE_NOTE = (
    "Worst-phase figures are stress-test statistics over the declared phases; "
    "they are not estimated production frequencies."
)

#: statistics :func:`ledgerscope.analysis.stats.bootstrap.paired_bootstrap` can recompute per replicate
STATISTICS = (
    "mean",
    "pooled_mean",
    "worst_aggregate",
    "worst_per_question",
    "best_aggregate",
    "best_per_question",
)
DEFAULT_STATISTICS = ("mean", "worst_aggregate", "worst_per_question")

#: answer verdicts that take an answerable record out of the answer denominators
_UNJUDGED = frozenset({"not-judged", "infrastructure-failure", "not-applicable"})
_ANSWERED = frozenset({"correct", "critical-condition-error", "wrong"})


@dataclass(frozen=True)
class Metric:
    name: str
    higher_is_better: bool
    definition: str
    denominator: str
    binary: bool = True

    def describe(self) -> dict[str, Any]:
        return {
            "definition": self.definition,
            "denominator": self.denominator,
            "direction": direction_label(self.higher_is_better),
            "binary": self.binary,
        }


_JUDGED = (
    "answer-judged answerable records (answerable, not support-only, verdict not "
    "not-judged or infrastructure-failure)"
)
METRICS: dict[str, Metric] = {
    m.name: m
    for m in (
        Metric(
            "support",
            True,
            "support_packed: the packed context covers a sufficient support set",
            "answerable records with a support flag (support-only and budget-infeasible included)",
        ),
        Metric("answer_correct", True, "answer_verdict is correct", _JUDGED),
        Metric("critical", False, "answer_verdict is critical-condition-error", _JUDGED),
        Metric(
            "abstained",
            False,
            "answer_verdict is abstained (lost coverage, not a critical error)",
            _JUDGED,
        ),
        Metric(
            "false_assertion",
            False,
            "answer_verdict is false-assertion",
            "answer-judged unanswerable controls (abstained or false-assertion)",
        ),
        Metric(
            "citation_supported",
            True,
            "citation_verdict is supported",
            "answer-judged answerable records that answered (correct, critical-condition-error, wrong)",
        ),
        Metric(
            "prompt_tokens",
            False,
            "prompt tokens of the record",
            "records with a token count",
            binary=False,
        ),
        Metric(
            "evidence_tokens",
            False,
            "packed evidence tokens of the record",
            "records with a token count",
            binary=False,
        ),
    )
}
DEFAULT_METRICS = tuple(METRICS)


def direction_label(higher_is_better: bool) -> str:
    """How a metric's ``direction`` reads in a comparison's JSON."""
    return "higher-is-better" if higher_is_better else "lower-is-better"


# ---------------------------------------------------------------------------
# per-record outcomes


def _col(values: Any, n: int) -> np.ndarray:
    if isinstance(values, np.ndarray) and values.dtype == object and values.shape == (n,):
        return values
    out: np.ndarray = np.empty(n, dtype=object)
    out[:] = list(values) if values is not None else [None] * n
    return out


class _Distinct:
    """An object column as codes of its distinct values, so a test runs once per distinct value."""

    def __init__(self, col: np.ndarray) -> None:
        self.col = col
        try:
            self.values = list(dict.fromkeys(col.tolist()))
        except TypeError:  # an unhashable value: test each one
            self.codes = None
            return
        index = {v: i for i, v in enumerate(self.values)}
        self.codes = np.fromiter(map(index.__getitem__, col.tolist()), dtype=np.intp, count=len(col))

    def test(self, fn: Callable[[Any], object]) -> np.ndarray:
        if self.codes is None:
            return np.array([bool(fn(v)) for v in self.col.tolist()], dtype=bool)
        return np.array([bool(fn(v)) for v in self.values], dtype=bool)[self.codes]


def _truths(values: Any) -> np.ndarray:
    if isinstance(values, np.ndarray) and values.dtype == bool:
        return np.array(values, dtype=bool)
    return np.array([bool(a) for a in values])


def _numbers(values: Any, n: int) -> np.ndarray:
    """``float(v)`` per value, ``NaN`` for None."""
    if isinstance(values, np.ndarray) and values.dtype.kind in "iuf" and values.shape == (n,):
        return values.astype(float)
    return np.array([np.nan if v is None else float(v) for v in _col(values, n)], dtype=float)


def record_metrics(
    *,
    answerable: Sequence[Any],
    support_only: Sequence[Any],
    support_packed: Sequence[Any],
    answer_verdict: Sequence[Any],
    citation_verdict: Sequence[Any],
    prompt_tokens: Sequence[Any] | None = None,
    evidence_tokens: Sequence[Any] | None = None,
) -> dict[str, np.ndarray]:
    """Every metric of :data:`METRICS` per record: float arrays, ``NaN`` outside the denominator."""
    n = len(answerable)
    ans = _truths(answerable)
    sonly = _truths(support_only)
    sp = _Distinct(_col(support_packed, n))
    av = _Distinct(_col(answer_verdict, n))
    cv = _Distinct(_col(citation_verdict, n))
    nan = np.full(n, np.nan)

    def where(defined: np.ndarray, hit: np.ndarray) -> np.ndarray:
        return np.where(defined, hit.astype(float), nan)

    def verdict(name: str) -> np.ndarray:
        return av.test(lambda v: v == name)

    judged = ans & ~sonly & av.test(lambda v: v is not None and v not in _UNJUDGED)
    control = ~ans & ~sonly & av.test(lambda v: v in ("abstained", "false-assertion"))
    answered = judged & av.test(lambda v: v in _ANSWERED)
    out = {
        "support": where(ans & sp.test(lambda s: s is not None), sp.test(bool)),
        "answer_correct": where(judged, verdict("correct")),
        "critical": where(judged, verdict("critical-condition-error")),
        "abstained": where(judged, verdict("abstained")),
        "false_assertion": where(control, verdict("false-assertion")),
        "citation_supported": where(
            answered & cv.test(lambda v: v != "not-recorded"), cv.test(lambda v: v == "supported")
        ),
    }
    for name, values in (("prompt_tokens", prompt_tokens), ("evidence_tokens", evidence_tokens)):
        out[name] = _numbers(values, n)
    return out


# ---------------------------------------------------------------------------
# phase tables


def finite_or_none(x: Any) -> float | None:
    """``float(x)``, or None for NaN (JSON has no NaN; an undefined mean is null)."""
    x = float(x)
    return None if np.isnan(x) else x


def _arg_extreme(values: np.ndarray, use_min: bool) -> int | None:
    if values.size == 0 or np.all(np.isnan(values)):
        return None
    return int(np.nanargmin(values) if use_min else np.nanargmax(values))


def phase_table(
    matrix: np.ndarray, phase_labels: Sequence[str], *, higher_is_better: bool = True
) -> dict[str, Any]:
    """Per phase, phase average and worst/best phase (both ways) of one arm's metric matrix.

    ``matrix`` is questions x phases, ``NaN`` where the metric does not apply.
    ``worst_phase.aggregate`` is the worst per-phase mean and its phase;
    ``worst_phase.per_question`` takes each question's worst phase first, then
    averages over questions (more adversarial). For a lower-is-better metric
    (critical errors) the worst is the maximum. Worst-phase figures are
    stress-test statistics, never a production frequency (``note``).
    """
    m = np.asarray(matrix, dtype=float)
    if m.ndim != 2 or m.shape[1] != len(phase_labels):
        raise ValueError(f"matrix shape {m.shape} does not match {len(phase_labels)} phase labels")
    labels = [str(p) for p in phase_labels]
    valid = ~np.isnan(m)
    n, sums, means, mean_of_phases = _phase_means(m, valid)
    pooled = sums.sum() / n.sum() if n.sum() else np.nan
    row_any = valid.any(axis=1)
    values, rows = m[valid], m[row_any]
    binary = bool(np.all((values == 0.0) | (values == 1.0)))  # np.isin(values, (0.0, 1.0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        lo, hi = np.nanmin(rows, axis=1), np.nanmax(rows, axis=1)

    table = {
        "direction": direction_label(higher_is_better),
        "n_questions": int(row_any.sum()),
        "n_phases": len(labels),
        "per_phase": [
            {"phase": lab, "mean": finite_or_none(means[i]), "sum": float(sums[i]), "n": int(n[i])}
            for i, lab in enumerate(labels)
        ],
        "phase_average": {
            "mean_of_phases": finite_or_none(mean_of_phases),
            "pooled": finite_or_none(pooled),
            "n_records": int(n.sum()),
        },
        "worst_phase": _extreme_phase(means, labels, lo, hi, use_min=higher_is_better),
        "best_phase": _extreme_phase(means, labels, lo, hi, use_min=not higher_is_better),
        # a question whose value differs between phases (for 0/1 outcomes: a reversal)
        "reversals": int(np.sum(lo != hi)),
        "min_value": finite_or_none(values.min()) if values.size else None,
        "max_value": finite_or_none(values.max()) if values.size else None,
        "note": WORST_PHASE_NOTE,
    }
    if binary:
        table["questions_with_any"] = int(np.sum(hi == 1.0))
        table["questions_with_all"] = int(np.sum(lo == 1.0))
    return table


def _phase_means(m: np.ndarray, valid: np.ndarray) -> tuple[Any, ...]:
    """Per phase: records where the metric applies, their sum and mean (NaN for an empty phase,
    without a warning), and the mean of those means (each phase weighs the same)."""
    n = valid.sum(axis=0)
    sums = np.where(valid, m, 0.0).sum(axis=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        means = sums / n
        mean_of_phases = np.nanmean(means) if means.size else np.nan
    return n, sums, means, mean_of_phases


def _extreme_phase(
    means: np.ndarray, labels: list[str], lo: np.ndarray, hi: np.ndarray, *, use_min: bool
) -> dict[str, Any]:
    """The worst (or best) phase both ways: the extreme per-phase mean and its phase, and the mean
    over questions of each question's own extreme phase (``lo``/``hi``: per-question min/max)."""
    k = _arg_extreme(means, use_min)
    per_q = lo if use_min else hi  # each question's worst (best) phase
    return {
        "aggregate": {
            "value": None if k is None else finite_or_none(means[k]),
            "phase": None if k is None else labels[k],
        },
        "per_question": {
            "value": finite_or_none(per_q.mean()) if per_q.size else None,
            "n_questions": int(per_q.size),
        },
    }


def segment_breakdown(
    matrix: np.ndarray,
    phase_labels: Sequence[str],
    segments: Sequence[str],
    stress_sets: Sequence[str],
    *,
    higher_is_better: bool = True,
) -> dict[str, Any]:
    """Phase tables per stress set, overall and per segment, with their denominators.

    ``{stress_set: {"all": table, "segments": {segment: table}}}``. Stress sets
    (representative, enriched) are reported apart and never pooled: there is no
    cross-set entry.
    """
    m = np.asarray(matrix, dtype=float)
    seg = np.asarray(segments, dtype=object)
    sset = np.asarray(stress_sets, dtype=object)
    out: dict[str, Any] = {}
    for s in sorted(set(sset.tolist())):
        rows = sset == s
        out[s] = {
            "all": phase_table(m[rows], phase_labels, higher_is_better=higher_is_better),
            "segments": {
                g: phase_table(m[rows & (seg == g)], phase_labels, higher_is_better=higher_is_better)
                for g in sorted(set(seg[rows].tolist()))
            },
        }
    return out
