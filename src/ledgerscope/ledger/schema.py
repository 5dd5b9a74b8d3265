"""The boundary ledger's tables: one Arrow schema each, versioned by FORMAT.

Layout of a ledger directory (format 2)::

    manifest.json                      arms (config, digest, phase list, model ids), sources, fixtures
    sources.parquet                    every source version the sweep read (text included)
    fixtures.jsonl                     the resolved canonical fixtures
    partitions/arm-A/phase-L/          one partition per arm and phase, renamed into place whole
        units.parquet  boundaries.parquet  candidates.parquet  records.parquet  repairs.parquet
        _SUCCESS.json
    oracle/arm-A/oracle.parquet        the oracle run per question and arm

Partition values are written once, as data: every row of every table carries
its ``arm`` and ``phase`` as strings, and no directory name is a ``key=value``
pair, so no engine derives a column from the path. With the Hive spelling of
format 1 (``arm=A/phase=L``, the same values in the files too) the engines'
default calls disagreed: pandas and ``pyarrow.dataset(partitioning="hive")``
refused to merge the file's string with the path's dictionary or int32, DuckDB
read ``phase`` as BIGINT, polars as String. Values in the path only (the Hive
convention) do not agree either: a label that looks like a number (the default
labels ``0``..``7``) comes back as an integer from DuckDB, polars and pyarrow
and as a category from pandas, and polars reads no path column from a glob.
With the format 2 names (measured with DuckDB 2.0, polars 2.1, pandas 3.1,
pyarrow 26; tests/test_ledger_engines.py keeps it so),
``read_parquet('L/partitions/*/*/records.parquet')`` in DuckDB and polars,
``pandas.read_parquet`` and ``pyarrow.dataset.dataset`` over those files (with
or without ``partitioning="hive"``) give the same rows, with ``arm`` and
``phase`` as strings and labels such as ``0``, ``5``, ``a`` and ``p5``
unchanged. The prefixes ``arm-`` and ``phase-`` keep a name such as ``..`` or
``_x`` from being a path step or a name that dataset discovery skips as
hidden. :mod:`.layout` builds and parses these paths; format 1 ledgers are
still read (:data:`FORMAT_1`), not resumed.

``repairs`` lists every unit an external chunker returned whose offsets were not verified as
given (repaired, located by its text, or dropped, with the reason; see
:mod:`ledgerscope.pipeline.external`). It was added within format 2: a partition without
``repairs.parquet`` (an older ledger, an ingested one) reads as having none.

Candidate lists are recorded whole: ``fused`` holds every fused unit (the
reranker reads the first ``rerank_depth``), ``reranked`` every reranked unit
(selection reads the first ``selection_depth``); both cutoffs are on each
record. Columns named ``*_json`` hold JSON text (lists of small objects) so that the
same rows round-trip through JSONL unchanged.
"""

from __future__ import annotations

import threading

#: the format this version writes
FORMAT = "ledgerscope-ledger/2"
#: the Hive-named layout (``arm=A/phase=L``): read, no longer written
FORMAT_1 = "ledgerscope-ledger/1"
READABLE_FORMATS = (FORMAT, FORMAT_1)

STAGES = ("bm25", "dense_exact", "dense_ann", "union", "fused", "reranked", "selected", "packed", "topk")

SUPPORT_COLUMNS = (
    "support_chunked", "support_bm25", "support_dense_exact", "support_exact", "support_dense_ann",
    "support_production", "support_union", "support_fused",
    "support_reranked", "support_selected", "support_packed", "support_cited", "support_topk",
)

#: the partition tables, in the order every reader lists them (names only: no pyarrow needed)
TABLE_NAMES = ("units", "boundaries", "candidates", "records", "repairs")
#: partition tables a partition may lack (added within the format): read as empty
OPTIONAL_TABLES = frozenset({"repairs"})

#: the Arrow schemas, built on first use (PEP 562): ``schema.RECORDS`` imports pyarrow, ``schema.FORMAT``
#: does not, so a reader that only names tables (the TUI's first screen) never loads it
_ARROW_NAMES = ("UNITS", "BOUNDARIES", "CANDIDATES", "RECORDS", "REPAIRS", "ORACLE", "SOURCES", "TABLES")


def _arrow_schemas() -> dict:
    import pyarrow as pa

    units = pa.schema([
        ("arm", pa.string()), ("phase", pa.string()), ("unit_id", pa.string()),
        ("doc_id", pa.string()), ("version", pa.string()), ("ordinal", pa.int32()),
        ("start", pa.int64()), ("end", pa.int64()), ("core_start", pa.int64()), ("core_end", pa.int64()),
        ("token_start", pa.int32()), ("token_end", pa.int32()), ("n_tokens", pa.int32()),
        ("text", pa.string()), ("access", pa.list_(pa.string())),
    ])

    boundaries = pa.schema([
        ("arm", pa.string()), ("phase", pa.string()), ("phase_offset", pa.int32()), ("doc_id", pa.string()),
        ("version", pa.string()), ("n_tokens", pa.int32()),
        ("cut_tokens", pa.list_(pa.int32())), ("cut_chars", pa.list_(pa.int64())),
    ])

    candidates = pa.schema([
        ("arm", pa.string()), ("phase", pa.string()), ("qid", pa.string()), ("stage", pa.string()),
        ("rank", pa.int32()), ("unit_id", pa.string()), ("score", pa.float64()),
        ("doc_id", pa.string()), ("start", pa.int64()), ("end", pa.int64()),
        ("lineage", pa.list_(pa.string())),
    ])


    records = pa.schema([
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

    oracle = pa.schema([
        ("arm", pa.string()), ("qid", pa.string()), ("support_set", pa.int32()),
        ("feasible", pa.bool_()), ("evidence_tokens", pa.int32()), ("budget_tokens", pa.int32()),
        ("context", pa.string()), ("answer", pa.string()), ("abstained", pa.bool_()),
        ("answer_verdict", pa.string()), ("answer_reason", pa.string()),
        ("generator_error", pa.string()), ("attempts", pa.int32()),
    ])

    sources = pa.schema([
        ("doc_id", pa.string()), ("version", pa.string()), ("text", pa.string()),
        ("observed", pa.string()), ("access", pa.list_(pa.string())),
    ])

    repairs = pa.schema([
        ("arm", pa.string()), ("phase", pa.string()), ("doc_id", pa.string()), ("version", pa.string()),
        ("position", pa.int32()), ("side", pa.string()), ("status", pa.string()), ("text", pa.string()),
        ("given_start", pa.int64()), ("given_end", pa.int64()), ("start", pa.int64()), ("end", pa.int64()),
        ("note", pa.string()),
    ])

    tables = {"units": units, "boundaries": boundaries, "candidates": candidates, "records": records,
              "repairs": repairs}
    return {"UNITS": units, "BOUNDARIES": boundaries, "CANDIDATES": candidates, "RECORDS": records,
            "REPAIRS": repairs, "ORACLE": oracle, "SOURCES": sources, "TABLES": tables}


_BUILD_LOCK = threading.Lock()


def __getattr__(name: str):
    if name in _ARROW_NAMES:
        with _BUILD_LOCK:  # built once, even when two threads ask first
            if "TABLES" not in globals():
                globals().update(_arrow_schemas())
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
