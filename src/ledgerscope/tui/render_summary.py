"""Rich text for the summary panes (Stats, the grid caption, the help legend); no Textual.

Same rules as :mod:`.render`: untrusted strings go through ``safe`` into
``Text`` objects (table cells included), never markup.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rich.text import Text

from ledgerscope.common.safe_text import safe_line
from ledgerscope.report.terminal import METRIC_TITLES
from ledgerscope.tui.model import MISSING_GLYPH, REVERSAL_GLYPH
from ledgerscope.tui.render import VERDICT_STYLE, Palette, fmt, lit, pick

if TYPE_CHECKING:
    from ledgerscope.tui.data import LedgerSession


def _interval(stat: Mapping[str, Any] | None, digits: int = 3) -> str:
    if not stat:
        return "–"
    est, low, high = (fmt(stat.get(k), digits) for k in ("estimate", "low", "high"))
    return f"{est} [{low},{high}]"


def stats_text(
    summaries: Mapping[str, Mapping[str, Mapping]],
    arms: Mapping[str, str],
    phases: Sequence[str],
    comparison: Mapping | None,
    decision: Mapping | None,
    status: str,
    palette: Palette,
):
    """Per-phase rates of each arm (SQL, immediate), then the paired comparison and release decision."""
    from rich.console import Group

    parts: list[Any] = _phase_rates(summaries, arms, phases, palette)
    if comparison is None:
        parts.append(Text("\n" + status, style=pick(palette, "muted")))
        return Group(*parts)
    parts.append(_comparison_intro(comparison, palette))
    for set_name, block in comparison["stress_sets"].items():
        parts += [_metric_table(set_name, block, which) for which in ("phase average", "worst phase")]
        if segs := block.get("segments") or {}:
            parts.append(_segment_table(set_name, segs))
    parts.append(_answer_side(comparison, palette))
    parts.append(noise_tail(comparison.get("noise"), palette))
    parts.append(_decision_tail(decision, comparison.get("note", ""), palette))
    parts.append(_resources_tail(comparison.get("resources"), palette))
    return Group(*parts)


def _resources_tail(resources: Mapping | None, palette: Palette) -> Text:
    """What each arm cost (the resource record) and candidate minus baseline, as plain lines."""
    from ledgerscope.report.resources_view import SHOWN, difference_lines, resource_lines

    tail = Text()
    if not resources:
        return tail
    tail.append("\nresources\n", style=pick(palette, "heading"))
    for role in ("candidate", "baseline"):
        res = resources.get(role) or {}
        for line in resource_lines(str(res.get("arm", role)), dict(res)):
            tail.append(f"  {lit(line)}\n")
        lat = res.get("latency_ms") or {}
        if res.get("recorded"):
            cells = [
                f"{s} {fmt((lat.get(s) or {}).get('p50'), 2)}/{fmt((lat.get(s) or {}).get('p95'), 2)}"
                for s in SHOWN
            ]
            tail.append(f"  {lit(str(res.get('arm', role)))} latency ms p50/p95: {lit(', '.join(cells))}\n")
    for line in difference_lines(dict(resources)):
        tail.append(f"  {lit(line)}\n")
    return tail


def _answer_side(comparison: Mapping, palette: Palette) -> Text:
    """The oracle's validity meter: what the answer-side figures and decision checks are worth."""
    from ledgerscope.analysis.validity import validity_lines

    text = Text("\n")
    for line in validity_lines(comparison.get("answer_validity")):
        text.append(lit(line) + "\n", style=pick(palette, "fail") if "UNVERIFIED" in line else None)
    return text


def noise_tail(noise: Mapping | None, palette: Palette) -> Text:
    """``--repeats``: per arm its repeats, noisy questions and flip rate, as ``compare`` prints them
    (the lines come from analysis/; qids and arm names are data: escaped, appended, never markup)."""
    text = Text()
    if not noise:
        return text
    from ledgerscope.analysis.stats.repeat_noise import noise_lines

    head, *sides = noise_lines(dict(noise))
    text.append("\n" + lit(head) + "\n", style=pick(palette, "heading"))
    for side, line in zip(("candidate", "baseline"), sides, strict=True):
        noisy = bool((noise.get(side) or {}).get("noisy_questions"))  # a warning colour, the words say it
        text.append(lit(line) + "\n", style=pick(palette, "boundary" if noisy else "muted"))
    return text


