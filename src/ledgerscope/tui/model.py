"""The TUI's plain data: glyphs, rows, record details, filters and pure helpers. No Textual, no DuckDB.

* **Glyphs**: every verdict has one (✓ ✗ ! ∅ ? ⚠ ⊘), so meaning never rests
  on colour alone.
* **Worst phase of a question** (grid mark): the phase whose record fails
  (step other than 0), with the most severe answer verdict
  (:data:`VERDICT_SEVERITY`), then the earliest losing step, then the first
  phase; marked only when the phases differ or the worst one fails.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ledgerscope.common.sql_tables import sql_literal

#: verdict -> glyph; meaning never rests on colour alone
VERDICT_GLYPHS: dict[str, str] = {
    "correct": "✓",
    "wrong": "✗",
    "critical-condition-error": "!",
    "abstained": "∅",
    "not-judged": "?",
    "infrastructure-failure": "⚠",
    "false-assertion": "⊘",
}
MISSING_GLYPH = "·"  # no record for this (arm, phase, question)
UNKNOWN_GLYPH = "~"
REVERSAL_GLYPH = "↕"
WORST_GLYPH = "▼"
VERDICT_SEVERITY: dict[str | None, int] = {
    "false-assertion": 7,
    "critical-condition-error": 6,
    "wrong": 5,
    "infrastructure-failure": 4,
    "abstained": 3,
    "not-judged": 1,
    "correct": 0,
}
CITATION_GLYPHS = {
    "supported": "✓",
    "unsupported": "✗",
    "unresolvable": "⊘",
    "no-citation": "∅",
    "not-applicable": "–",
}


def verdict_glyph(verdict: str | None) -> str:
    if verdict is None:
        return MISSING_GLYPH
    return VERDICT_GLYPHS.get(verdict, UNKNOWN_GLYPH)


@dataclass
class Cell:
    verdict: str | None
    step: int | None
    label: str | None = None


@dataclass
class ListRow:
    ord: int
    qid: str
    segment: str
    question: str
    reversal: dict[str, bool]
    cells: dict[str, dict[str, Cell]]  # role -> phase -> cell


@dataclass
class RecordDetail:
    role: str
    arm: str
    phase: str
    record: dict | None
    stages: dict[str, list[dict]]
    units: list[dict]
    cuts: dict[str, list[int]]
    oracle: dict | None
    fixture: Any
    texts: dict[str, str]
    diagnosis: Any = None
    coverage: dict[str, str] = field(default_factory=dict)  # span id -> full | partial | none (packed)


@dataclass
class Detail:
    qid: str
    phase: str
    arms: dict[str, RecordDetail]


@dataclass(frozen=True)
class StatsState:
    """The Stats pane's paired comparison: not yet asked for, running, done (or failed, in ``status``)."""

    status: str = "paired comparison: press s (or open this pane) to compute"
    running: bool = False
    comparison: dict | None = None
    decision: dict | None = None


@dataclass
class Filters:
    """The list filter: the filter-bar predicate plus quick filters, composed into one predicate."""

    where: str = ""
    segment: str | None = None
    step: int | None = None
    verdict: str | None = None
    reversal: bool = False

    def compose(self, arm: str) -> str:
        parts = [f"arm = {sql_literal(arm)}"]
        if self.where.strip():
            parts.append(f"(\n{self.where.strip()}\n)")
        if self.segment:
            parts.append(f"segment = {sql_literal(self.segment)}")
        if self.step is not None:
            parts.append(f"step = {int(self.step)}")
        if self.verdict:
            parts.append(f"answer_verdict = {sql_literal(self.verdict)}")
        if self.reversal:
            parts.append("reversal")
        return " AND ".join(parts)

    def describe(self) -> str:
        bits = []
        if self.where.strip():
            bits.append(self.where.strip())
        if self.segment:
            bits.append(f"segment={self.segment}")
        if self.step is not None:
            bits.append(f"step={self.step}")
        if self.verdict:
            bits.append(f"verdict={self.verdict}")
        if self.reversal:
            bits.append("reversals only")
        return "; ".join(bits)


# ---------------------------------------------------------------------------
# pure helpers


