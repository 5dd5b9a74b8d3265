"""Rich ``Text`` for the Source and Context panes: the document as cut, and the packed context.

The Source pane shows a question's documents with this phase's chunk
boundaries (┃), gold spans (⟪span⟫) and one stage's ranked units (⟦r3 … r3⟧);
the Context pane shows the packed context with the gold text that survived
packing emphasised. Same rules as :mod:`.render`: document and context text is
appended through ``safe`` into ``Text``, never parsed as markup.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

from rich.style import Style
from rich.text import Text

from ledgerscope.analysis.diagnosis.span_fates import document_title
from ledgerscope.common.intervals import merge_intervals
from ledgerscope.common.safe_text import safe
from ledgerscope.tui.model import RecordDetail, generated_ranges, survived_ranges
from ledgerscope.tui.render import COVER_GLYPHS, MAX_TEXT, Palette, bar, fmt, lit, pick

SOURCE_STAGES = ("packed", "selected", "reranked", "fused", "union", "dense_ann", "dense_exact", "bm25")
SOURCE_WINDOW = 20_000  # documents longer than this show a window around the marked intervals
SOURCE_MARGIN = 1_500
MAX_MARKED_RANK = 10
DOC_HEADING = "── "  # starts each document's header line (d/D scroll to the next/previous)


# ---------------------------------------------------------------------------
# source


def source_text(rd: RecordDetail, stage: str, palette: Palette, max_rank: int = MAX_MARKED_RANK) -> Text:
    """The document(s) of the question with this phase's cuts, gold spans and one stage's units."""
    out = Text()
    fx = rd.fixture
    docs = list(fx.doc_ids) if fx is not None else []
    rows = rd.stages.get(stage, [])
    if not docs:
        docs = list(dict.fromkeys(r["doc_id"] for r in rows if r.get("doc_id")))
    out.append("legend: ", style=pick(palette, "muted"))
    out.append("┃", style=pick(palette, "boundary"))
    out.append(" chunk boundary  ")
    out.append("⟪span⟫", style=pick(palette, "gold-label"))
    out.append(" gold span  ")
    out.append("⟦r3 … r3⟧", style=pick(palette, "rank"))
    out.append(f" {stage} rank (top {max_rank})   t: next stage\n")
    if not docs:
        out.append(
            "no documents for this question (unanswerable control with nothing packed)\n",
            style=pick(palette, "muted"),
        )
    for i, doc in enumerate(docs, start=1):
        _source_doc(out, rd, doc, f"{i}/{len(docs)}", stage, rows, palette, max_rank)
    return out


def _source_doc(
    out: Text, rd: RecordDetail, doc: str, which: str, stage: str, rows, palette: Palette, max_rank: int
) -> None:
    """One document of the source view: a header (its place among the question's documents, its
    title and id; ``d``/``D`` jump between them), its text with cuts, gold spans and the stage's
    units marked inline, then the gold legend and the list of marked units."""
    text = rd.texts.get(doc)
    cuts = rd.cuts.get(doc, [])
    spans = [s for s in (rd.fixture.spans if rd.fixture is not None else ()) if s.doc_id == doc]
    marked = [
        r
        for r in rows
        if r.get("doc_id") == doc and r.get("start") is not None and int(r["rank"]) <= max_rank
    ]
    n_units = sum(1 for u in rd.units if u.get("doc_id") == doc)
    title = document_title(doc, text)
    name = lit(doc) if title == doc else f"{lit(title)} ({lit(doc)})"
    out.append(f"\n{DOC_HEADING}{which} {name} ", style=pick(palette, "heading"))
    out.append(
        f"· phase {lit(rd.phase)} of {lit(rd.arm)}: {n_units} units, {len(cuts)} cuts; "
        f"{len(marked)} {stage} unit(s) marked\n",
        style=pick(palette, "muted"),
    )
    if text is None:
        out.append("  (source text not in the ledger)\n", style=pick(palette, "error"))
        return
    lo, hi = _source_window(len(text), spans, marked)
    if lo > 0:
        out.append(f"… {lo} characters before …\n", style=pick(palette, "muted"))
    _marked_text(out, text, _source_events(cuts, spans, marked, lo, hi), lo, hi, palette)
    if hi < len(text):
        out.append(f"\n… {len(text) - hi} characters after …", style=pick(palette, "muted"))
    out.append("\n")
    if spans:
        _gold_legend(out, rd, spans, palette)
    if marked:
        _marked_units(out, stage, marked, spans, palette)
    unlocated_lines(out, rd, doc, palette)


def _source_window(length: int, spans, marked) -> tuple[int, int]:
    """The [lo, hi) slice of a long document worth showing: every gold span and marked unit with
    a margin, capped at four windows, so a big source does not drown the marks."""
    lo, hi = 0, length
    if length > SOURCE_WINDOW:
        points = (
            [s.start for s in spans]
            + [s.end for s in spans]
            + [int(r["start"]) for r in marked]
            + [int(r["end"]) for r in marked]
        )
        if points:
            lo, hi = max(0, min(points) - SOURCE_MARGIN), min(length, max(points) + SOURCE_MARGIN)
        else:
            hi = SOURCE_WINDOW
        hi = min(hi, lo + 4 * SOURCE_WINDOW)
    return lo, hi


def _source_events(cuts, spans, marked, lo: int, hi: int) -> list[tuple[int, int, str, Any]]:
    """Cuts, gold opens/closes and unit opens/closes as (offset, order, kind, payload), sorted so
    at one offset closes come before gold opens before unit opens (the marks nest cleanly)."""
    events: list[tuple[int, int, str, Any]] = []
    for c in cuts:
        if lo <= c <= hi:
            events.append((int(c), 0, "cut", None))
    for s in spans:
        events.append((max(lo, s.start), 2, "gold+", s))
        events.append((min(hi, s.end), 1, "gold-", s))
    for r in marked:
        events.append((max(lo, int(r["start"])), 3, "r+", r))
        events.append((min(hi, int(r["end"])), 1, "r-", r))
    events.sort(key=lambda e: (e[0], e[1], str(e[2])))
    return events


def _marked_text(out: Text, text: str, events, lo: int, hi: int, palette: Palette) -> None:
    """``text[lo:hi]`` with each event's glyph inserted at its offset; the plain runs between are
    styled by how many gold spans and units are open there."""
    gold_depth = ret_depth = 0
    pos = lo
    for offset, _, kind, payload in events:
        offset = min(max(offset, lo), hi)
        if offset > pos:
            _append_plain(out, text[pos:offset], gold_depth, ret_depth, palette)
            pos = offset
        if kind == "cut":
            out.append("┃", style=pick(palette, "boundary"))
        elif kind == "gold+":
            gold_depth += 1
            out.append(f"⟪{lit(_span_label(payload))}⟫", style=pick(palette, "gold-label"))
        elif kind == "gold-":
            gold_depth = max(0, gold_depth - 1)
            out.append(f"⟪/{lit(payload.span_id)}⟫", style=pick(palette, "gold-label"))
        elif kind == "r+":
            ret_depth += 1
            out.append(f"⟦r{int(payload['rank'])}", style=pick(palette, "rank"))
        elif kind == "r-":
            ret_depth = max(0, ret_depth - 1)
            out.append(f"r{int(payload['rank'])}⟧", style=pick(palette, "rank"))
    if hi > pos:
        _append_plain(out, text[pos:hi], gold_depth, ret_depth, palette)


def _gold_legend(out: Text, rd: RecordDetail, spans, palette: Palette) -> None:
    """Each gold span's label and offsets, with how much of it reached the packed context."""
    out.append("gold: ", style=pick(palette, "heading"))
    for s in spans:
        cov = rd.coverage.get(s.span_id)
        out.append(f"{lit(_span_label(s))} [{s.start},{s.end}) ")
        if cov:
            out.append(
                f"{COVER_GLYPHS[cov]} {cov} in packed context  ",
                style=pick(palette, "pass" if cov == "full" else "fail"),
            )
    out.append("\n")


