"""Rich ``Text`` building for the TUI panes (pure functions; no Textual).

This module holds the palette and shared helpers plus the Answer,
Diagnosis and Compare panes; the Source and Context panes are in
:mod:`.render_source`, the summary panes in :mod:`.render_summary`.

Untrusted text (documents, questions, answers, contexts, ids) is always
appended as plain strings through :func:`ledgerscope.common.safe_text.safe` into
``rich.text.Text`` objects, never parsed as markup: a document holding
``[bold red]`` or an escape byte shows those characters literally. Meaning
is carried by glyphs and words (✓ ✗ ! ∅ ? ⚠ ⊘, ⟪span⟫, ⟦r3 … r3⟧, ┃);
styles from the palette only add emphasis, so ``NO_COLOR`` loses nothing.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from rich.style import Style
from rich.text import Text

from ledgerscope.analysis.diagnosis import json_list
from ledgerscope.common.safe_text import safe
from ledgerscope.common.values import format_value
from ledgerscope.tui.model import (
    CITATION_GLYPHS,
    MISSING_GLYPH,
    REVERSAL_GLYPH,
    RecordDetail,
    verdict_glyph,
)

Palette = Mapping[str, Style]
COVER_GLYPHS = {"full": "✓", "partial": "◐", "none": "✗"}
MAX_TEXT = 20_000  # an answer or context longer than this is cut (a pathological value must not hang the UI)
VERDICT_STYLE = {
    "correct": "v-correct",
    "wrong": "v-wrong",
    "critical-condition-error": "v-critical",
    "abstained": "v-abstained",
    "not-judged": "v-muted",
    "infrastructure-failure": "v-infra",
    "false-assertion": "v-critical",
}


def make_palette(colors: Mapping[str, str] | None = None) -> dict[str, Style]:
    """Styles for the panes from theme colours (``success``, ``error``, ``warning``, ``accent``...).

    Every style keeps a text attribute (bold, underline, reverse, italic) so
    it still reads with colours stripped.
    """
    c = dict(colors or {})

    def col(name: str, default: str | None) -> str | None:
        return c.get(f"ls-{name}") or c.get(name) or default

    def st(color: str | None = None, **kw) -> Style:
        try:
            return Style(color=color, **kw)
        except Exception:  # a theme value Rich cannot parse: keep the attributes
            return Style(**kw)

    return {
        "v-correct": st(col("success", "green"), bold=True),
        "v-wrong": st(col("error", "red"), bold=True),
        "v-critical": st(col("error", "red"), bold=True, underline=True),
        "v-abstained": st(col("warning", "yellow"), bold=True),
        "v-infra": st(col("warning", "yellow"), bold=True, reverse=True),
        "v-muted": st(col("text-muted", None), italic=True),
        "gold": st(col("gold", col("accent", "cyan")), bold=True, underline=True),
        "gold-label": st(col("gold", col("accent", "cyan")), bold=True, reverse=True),
        "boundary": st(col("warning", "yellow"), bold=True),
        "retrieved": st(col("retrieved", col("primary", "blue")), italic=True),
        "rank": st(col("retrieved", col("primary", "blue")), bold=True),
        "heading": st(col("accent", None), bold=True),
        "muted": st(col("text-muted", None), dim=True),
        "diff": st(col("warning", "yellow"), bold=True, reverse=True),
        "pass": st(col("success", "green"), bold=True),
        "fail": st(col("error", "red"), bold=True),
        "bar": st(col("primary", "blue"), bold=True),
        "match": st(col("accent", None), bold=True),
        "error": st(col("error", "red"), bold=True),
        "generated": st(col("secondary", "magenta"), italic=True, underline=True),
    }


def pick(palette: Palette, key: str) -> Style:
    return palette.get(key, Style())


def lit(text: Any, max_len: int | None = None) -> str:
    """Untrusted value → display string: controls and bidi overrides escaped."""
    return safe("" if text is None else str(text), max_len)


def verdict_text(verdict: str | None, palette: Palette, with_label: bool = True) -> Text:
    glyph = verdict_glyph(verdict)
    label = f" {lit(verdict)}" if with_label and verdict is not None else (" no record" if with_label else "")
    return Text(glyph + label, style=pick(palette, VERDICT_STYLE.get(verdict or "", "v-muted")))


def cell_text(cell, palette: Palette) -> Text:
    """A grid cell: verdict glyph and diagnosis step, e.g. ``✗ 7``."""
    if cell is None:
        return Text(MISSING_GLYPH + "  ", style=pick(palette, "muted"))
    step = "" if cell.step is None else str(cell.step)
    return Text(
        f"{verdict_glyph(cell.verdict)}{step:>2}",
        style=pick(palette, VERDICT_STYLE.get(cell.verdict or "", "v-muted")),
    )


def bar(fraction: float | None, width: int = 20) -> str:
    if fraction is None:
        return "░" * width
    f = min(max(fraction, 0.0), 1.0)
    full = round(f * width)
    return "█" * full + "░" * (width - full)


#: a value for a cell: a float to ``digits`` digits; an en dash for a missing one
fmt = functools.partial(format_value, missing="–")


# ---------------------------------------------------------------------------
# answer


def answer_text(rd: RecordDetail, palette: Palette) -> Text:
    """The answer pane: the question and expected answer, the generator's answer and verdict, each
    citation with the gold it covers, then the oracle arm's answer beside it."""
    rec = rd.record or {}
    out = Text()
    out.append("question ", style=pick(palette, "heading"))
    out.append(f"{lit(rec.get('qid'))}: {lit(rec.get('question'))}\n")
    if rd.fixture is not None and rd.fixture.answer.expected:
        out.append(f"expected {lit(rd.fixture.answer.expected)}", style=pick(palette, "muted"))
        if rd.fixture.answer.default:
            out.append(
                f" · default if the qualifier is missed {lit(rd.fixture.answer.default)}",
                style=pick(palette, "muted"),
            )
        out.append("\n")
    out.append("\nanswer ", style=pick(palette, "heading"))
    out.append_text(verdict_text(rec.get("answer_verdict"), palette))
    out.append("\n")
    out.append(lit(rec.get("answer"), MAX_TEXT) or "(no answer)")
    out.append("\n")
    out.append(f"reason: {lit(rec.get('answer_reason'))}\n", style=pick(palette, "muted"))
    out.append(f"abstained: {'yes' if rec.get('abstained') else 'no'} · attempts {fmt(rec.get('attempts'))}")
    if rec.get("generator_error"):
        out.append(f" · generator error: {lit(rec.get('generator_error'))}", style=pick(palette, "error"))
    out.append("\n\n")
    _citations(out, rd, rec, palette)
    _oracle(out, rd.oracle, rec, palette)
    return out


