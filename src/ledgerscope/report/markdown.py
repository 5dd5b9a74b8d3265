"""The release gate as a Markdown summary: for a pull request comment or ``$GITHUB_STEP_SUMMARY``.

Decision first, then the rule's checks, the worst flips (correct in the baseline, wrong in the
candidate) and the figures (paired differences with their minimum detectable difference).
Untrusted text (questions, ids) is escaped: control and bidi characters shown, HTML entities, and
Markdown punctuation backslashed, so a question cannot become a link, an image or a table cell.
"""

from __future__ import annotations

import html
import re

from ledgerscope.analysis.stats.power import detectable, headline
from ledgerscope.common.safe_text import safe_line
from ledgerscope.report.gate_inputs import GateOutcome

#: flips listed in the summary (all of them are in the JUnit file)
WORST_FLIPS = 10
#: what can start markup inside a line or a table cell (``<`` and ``&`` become entities first)
_MD_PUNCT = re.compile(r"([\\`*_\[\]!|~])")
_GLYPH = {"pass": "✅ pass", "violates": "❌ violates", "inconclusive": "⚠️ inconclusive"}
_OUTCOME = {"accept": "✅ ACCEPT", "reject": "❌ REJECT", "collect-more-evidence": "⚠️ COLLECT MORE EVIDENCE"}
_FIGURES = (("support", "support"), ("answer_correct", "correct"), ("citation_supported", "cited-ok"))


def md(text: object) -> str:
    """Untrusted text as literal Markdown on one line."""
    return _MD_PUNCT.sub(r"\\\1", html.escape(safe_line(str(text), 500), quote=False))


def code(text: object) -> str:
    """Untrusted text as a Markdown code span (shown literally; no backtick can close it)."""
    return "`" + safe_line(str(text), 500).replace("`", "'").replace("|", "\\|") + "`"


def _num(x: float | None, sign: bool = True) -> str:
    return "n/a" if x is None else (f"{x:+.3f}" if sign else f"{x:.3f}")


def _checks(gate: GateOutcome) -> list[str]:
    rows = ["| status | stress set | check | reason |", "| --- | --- | --- | --- |"]
    rows += [
        f"| {_GLYPH.get(c['status'], md(c['status']))} | {md(c['stress_set'])} | {md(c['tolerance'])} "
        f"| {md(c['reason'])} |"
        for c in gate.decision["checks"]
    ]
    return rows


def _flips(gate: GateOutcome) -> list[str]:
    if not gate.flips:
        return ["No question flipped from correct (baseline) to wrong (candidate)."]
    n = sum(len(f["phases"]) for f in gate.flips)
    rows = [
        f"{len(gate.flips)} question(s) flipped from correct to wrong at {n} (question, phase) cell(s); "
        f"the {min(WORST_FLIPS, len(gate.flips))} with most phases:",
        "",
        "| question | segment | phases | diagnosis step | boundary |",
        "| --- | --- | --- | --- | --- |",
    ]
    noisy = sum(bool(f.get("noisy")) for f in gate.flips)
    if noisy:  # --repeats: a flip whose verdict also flips between repeats may be run-to-run noise
        rows[0] += f" ({noisy} of these questions are noisy, listed last and marked ~)"
    for f in gate.flips[:WORST_FLIPS]:
        first = f["phases"][0]
        phases = ", ".join(p["phase"] for p in f["phases"])
        rows.append(
            f"| {'~ ' if f.get('noisy') else ''}{md(f['qid'])} | {md(f['segment'])} | {md(phases)} "
            f"| {md(first['step'])} {md(first['step_name'])} | {md(first['boundary'])} |"
        )
    return rows


def _noise(gate: GateOutcome) -> list[str]:
    """``--repeats``: the run-to-run noise, counted apart (nothing without repeats)."""
    from ledgerscope.analysis.stats.repeat_noise import noise_lines

    lines = noise_lines(gate.comparison.get("noise"))
    return ["", "### Run-to-run noise", "", *(f"- {md(x.strip())}" for x in lines)] if lines else []


def _figures(gate: GateOutcome) -> list[str]:
    conf = gate.comparison["settings"]["confidence"]
    rows = [
        f"Candidate minus baseline, phase average, {conf:.0%} interval; MDD: the minimum detectable "
        "difference at 80% power for these questions and document clusters.",
        "",
        "| stress set | questions | clusters | metric | difference | interval | MDD |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, block in sorted(gate.comparison["stress_sets"].items()):
        for metric, label in _FIGURES:
            diff = ((block["metrics"].get(metric) or {}).get("difference")) or {}
            e = (diff.get("statistics") or {}).get("mean")
            if not e:
                continue
            mdd = detectable(diff, "mean")
            rows.append(
                f"| {md(name)} | {diff.get('n_questions')} | {diff.get('n_units')} | {label} "
                f"| {_num(e['estimate'])} | [{_num(e['low'])}, {_num(e['high'])}] "
                f"| {_num(mdd, sign=False)} |"
            )
    return rows


def markdown_summary(gate: GateOutcome) -> str:
    """The whole summary as Markdown text."""
    d = gate.decision
    base = f"ledger {code(gate.baseline_ledger)}" if gate.baseline_ledger else "the same ledger"
    title = _OUTCOME.get(d["outcome"], md(d["outcome"]))
    if headline(d) != d["outcome"].upper():  # an ACCEPT below the minimum detectable difference
        title = "⚠️ " + md(headline(d))
    head = [
        f"## Release gate: {title}",
        "",
        f"**{md(gate.candidate)}** (candidate, ledger {code(gate.ledger)}) against "
        f"**{md(gate.baseline)}** (baseline, {base}); rule {code(gate.rule)} ({code(d['rule_digest'])}); "
        f"exit status {gate.exit_code} ({code('--fail-on ' + gate.fail_on)}).",
    ]
    if gate.report:
        head.append(f"The HTML report: {code(gate.report)}.")
    parts = [
        *head,
        "",
        "### Checks",
        "",
        *_checks(gate),
        "",
        "### Worst flips",
        "",
        *_flips(gate),
        "",
        "### Figures",
        "",
        *_figures(gate),
        *_noise(gate),
        "",
    ]
    return "\n".join(parts)
