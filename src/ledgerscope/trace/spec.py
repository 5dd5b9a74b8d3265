"""The ``ledgerscope-trace/1`` format: field names, stage names and their cascade order.

One place for the names the validator (:mod:`ledgerscope.ingest.read.traceformat`,
:mod:`ledgerscope.ingest.read.chunkstore`),
the JSON Schema file (``trace-1.schema.json``, kept equal by a test), the
OpenInference mapping and the derivation share. The format itself is described
in ``docs/ingest.md``.
"""

from __future__ import annotations

import hashlib
import re

#: the version of both files, a trace file and its chunk store (a line may say so in ``format``)
FORMAT = "ledgerscope-trace/1"

#: the longest line either parser reads (DuckDB's default object size, 16 MiB)
MAX_LINE_BYTES = 16 * 1024 * 1024

#: standard stage names in cascade order; ``retrieved`` (seed 002's retrieved_ids, the list the
#: reranker reads) is the same stage as ``fused`` and a trace names at most one of them
STAGE_ORDER = ("bm25", "dense_exact", "dense_ann", "union", "fused", "reranked", "selected", "packed")
STAGE_ALIASES = {"retrieved": "fused"}
KNOWN_STAGES = frozenset(STAGE_ORDER) | frozenset(STAGE_ALIASES)
#: a name a trace may declare for a stage of its own (listed in ``stage_order``)
STAGE_NAME = re.compile(r"[a-z][a-z0-9_]{0,39}")

#: top-level fields: name -> (kinds accepted, required)
TRACE_FIELDS: dict[str, tuple[str, bool]] = {
    "format": ("string", False),
    "qid": ("string", True),
    "config": ("string", False),
    "phase": ("string", False),
    "question": ("string", False),
    "retrieved_ids": ("ids", False),
    "scores": ("scores", False),
    "context_ids": ("ids", True),
    "context_text": ("string-or-strings", True),
    "answer": ("string-or-null", True),
    "abstained": ("boolean", False),
    "error": ("string-or-null", False),
    "prompt": ("string", False),
    "citations": ("strings", False),
    "stages": ("stages", False),
    "stage_order": ("strings", False),
    "claims": ("claims", False),
}

#: what a producer may claim about its own record (kept beside ledgerscope's derivation, compared)
#: (the ledger's SUPPORT_COLUMNS but support_topk, spelled out on purpose: the trace package installs and
#: imports without ledger/; tests/test_ingest_format.py holds the two lists equal)
CLAIM_FLAGS = (
    "support_chunked",
    "support_bm25",
    "support_dense_exact",
    "support_exact",
    "support_dense_ann",
    "support_production",
    "support_union",
    "support_fused",
    "support_reranked",
    "support_selected",
    "support_packed",
    "support_cited",
)
CLAIM_VERDICTS = ("answer_verdict", "citation_verdict")
CLAIM_COUNTS = ("prompt_tokens", "completion_tokens", "evidence_tokens")
CLAIM_KEYS = frozenset(CLAIM_FLAGS + CLAIM_VERDICTS + CLAIM_COUNTS)

#: chunk store lines: name -> (kinds accepted, required)
CHUNK_FIELDS: dict[str, tuple[str, bool]] = {
    "format": ("string", False),
    "chunk_id": ("string", True),
    "doc_id": ("string", True),
    "text": ("string", True),
    "start": ("offset", False),
    "end": ("offset", False),
    "coordinate_system": ("string", False),
    "version": ("string", False),
    "prefix": ("string", False),
    "suffix": ("string", False),
    "config": ("string-or-strings", False),
    "partial": ("boolean", False),
}

#: the tree columns (``support_*``) and the recorded stages each needs: a column is written only
#: when its stages are recorded, otherwise it is NULL, "not recorded"
#: (``exact`` = BM25 + exact dense, recorded with exact dense; ``production`` = the production
#: first-stage lists, BM25 and ANN, whichever the trace records)
VIRTUAL_STAGES: dict[str, tuple[str, ...]] = {
    "bm25": ("bm25",),
    "dense_exact": ("dense_exact",),
    "exact": ("bm25", "dense_exact"),
    "dense_ann": ("dense_ann",),
    "production": ("bm25", "dense_ann"),
    "union": ("union",),
    "fused": ("fused",),
    "reranked": ("reranked",),
    "selected": ("selected",),
    "packed": ("packed",),
}


def virtual_recorded(vstage: str, recorded: set[str] | frozenset[str]) -> bool:
    """Whether a tree stage can be derived from the stages a trace recorded."""
    if vstage == "exact":
        return "dense_exact" in recorded
    if vstage == "production":
        return bool({"bm25", "dense_ann"} & recorded)
    return all(s in recorded for s in VIRTUAL_STAGES[vstage])


def canonical_stage(name: str) -> str:
    """``retrieved`` is written as ``fused``; every other name as itself."""
    return STAGE_ALIASES.get(name, name)


def derived_chunk_id(doc_id: str | None, start: int | None, text: str) -> str:
    """A stable chunk id for a chunk that carries none (LangChain's splitters, spans without
    ``document.id``): its source, start and a digest of its content, so the same chunk gets the same
    id in every run, every config and both recording paths (the LangChain handler and the span
    mapping). Without a source it is the content's digest alone."""
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    if not doc_id:
        return "sha256:" + digest[:24]
    return f"{doc_id}@{start}#{digest[:12]}" if start is not None else f"{doc_id}#{digest[:16]}"
