"""The HTML report's reversal sections: the strip (every question's verdicts across phases) and
the boundary cards (for each reversal, the neighbouring phases' source, cuts, packed context and
answer). Every ledger string is escaped (:func:`ledgerscope.report.svg.esc`): documents, questions
and answers are data, never markup.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import Any

from ledgerscope.report.figures import ReportData
from ledgerscope.report.svg import Cell, esc, strip

VERDICTS = {  # glyph and fill per answer verdict: never colour alone
    "correct": ("✓", "#bbf7d0"),
    "wrong": ("✗", "#fecaca"),
    "critical-condition-error": ("!", "#fca5a5"),
    "abstained": ("∅", "#e5e7eb"),
    "false-assertion": ("⊘", "#fde68a"),
    "not-judged": ("?", "#f3f4f6"),
    "infrastructure-failure": ("⚠", "#ddd6fe"),
}
SUPPORT_CELLS = {
    True: ("●", "#bfdbfe", "support kept"),
    False: ("○", "#ffffff", "support lost"),
    None: ("–", "#f9fafb", "no support flag (unanswerable)"),
}


def reversal_strip(data: ReportData) -> str:
    """The strip: per question and phase, each arm's support and answer as a glyph on a fill."""
    s = data.strip
    arms = s["arms"]
    headers = [(f"{a}: support", s["phases"][a]) for a in arms] + [
        (f"{a}: answer", s["phases"][a]) for a in arms
    ]
    rows = []
    for q in s["questions"]:
        marker = "↕ " if q["reversals"] else "  "
        groups: list[list[Cell | None]] = []
        for kind in ("support", "answer"):
            for arm in arms:
                cells = q["cells"].get(arm, {})
                groups.append([_cell(kind, cells.get(p)) for p in s["phases"][arm]])
        hover = f"{q['qid']} ({q['segment']}): {q['question']}"
        rows.append((marker + q["qid"], hover, groups))
    chart = strip(
        rows,
        headers,
        element_id="reversal-strip",
        title="verdict per question and phase (↕: the verdict changes with the phase)",
    )
    legend = " · ".join(f"{g} {esc(v)}" for v, (g, _f) in VERDICTS.items())
    return (
        '<section id="strip"><h2>Reversal strip</h2><p class="note">Support: ● kept, ○ lost, – no '
        f"support flag. Answer: {legend}. Hover a question id for its text.</p>{chart}</section>"
    )


def _cell(kind: str, value: tuple[str, bool | None] | None) -> Cell | None:
    if value is None:
        return None
    verdict, support = value
    if kind == "support":
        glyph, fill, _what = SUPPORT_CELLS[support]
        return Cell(glyph, fill)
    glyph, fill = VERDICTS.get(verdict, ("~", "#ffffff"))
    return Cell(glyph, fill)


def reversal_cards(data: ReportData) -> str:
    """Per reversal, the phases on either side of the flip: marked source, packed context, answer."""
    out = [
        '<section id="reversals"><h2>Reversal boundaries</h2><p class="note">For each reversal, the two '
        "neighbouring phases on either side of the flip: the source around the gold spans with this "
        'phase\'s chunk cuts (<span class="cut">┃</span>), gold spans (<mark class="gold">⟪id … ⟫'
        '</mark>) and packed units (<span class="packed">underlined</span>), then the packed context '
        "the reader got, its surviving gold marked.</p>"
    ]
    index = [
        f'<li><a href="#rev-{i}">{esc(c["arm"])} · {esc(c["kind"])} · {esc(c["qid"])}</a></li>'
        for i, c in enumerate(data.reversals)
    ]
    out.append(f"<nav><ul>{''.join(index)}</ul></nav>")
    out.extend(_card(i, c) for i, c in enumerate(data.reversals))
    out.append("</section>")
    return "".join(out)


def _card(i: int, c: dict[str, Any]) -> str:
    sides_text = " | ".join(f"{esc(k)} {esc(', '.join(v))}" for k, v in c["phases"].items())
    sides = "".join(_side_html(c["kind"], s) for s in c["sides"])
    return (
        f'<article class="card" id="rev-{i}"><h3>{esc(c["qid"])} · {esc(c["arm"])} · {esc(c["kind"])} '
        f"reversal · {esc(c['segment'])}</h3><p>question: {esc(c['question'])}</p>"
        f'<p class="meta">phases on each side: {sides_text}</p><div class="sides">{sides}</div>'
        "</article>"
    )


