"""A preregistered release rule (TOML) and the accept / reject / collect-more-evidence decision.

The rule is written **before** the candidate's results are seen; its SHA-256
(:func:`rule_digest`, over the file's bytes) travels with every decision so a
reader can check the decision used the file that was declared. The comparison
it is applied to is :func:`ledgerscope.analysis.stats.compare.compare_arms`'s dict, computed with
the rule's ``confidence``, ``n_resamples`` and ``seed`` (a mismatch is an
error, not a silent recomputation).

File format (``ledgerscope-release-rule/1``; ``docs/release_rule.example.toml``)
--------------------------------------------------------------------------------
Top-level keys, all optional except that at least one tolerance is required::

    format = "ledgerscope-release-rule/1"
    description = "free text: population, intervention, why these tolerances"
    candidate = "arm-name"            # if given, the comparison's arms must match
    baseline = "arm-name"
    confidence = 0.95                 # two-sided percentile interval (default 0.95)
    n_resamples = 10000               # bootstrap replicates (default 10000, at least 100)
    seed = 0                          # bootstrap seed (default 0)
    interval_handling = "conservative"  # the only handling (default)
    min_questions = 30                # default 1; see below
    min_oracle_correct = 0.8          # default 0.8; see "Answer side" below
    underpowered_is_inconclusive = true   # default true; see below
    stress_sets = ["representative", "enriched"]   # default: every stress set in the comparison

Tolerances on the paired difference (candidate minus baseline), each a number
in [-1, 1] that the difference must not fall below (``-0.02`` = at most two
points of loss). A bare number applies to ``mean`` (the phase average: mean of
per-phase means) and ``worst_aggregate`` (the worst phase: min over phases of
aggregate support); a table names statistics one by one, any of ``mean``,
``pooled_mean``, ``worst_aggregate``, ``worst_per_question``::

    max_support_loss = -0.02                          # support (complete support in the packed context)
    [max_support_loss]                                # or, per statistic
    mean = -0.02
    worst_aggregate = -0.03
    worst_per_question = -0.05
    [max_answer_loss]                                 # answer_correct, same form
    [max_citation_loss]                               # citation_supported (unresolved attribution)

Critical-condition errors of the **candidate**, per segment (segment names as in
the fixtures; quote none, hyphens are valid bare keys). An integer is the most
questions allowed to have a critical-condition error in at least one phase; a
float in [0, 1] is the most share of the segment's answer-judged questions
allowed to have one (its exact Clopper-Pearson interval at ``confidence`` is
what the rule judges)::

    [max_critical_errors_per_segment]
    rule-exception = 0
    number-scope = 0.05

Token ceiling of the candidate per record (a measured resource, judged without
an interval). A bare integer is the ``max`` of ``prompt_tokens``::

    [max_evidence_tokens]
    field = "prompt_tokens"           # or "evidence_tokens" (default prompt_tokens)
    mean = 900                        # mean over the matched records
    max = 1200                        # largest single record

Latency allowance and cost boundary (``[max_latency]``, ``[max_latency_vs_baseline]``,
``[max_cost]``): see :mod:`.resource_limits`; they read the comparison's ``resources``.

Unknown keys, wrong types and out-of-range values are errors naming the file,
line (where it can be found) and field.

Answer side: the answer-side checks (``max_answer_loss``, ``max_critical_errors_per_segment``) judge the
generator's answers, which say something only where the generator answers correctly when given full
support. Where an arm's oracle is correct on fewer than ``min_oracle_correct`` of a stress set's
answerable questions (the comparison's ``answer_validity``, :mod:`ledgerscope.analysis.validity`),
those checks are *inconclusive: generator fails with full support on N of M questions*, never pass.

Decision (``interval_handling = "conservative"``)
--------------------------------------------------
Every tolerance is checked in every evaluated stress set (representative and
enriched are judged apart, never pooled). A check with an interval *passes*
only if the whole interval lies within the tolerance, *violates* if the whole
interval lies outside, and is *inconclusive* otherwise; a check without an
interval (counts, tokens) passes or violates on the observed value. A check
over fewer than ``min_questions`` questions cannot pass (a small sample that
looks fine is inconclusive), but a violation still counts. The outcome is
``reject`` if any check violates, else ``collect-more-evidence`` if any is
inconclusive or has no data, else ``accept``. Every check yields a reason
naming the stress set, metric, observed value or interval, and the tolerance;
a difference check's reason also gives its minimum detectable difference at 80%
power and the questions its tolerance would need (:mod:`ledgerscope.analysis.stats.power`). An ``accept``
with a passing tolerance smaller than its minimum detectable difference is not a
clean pass: it becomes ``collect-more-evidence`` (``underpowered_is_inconclusive
= false``: stays ``accept`` with the warning as its first reason).
"""

from __future__ import annotations

from typing import Any