def question_noise_text(noise: Mapping | None, role: str, qid: str, palette: Palette) -> Text:
    """The compare view's word on one question in one arm (``--repeats``, once the Stats pane's
    comparison is in): does its verdict flip between repeats? A difference between the arms on a
    noisy question may be nothing but the generator's noise."""
    side = (noise or {}).get(role)
    if not side:
        return Text()
    q = next((q for q in side.get("noisy", []) if q["qid"] == qid), None)
    k = side["repeats"]
    if q is None:
        return Text(f"\nrun-to-run noise: steady over {k} repeats\n", style=pick(palette, "muted"))
    phases = ", ".join(lit(ph) for ph in q["phases_flipped"])
    line = f"\n~ noisy: flip rate {q['flip_rate']:.2f} over {k} repeats (flips at phase {phases})\n"
    return Text(line, style=pick(palette, "boundary"))


def _table(title: Text | None = None):
    """The Stats pane's table style: a simple head, no edges, the title on the left."""
    from rich import box
    from rich.table import Table

    return Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)


def _phase_rates(
    summaries: Mapping[str, Mapping[str, Mapping]],
    arms: Mapping[str, str],
    phases: Sequence[str],
    palette: Palette,
) -> list[Any]:
    """Each arm's support and correct rate per phase, then its phase average and worst phases."""
    head = Text()
    head.append(
        "per phase: support in packed context / correct answer (answerable records)\n",
        style=pick(palette, "heading"),
    )
    table = _table()
    table.add_column("phase")
    for role in summaries:
        table.add_column(Text(lit(arms[role], 20)), justify="right")
    for p in phases:
        cells = [Text(lit(p, 10))]
        for role in summaries:
            row = summaries[role].get(p)
            cells.append(
                Text(f"{fmt(row['support'], 2)} / {fmt(row['correct'], 2)}" if row else MISSING_GLYPH)
            )
        table.add_row(*cells)
    lines = Text()
    for role, rows in summaries.items():
        vals = [(r["correct"], p) for p, r in rows.items() if r.get("correct") is not None]
        sup = [(r["support"], p) for p, r in rows.items() if r.get("support") is not None]
        if vals:
            avg = sum(v for v, _ in vals) / len(vals)
            w = min(vals)
            ws = min(sup) if sup else (None, None)
            lines.append(
                f"{lit(arms[role])}: phase average correct {avg:.2f}; worst phase correct {w[0]:.2f} "
                f"(phase {lit(w[1])}); worst phase support {fmt(ws[0], 2)} (phase {lit(ws[1])})\n"
            )
    return [head, table, lines]


def _comparison_intro(comparison: Mapping, palette: Palette) -> Text:
    """Which arms, how many questions and phases, the bootstrap's settings and clusters."""
    m = comparison["matching"]
    settings = comparison["settings"]
    intro = Text()
    intro.append(
        f"\npaired comparison: {lit(comparison['candidate']['arm'])} minus "
        f"{lit(comparison['baseline']['arm'])}\n",
        style=pick(palette, "heading"),
    )
    intro.append(
        f"{m['matched_questions']} questions × phases {', '.join(lit(p) for p in m['shared_phases'])}; "
        f"bootstrap {settings['n_resamples']}×, seed {settings['seed']}, "
        f"{int(settings['confidence'] * 100)}% intervals; "
        "worst phase = the worst per-phase mean (@ its phase)",
        style=pick(palette, "muted"),
    )
    if comparison.get("clusters"):
        from ledgerscope.report.terminal import clusters_line

        intro.append("\n" + lit(clusters_line(comparison["clusters"])), style=pick(palette, "muted"))
    return intro


