"""Selection and packing under a fixed evidence-token budget (primary view) or a
fixed top-k (secondary view).

Declared packing rules:
* rank order: units enter in reranked order (after the selection-depth cut);
* expansion (optional, ``neighbours``): each selected unit is followed by its
  adjacent units of the same document *version*; every expanded unit's access
  labels are re-checked against the reader's clearance, and a unit the reader
  may not see is dropped and logged;
* dedup: a source interval already packed is not packed again;
* overflow: first fit in rank order: a block that does not fit the remaining
  budget is skipped and logged, later smaller blocks may still fit;
* formatting: citation labels, document ids and separators are counted.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ledgerscope.pipeline.contracts.prompt import (
    BLOCK_SEPARATOR,
    DEFAULT_TEMPLATE,
    ContextBlock,
    PromptTemplate,
)
from ledgerscope.pipeline.contracts.stages import Packed
from ledgerscope.pipeline.contracts.units import Unit


def visible(unit: Unit, clearance: frozenset[str]) -> bool:
    """A reader sees a unit when it holds every access label of its source."""
    return set(unit.access) <= clearance


def expand(
    selected: Sequence[Unit], by_doc: dict[str, list[Unit]], neighbours: int, clearance: frozenset[str]
) -> tuple[list[Unit], list[dict]]:
    """Selected units each followed by up to ``neighbours`` units either side (same version)."""
    out: list[Unit] = []
    dropped: list[dict] = []
    for u in selected:
        siblings = by_doc.get(u.doc_id, [])
        lo, hi = max(0, u.ordinal - neighbours), min(len(siblings), u.ordinal + neighbours + 1)
        for v in siblings[lo:hi]:
            if v.version != u.version:
                dropped.append({"unit_id": v.unit_id, "reason": "version differs from the hit"})
                continue
            if not visible(v, clearance):
                dropped.append({"unit_id": v.unit_id, "reason": "access label not held by reader"})
                continue
            out.append(v)
    return out, dropped


def pack(
    units: Sequence[Unit],
    count_tokens: Callable[[str], int],
    budget: int | None,
    top_k: int | None = None,
    template: PromptTemplate = DEFAULT_TEMPLATE,
) -> Packed:
    """Pack units into labelled blocks: under ``budget`` tokens, or the first ``top_k``; each block
    costs its rendering by the arm's ``template`` (``context_format``)."""
    blocks: list[ContextBlock] = []
    packed: list[Unit] = []
    seen: set[tuple[str, int, int]] = set()
    used = 0
    overflow: list[dict] = []
    sep = max(0, count_tokens("x" + BLOCK_SEPARATOR + "x") - 2 * count_tokens("x"))
    for u in units:
        key = (u.version, u.start, u.end)
        if key in seen:
            continue
        if top_k is not None and len(packed) >= top_k:
            break
        block = ContextBlock(str(len(blocks) + 1), u.unit_id, u.doc_id, u.text)
        cost = count_tokens(template.block(block)) + (sep if blocks else 0)
        if budget is not None and used + cost > budget:
            overflow.append({"unit_id": u.unit_id, "tokens": cost, "remaining": budget - used})
            continue
        seen.add(key)
        blocks.append(block)
        packed.append(u)
        used += cost
    # The literal context is what counts: re-measure it and shed from the tail if a
    # tokenizer merged across a separator and pushed it over the budget.
    while budget is not None and blocks and count_tokens(template.context(blocks)) > budget:
        u = packed.pop()
        blocks.pop()
        overflow.append({"unit_id": u.unit_id, "tokens": None, "remaining": None, "reason": "re-measure"})
    used = count_tokens(template.context(blocks)) if blocks else 0
    return Packed(blocks, packed, used, overflow, [], list(units))


def repeated_source_tokens(units: Sequence[Unit], count_tokens: Callable[[str], int]) -> int:
    """Tokens a packed context spends on source characters it already contains (overlap)."""
    total = 0
    by_doc: dict[tuple[str, str], list[Unit]] = {}
    for u in units:
        by_doc.setdefault((u.doc_id, u.version), []).append(u)
    for group in by_doc.values():
        group.sort(key=lambda u: u.start)
        reach = -1
        for u in group:
            if u.start < reach:
                overlap_end = min(reach, u.end)
                total += count_tokens(u.text[: overlap_end - u.start])
            reach = max(reach, u.end)
    return total
