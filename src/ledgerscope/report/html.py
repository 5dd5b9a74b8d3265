"""The shareable HTML report: one self-contained file, readable offline, without JavaScript, printable.

:func:`render` turns :class:`ledgerscope.report.figures.ReportData` into a page with inline
styles and inline SVG (:mod:`.svg`). It contains no script and no reference to another file or
host, and its Content-Security-Policy forbids both, so the page cannot fetch anything even if
it tried. Every string from the ledger (documents, questions, answers, ids) goes through
:func:`ledgerscope.report.svg.esc`: markup shows as text and control or bidi characters as
visible escapes; no markup is ever built from data.
"""

from __future__ import annotations

import datetime
from typing import Any

from ledgerscope.analysis.stats.power import headline
from ledgerscope.report.figures import ReportData
from ledgerscope.report.html_reversals import reversal_cards, reversal_strip
from ledgerscope.report.resources_html import resources_section
from ledgerscope.report.svg import Series, bars, esc, histogram, line_chart

CANDIDATE_COLOUR, BASELINE_COLOUR = "#c2410c", "#0f766e"
METRIC_NAMES = {
    "support": "support (complete support in the packed context)",
    "answer_correct": "correct answers",
    "critical": "critical-condition errors",
}
OUTCOME_GLYPHS = {"accept": "✓", "reject": "✗", "collect-more-evidence": "?"}
STATUS_GLYPHS = {"pass": "✓", "violates": "✗", "inconclusive": "?"}

STYLE = """
body{font-family:system-ui,sans-serif;margin:0 auto;max-width:1100px;padding:1rem 1.5rem;color:#111;
background:#fff;line-height:1.4}
h1{font-size:1.5rem;margin:.2rem 0}h2{font-size:1.2rem;border-bottom:1px solid #ccc;margin-top:2rem}
h3{font-size:1rem;margin:1rem 0 .3rem}
.meta,.note{color:#444;font-size:.85rem}
.decision{border:3px solid #111;padding:.6rem 1rem;margin:1rem 0}
.outcome{font-size:1.8rem;font-weight:bold;letter-spacing:.05em}
.outcome.reject{color:#b91c1c}.outcome.accept{color:#15803d}.outcome.collect-more-evidence{color:#a16207}
.reasons li{margin:.2rem 0}.status{font-weight:bold;display:inline-block;width:1.2em}
.withheld{background:#fef3c7;border:1px solid #d97706;padding:.5rem .8rem}
table{border-collapse:collapse;font-size:.85rem;margin:.4rem 0}
td,th{border-bottom:1px solid #e5e7eb;padding:.15rem .5rem;text-align:right}
td:first-child,th:first-child{text-align:left}
.charts{display:flex;flex-wrap:wrap;gap:1rem}
svg{max-width:100%;height:auto}
.card{border:1px solid #ccc;padding:.5rem .8rem;margin:1rem 0;break-inside:avoid}
.sides{display:grid;grid-template-columns:1fr 1fr;gap:1rem}
.text{white-space:pre-wrap;font-family:ui-monospace,monospace;font-size:.78rem;background:#f9fafb;
padding:.4rem;border:1px solid #eee;overflow-wrap:anywhere}
mark.gold{background:#fde68a;color:#000}.packed{text-decoration:underline #2563eb 2px}
.cut{color:#dc2626;font-weight:bold}.lbl{color:#92400e;font-size:.7rem}
nav ul{columns:3;font-size:.8rem}
@page{size:A4;margin:12mm}
"""
PRINT_STYLE = """
body{max-width:none;padding:0;font-size:10pt}nav{display:none}
h2{break-after:avoid}.card,.decision,svg,table{break-inside:avoid}
.sides{grid-template-columns:1fr 1fr}a{color:#000;text-decoration:none}
"""
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'"


def render(data: ReportData, *, generated: str | None = None) -> str:
    """The whole page as one string."""
    generated = generated or datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    title = f"ledgerscope report: {data.candidate} vs {data.baseline}"
    body = [
        _header(data, title, generated),
        _decision(data),
        _withheld(data),
        _nav(),
        _curves(data),
        _distributions(data),
        _funnel(data),
        _steps(data),
        _segments(data),
        reversal_strip(data),
        reversal_cards(data),
        resources_section(data.comparison),
        _footer(data),
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<title>{esc(title)}</title><style>{STYLE}</style><style media="print">{PRINT_STYLE}</style>'
        "</head><body>" + "".join(body) + "</body></html>\n"
    )


