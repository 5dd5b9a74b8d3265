"""A support set explained as a set: each span of the record's sufficient set, its document, its own fate.

A question whose support lies in two documents jointly (a policy and its exception, a contract
clause and its definition, two Wikipedia paragraphs of a multi-hop question) can lose each
document's spans at a different step. The record's step (:mod:`.tree`) is the set's first loss;
this module says what became of every span of the set the evidence names, so the others are
listed too. Pure functions, no I/O: the walk (:func:`.tree.diagnose`, the TUI's Diagnosis pane)
and ``diagnose --json`` (whose SQL computes the per-stage coverage and joins the fates of
:func:`fate_table`) both take their fates from :func:`fate_of`.

Declared rules
--------------
* A span's *marks*: for each support stage of the walk (chunked, exact, production, union,
  fused, reranked, packed) ``K`` when the stage's intervals cover the span (whitespace, and
  punctuation at its ends, excused: :func:`ledgerscope.common.intervals.covers`), ``L`` when they
  do not, ``N`` when the record does not record the stage (its support flag is NULL).
* A span's fate, by the tree's own rule for sets applied to the one span: it is *kept to* the
  last recorded stage that covers it, and *lost at* the step of the first recorded stage after
  that one (None: kept to the packed context). A stage before that which does not cover it is
  listed in ``regained`` (lost there, a later stage has it again).
* Which set: the one the record's evidence names (``sufficient_set``: the closest to being kept
  at the losing stage). Fates are given for records that lose support (steps 2-8).
* A document's title: the first line of its text when that is a Markdown heading (``# Title``),
  else its id.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ledgerscope.analysis.diagnosis.evidence import span_gaps, stage_rows
from ledgerscope.analysis.diagnosis.steps import SUPPORT_WALK

if TYPE_CHECKING:  # annotations only
    from ledgerscope.inputs.fixtures import Fixture, GoldSpan

#: (step, record flag, stage) of the support walk, in cascade order
FATE_WALK = SUPPORT_WALK
KEPT, LOST, NOT_RECORDED = "K", "L", "N"
#: the candidate lists (and "units") a span's marks read, for every stage of the walk
FATE_LISTS = ("units", "bm25", "dense_exact", "dense_ann", "union", "fused", "reranked", "packed")
TITLE_CHARS = 60


def fate_of(marks: str) -> dict[str, Any]:
    """A span's fate from its marks over :data:`FATE_WALK` (rules in the module docstring):
    ``kept_to`` (a stage or None), ``lost_at`` (a step or None) and ``regained`` (steps)."""
    walked = [
        (step, stage, m == KEPT)
        for (step, _, stage), m in zip(FATE_WALK, marks, strict=True)
        if m != NOT_RECORDED
    ]
    last = max((i for i, (_, _, kept) in enumerate(walked) if kept), default=-1)
    kept_to = walked[last][1] if last >= 0 else None
    lost_at = walked[last + 1][0] if last + 1 < len(walked) else None
    regained = [step for step, _, kept in walked[: max(last, 0)] if not kept]
    return {"kept_to": kept_to, "lost_at": lost_at, "regained": regained}


def fate_table() -> dict[str, dict[str, Any]]:
    """Every possible marks string (3^7) with its fate: what the SQL diagnosis joins per span."""
    return {
        "".join(m): fate_of("".join(m))
        for m in itertools.product((KEPT, LOST, NOT_RECORDED), repeat=len(FATE_WALK))
    }


def span_marks(
    record: Mapping[str, Any],
    span: GoldSpan,
    stages: Mapping[str, Sequence[Mapping[str, Any]]],
    texts: Mapping[str, str],
) -> str:
    """One span's marks: per stage of the walk, covered (K), not (L) or not recorded (N)."""
    out = []
    for _, flag, stage in FATE_WALK:
        if record.get(flag) is None:
            out.append(NOT_RECORDED)
            continue
        rows = stage_rows(stage, stages, record) or []
        out.append(LOST if span_gaps(span, rows, texts) else KEPT)
    return "".join(out)


