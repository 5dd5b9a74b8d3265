"""Rich renderables for the CLI's human-readable reports (diagnose, compare).

All untrusted text (questions, answers) is passed as ``rich.text.Text``, never
as markup, so ``[bold]`` in a document stays literal.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from ledgerscope.common.safe_text import safe
from ledgerscope.common.values import format_value as _fmt

METRIC_TITLES = {
    "support": "support",
    "answer_correct": "correct",
    "critical": "critical",
    "abstained": "abstained",
    "false_assertion": "false-assert",
    "citation_supported": "cited-ok",
    "prompt_tokens": "prompt tok",
    "evidence_tokens": "evidence tok",
}


def diagnosis_table(rows: list[dict[str, Any]]) -> Table:
    """Counts per (arm, step) and the first failing records."""
    table = Table(
        title="diagnosis: records per step",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        collapse_padding=True,
    )
    table.add_column("arm")
    table.add_column("step", justify="right")
    table.add_column("name")
    table.add_column("records", justify="right")
    table.add_column("examples (qid@phase)")
    counts: Counter[tuple[str, int, str]] = Counter()
    examples: dict[tuple[str, int, str], list[str]] = {}
    for r in rows:
        key = (r["arm"], r["step"], r["step_name"])
        counts[key] += 1
        examples.setdefault(key, [])
        if len(examples[key]) < 3:
            examples[key].append(f"{r['qid']}@{r['phase']}")
    for key in sorted(counts, key=lambda k: (k[0], k[1])):
        arm, step, name = key
        table.add_row(
            Text(arm), str(step), Text(name), str(counts[key]), Text(safe(", ".join(examples[key])))
        )
    table.caption = f"{len(rows)} records; `ledgerscope diagnose LEDGER --json` prints the evidence"
    return table


_FUNNEL = ("chunked", "exact", "production", "union", "fused", "reranked", "packed", "cited")
_FUNNEL_TITLES = ("chunk", "exact", "prod", "union", "fused", "rrank", "pack", "cite")


def survival_table(rows: list[dict[str, Any]]) -> Group:
    """Stage survival per arm: % of answerable questions still supported after each stage.

    One row with the phase average, one with the worst phase.
    """
    table = _per_arm_table("stage survival: % of answerable questions keeping support", "")
    for title in _FUNNEL_TITLES:
        table.add_column(title, justify="right", no_wrap=True, min_width=5)
    notes = []
    for arm, phases in _by_arm(rows).items():
        avg, worst = [], []
        for stage in _FUNNEL:
            rates = [p["survival_rate"][stage] for p in phases if p["survival_rate"].get(stage) is not None]
            avg.append(f"{100 * sum(rates) / len(rates):.0f}" if rates else "-")
            worst.append(f"{100 * min(rates):.0f}" if rates else "-")
        table.add_row(Text(safe(arm)), "avg", *avg)
        table.add_row("", "worst", *worst)
        ann = [p["ann_recall"] for p in phases if p.get("ann_recall") is not None]
        regret = sum(p.get("reranker_regret") or 0 for p in phases)
        note = f"{safe(arm)}: ANN recall vs exact {sum(ann) / len(ann):.3f}, " if ann else f"{safe(arm)}: "
        notes.append(note + f"reranker regret in {regret} record(s)")
        extra = [
            f"{label} {_mean_of(phases, key):{spec}}"
            for label, key, spec in (
                ("duplicate ratio", "duplicate_ratio", ".3f"),
                ("prompt tokens", "mean_prompt_tokens", ".0f"),
                ("repeated tokens", "mean_repeated_source_tokens", ".1f"),
            )
            if _mean_of(phases, key) is not None
        ]
        if extra:
            notes.append("  mean per record: " + ", ".join(extra))
    return Group(table, Text("\n".join(notes)))


def _per_arm_table(title: str, second: str) -> Table:
    """A summary table in the reports' style, its first columns the arm and ``second``."""
    table = Table(
        title=title, title_justify="left", box=box.SIMPLE_HEAD, collapse_padding=True, pad_edge=False
    )
    table.add_column("arm", no_wrap=True, max_width=14)
    table.add_column(second, no_wrap=True)
    return table