def _citations(out: Text, rd: RecordDetail, rec: dict, palette: Palette) -> None:
    """The citation verdict, then each citation: unresolvable, or its offsets, the gold spans it
    covers (fully or partly) and its quoted text."""
    cv = rec.get("citation_verdict")
    out.append("citations ", style=pick(palette, "heading"))
    out.append(
        f"{CITATION_GLYPHS.get(cv or '', '~')} {lit(cv)}",
        style=pick(
            palette,
            "pass" if cv == "supported" else "fail" if cv in ("unsupported", "unresolvable") else "muted",
        ),
    )
    out.append(f" — {lit(rec.get('citation_reason'))}\n")
    cites = json_list(rec.get("citations_json"))
    if not cites:
        out.append("  (none)\n", style=pick(palette, "muted"))
    spans = list(rd.fixture.spans) if rd.fixture is not None else []
    for c in cites:
        doc, start, end = c.get("doc_id"), c.get("start"), c.get("end")
        text = rd.texts.get(doc) if doc else None
        label = f"  [{lit(c.get('label'))}] "
        if text is None or start is None or end is None or not (0 <= int(start) <= int(end) <= len(text)):
            out.append(label + f"⊘ unresolvable: {lit(c.get('unit_id'))}\n", style=pick(palette, "fail"))
            continue
        start, end = int(start), int(end)
        out.append(label + f"{lit(doc)} [{start},{end}) ")
        hits = []
        for s in spans:
            if s.doc_id == doc and start < s.end and end > s.start:
                hits.append(f"{s.span_id} {'✓ full' if start <= s.start and end >= s.end else '◐ partial'}")
        if hits:
            out.append("covers " + ", ".join(lit(h) for h in hits), style=pick(palette, "gold"))
        else:
            out.append("covers no gold span", style=pick(palette, "muted"))
        out.append(f"\n      “{lit(text[start:end], 160)}”\n")