def document_title(doc_id: str, text: str | None) -> str:
    """The document's title (a Markdown heading on its first line), else its id."""
    if text:
        first = text.lstrip("\ufeff \t\r\n").split("\n", 1)[0].strip()
        if first.startswith("#"):
            title = first.lstrip("#").strip()
            if title:
                return title if len(title) <= TITLE_CHARS else title[: TITLE_CHARS - 1] + "…"
    return doc_id


def span_fates(
    record: Mapping[str, Any],
    stages: Mapping[str, Sequence[Mapping[str, Any]]],
    fixture: Fixture,
    texts: Mapping[str, str],
    set_index: int,
) -> list[dict[str, Any]]:
    """Each span of sufficient set ``set_index`` in set order: its id, document, title and fate."""
    if not 0 <= set_index < len(fixture.sufficient_sets):
        return []
    by_id = {s.span_id: s for s in fixture.spans}
    out = []
    for sid in fixture.sufficient_sets[set_index]:
        span = by_id.get(sid)
        if span is None:
            continue
        out.append(
            {
                "span": sid,
                "doc_id": span.doc_id,
                "title": document_title(span.doc_id, texts.get(span.doc_id)),
                **fate_of(span_marks(record, span, stages, texts)),
            }
        )
    return out


# ---------------------------------------------------------------------------
# in words (the walk in the TUI, compare mode)


def fate_words(fate: Mapping[str, Any], step_names: Mapping[int, str]) -> str:
    """``kept to packed``, ``lost at step 3 (exact retrievers miss)``; regained steps after."""
    lost = fate.get("lost_at")
    if lost is None:
        text = f"kept to {fate.get('kept_to') or 'the end'}"
    else:
        text = f"lost at step {lost} ({step_names.get(lost, '?')})"
        if fate.get("kept_to"):
            text += f", kept to {fate['kept_to']}"
    if fate.get("regained"):
        text += f"; missing at step {', '.join(map(str, fate['regained']))}, then regained"
    return text


def by_document(fates: Sequence[Mapping[str, Any]]) -> list[tuple[str, str, list[Mapping[str, Any]]]]:
    """(doc id, title, its spans' fates) per document, in the set's order of first appearance."""
    groups: dict[str, tuple[str, str, list[Mapping[str, Any]]]] = {}
    for f in fates:
        groups.setdefault(f["doc_id"], (f["doc_id"], f.get("title") or f["doc_id"], []))[2].append(f)
    return list(groups.values())


def explain_set(
    fates: Sequence[Mapping[str, Any]], step: int, step_names: Mapping[int, str], set_index: int | None = None
) -> list[str]:
    """The set in words: a head line (spans, documents, the record's step as the first loss), then
    one line per document: its title, then its spans, each with its fate."""
    if not fates:
        return []
    docs = by_document(fates)
    which = f"set {set_index}" if set_index is not None and set_index >= 0 else "set"
    lines = [
        f"{which} of {len(fates)} span{'s' * (len(fates) != 1)} in {len(docs)} "
        f"document{'s' * (len(docs) != 1)}; first loss: step {step} ({step_names.get(step, '?')})"
    ]
    for doc_id, title, spans in docs:
        name = title if title == doc_id else f"{title} ({doc_id})"
        parts = []
        for f in spans:
            first = f.get("lost_at") == step or step in (f.get("regained") or [])
            parts.append(f"{f['span']} {fate_words(f, step_names)}{' ← first loss' if first else ''}")
        lines.append(f"{name}: " + "; ".join(parts))
    return lines


def docs_of_spans(fixture: Fixture | None, texts: Mapping[str, str]) -> dict[str, str]:
    """Span id -> its document's title (compare mode names documents beside span ids)."""
    if fixture is None:
        return {}
    return {s.span_id: document_title(s.doc_id, texts.get(s.doc_id)) for s in fixture.spans}
