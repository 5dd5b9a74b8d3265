"""The boundary ledger's tables: one Arrow schema each, versioned by FORMAT.

Layout of a ledger directory (format 3)::

    manifest.json                          arms (config, digest, phase list, model ids), sources, fixtures
    fixtures.jsonl                         the resolved canonical fixtures
    records/arm=A/phase=L/part-0.parquet   one directory per table, Hive-partitioned by arm and phase:
    units/...  candidates/...  boundaries/...  repairs/...   (the same spelling)
    repeats/...                            (only a sweep with --repeats K > 1: every answer)
    oracle/arm=A/part-0.parquet            the oracle run per question and arm
    sources/part-0.parquet                 every source version the sweep read (text included)
    _commits/arm=A/phase=L.json            a partition's commit marker, written after its files
    _commits/oracle/arm=A.json             the oracle run's resource record

A directory names exactly one table, so ``pandas.read_parquet("L/records")``,
``pyarrow.dataset.dataset("L/records")``, ``polars.read_parquet("L/records")`` and
DuckDB's ``read_parquet('L/records/**/*.parquet')`` read that table and nothing else.
The markers lie outside the table directories (a file of another kind there stops
polars reading the directory, and an engine reading by glob would not skip it).

Every row of every table still carries its ``arm`` and ``phase`` as strings, the
same values its path names. Measured with DuckDB 2.0, polars 2.1, pandas 3.1,
pyarrow 26 (tests/test_ledger_format3.py keeps it so): with the values in the files,
DuckDB and polars (directory, glob, with or without ``hive_partitioning``) and
``pyarrow.dataset.dataset(dir)`` return them as strings, labels such as ``0`` and
``07`` unchanged. Without them (the values in the path only), ``0``..``7`` come back
as integers from pyarrow, polars and pandas, ``07`` as 7, and ``pyarrow.dataset``'s
default call has no ``arm`` column at all. The one default call the files' columns
do not suit is ``pandas.read_parquet(dir)``, which asks pyarrow for Hive
partitioning with dictionary columns and refuses to merge them with the files'
strings (an error, never wrong rows); ``pandas.read_parquet(dir, partitioning=None)``
reads the table (docs/ledger.md lists each engine's call).

Format 2 (read, converted, not resumed) put a partition's tables together:
``partitions/arm-A/phase-L/{units,boundaries,candidates,records,repairs}.parquet``
and ``_SUCCESS.json``, ``oracle/arm-A/oracle.parquet``, ``sources.parquet``; a
directory read of ``partitions`` mixed four tables under one schema. Format 1 spelled
those directories ``arm=A`` and ``phase=L``. :mod:`.layout` builds and parses every
format's paths.

``repairs`` lists every unit an external chunker returned whose offsets were not verified as
given (repaired, located by its text, or dropped, with the reason; see
:mod:`ledgerscope.pipeline.chunking.external`). It was added within format 2: a partition without
``repairs.parquet`` (an older ledger, an ingested one) reads as having none.

Candidate lists are recorded whole: ``fused`` holds every fused unit (the
reranker reads the first ``rerank_depth``), ``reranked`` every reranked unit
(selection reads the first ``selection_depth``); both cutoffs are on each
record. Columns named ``*_json`` hold JSON text (lists of small objects) so that the
same rows round-trip through JSONL unchanged.
"""

from __future__ import annotations

import threading
from typing import Any

#: the format this version writes: a directory per table
FORMAT = "ledgerscope-ledger/3"
#: one directory per partition (``partitions/arm-A/phase-L/``): read, no longer written
FORMAT_2 = "ledgerscope-ledger/2"
#: the Hive-named partition directories (``partitions/arm=A/phase=L``): read, no longer written
FORMAT_1 = "ledgerscope-ledger/1"
READABLE_FORMATS = (FORMAT, FORMAT_2, FORMAT_1)

STAGES = ("bm25", "dense_exact", "dense_ann", "union", "fused", "reranked", "selected", "packed", "topk")

#: (trace/spec.py spells these out as CLAIM_FLAGS, all but support_topk: a test holds them equal)
SUPPORT_COLUMNS = (
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
    "support_topk",
)