from ledgerscope.analysis.stats.power import UNDERPOWERED, too_small_reason, underpowered_passes, with_power
from ledgerscope.analysis.stats.release.resource_limits import resource_checks
from ledgerscope.analysis.stats.release.rule import STAT_WORDS, Check, Decision, Rule
from ledgerscope.analysis.validity import gate_checks
from ledgerscope.common.errors import InputError, Problem

# ---------------------------------------------------------------------------
# deciding


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:+.4f}"


def _fmt_plain(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.4g}"


def _check_settings(rule: Rule, comparison: dict[str, Any]) -> None:
    problems = []
    settings = comparison.get("settings", {})
    for key in ("confidence", "n_resamples", "seed"):
        if key in settings and settings[key] != getattr(rule, key):
            problems.append(
                Problem(
                    "comparison",
                    None,
                    f"settings.{key}",
                    f"computed with {settings[key]!r} but the rule ({rule.path}) declares "
                    f"{getattr(rule, key)!r}; rerun the comparison with the rule's settings",
                )
            )
        elif key not in settings:
            problems.append(Problem("comparison", None, f"settings.{key}", "missing"))
    for arm in ("candidate", "baseline"):
        want = getattr(rule, arm)
        got = (comparison.get(arm) or {}).get("arm")
        if want is not None and got != want:
            problems.append(
                Problem(
                    "comparison",
                    None,
                    f"{arm}.arm",
                    f"is {got!r} but the rule ({rule.path}) was declared for {want!r}",
                )
            )
    if problems:
        raise InputError(problems)


def _interval_status(low: float, high: float, limit: float) -> str:
    """Conservative: the whole interval at or above the limit passes, wholly below violates."""
    if low >= limit:
        return "pass"
    if high < limit:
        return "violates"
    return "inconclusive"


def _gate(status: str, n: int | None, rule: Rule) -> tuple[str, str]:
    if status == "pass" and (n is None or n < rule.min_questions):
        return "inconclusive", f"; only {n or 0} question(s), fewer than min_questions {rule.min_questions}"
    return status, ""


_VERB = {"pass": "within tolerance", "violates": "VIOLATES tolerance", "inconclusive": "inconclusive"}


def _difference_checks(rule: Rule, s: str, block: dict[str, Any]) -> list[Check]:
    out = []
    conf = f"{rule.confidence:.0%}"
    for tol in rule.differences:
        name = f"{tol.key}.{tol.statistic}"
        what = f"{s}: {tol.metric} difference (candidate - baseline), {STAT_WORDS[tol.statistic]}"
        metric = (block.get("metrics") or {}).get(tol.metric) or {}
        diff = metric.get("difference")
        entry = ((diff or {}).get("statistics") or {}).get(tol.statistic)
        if entry is None or entry.get("low") is None or entry.get("high") is None:
            out.append(
                Check(
                    s,
                    name,
                    tol.metric,
                    "inconclusive",
                    f"{what}: no data; tolerance >= {_fmt(tol.limit)}: no evidence",
                    limit=tol.limit,
                    n=(diff or {}).get("n_questions"),
                )
            )
            continue
        assert diff is not None  # the entry is one of its statistics
        n = diff.get("n_questions")
        low, high, est = entry["low"], entry["high"], entry.get("estimate")
        status, extra = _gate(_interval_status(low, high, tol.limit), n, rule)
        reason = (
            f"{what} = {_fmt(est)}, {conf} CI [{_fmt(low)}, {_fmt(high)}], n={n} questions; "
            f"tolerance >= {_fmt(tol.limit)}: {_VERB[status]}{extra}"
        )
        out.append(Check(s, name, tol.metric, status, reason, est, low, high, tol.limit, n))
    return out


def _clopper_pearson(k: int, n: int, confidence: float) -> tuple[float, float]:
    from scipy.stats import binomtest

    ci = binomtest(k, n).proportion_ci(confidence_level=confidence, method="exact")
    return float(ci.low), float(ci.high)


def _segment_checks(rule: Rule, s: str, block: dict[str, Any]) -> list[Check]:
    out = []
    for lim in rule.critical_per_segment:
        name = f"max_critical_errors_per_segment.{lim.segment}"
        seg = (block.get("segments") or {}).get(lim.segment) or {}
        table = ((seg.get("metrics") or {}).get("critical") or {}).get("candidate") or {}
        n = table.get("n_questions") or 0
        k = table.get("questions_with_any")
        what = f"{s}: critical-condition errors of the candidate in segment {lim.segment}"
        if not n or k is None:
            bound = (
                f"<= {int(lim.limit)} question(s)"
                if lim.kind == "count"
                else f"<= {_fmt_plain(lim.limit)} of questions"
            )
            out.append(
                Check(
                    s,
                    name,
                    "critical",
                    "inconclusive",
                    f"{what}: no answer-judged questions; tolerance {bound}: no evidence",
                    limit=lim.limit,
                    n=n,
                )
            )
            continue
        if lim.kind == "count":
            status = "violates" if k > lim.limit else "pass"
            status, extra = _gate(status, n, rule)
            reason = (
                f"{what}: {k} of {n} question(s) with a critical error in at least one phase; "
                f"tolerance <= {int(lim.limit)} question(s): {_VERB[status]}{extra}"
            )
            out.append(Check(s, name, "critical", status, reason, float(k), None, None, lim.limit, n))
        else:
            low, high = _clopper_pearson(int(k), int(n), rule.confidence)
            status = "pass" if high <= lim.limit else "violates" if low > lim.limit else "inconclusive"
            status, extra = _gate(status, n, rule)
            reason = (
                f"{what}: share of questions with a critical error in at least one phase = "
                f"{k}/{n} = {k / n:.4f}, {rule.confidence:.0%} Clopper-Pearson CI "
                f"[{low:.4f}, {high:.4f}]; tolerance <= {_fmt_plain(lim.limit)}: "
                f"{_VERB[status]}{extra}"
            )
            out.append(Check(s, name, "critical", status, reason, k / n, low, high, lim.limit, n))
    return out