def _by_arm(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        out.setdefault(r["arm"], []).append(r)
    return out


def _mean_of(phases: list[dict[str, Any]], key: str) -> float | None:
    values = [p[key] for p in phases if p.get(key) is not None]
    return sum(values) / len(values) if values else None


def recall_table(rows: list[dict[str, Any]]) -> Table | None:
    """recall@k of each ranked stage per arm: phase average (worst phase), in percent of answerable
    questions; k beyond a stage's longest list is left out. None when no row has recall@k."""
    rows = [r for r in rows if r.get("recall_at_k")]
    if not rows:
        return None
    ks = list(dict.fromkeys(k for r in rows for by_k in r["recall_at_k"].values() for k in by_k))
    if not ks:  # ranked stages without a k to read them at (e.g. only a packed context recorded)
        return None
    table = _per_arm_table("recall@k, % of answerable questions: phase average (worst phase)", "stage")
    for k in ks:
        table.add_column(f"@{k}", justify="right", no_wrap=True)
    for arm, phases in _by_arm(rows).items():
        for i, stage in enumerate(phases[0]["recall_at_k"]):
            cells = []
            for k in ks:
                values = [
                    p["recall_at_k"][stage][k]
                    for p in phases
                    if p["recall_at_k"].get(stage, {}).get(k) is not None
                ]
                cells.append(
                    f"{100 * sum(values) / len(values):.0f} ({100 * min(values):.0f})" if values else "-"
                )
            table.add_row(Text(safe(arm)) if i == 0 else "", stage, *cells)
    return table


def _interval(stat: dict[str, Any], digits: int) -> str:
    if not stat:
        return "-"
    low, high = _fmt(stat.get("low"), digits), _fmt(stat.get("high"), digits)
    return f"{_fmt(stat.get('estimate'), digits)} [{low},{high}]"


def comparison_report(
    comparison: dict[str, Any], decision: dict[str, Any] | None
) -> Iterable[RenderableType]:
    """The comparison as terminal renderables: a settings line, per stress set its metric table
    (and segment table), then the release decision when one was made."""
    from ledgerscope.analysis.stats.power import headline

    cand, base = comparison["candidate"]["arm"], comparison["baseline"]["arm"]
    settings = comparison["settings"]
    m = comparison["matching"]
    yield Text(
        f"{cand} minus {base}: {m['matched_questions']} matched questions, {m['matched_records']} matched "
        f"records over phases {', '.join(m['shared_phases'])}; bootstrap {settings['n_resamples']} x, "
        f"seed {settings['seed']}, {int(settings['confidence'] * 100)}% percentile intervals, "
        f"resampling unit: {settings['resampling_unit']}"
    )
    failed = {
        side: comparison[side].get("counts", {}).get("infrastructure_failure", 0)
        for side in ("candidate", "baseline")
    }
    if any(failed.values()):
        yield Text(
            f"failed requests (infrastructure failures: never judged, outside every answer metric): "
            f"{cand} {failed['candidate']}, {base} {failed['baseline']}"
        )
    clusters = comparison.get("clusters")
    if clusters:
        yield Text(clusters_line(clusters))
    for set_name, block in comparison["stress_sets"].items():
        yield _metric_table(set_name, block, comparison)
        if line := detectable_line(block, settings["confidence"]):
            yield Text(line)
        yield Text(comparison.get("note", ""))
        segs = block.get("segments") or {}
        if segs:
            yield _segment_table(set_name, segs)
    from ledgerscope.analysis.validity import validity_lines

    for line in validity_lines(comparison.get("answer_validity")):
        yield Text(safe(line))
    from ledgerscope.analysis.stats.repeat_noise import noise_lines

    for line in noise_lines(comparison.get("noise")):  # --repeats: noisy questions counted apart
        yield Text(safe(line))
    if decision is not None:
        yield Text(
            f"release decision: {headline(decision)}  (rule {decision['rule_digest']})",
            style="bold",
        )
        for reason in decision["reasons"]:
            yield Text("  - " + safe(reason))


def _metric_table(set_name: str, block: dict[str, Any], comparison: dict[str, Any]) -> Table:
    """One stress set's metrics: both arms' phase averages and worst phases, and the mean and
    worst-phase differences with their intervals (token counts without decimals)."""
    table = Table(
        title=f"stress set: {set_name} ({block['n_questions']} questions, "
        f"{block['n_clusters']} document clusters{_other_rule(block, comparison)})",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        collapse_padding=True,
        pad_edge=False,
    )
    for col in ("metric", "cand", "base", "diff [CI]", "worst c/b", "worst diff [CI]"):
        table.add_column(
            col,
            justify="left" if col == "metric" else "right",
            no_wrap=True,
            min_width=5 if col in ("cand", "base") else None,
        )
    for metric, res in block["metrics"].items():
        c, b, d = res["candidate"], res["baseline"], res.get("difference")
        mean = (d or {}).get("statistics", {}).get("mean", {})
        worst = (d or {}).get("statistics", {}).get("worst_aggregate", {})
        digits = 0 if metric.endswith("tokens") else 2
        table.add_row(
            METRIC_TITLES.get(metric, metric),
            _fmt(c["phase_average"]["mean_of_phases"], digits),
            _fmt(b["phase_average"]["mean_of_phases"], digits),
            _interval(mean, digits),
            f"{_fmt(c['worst_phase']['aggregate']['value'], digits)}"
            f"/{_fmt(b['worst_phase']['aggregate']['value'], digits)}",
            _interval(worst, digits),
        )
    return table


def detectable_line(block: dict[str, Any], confidence: float) -> str | None:
    """What this stress set could detect: each metric's minimum detectable difference (phase average
    / worst phase) at 80% power and the rule's confidence, for its questions and clusters."""
    from ledgerscope.analysis.stats.power import POWER, detectable

    parts = []
    for metric, res in block["metrics"].items():
        d = res.get("difference")
        mean, worst = detectable(d, "mean"), detectable(d, "worst_aggregate")
        if mean is None:
            continue
        digits = 0 if metric.endswith("tokens") else 3
        parts.append(f"{METRIC_TITLES.get(metric, metric)} {_fmt(mean, digits)}/{_fmt(worst, digits)}")
    if not parts:
        return None
    return (
        f"minimum detectable difference (phase average/worst phase; {POWER:.0%} power, "
        f"{confidence:.0%} confidence, {block['n_questions']} questions in {block['n_clusters']} "
        f"clusters, fewer where a metric applies to fewer): " + ", ".join(parts)
    )


def _segment_table(set_name: str, segs: dict[str, Any]) -> Table:
    """Support and critical-error phase averages per segment, both arms: where a difference sits."""
    seg = Table(
        title=f"segments ({set_name}): support and critical errors, phase average",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        collapse_padding=True,
    )
    for col in ("segment", "n", "support c", "support b", "critical c", "critical b"):
        seg.add_column(col, justify="left" if col == "segment" else "right")
    for name, sb in segs.items():
        sm = sb["metrics"]
        seg.add_row(
            name,
            str(sb["n_questions"]),
            _fmt(sm["support"]["candidate"]["phase_average"]["mean_of_phases"]),
            _fmt(sm["support"]["baseline"]["phase_average"]["mean_of_phases"]),
            _fmt(sm["critical"]["candidate"]["phase_average"]["mean_of_phases"]),
            _fmt(sm["critical"]["baseline"]["phase_average"]["mean_of_phases"]),
        )
    return seg


def _other_rule(block: dict[str, Any], comparison: dict[str, Any]) -> str:
    """The same block's cluster count under the rule not used (", 2 by components")."""
    both = block.get("n_clusters_by_rule")
    rule = (comparison.get("clusters") or {}).get("rule")
    if not both or not rule:
        return ""
    other = "components" if rule == "first-document" else "first_document"
    return f"; {both[other]} by {other.replace('_', ' ')}"


def clusters_line(clusters: dict[str, Any]) -> str:
    """One line: the bootstrap's clusters under both rules, which one is used, and any warning."""
    line = (
        f"bootstrap clusters: {clusters['first_document']} by first document, "
        f"{clusters['components']} by connected components of the question-document graph; "
        f"using {clusters['rule']}"
    )
    if clusters.get("warning"):
        line += f"\nwarning: {clusters['warning']}"
    return line


def calibration_report(result: dict[str, Any]) -> Iterable[RenderableType]:
    """``judge calibrate``: the confusion matrix (deterministic rows, LLM columns), kappa, examples."""
    endpoint = result["judge"].get("endpoint", {})
    yield Text(
        safe(
            f"arm {result['arm']}: LLM judge {endpoint.get('model') or '?'} "
            f"at {endpoint.get('base_url', '?')} "
            f"(rubric {result['judge'].get('rubric_version')}, verdicts {result['llm_verdicts']}) "
            "against the "
            f"deterministic judge: {result['compared']} records compared, {result['skipped']} not judged by "
            f"either, {result['distinct_answers_graded']} distinct answers graded now"
        )
    )
    table = Table(
        title="rows: deterministic judge, columns: LLM judge",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        collapse_padding=True,
        pad_edge=False,
    )
    table.add_column("deterministic \\ llm", justify="left", no_wrap=True)
    for label in result["labels"]:
        table.add_column(label, justify="right")
    for label, row in zip(result["labels"], result["matrix"], strict=True):
        table.add_row(label, *(str(n) for n in row))
    yield table
    yield Text(
        f"observed agreement {_fmt(result['observed'])}, chance agreement {_fmt(result['expected'])}, "
        f"Cohen's kappa {_fmt(result['kappa'])} ({result['band']})"
        + (f"; {result['unlabelled']} LLM replies without a usable label" if result["unlabelled"] else "")
    )
    yield Text(result["note"])
    for d in result["disagreements"]:
        yield Text(
            "  "
            + safe(
                f"{d['qid']}@{d['phase']}: deterministic {d['deterministic']}, "
                f"llm {d['llm']} ({d['llm_reason'][:80]}) for {str(d['answer'])[:80]!r}"
            )
        )


def reversals_table(reversals: list[dict[str, Any]], examples: int = 2) -> Table | None:
    """Questions whose support or answer verdict flips with the phase, per arm and kind, with the
    first few and the phases on each side. None when there are none."""
    if not reversals:
        return None
    table = _per_arm_table("reversals: questions whose verdict changes with the phase", "kind")
    table.add_column("questions", justify="right")
    table.add_column("examples (phases on each side)")
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in reversals:
        groups.setdefault((r["arm"], r["kind"]), []).append(r)
    for (arm, kind), revs in sorted(groups.items(), key=lambda g: (g[0][0], g[0][1] != "support")):
        shown = [
            f"{r['qid']}: " + " | ".join(f"{side} {','.join(phases)}" for side, phases in r["phases"].items())
            for r in revs[:examples]
        ]
        table.add_row(Text(safe(arm)), kind, str(len(revs)), Text(safe("\n".join(shown))))
    return table