def span_coverage(fixture, rows: Sequence[Mapping[str, Any]], texts: Mapping[str, str]) -> dict[str, str]:
    """Per gold span: ``full``, ``partial`` or ``none`` coverage by the rows' intervals."""
    from ledgerscope.common.intervals import uncovered

    out: dict[str, str] = {}
    for span in fixture.spans:
        ivs = [
            (int(r["start"]), int(r["end"]))
            for r in rows
            if r.get("doc_id") == span.doc_id and r.get("start") is not None
        ]
        text = texts.get(span.doc_id, "")
        gaps = uncovered(text, span.start, span.end, ivs) if text else [(span.start, span.end)]
        if not gaps:
            out[span.span_id] = "full"
        elif any(s < span.end and e > span.start for s, e in ivs):
            out[span.span_id] = "partial"
        else:
            out[span.span_id] = "none"
    return out


def worst_phase(cells: Mapping[str, Cell], phases: Sequence[str]) -> str | None:
    """The question's worst phase (rule in the module docstring), or None when nothing stands out."""
    keyed = []
    for i, p in enumerate(phases):
        c = cells.get(p)
        if c is None or c.step is None:
            continue
        keyed.append(
            (
                (
                    1 if c.step != 0 else 0,
                    VERDICT_SEVERITY.get(c.verdict, 2),
                    -(c.step or 0) if c.step else 0,
                    -i,
                ),
                p,
            )
        )
    if not keyed:
        return None
    keys = [k[:3] for k, _ in keyed]
    best = max(keyed)
    if best[0][0] == 0 and len(set(keys)) == 1:
        return None
    return best[1]


def next_match(matches: Sequence[int], cursor: int, direction: int, include_current: bool = False) -> int:
    """The search match to move to from ``cursor``: the next one (``direction`` > 0, the cursor's own
    with ``include_current``) or the previous one, wrapping around; ``matches`` sorted, not empty."""
    if direction > 0:
        after = [i for i in matches if i > cursor or (include_current and i == cursor)]
        return after[0] if after else matches[0]
    before = [i for i in matches if i < cursor]
    return before[-1] if before else matches[-1]


_WORD = re.compile(r"[^\W\d_]{4,}")
_HEX = re.compile(r"[a-fA-F]+")


def opaque_id(qid: str) -> bool:
    """An id that says nothing about its question (a hash, a number, ``q000123``): no four letters in
    a row in its last part, hexadecimal digits aside. The list shows the question's start beside it."""
    return not any(not _HEX.fullmatch(w) for w in _WORD.findall(re.split(r"[/:]", qid)[-1]))


def worst_column(summary: Mapping[str, Mapping[str, Any]]) -> str | None:
    """The phase with the lowest correct rate (``summary``: phase -> rates), when the phases differ."""
    vals = [(r["correct"], p) for p, r in summary.items() if r.get("correct") is not None]
    if not vals:
        return None
    low = min(v for v, _ in vals)
    if low == max(v for v, _ in vals):
        return None
    return next(p for v, p in vals if v == low)


def survived_ranges(context: str, rd: RecordDetail) -> list[tuple[int, int, str]]:
    """(start, end, span id) ranges of ``context`` that hold a gold span's text kept by a packed unit."""
    from ledgerscope.analysis.survival import gold_in_context

    fx = rd.fixture
    if fx is None or not context:
        return []
    return gold_in_context(context, fx.spans, rd.stages.get("packed", []), rd.texts)


def generated_ranges(context: str, rd: RecordDetail) -> list[tuple[int, int]]:
    """(start, end) ranges of ``context`` holding the generated context of a packed unit (its units
    row's ``context_json`` parts of kind ``generated``), each found after the previous."""
    import json

    packed = [r.get("unit_id") for r in sorted(rd.stages.get("packed", []), key=lambda r: int(r["rank"]))]
    by_id = {u.get("unit_id"): u for u in rd.units if u.get("context_json")}
    out: list[tuple[int, int]] = []
    pos = 0
    for uid in packed:
        unit = by_id.get(uid)
        if unit is None:
            continue
        try:
            parts = json.loads(unit["context_json"])
        except ValueError:
            continue
        for part in parts if isinstance(parts, list) else []:
            text = str(part.get("text") or "").strip() if isinstance(part, dict) else ""
            if part.get("kind") != "generated" or not text:
                continue
            i = context.find(text, pos)
            if i < 0:
                i = context.find(text)
            if i >= 0:
                out.append((i, i + len(text)))
                pos = i + len(text)
    return sorted(set(out))