#: the partition tables, in the order every reader lists them (names only: no pyarrow needed); adding a
#: table is a line here and its columns in :data:`COLUMNS` (its paths follow from :mod:`.layout`)
TABLE_NAMES = ("units", "boundaries", "candidates", "records", "repairs", "repeats")
#: the run-level tables (one file per arm, one per ledger)
RUN_TABLES = ("oracle", "sources")
#: partition tables a partition may lack (added within the format): read as empty
OPTIONAL_TABLES = frozenset({"repairs", "repeats"})

#: each table's columns as (name, type): the one declaration both the Arrow schemas (below, built on
#: first use) and DuckDB's empty tables (:func:`duckdb_columns`, no pyarrow) are made from
UNITS_COLUMNS = (
    ("arm", "string"),
    ("phase", "string"),
    ("unit_id", "string"),
    ("doc_id", "string"),
    ("version", "string"),
    ("ordinal", "int32"),
    ("start", "int64"),
    ("end", "int64"),
    ("core_start", "int64"),
    ("core_end", "int64"),
    ("token_start", "int32"),
    ("token_end", "int32"),
    ("n_tokens", "int32"),
    ("text", "string"),
    ("access", "list<string>"),
    # added within format 2 (optional: an older ledger reads them as NULL): whether the unit lies on a
    # source interval, how it was placed (or why not), and the generated context around it (ingest)
    ("located", "bool"),
    ("placement", "string"),
    ("placed_by", "string"),
    ("placement_note", "string"),
    ("context_json", "string"),
)

BOUNDARIES_COLUMNS = (
    ("arm", "string"),
    ("phase", "string"),
    ("phase_offset", "int32"),
    ("doc_id", "string"),
    ("version", "string"),
    ("n_tokens", "int32"),
    ("cut_tokens", "list<int32>"),
    ("cut_chars", "list<int64>"),
)

CANDIDATES_COLUMNS = (
    ("arm", "string"),
    ("phase", "string"),
    ("qid", "string"),
    ("stage", "string"),
    ("rank", "int32"),
    ("unit_id", "string"),
    ("score", "float64"),
    ("doc_id", "string"),
    ("start", "int64"),
    ("end", "int64"),
    ("lineage", "list<string>"),
)

RECORDS_COLUMNS = (
    ("arm", "string"),
    ("phase", "string"),
    ("phase_offset", "int32"),
    ("qid", "string"),
    ("question", "string"),
    ("segment", "string"),
    ("answerable", "bool"),
    ("support_only", "bool"),
    ("stress_set", "string"),
    ("doc_ids", "list<string>"),
    ("gold_status", "string"),
    *[(c, "bool") for c in SUPPORT_COLUMNS],
    ("covered_set", "int32"),
    ("single_unit_complete", "bool"),
    ("packed_context", "string"),
    ("packed_unit_ids", "list<string>"),
    ("evidence_tokens", "int32"),
    ("prompt_tokens", "int32"),
    ("budget_tokens", "int32"),
    ("rerank_depth", "int32"),
    ("selection_depth", "int32"),
    ("repeated_source_tokens", "int32"),
    ("topk_tokens", "int32"),
    ("overflow_json", "string"),
    ("expansion_dropped_json", "string"),
    ("answer", "string"),
    ("abstained", "bool"),
    ("citations_json", "string"),
    ("answer_verdict", "string"),
    ("answer_reason", "string"),
    ("citation_verdict", "string"),
    ("citation_reason", "string"),
    ("generator_error", "string"),
    ("attempts", "int32"),
    ("generator_detail_json", "string"),
    ("oracle_verdict", "string"),
    ("oracle_feasible", "bool"),
    ("config_digest", "string"),
    # added within format 2 (optional): the support stages whose verdict rests on an unlocated chunk
    ("unverifiable_stages", "string"),
)

ORACLE_COLUMNS = (
    ("arm", "string"),
    ("qid", "string"),
    ("support_set", "int32"),
    ("feasible", "bool"),
    ("evidence_tokens", "int32"),
    ("budget_tokens", "int32"),
    ("context", "string"),
    ("answer", "string"),
    ("abstained", "bool"),
    ("answer_verdict", "string"),
    ("answer_reason", "string"),
    ("generator_error", "string"),
    ("attempts", "int32"),
)

