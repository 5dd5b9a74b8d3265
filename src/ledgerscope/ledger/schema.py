"""The boundary ledger's tables: one Arrow schema each, versioned by FORMAT.

Layout of a ledger directory::

    manifest.json                      arms (config, digest, phase list, model ids), sources, fixtures
    sources.parquet                    every source version the sweep read (text included)
    fixtures.jsonl                     the resolved canonical fixtures
    partitions/arm=A/phase=L/          one partition per arm and phase, renamed into place whole
        units.parquet  boundaries.parquet  candidates.parquet  records.parquet  _SUCCESS.json
    oracle/arm=A/oracle.parquet        the oracle run per question and arm

Candidate lists are recorded whole: ``fused`` holds every fused unit (the
reranker reads the first ``rerank_depth``), ``reranked`` every reranked unit
(selection reads the first ``selection_depth``); both cutoffs are on each
record. Columns named ``*_json`` hold JSON text (lists of small objects) so that the
same rows round-trip through JSONL unchanged.
"""

from __future__ import annotations

import pyarrow as pa

FORMAT = "ledgerscope-ledger/1"

STAGES = ("bm25", "dense_exact", "dense_ann", "union", "fused", "reranked", "selected", "packed", "topk")

UNITS = pa.schema([
    ("arm", pa.string()), ("phase", pa.string()), ("unit_id", pa.string()),
    ("doc_id", pa.string()), ("version", pa.string()), ("ordinal", pa.int32()),
    ("start", pa.int64()), ("end", pa.int64()), ("core_start", pa.int64()), ("core_end", pa.int64()),
    ("token_start", pa.int32()), ("token_end", pa.int32()), ("n_tokens", pa.int32()),
    ("text", pa.string()), ("access", pa.list_(pa.string())),
])

BOUNDARIES = pa.schema([
    ("arm", pa.string()), ("phase", pa.string()), ("phase_offset", pa.int32()), ("doc_id", pa.string()),
    ("version", pa.string()), ("n_tokens", pa.int32()),
    ("cut_tokens", pa.list_(pa.int32())), ("cut_chars", pa.list_(pa.int64())),
])

CANDIDATES = pa.schema([
    ("arm", pa.string()), ("phase", pa.string()), ("qid", pa.string()), ("stage", pa.string()),
    ("rank", pa.int32()), ("unit_id", pa.string()), ("score", pa.float64()),
    ("doc_id", pa.string()), ("start", pa.int64()), ("end", pa.int64()),
    ("lineage", pa.list_(pa.string())),
])

SUPPORT_COLUMNS = (
    "support_chunked", "support_bm25", "support_dense_exact", "support_exact", "support_dense_ann",
    "support_production", "support_union", "support_fused",
    "support_reranked", "support_selected", "support_packed", "support_cited", "support_topk",
)

RECORDS = pa.schema([
    ("arm", pa.string()), ("phase", pa.string()), ("phase_offset", pa.int32()), ("qid", pa.string()),
    ("question", pa.string()), ("segment", pa.string()), ("answerable", pa.bool_()),
    ("support_only", pa.bool_()), ("stress_set", pa.string()), ("doc_ids", pa.list_(pa.string())),
    ("gold_status", pa.string()),
    *[(c, pa.bool_()) for c in SUPPORT_COLUMNS],
    ("covered_set", pa.int32()), ("single_unit_complete", pa.bool_()),
    ("packed_context", pa.string()), ("packed_unit_ids", pa.list_(pa.string())),
    ("evidence_tokens", pa.int32()), ("prompt_tokens", pa.int32()), ("budget_tokens", pa.int32()),
    ("rerank_depth", pa.int32()), ("selection_depth", pa.int32()),
    ("repeated_source_tokens", pa.int32()), ("topk_tokens", pa.int32()),
    ("overflow_json", pa.string()), ("expansion_dropped_json", pa.string()),
    ("answer", pa.string()), ("abstained", pa.bool_()), ("citations_json", pa.string()),
    ("answer_verdict", pa.string()), ("answer_reason", pa.string()),
    ("citation_verdict", pa.string()), ("citation_reason", pa.string()),
    ("generator_error", pa.string()), ("attempts", pa.int32()), ("generator_detail_json", pa.string()),
    ("oracle_verdict", pa.string()), ("oracle_feasible", pa.bool_()),
    ("config_digest", pa.string()),
])

ORACLE = pa.schema([
    ("arm", pa.string()), ("qid", pa.string()), ("support_set", pa.int32()),
    ("feasible", pa.bool_()), ("evidence_tokens", pa.int32()), ("budget_tokens", pa.int32()),
    ("context", pa.string()), ("answer", pa.string()), ("abstained", pa.bool_()),
    ("answer_verdict", pa.string()), ("answer_reason", pa.string()),
    ("generator_error", pa.string()), ("attempts", pa.int32()),
])

SOURCES = pa.schema([
    ("doc_id", pa.string()), ("version", pa.string()), ("text", pa.string()),
    ("observed", pa.string()), ("access", pa.list_(pa.string())),
])

TABLES = {"units": UNITS, "boundaries": BOUNDARIES, "candidates": CANDIDATES, "records": RECORDS}
