"""``phase_scope = "evidence"``: which documents a phase sweep re-chunks, and where that is recorded.

A phase sweep costs phases x corpus, but the boundaries that decide a question's verdicts lie in
the documents holding its gold support and in the documents that compete with it for the
reader's context. With the evidence scope the arm's **base phase** (the first of its phase list)
runs over the whole corpus as usual; then the phased set is fixed: every document with a gold span
of some question, plus every document whose units **reach** some question's candidate lists at the
base phase. What "reach" means is :data:`REACH` (``reach`` below, default ``"packed"``: the
units the reader saw, in the packed context or the top-k view). Wider criteria phase far more:
one question's fused head (``rerank_depth`` = 30 candidates) spans about 15 documents, and the
union over 56 questions was every document of the corpora measured; on the ten-times corpus an
8-phase sweep embeds 2.5 x one phase with ``packed``, 5.6 x with ``reranked``, 8.2 x with
``fused`` (the full sweep's figure), 1.8 x with the gold documents alone, and ``packed`` and
``gold`` agreed with the full sweep on 223 of 224 records (docs/benchmarks.md, issue 30). Every
later phase re-cuts only
the phased documents; the others keep the base phase's units, which the embedding caches serve, so
they are chunked and embedded once. Each partition's ``_SUCCESS.json`` records the scope, the
criterion, the base phase and the phased documents (``rerun`` rebuilds a record from them); the
arm configuration in the manifest names the scope. Needs the local executor: the base phase must
be finished before the others start.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ledgerscope.ledger.write import is_done, table_path


def base_phase(cfg: Any) -> Any:
    return cfg.phase_list()[0]


#: which base-phase lists a document must have a unit in to be phased: stage -> the rank cut (a
#: setting of the arm, or None for the whole recorded list)
REACH: dict[str, tuple[tuple[str, str | None], ...]] = {
    "fused": (("fused", "rerank_depth"),),  # the reranker's input
    "reranked": (("reranked", "rerank.selection_depth"),),  # kept after the reranker's cut
    "packed": (("packed", None), ("topk", None)),  # what the reader saw, both views
    "gold": (),  # the gold documents alone: the least any evidence sweep re-cuts
}
#: the criterion sweeps use; scripts/bench_scope.py sets it to compare them
reach = "packed"


def _cut(cfg: Any, setting: str | None) -> int | None:
    if setting is None:
        return None
    return int(getattr(cfg, setting) if "." not in setting else cfg.setting(setting))


def phased_documents(
    out: Path, cfg: Any, base_label: str, fixtures: Sequence[Any], criterion: str | None = None
) -> frozenset[str]:
    """Gold documents plus every document with a unit in one of the criterion's base-phase lists
    of some question (:data:`REACH`)."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    path = table_path(out, "candidates", cfg.name, base_label)
    table = pq.read_table(path, columns=["stage", "rank", "doc_id"])
    reached: set[str] = set()
    for stage, setting in REACH[criterion or reach]:
        mask = pc.equal(table["stage"], stage)
        depth = _cut(cfg, setting)
        if depth is not None:
            mask = pc.and_(mask, pc.less_equal(table["rank"], depth))
        reached.update(table.filter(mask)["doc_id"].to_pylist())
    gold = {s.doc_id for f in fixtures for s in f.spans}
    return frozenset(reached | gold)


def apply_scope(out: Path, rt: Any, fixtures: Sequence[Any]) -> bool:
    """After the base phase is on disk, fix the arm's phased documents (no-op for scope "all").
    True when this call fixed them (the sweep then replans which unit texts later phases reuse)."""
    cfg = rt.config
    if getattr(cfg, "phase_scope", "all") != "evidence" or rt.phase_scope is not None:
        return False
    base = base_phase(cfg)
    rt.phase_scope = (base.offset, phased_documents(out, cfg, base.label, fixtures))
    rt.phase_reach = reach
    return True


def plan_scope(rt: Any, out: Path, fixtures: Sequence[Any]) -> str | None:
    """``sweep --estimate`` for an evidence arm: with the base phase on disk the plan cuts as the
    sweep will; before it, the phased documents are unknown (the note says every document counts
    at every phase)."""
    cfg = rt.config
    if getattr(cfg, "phase_scope", "all") != "evidence":
        return None
    if is_done(out, cfg.name, base_phase(cfg).label):
        apply_scope(out, rt, fixtures)
        return None
    return (
        f'arm {cfg.name!r}: phase_scope = "evidence" re-cuts only the documents its base phase '
        "reaches, known once that phase ran; every document is counted at every phase (an upper bound)"
    )


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
        "reach": getattr(rt, "phase_reach", None) or reach,
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
        rt.phase_reach = rec.get("reach")