SOURCES_COLUMNS = (
    ("doc_id", "string"),
    ("version", "string"),
    ("text", "string"),
    ("observed", "string"),
    ("access", "list<string>"),
)

REPAIRS_COLUMNS = (
    ("arm", "string"),
    ("phase", "string"),
    ("doc_id", "string"),
    ("version", "string"),
    ("position", "int32"),
    ("side", "string"),
    ("status", "string"),
    ("text", "string"),
    ("given_start", "int64"),
    ("given_end", "int64"),
    ("start", "int64"),
    ("end", "int64"),
    ("note", "string"),
)

#: every answer of a sweep run with ``--repeats K`` (K > 1 only): one row per (arm, phase, qid, repeat);
#: repeat 0 is the record's own answer (:mod:`ledgerscope.pipeline.run.repeats`)
REPEATS_COLUMNS = (
    ("arm", "string"),
    ("phase", "string"),
    ("qid", "string"),
    ("repeat", "int32"),
    ("seed", "int64"),
    ("answer", "string"),
    ("abstained", "bool"),
    ("citations_json", "string"),
    ("cited_unit_ids", "list<string>"),
    ("answer_verdict", "string"),
    ("answer_reason", "string"),
    ("citation_verdict", "string"),
    ("citation_reason", "string"),
    ("generator_error", "string"),
    ("latency_s", "float64"),
)

#: table name -> its columns, every table a ledger holds
COLUMNS = {
    "units": UNITS_COLUMNS,
    "boundaries": BOUNDARIES_COLUMNS,
    "candidates": CANDIDATES_COLUMNS,
    "records": RECORDS_COLUMNS,
    "repairs": REPAIRS_COLUMNS,
    "repeats": REPEATS_COLUMNS,
    "oracle": ORACLE_COLUMNS,
    "sources": SOURCES_COLUMNS,
}

#: columns added within format 2: a file without them (an older ledger) reads them as NULL
OPTIONAL_COLUMNS = {
    "units": ("located", "placement", "placed_by", "placement_note", "context_json"),
    "records": ("unverifiable_stages",),
}

#: each column type in Arrow (the ``pyarrow`` factory) and in DuckDB (what DuckDB reads it as)
_TYPES = {
    "string": ("string", "VARCHAR"),
    "int32": ("int32", "INTEGER"),
    "int64": ("int64", "BIGINT"),
    "float64": ("float64", "DOUBLE"),
    "bool": ("bool_", "BOOLEAN"),
}


def duckdb_columns(table: str) -> str:
    """``"name" TYPE, ...`` of ``table`` for a DuckDB ``CREATE TABLE``: an empty table that binds as
    the Arrow schema's would, without importing pyarrow."""

    def sql_type(kind: str) -> str:
        return sql_type(kind[5:-1]) + "[]" if kind.startswith("list<") else _TYPES[kind][1]

    return ", ".join(f'"{name}" {sql_type(kind)}' for name, kind in COLUMNS[table])


#: the Arrow schemas, built on first use (PEP 562): ``schema.RECORDS`` imports pyarrow, ``schema.FORMAT``
#: does not, so a reader that only names tables (the TUI's first screen) never loads it
_ARROW_NAMES = (
    "UNITS",
    "BOUNDARIES",
    "CANDIDATES",
    "RECORDS",
    "REPAIRS",
    "REPEATS",
    "ORACLE",
    "SOURCES",
    "TABLES",
)


def _arrow_schemas() -> dict[str, Any]:
    import pyarrow as pa

    def arrow_type(kind: str) -> Any:
        if kind.startswith("list<"):
            return pa.list_(arrow_type(kind[5:-1]))
        return getattr(pa, _TYPES[kind][0])()

    built = {name: pa.schema([(c, arrow_type(k)) for c, k in cols]) for name, cols in COLUMNS.items()}
    return {
        **{name.upper(): table for name, table in built.items()},
        "TABLES": {name: built[name] for name in TABLE_NAMES},
    }


_BUILD_LOCK = threading.Lock()


def __getattr__(name: str) -> Any:
    if name in _ARROW_NAMES:
        with _BUILD_LOCK:  # built once, even when two threads ask first
            if "TABLES" not in globals():
                globals().update(_arrow_schemas())
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
