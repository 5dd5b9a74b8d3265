"""The chunks an ingest could not place, per document with examples, for ``diagnose``'s summary.

An ingested ledger's manifest records how every chunk of the pipeline's store was placed
(``ingested.inputs.chunks.resolution``); the unplaced are units without an interval, and the records
whose verdict rests on one are diagnosed ``unverifiable: unlocated chunk``. Untrusted text (ids,
document names, notes) goes in as ``rich.text.Text``, never markup.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich import box
from rich.table import Table
from rich.text import Text

from ledgerscope.common.safe_text import safe


def unlocated_summary(manifest: Mapping[str, Any]) -> dict[str, Any] | None:
    """The manifest's unplaced-chunk summary (count, of, per document), or None when it has none."""
    res = (((manifest.get("ingested") or {}).get("inputs") or {}).get("chunks") or {}).get("resolution")
    unlocated = (res or {}).get("unlocated") if isinstance(res, Mapping) else None
    if not isinstance(unlocated, Mapping) or not unlocated.get("count"):
        return None
    return dict(unlocated)


def unlocated_table(manifest: Mapping[str, Any], documents: int = 10) -> Table | None:
    """Unplaced chunks per document (most first) with examples; None when every chunk was placed."""
    summary = unlocated_summary(manifest)
    if summary is None:
        return None
    table = Table(
        title=f"unlocated chunks: {summary['count']} of {summary.get('of', '?')} in the store "
        "(units without an interval; verdicts resting on one: unverifiable)",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        collapse_padding=True,
    )
    table.add_column("document")
    table.add_column("unlocated", justify="right")
    table.add_column("examples")
    per_doc = summary.get("per_document") or {}
    ranked = sorted(per_doc.items(), key=lambda kv: (-int(kv[1].get("unlocated", 0)), kv[0]))
    for doc, entry in ranked[:documents]:
        table.add_row(
            Text(safe(doc)),
            str(entry.get("unlocated", 0)),
            Text(safe("\n".join(str(e)[:160] for e in (entry.get("examples") or [])[:2]))),
        )
    if len(ranked) > documents:
        table.caption = f"{len(ranked) - documents} more document(s) in manifest.json"
    return table