def _header(data: ReportData, title: str, generated: str) -> str:
    m = data.manifest
    return (
        f'<header><h1>{esc(title)}</h1><p class="meta">ledger <code>{esc(data.ledger)}</code> · '
        f"identity <code>{esc(m.get('identity', '?'))}</code> · swept {esc(m.get('created', '?'))} · "
        f"report generated {esc(generated)}</p></header>"
    )


def _answer_side(data: ReportData) -> str:
    """The oracle's validity meter, beside the decision: what the answer-side verdicts are worth."""
    from ledgerscope.analysis.stats.repeat_noise import noise_lines
    from ledgerscope.analysis.validity import validity_lines

    lines = validity_lines(data.comparison.get("answer_validity"))
    noise = noise_lines(data.comparison.get("noise"))  # --repeats: noisy questions counted apart
    out = '<pre class="answer-side" id="answer-side">' + "\n".join(esc(x) for x in lines) + "</pre>"
    out = out if lines else ""
    if noise:
        out += '<pre class="noise" id="noise">' + "\n".join(esc(x) for x in noise) + "</pre>"
    return out


def _decision(data: ReportData) -> str:
    d = data.decision
    if d is None:
        return (
            '<section id="decision" class="decision"><div class="outcome">no release decision</div>'
            "<p>No preregistered rule was given (<code>--rule</code>): the figures below describe the "
            f"comparison without judging it.</p>{_answer_side(data)}</section>"
        )
    items = "".join(
        f'<li><span class="status" title="{esc(c["status"])}">{STATUS_GLYPHS[c["status"]]}</span>'
        f"{esc(c['status'])}: {esc(c['reason'])}</li>"
        for c in d["checks"]
    )
    rule = data.rule or {}
    outcome = d["outcome"]
    return (
        f'<section id="decision" class="decision"><div class="outcome {esc(outcome)}">'
        f"{OUTCOME_GLYPHS.get(outcome, '')} release decision: {esc(headline(d))}</div>"
        f'<ul class="reasons">{items}</ul><p class="meta">rule <code>{esc(rule.get("path", ""))}</code>, '
        f"digest <code>{esc(d['rule_digest'])}</code>{_rule_description(rule)}</p>"
        f"{_answer_side(data)}</section>"
    )


def _rule_description(rule: dict[str, Any]) -> str:
    return f" · {esc(rule['description'])}" if rule.get("description") else ""


def _withheld(data: ReportData) -> str:
    r = data.redaction
    if not r:
        return ""
    return (
        '<section id="withheld" class="withheld"><strong>Restricted source text withheld.</strong> '
        f"{r['documents']} document(s), {r['spans']} span(s) and {r['fields']} other text field(s) of "
        "documents with access labels are shown as ids, offsets and digests only "
        f"({', '.join(esc(d) for d in r['doc_ids'])}). Run <code>ledgerscope report … "
        "--include-restricted</code> inside the authorised environment to include them.</section>"
    )


def _nav() -> str:
    parts = [
        ("curves", "phase curves"),
        ("differences", "paired differences"),
        ("funnel", "stage survival"),
        ("steps", "diagnosis steps"),
        ("segments", "segments"),
        ("strip", "reversal strip"),
        ("reversals", "reversal boundaries"),
    ]
    return "<nav><ul>" + "".join(f'<li><a href="#{a}">{t}</a></li>' for a, t in parts) + "</ul></nav>"


def _series(data: ReportData, entries: list[dict[str, Any]]) -> list[Series]:
    out = []
    for arm, name, colour, dash, marker in (
        ("candidate", data.candidate, CANDIDATE_COLOUR, "", "circle"),
        ("baseline", data.baseline, BASELINE_COLOUR, "6 4", "square"),
    ):
        vals = [(e[arm] or {}) for e in entries]
        out.append(
            Series(
                name if name == arm else f"{arm}: {name}",
                [v.get("mean") for v in vals],
                [v.get("low") for v in vals],
                [v.get("high") for v in vals],
                colour,
                dash,
                marker,
            )
        )
    return out