def _oracle(out: Text, orc: dict | None, rec: dict, palette: Palette) -> None:
    """The oracle arm's verdict, feasibility and answer (gold evidence, same generator): whether
    the generator could have answered with the right context."""
    out.append("\noracle ", style=pick(palette, "heading"))
    if orc is None:
        out.append(
            f"(no oracle row) recorded verdict {lit(rec.get('oracle_verdict'))}\n",
            style=pick(palette, "muted"),
        )
        return
    out.append_text(verdict_text(orc.get("answer_verdict"), palette))
    out.append(
        f" · feasible {'yes' if orc.get('feasible') else 'no'} · evidence {fmt(orc.get('evidence_tokens'))}/"
        f"{fmt(orc.get('budget_tokens'))} tokens · support set {fmt(orc.get('support_set'))}\n"
    )
    out.append(f"  answer: {lit(orc.get('answer'))}\n")
    out.append(f"  reason: {lit(orc.get('answer_reason'))}\n", style=pick(palette, "muted"))
    if orc.get("generator_error"):
        out.append(f"  generator error: {lit(orc.get('generator_error'))}\n", style=pick(palette, "error"))


# ---------------------------------------------------------------------------
# diagnosis


def diagnosis_text(rd: RecordDetail, survival_row: Mapping[str, Any] | None, palette: Palette) -> Text:
    out = Text()
    d = rd.diagnosis
    if d is None:
        out.append("no record for this arm and phase\n", style=pick(palette, "muted"))
        return out
    out.append(f"step {d.step} · {d.step_name}", style=pick(palette, "pass" if d.step == 0 else "fail"))
    out.append(f" · label {lit(d.label)}\n")
    if d.flags:
        out.append("flags: " + ", ".join(lit(f) for f in d.flags) + "\n", style=pick(palette, "muted"))
    out.append("\nthe walk\n", style=pick(palette, "heading"))
    for w in d.walk:
        passed = w.get("passed")
        glyph = "✓" if passed else ("–" if passed is None else "✗")
        style = "pass" if passed else ("muted" if passed is None else "fail")
        out.append(f" {glyph} {w.get('step'):>2} {lit(w.get('name')):<26}", style=pick(palette, style))
        out.append(f" {lit(w.get('detail'))}\n")
        if passed is False:
            break
    _support_set(out, d, palette)
    out.append("\nevidence\n", style=pick(palette, "heading"))
    _pretty(out, {k: v for k, v in d.evidence.items() if k != "span_fates"}, 1, palette)
    out.append("\nstage survival", style=pick(palette, "heading"))
    out.append(f" ({lit(rd.arm)}, phase {lit(rd.phase)}, answerable records)\n")
    if not survival_row:
        out.append("  (loading…)\n", style=pick(palette, "muted"))
        return out
    from ledgerscope.analysis.survival import SURVIVAL_STAGES

    n = survival_row.get("n_answerable") or 0
    for stage in SURVIVAL_STAGES:
        k = survival_row.get(stage) or 0
        if n and survival_row.get(f"{stage}_recorded") == 0:  # an ingested trace without this stage
            out.append(f"  {stage:<11}  not recorded\n", style=pick(palette, "muted"))
            continue
        out.append(f"  {stage:<11}{k:>6}/{n:<6}")
        out.append(bar(k / n if n else None, 20), style=pick(palette, "bar"))
        out.append(f" {k / n:.0%}\n" if n else "\n")
    regret = survival_row.get("reranker_regret")
    out.append(f"  reranker regret {fmt(regret)} of {fmt(survival_row.get('fused'))} with fused support\n")
    return out


def _support_set(out: Text, d, palette: Palette) -> None:
    """The support set as a set, under the walk: its spans by document (title and id), each with its
    own fate, the record's step named as the first loss."""
    from ledgerscope.analysis.diagnosis import STEP_NAMES
    from ledgerscope.analysis.diagnosis.span_fates import explain_set

    ev = d.evidence
    lines = explain_set(ev.get("span_fates") or [], d.step, STEP_NAMES, ev.get("sufficient_set"))
    if not lines:
        return
    out.append("\nthe support set\n", style=pick(palette, "heading"))
    out.append(f" {lit(lines[0])}\n")
    for line in lines[1:]:
        out.append(f"  • {lit(line)}\n", style=pick(palette, "fail" if "lost at" in line else "pass"))