def _marked_units(out: Text, stage: str, marked, spans, palette: Palette) -> None:
    """The marked units by rank, with score and the gold spans each overlaps."""
    out.append(f"{stage} units in this document:\n", style=pick(palette, "heading"))
    for r in sorted(marked, key=lambda r: int(r["rank"])):
        hits = [s.span_id for s in spans if int(r["start"]) < s.end and int(r["end"]) > s.start]
        score = "" if r.get("score") is None else f" score {float(r['score']):.3f}"
        out.append(
            f"  r{int(r['rank']):<3} [{int(r['start'])},{int(r['end'])}){score}  {lit(r.get('unit_id'))}"
        )
        if hits:
            out.append(f"  ⟪{', '.join(lit(h) for h in hits)}⟫", style=pick(palette, "gold"))
        out.append("\n")


def _span_label(span) -> str:
    dep = getattr(span, "dependency", "") or ""
    label = getattr(span, "label", "") or ""
    extra = label or (dep if dep and dep != "primary" else "")
    return f"{span.span_id}:{extra}" if extra else span.span_id


def _append_plain(out: Text, chunk: str, gold: int, ret: int, palette: Palette) -> None:
    style = Style()
    if ret:
        style += pick(palette, "retrieved")
    if gold:
        style += pick(palette, "gold")
    out.append(safe(chunk), style=style or None)