def _side_html(kind: str, s: dict[str, Any]) -> str:
    support = {True: "support kept ●", False: "support lost ○", None: "no support flag"}[s["support_packed"]]
    glyph = VERDICTS.get(s["answer_verdict"], ("~", ""))[0]
    head = (
        f"<h4>phase {esc(s['phase'])}: {glyph} {esc(s['answer_verdict'])} · {support} · evidence "
        f"{esc(s['evidence_tokens'])}/{esc(s['budget_tokens'])} tokens</h4>"
    )
    parts = [head]
    for e in s["excerpts"]:
        parts.append(_excerpt_html(e))
    units = ", ".join(f"r{p['rank']} {esc(p['unit_id'])}" for p in s["packed"])
    parts.append(f'<p class="meta">packed units: {units or "none"}</p>')
    parts.append(f'<div class="text" title="packed context">{_marked_context(s)}</div>')
    parts.append(f"<p>answer: <q>{esc(s['answer'] or '')}</q></p>")
    return f'<div class="side">{"".join(parts)}</div>'


def _excerpt_html(e: dict[str, Any]) -> str:
    where = f"{esc(e['doc_id'])} [{e['start']}, {e['end']})"
    if e.get("withheld"):
        w = e["withheld"]
        return (
            f'<p class="meta">{where}: text withheld (restricted: {esc(", ".join(w["access"]))}; version '
            f"<code>{esc(w['version'])}</code>); gold spans "
            f"{esc(', '.join(f'{sid} [{a}, {b})' for sid, a, b in e['spans']))}; chunk cuts at "
            f"{esc(', '.join(str(c) for c in e['cuts']) or 'none')}</p>"
        )
    if e["text"] is None:
        return f'<p class="meta">{where}: source text not in the ledger</p>'
    cuts_in = [
        f"{c} (inside {', '.join(sid for sid, a, b in e['spans'] if a < c < b)})"
        for c in e.get("cuts_in_gold") or []
    ]
    note = (
        f"chunk cut inside a gold span at char {', '.join(cuts_in)}"
        if cuts_in
        else "no chunk cut inside a gold span"
    )
    return f'<p class="meta">{where}: {esc(note)}</p><div class="text">{_marked_source(e)}</div>'


def _marked_source(e: dict[str, Any]) -> str:
    """The excerpt's text with gold spans, packed units and chunk cuts marked (positions in the document)."""
    base, text = e["start"], e["text"]
    end = base + len(text)
    points = {base, end, *(c for c in e["cuts"])}
    for _sid, a, b in e["spans"]:
        points.update((max(base, a), min(end, b)))
    for a, b, _r in e["packed"]:
        points.update((min(max(base, a), end), min(max(base, b), end)))
    cuts = set(e["cuts"])
    out: list[str] = []
    ordered = sorted(points)
    for a, b in itertools.pairwise(ordered):
        out.extend(f'<span class="lbl">⟪{esc(sid)}</span>' for sid, s0, _e in e["spans"] if s0 == a)
        if a in cuts:
            out.append(f'<span class="cut" title="chunk cut at char {a}">┃</span>')
        piece = esc(text[a - base : b - base])
        if any(p0 <= a and b <= p1 for p0, p1, _r in e["packed"]):
            piece = f'<span class="packed">{piece}</span>'
        if any(s0 <= a and b <= s1 for _sid, s0, s1 in e["spans"]):
            piece = f'<mark class="gold">{piece}</mark>'
        out.append(piece)
        out.extend(f'<span class="lbl">{esc(sid)}⟫</span>' for sid, _s, e1 in e["spans"] if e1 == b)
    if end in cuts:
        out.append(f'<span class="cut" title="chunk cut at char {end}">┃</span>')
    return "".join(out)


def _marked_context(s: dict[str, Any]) -> str:
    context = s["context"] or ""
    if not context:
        return "(empty)"
    pos, out = 0, []
    for a, b in _merge((a, b) for a, b, _sid in s["context_gold"]):
        if a > pos:
            out.append(esc(context[pos:a]))
        out.append(f'<mark class="gold">{esc(context[max(a, pos) : b])}</mark>')
        pos = max(pos, b)
    out.append(esc(context[pos:]))
    return "".join(out)


def _merge(ranges: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[list[int]] = []
    for a, b in sorted(ranges):
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return [(a, b) for a, b in merged]