def _curves(data: ReportData) -> str:
    out = [
        '<section id="curves"><h2>Per phase: support and correct answers</h2>'
        f'<p class="note">Each point is one arm\'s rate at one phase, its whisker the '
        f"{data.settings.confidence:.0%} bootstrap interval ({data.settings.n_resamples} replicates, "
        f"seed {data.settings.seed}, documents resampled). The ring marks each arm's worst phase. "
        f"{esc(data.comparison.get('note', ''))}</p>"
    ]
    for stress_set, by_metric in sorted(data.curves.items(), key=lambda kv: kv[0] != "representative"):
        block = data.comparison["stress_sets"][stress_set]
        out.append(
            f"<h3>stress set {esc(stress_set)} ({block['n_questions']} questions, "
            f'{block["n_clusters"]} document clusters)</h3><div class="charts">'
        )
        tables = []
        for metric, entries in by_metric.items():
            labels = [e["phase"] for e in entries]
            marks = []
            for k, arm in enumerate(("candidate", "baseline")):
                worst = block["metrics"][metric][arm]["worst_phase"]["aggregate"]["phase"]
                if worst in labels:
                    marks.append((k, labels.index(worst), f"worst {worst}"))
            out.append(
                line_chart(
                    labels,
                    _series(data, entries),
                    title=f"{METRIC_NAMES[metric]}",
                    y_label="rate",
                    marks=marks,
                    element_id=f"phase-curve-{stress_set}-{metric}",
                )
            )
            tables.append(_curve_table(metric, entries))
        out.append("</div>" + "".join(tables))
    out.append("</section>")
    return "".join(out)


def _pct(v: float | None) -> str:
    return "–" if v is None else f"{100 * v:.0f}%"


def _curve_table(metric: str, entries: list[dict[str, Any]]) -> str:
    head = "".join(f"<th>{esc(e['phase'])}</th>" for e in entries)
    rows = []
    for arm in ("candidate", "baseline"):
        cells = "".join(
            f"<td>{_pct(e[arm]['mean'])} [{_pct(e[arm]['low'])}, {_pct(e[arm]['high'])}] n={e[arm]['n']}</td>"
            if e[arm]
            else "<td>–</td>"
            for e in entries
        )
        rows.append(f"<tr><td>{arm}</td>{cells}</tr>")
    return (
        f"<table><caption>{esc(METRIC_NAMES[metric])} per phase: rate [interval] and denominator"
        f"</caption><tr><th>phase</th>{head}</tr>{''.join(rows)}</table>"
    )


def _distributions(data: ReportData) -> str:
    out = [
        '<section id="differences"><h2>Paired difference (candidate − baseline) against the rule</h2>'
        '<p class="note">The bootstrap distribution of the difference, the shaded band its interval, the '
        "solid line the estimate, the dashed line the rule's tolerance (the difference must not fall "
        "below it). A tolerance passes only if the whole interval lies at or above it. The dotted line "
        "is minus the minimum detectable difference (MDD) at 80% power for these questions and document "
        "clusters: a tolerance closer to zero than it is one this run is too small to show.</p>"
        '<div class="charts">'
    ]
    for d in sorted(data.distributions, key=lambda d: d["stress_set"] != "representative"):
        lines = [(d["estimate"], f"estimate {d['estimate']:+.3f}", "")] if d["estimate"] is not None else []
        if d["limit"] is not None:
            lines.append((d["limit"], f"tolerance ≥ {d['limit']:+.3f}", "5 3"))
        status = f" · {STATUS_GLYPHS[d['status']]} {d['status']}" if d["status"] else ""
        if d.get("mdd") is not None:
            lines.append((-d["mdd"], f"MDD −{d['mdd']:.3f}", "1 3"))
        band = (d["low"], d["high"]) if d["low"] is not None else None
        mdd = f" · MDD {d['mdd']:.3f} (80% power)" if d.get("mdd") is not None else ""
        title = f"{d['stress_set']}: {d['metric']}, {d['statistic']}{status}{mdd}"
        out.append(
            histogram(
                list(d["replicates"]),
                title=title,
                lines=lines,
                band=band,
                element_id=f"difference-{d['stress_set']}-{d['metric']}-{d['statistic']}",
            )
        )
    out.append("</div></section>")
    return "".join(out)


def _funnel(data: ReportData) -> str:
    stages = [f["stage"] for f in next(iter(data.funnel.values()))]
    groups = []
    for arm, colour, dash in (
        (data.candidate, CANDIDATE_COLOUR, ""),
        (data.baseline, BASELINE_COLOUR, "6 4"),
    ):
        rows = data.funnel[arm]
        groups.append(
            (
                Series(arm, [r["mean"] for r in rows], [r["worst"] for r in rows], [], colour, dash),
                [f"{_pct(r['mean'])} (worst {_pct(r['worst'])})" for r in rows],
            )
        )
    chart = bars(
        stages,
        groups,
        title="stage survival: share of answerable records keeping support",
        element_id="funnel-chart",
    )
    return (
        '<section id="funnel"><h2>Stage survival</h2><p class="note">Per stage of the cascade, the phase '
        "average of the share of answerable records whose support survives it; the black tick is the "
        f"worst phase.</p>{chart}</section>"
    )