def _pretty(out: Text, obj: Any, indent: int, palette: Palette, max_items: int = 12) -> None:
    pad = "  " * indent
    if isinstance(obj, Mapping):
        for k, v in obj.items():
            if isinstance(v, Mapping | list) and v:
                out.append(f"{pad}{lit(k)}:\n", style=pick(palette, "muted"))
                _pretty(out, v, indent + 1, palette, max_items)
            else:
                out.append(f"{pad}{lit(k)}: ", style=pick(palette, "muted"))
                out.append(f"{lit(_short(v), 200)}\n")
        return
    if isinstance(obj, list):
        for i, item in enumerate(obj):
            if i >= max_items:
                out.append(f"{pad}… {len(obj) - max_items} more\n", style=pick(palette, "muted"))
                break
            if isinstance(item, Mapping):
                flat = ", ".join(
                    f"{k}={_short(v)}" for k, v in item.items() if not isinstance(v, Mapping | list)
                )
                nested = {k: v for k, v in item.items() if isinstance(v, Mapping | list)}
                out.append(f"{pad}- {lit(flat, 220)}\n")
                if nested:
                    _pretty(out, nested, indent + 1, palette, max_items)
            else:
                out.append(f"{pad}- {lit(_short(item), 200)}\n")
        return
    out.append(f"{pad}{lit(_short(obj), 200)}\n")


def _short(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return "–" if v is None else str(v)


# ---------------------------------------------------------------------------
# compare


def compare_texts(details: Mapping[str, RecordDetail], palette: Palette) -> dict[str, Text]:
    """Per role, the record side by side with fields that differ from the other role marked ``≠``."""
    roles = [r for r in ("candidate", "baseline") if r in details]
    fields: dict[str, dict[str, str]] = {}
    packed: dict[str, set[tuple]] = {}
    for role in roles:
        rd = details[role]
        rec = rd.record or {}
        d = rd.diagnosis
        verdict, cv = rec.get("answer_verdict"), rec.get("citation_verdict")
        fields[role] = {
            "verdict": f"{verdict_glyph(verdict)} {verdict or 'no record'}",
            "step": f"{d.step} {d.step_name}" if d else "–",
            "label": d.label if d else "–",
            "citation": f"{CITATION_GLYPHS.get(cv or '', '~')} {cv}",
            "gold kept": _gold_kept(rd),
            "tokens": f"{fmt(rec.get('evidence_tokens'))}/{fmt(rec.get('budget_tokens'))}",
            "answer": rec.get("answer") or "",
        }
        packed[role] = {(r.get("doc_id"), r.get("start"), r.get("end")) for r in rd.stages.get("packed", [])}
    out: dict[str, Text] = {}
    for role in roles:
        rd = details[role]
        other = next((r for r in roles if r != role), None)
        t = Text()
        t.append(f"{role}: {lit(rd.arm)} · phase {lit(rd.phase)}\n", style=pick(palette, "heading"))
        for name, value in fields[role].items():
            differs = other is not None and fields[other][name] != value
            t.append("≠ " if differs else "  ", style=pick(palette, "diff") if differs else None)
            t.append(f"{name:<10}", style=pick(palette, "muted"))
            if name == "answer":
                t.append("\n")
            t.append(lit(value, 600) + "\n", style=pick(palette, "diff") if differs else None)
        rows = sorted(rd.stages.get("packed", []), key=lambda r: int(r["rank"]))
        t.append(
            f"\npacked units ({len(rows)}); = same interval in the other arm, + only here\n",
            style=pick(palette, "heading"),
        )
        for r in rows:
            key = (r.get("doc_id"), r.get("start"), r.get("end"))
            only = other is not None and key not in packed[other]
            t.append("+ " if only else "= ", style=pick(palette, "diff") if only else None)
            t.append(
                f"r{int(r['rank'])} {lit(r.get('doc_id'))} [{fmt(r.get('start'))},{fmt(r.get('end'))})\n"
            )
        out[role] = t
    return out


def _gold_kept(rd: RecordDetail) -> str:
    """Each gold span's coverage in the packed context, its document named beside it (compare)."""
    from ledgerscope.analysis.diagnosis.span_fates import docs_of_spans

    titles = docs_of_spans(rd.fixture, rd.texts)
    parts = [
        f"{k} ({titles[k]}) {COVER_GLYPHS[v]}" if k in titles else f"{k} {COVER_GLYPHS[v]}"
        for k, v in sorted(rd.coverage.items())
    ]
    return " ".join(parts) or "–"


def reversal_mark(row, role: str) -> str:
    return REVERSAL_GLYPH if row.reversal.get(role) else " "