# ---------------------------------------------------------------------------
# context


def context_text(rd: RecordDetail, palette: Palette) -> Text:
    """The budget line, gold coverage, then the packed context verbatim with surviving gold emphasised."""
    rec = rd.record or {}
    out = Text()
    used, budget = rec.get("evidence_tokens"), rec.get("budget_tokens")
    frac = (used / budget) if used is not None and budget else None
    out.append("budget ", style=pick(palette, "heading"))
    out.append(bar(frac, 24), style=pick(palette, "bar"))
    out.append(f" evidence {fmt(used)}/{fmt(budget)} tokens")
    if frac is not None:
        out.append(f" ({frac:.0%})")
    out.append(
        f" · prompt {fmt(rec.get('prompt_tokens'))} tokens"
        f" · {len(rec.get('packed_unit_ids') or [])} units packed\n"
    )
    if rd.fixture is not None and rd.fixture.spans:
        out.append("gold in packed context: ", style=pick(palette, "heading"))
        for s in rd.fixture.spans:
            cov = rd.coverage.get(s.span_id, "none")
            out.append(
                f"{lit(s.span_id)} {COVER_GLYPHS[cov]} {cov}  ",
                style=pick(palette, "pass" if cov == "full" else "fail"),
            )
        out.append("\n")
    out.append("─" * 40 + " packed context (literal)\n", style=pick(palette, "muted"))
    context = (rec.get("packed_context") or "")[:MAX_TEXT]
    if not context:
        out.append("(empty)\n", style=pick(palette, "muted"))
        return out
    generated = generated_ranges(context, rd)
    gold = merge_intervals((a, b) for a, b, _ in survived_ranges(context, rd))
    _styled_context(out, context, gold, generated, palette)
    if generated:
        out.append("\n" + "─" * 40 + " ", style=pick(palette, "muted"))
        out.append("generated context", style=pick(palette, "generated"))
        out.append(
            f": {sum(b - a for a, b in generated)} characters the pipeline added around source "
            "slices (counted in evidence tokens, never gold support)\n",
            style=pick(palette, "muted"),
        )
    return out


def _styled_context(out: Text, context: str, gold, generated, palette: Palette) -> None:
    """The literal context, gold ranges in the gold style and generated ranges in their own (gold wins
    where they meet, which they never should)."""
    marks = sorted(
        {
            0,
            len(context),
            *(x for a, b in gold for x in (a, b)),
            *(x for a, b in generated for x in (a, b)),
        }
    )
    for a, b in pairwise(marks):
        if a >= b:
            continue
        style = (
            "gold"
            if any(g0 <= a and b <= g1 for g0, g1 in gold)
            else "generated"
            if any(g0 <= a and b <= g1 for g0, g1 in generated)
            else None
        )
        out.append(safe(context[a:b]), style=pick(palette, style) if style else None)


def unlocated_lines(out: Text, rd: RecordDetail, doc: str, palette: Palette, examples: int = 3) -> None:
    """The document's units that could not be placed: how many, and a few with why."""
    bad = [u for u in rd.units if u.get("doc_id") == doc and u.get("located") is False]
    if not bad:
        return
    out.append(
        f"  {len(bad)} unit(s) of this document could not be placed (no interval):\n",
        style=pick(palette, "error"),
    )
    for u in bad[:examples]:
        out.append(
            f"    {lit(u.get('unit_id'))} ({lit(u.get('placement'))}): "
            f"{lit(u.get('placement_note') or '', 160)}\n",
            style=pick(palette, "muted"),
        )