def _token_checks(rule: Rule, s: str, block: dict[str, Any]) -> list[Check]:
    tok = rule.tokens
    if tok is None:
        return []
    out = []
    table = ((block.get("metrics") or {}).get(tok.field) or {}).get("candidate") or {}
    n = table.get("n_questions")
    for kind, limit in (("mean", tok.mean), ("max", tok.max)):
        if limit is None:
            continue
        name = f"max_evidence_tokens.{kind}"
        observed = (
            (table.get("phase_average") or {}).get("pooled") if kind == "mean" else table.get("max_value")
        )
        what = f"{s}: candidate {tok.field} per record, {kind}"
        if observed is None:
            out.append(
                Check(
                    s,
                    name,
                    tok.field,
                    "inconclusive",
                    f"{what}: no records with a token count; ceiling <= {limit:g}: no evidence",
                    limit=limit,
                    n=n,
                )
            )
            continue
        status, extra = _gate("pass" if observed <= limit else "violates", n, rule)
        n_rec = (table.get("phase_average") or {}).get("n_records")
        reason = (
            f"{what} = {observed:.1f} over {n_rec} record(s); ceiling <= {limit:g} "
            f"(measured, no interval): {_VERB[status]}{extra}"
        )
        out.append(Check(s, name, tok.field, status, reason, observed, None, None, limit, n))
    return out


def _stress_set_checks(rule: Rule, by_set: dict[str, Any]) -> list[Check]:
    """The difference, segment and token checks of every stress set the rule evaluates (all the
    comparison holds when it names none); inconclusive where there is nothing to check."""
    wanted = list(rule.stress_sets) if rule.stress_sets else sorted(by_set)
    checks: list[Check] = []
    if not wanted:
        checks.append(
            Check(
                "-",
                "stress_sets",
                "-",
                "inconclusive",
                "the comparison holds no matched questions: no evidence",
            )
        )
    for s in wanted:
        block = by_set.get(s)
        if block is None:
            checks.append(
                Check(
                    s,
                    "stress_sets",
                    "-",
                    "inconclusive",
                    f"{s}: the rule evaluates this stress set but the comparison holds no "
                    "matched questions in it: no evidence",
                )
            )
            continue
        checks += _difference_checks(rule, s, block)
        checks += _segment_checks(rule, s, block)
        checks += _token_checks(rule, s, block)
    return checks


def decide(rule: Rule, comparison: dict[str, Any]) -> Decision:
    """Apply a loaded rule to a :func:`ledgerscope.analysis.stats.compare.compare_arms` result."""
    fmt = comparison.get("format")
    if fmt not in (None, "ledgerscope-comparison/1"):
        raise InputError(Problem("comparison", None, "format", f"unknown format {fmt!r}"))
    _check_settings(rule, comparison)
    checks = _stress_set_checks(rule, comparison.get("stress_sets") or {})
    checks += resource_checks(rule.resources, comparison, rule.min_questions, Check)
    arms = [(comparison.get(a) or {}).get("arm") for a in ("candidate", "baseline")]
    checks = gate_checks(
        checks, comparison.get("answer_validity"), [a for a in arms if a], rule.min_oracle_correct
    )
    statuses = {c.status for c in checks}
    outcome = (
        "reject"
        if "violates" in statuses
        else "collect-more-evidence"
        if "inconclusive" in statuses
        else "accept"
    )
    order = {"violates": 0, "inconclusive": 1, "pass": 2}
    ranked = sorted(with_power(rule, comparison, checks), key=lambda c: order[c.status])
    if outcome == "accept" and (small := underpowered_passes(rule, comparison, checks)):
        outcome = "collect-more-evidence" if rule.underpowered_is_inconclusive else "accept"
        ranked.insert(
            0,
            Check(
                "-",
                UNDERPOWERED,
                "-",
                "inconclusive" if outcome != "accept" else "pass",
                too_small_reason(small, outcome),
            ),
        )
    return Decision(outcome, [c.reason for c in ranked], rule.digest, ranked)
