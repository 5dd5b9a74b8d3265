"""``phase_scope = "evidence"``: which documents a phase sweep re-chunks, and where that is recorded.

A phase sweep costs phases x corpus, but the boundaries that decide a question's verdicts lie in
the documents holding its gold support and in the documents that compete with it for the
reranker. With the evidence scope the arm's **base phase** (the first of its phase list) runs over
the whole corpus as usual; then the phased set is fixed: every document with a gold span of some
question, plus every document with a unit in some question's fused head at the base phase (the
``rerank_depth`` candidates handed to the reranker, so the distractors near an answer move too).
The retrievers' whole lists (three, 50 deep by default) reach nearly every document of a small
corpus (all 33 of the bench's), which would phase everything. Every later phase re-cuts only the
phased documents; the others keep the base phase's units, which the embedding caches serve, so
they are chunked and embedded once. Each partition's ``_SUCCESS.json`` records the scope, the
base phase and the phased documents (``rerun`` rebuilds a record from them); the arm
configuration in the manifest names the scope. Needs the local executor: the base phase must be
finished before the others start.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ledgerscope.ledger.write import table_path


def base_phase(cfg: Any) -> Any:
    return cfg.phase_list()[0]


def phased_documents(
    out: Path, arm: str, base_label: str, fixtures: Sequence[Any], depth: int
) -> frozenset[str]:
    """Gold documents plus every document with a unit in some question's fused head (the
    ``rerank_depth`` candidates handed to the reranker) at the base phase."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    path = table_path(out, "candidates", arm, base_label)
    table = pq.read_table(path, columns=["stage", "rank", "doc_id"])
    mask = pc.and_(pc.equal(table["stage"], "fused"), pc.less_equal(table["rank"], depth))
    reached = set(table.filter(mask)["doc_id"].to_pylist())
    gold = {s.doc_id for f in fixtures for s in f.spans}
    return frozenset(reached | gold)


def apply_scope(out: Path, rt: Any, fixtures: Sequence[Any]) -> None:
    """After the base phase is on disk, fix the arm's phased documents (no-op for scope "all")."""
    cfg = rt.config
    if getattr(cfg, "phase_scope", "all") != "evidence" or rt.phase_scope is not None:
        return
    base = base_phase(cfg)
    rt.phase_scope = (base.offset, phased_documents(out, cfg.name, base.label, fixtures, cfg.rerank_depth))


def scope_record(rt: Any, phase: Any, n_documents: int) -> dict:
    """What a partition records about its scope (``_SUCCESS.json``'s ``phase_scope``)."""
    cfg = rt.config
    scope = getattr(cfg, "phase_scope", "all")
    if scope != "evidence":
        return {"scope": "all"}
    base = base_phase(cfg)
    phased = sorted(rt.phase_scope[1]) if rt.phase_scope is not None else None
    return {
        "scope": "evidence",
        "base_phase": base.label,
        "base_offset": base.offset,
        "documents": n_documents,
        "phased_documents": phased,
        "phased": len(phased) if phased is not None else n_documents,
    }


def restore_scope(rt: Any, meta: dict) -> None:
    """``rerun``: the scope a partition was built with, from its ``_SUCCESS.json``."""
    rec = (meta or {}).get("phase_scope") or {}
    if rec.get("scope") == "evidence" and rec.get("phased_documents") is not None:
        rt.phase_scope = (int(rec["base_offset"]), frozenset(rec["phased_documents"]))