def _steps(data: ReportData) -> str:
    arms = list(data.steps)
    # (step, name): step 9 holds answers the tree blames, failed requests and answered controls apart
    keys = sorted({(step, name) for arm in arms for step, name, _n in data.steps[arm]})
    counts = {arm: {(step, name): n for step, name, n in data.steps[arm]} for arm in arms}
    totals = {arm: sum(counts[arm].values()) or 1 for arm in arms}
    head = "".join(f"<th>{esc(a)}</th>" for a in arms)
    rows = "".join(
        f"<tr><td>{step} {esc(name)}</td>"
        + "".join(
            f"<td>{counts[a].get((step, name), 0)} "
            f"({100 * counts[a].get((step, name), 0) / totals[a]:.0f}%)</td>"
            for a in arms
        )
        + "</tr>"
        for step, name in keys
    )
    return (
        '<section id="steps"><h2>Records per diagnosis step</h2><p class="note">Each record sits on the '
        "first step of the ten-step tree that fails (0: every step passes).</p>"
        f"<table><tr><th>step</th>{head}</tr>{rows}</table></section>"
    )


def _segments(data: ReportData) -> str:
    out = [
        '<section id="segments"><h2>Segments</h2><p class="note">Phase averages per segment; n is the '
        "denominator: the questions where the metric applies.</p>"
    ]
    for stress_set, block in sorted(
        data.comparison["stress_sets"].items(), key=lambda kv: kv[0] != "representative"
    ):
        rows = []
        for name, seg in (block.get("segments") or {}).items():
            cells = [f"<td>{esc(name)}</td><td>{seg['n_questions']}</td>"]
            for metric in ("support", "answer_correct", "critical"):
                res = seg["metrics"].get(metric) or {}
                c, b = res.get("candidate") or {}, res.get("baseline") or {}
                diff = ((res.get("difference") or {}).get("statistics") or {}).get("mean") or {}
                interval = (
                    f" [{diff['low']:+.2f}, {diff['high']:+.2f}]" if diff.get("low") is not None else ""
                )
                cells.append(
                    f"<td>{_pct((c.get('phase_average') or {}).get('mean_of_phases'))} / "
                    f"{_pct((b.get('phase_average') or {}).get('mean_of_phases'))} "
                    f"(n={c.get('n_questions', 0)})</td>"
                    f"<td>{_diff(diff.get('estimate'))}{interval}</td>"
                )
            rows.append("<tr>" + "".join(cells) + "</tr>")
        head = "".join(
            f"<th>{esc(m)} c / b</th><th>difference [CI]</th>" for m in ("support", "correct", "critical")
        )
        out.append(
            f"<h3>stress set {esc(stress_set)}</h3><table><tr><th>segment</th><th>questions</th>{head}"
            f"</tr>{''.join(rows)}</table>"
        )
    out.append("</section>")
    return "".join(out)


def _diff(v: float | None) -> str:
    return "–" if v is None else f"{v:+.2f}"


def _footer(data: ReportData) -> str:
    s = data.comparison["settings"]
    m = data.comparison["matching"]
    sides = [data.comparison[side] for side in ("candidate", "baseline")]
    failed = [(side["arm"], side.get("counts", {}).get("infrastructure_failure", 0)) for side in sides]
    failures = (
        (
            "; failed requests (infrastructure failures: never judged, outside every answer metric): "
            + ", ".join(f"{esc(arm)} {n}" for arm, n in failed)
        )
        if any(n for _, n in failed)
        else ""
    )
    return (
        f'<footer><h2>How these figures were made</h2><p class="note">{m["matched_questions"]} matched '
        f"questions, {m['matched_records']} matched records over phases "
        f"{esc(', '.join(m['shared_phases']))}{failures}; "
        f"bootstrap {s['n_resamples']} x, seed {s['seed']}, {s['confidence']:.0%} {esc(s['method'])} "
        f"intervals, resampling unit: {esc(s['resampling_unit'])}. The same numbers as "
        f"<code>ledgerscope compare</code> and <code>ledgerscope diagnose</code> print for this ledger."
        "</p></footer>"
    )