def _metric_table(set_name: str, block: Mapping, which: str):
    """One stress set's metrics, both arms and the difference's interval: the phase average, or
    the worst phase (each value @ its phase); MDD: the minimum detectable difference beside it (80%
    power, :mod:`ledgerscope.analysis.stats.power`)."""
    from ledgerscope.analysis.stats.power import detectable

    t = _table(
        Text(
            f"stress set {lit(set_name)} · {which} ({block['n_questions']} questions, "
            f"{block['n_clusters']} document clusters)"
        )
    )
    for col in (
        "metric",
        "candidate",
        "baseline",
        "difference [95% CI]" if which == "phase average" else "worst difference [CI]",
        "MDD",
    ):
        t.add_column(col, justify="left" if col == "metric" else "right", no_wrap=True)
    for metric, res in block["metrics"].items():
        c, b, d = res["candidate"], res["baseline"], res.get("difference") or {}
        st = d.get("statistics", {})
        digits = 1 if metric.endswith("tokens") else 2
        name = Text(lit(METRIC_TITLES.get(metric, metric)))
        if which == "phase average":
            t.add_row(
                name,
                fmt(c["phase_average"]["mean_of_phases"], digits),
                fmt(b["phase_average"]["mean_of_phases"], digits),
                _interval(st.get("mean"), digits),
                fmt(detectable(d, "mean"), digits),
            )
        else:
            wc, wb = c["worst_phase"]["aggregate"], b["worst_phase"]["aggregate"]
            t.add_row(
                name,
                Text(f"{fmt(wc['value'], digits)} @{lit(wc['phase'])}"),
                Text(f"{fmt(wb['value'], digits)} @{lit(wb['phase'])}"),
                _interval(st.get("worst_aggregate"), digits),
                fmt(detectable(d, "worst_aggregate"), digits),
            )
    return t


def _segment_table(set_name: str, segs: Mapping[str, Mapping]):
    """Per segment of a stress set: questions, and support, correct and critical as candidate / baseline."""
    seg = _table(Text(f"segments ({lit(set_name)}), phase average, candidate / baseline"))
    for col in ("segment", "n", "support", "correct", "critical"):
        seg.add_column(col, justify="left" if col == "segment" else "right")
    for name, sb in segs.items():
        sm = sb["metrics"]

        def pair(metric: str, sm=sm) -> str:
            if metric not in sm:
                return "–"
            return (
                f"{fmt(sm[metric]['candidate']['phase_average']['mean_of_phases'], 2)} / "
                f"{fmt(sm[metric]['baseline']['phase_average']['mean_of_phases'], 2)}"
            )

        seg.add_row(
            Text(lit(name)),
            str(sb["n_questions"]),
            pair("support"),
            pair("answer_correct"),
            pair("critical"),
        )
    return seg


def _decision_tail(decision: Mapping | None, note: str, palette: Palette) -> Text:
    """The release decision (when a rule was given) with its reasons, and the comparison's note."""
    tail = Text()
    if decision is not None:
        from ledgerscope.analysis.stats.power import headline

        tail.append(
            f"\nrelease decision: {lit(headline(dict(decision)))}",
            style=pick(palette, "pass" if headline(dict(decision)) == "ACCEPT" else "fail"),
        )
        tail.append(f"  (rule {lit(decision.get('rule_digest'))})\n")
        for reason in decision.get("reasons", []):
            tail.append(f"  - {lit(reason)}\n")
    tail.append(f"\n{lit(note)}\n", style=pick(palette, "muted"))
    return tail


def grid_caption(
    role: str, arms: Mapping[str, str], compare: bool, worst_columns: Mapping[str, str | None]
) -> Text:
    t = Text()
    if compare:
        t.append("cells: " + " │ ".join(lit(arms[r]) for r in arms) + "  ")
    else:
        t.append(f"arm {lit(arms.get(role))}  ")
    t.append(
        "cell = verdict glyph + diagnosis step; "
        "▼ worst phase (row: the question's; header: lowest correct rate)"
    )
    for r, p in worst_columns.items():
        if p is not None and (compare or r == role):
            t.append(f"\n{lit(arms.get(r))}: worst phase by correct rate {lit(p)}")
    return t


def legend_text(palette: Palette) -> Text:
    from ledgerscope.tui.model import VERDICT_GLYPHS, WORST_GLYPH

    t = Text()
    t.append("verdicts: ", style=pick(palette, "heading"))
    for v, g in VERDICT_GLYPHS.items():
        t.append(g, style=pick(palette, VERDICT_STYLE.get(v, "v-muted")))
        t.append(f" {v}  ")
    t.append(f"{MISSING_GLYPH} no record\n")
    t.append(
        f"{REVERSAL_GLYPH} reversal (verdict or support differs across phases)   {WORST_GLYPH} worst phase   "
        "┃ chunk boundary   ⟪id⟫ gold span   ⟦rN … rN⟧ retrieved unit at rank N   "
        "✓/◐/✗ gold span fully/partly/not in the packed context   ≠ differs between arms\n"
    )
    return t


# ---------------------------------------------------------------------------
# the title, the list header and the status line


def title_text(session: LedgerSession) -> Text:
    """The ledger, the candidate arm and the baseline arm (with its ledger when it is another)."""
    t = Text("ledgerscope · ", style="bold")
    t.append(lit(session.ledger.name))
    t.append(f" · candidate arm {lit(session.arms['candidate'].name)!r}")
    if "baseline" in session.arms:
        t.append(f" vs baseline arm {lit(session.arms['baseline'].name)!r}")
        if session.baseline_ledger:
            t.append(f" ({lit(session.baseline_ledger.name)})")
    return t


def list_header_text(count: int, total: int, arm: str, phases: Sequence[str], width: int) -> Text:
    """Questions listed, then the column heads; one-character phase labels stand over their glyphs."""
    t = Text(f" {count} of {total} questions · {lit(arm)}", no_wrap=True, overflow="ellipsis")
    if phases and all(len(p) == 1 for p in phases) and width > len(phases) + 12:
        # the labels stand over their glyph columns (the strip ends 3 columns before the step)
        strip_at = width - 3 - len(phases)
        t.append("\n" + "  qid".ljust(strip_at) + "".join(lit(p) for p in phases) + " st", style="dim")
    else:
        t.append("\n  qid · phases " + " ".join(lit(p) for p in phases), style="dim")
    return t


def question_text(qid: str | None, question: str | None, width: int) -> Text:
    """The selected question on one line: its id, then what was asked, escaped (controls and bidi
    overrides shown as escapes, newlines as ``\\n``; never markup) and cut to ``width`` cells."""
    if qid is None:
        return Text("no question selected", style="dim", no_wrap=True)
    t = Text(no_wrap=True, overflow="ellipsis")
    t.append(lit(qid), style="bold")
    t.append(" · ")
    if question:
        t.append(safe_line(question))
    else:
        t.append("(no question text)", style="dim")
    t.truncate(max(width, 1), overflow="ellipsis")
    return t


def status_text(
    busy: Sequence[str],
    phase: str,
    phases: Sequence[str],
    arm: str,
    compare: bool,
    search: str,
    n_matches: int,
    filter_description: str,
    width: int | None = None,
) -> Text:
    """What is running, where the cursor is (phase, arm, compare), the search and the filter; cut to
    ``width`` cells with an ellipsis (``F`` shows the whole filter)."""
    i = phases.index(phase) + 1 if phase in phases else 0
    t = Text(no_wrap=True, overflow="ellipsis")
    if busy:
        t.append("⟳ " + ", ".join(sorted(busy)) + "… ", style="bold")
    t.append(f"phase {lit(phase)} ({i}/{len(phases)}) · arm {lit(arm)}")
    if compare:
        t.append(" · compare")
    if search:
        t.append(f" · /{lit(search)}: {n_matches} match(es)")
    t.append(f" · filter: {lit(filter_description)}" if filter_description else " · no filter")
    if width is not None and t.cell_len > width > 0:
        t.truncate(width - 1)
        t.append("…")
    return t
