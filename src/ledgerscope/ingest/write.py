"""Writing the derived rows as a standard ledger (format 2) through :mod:`ledgerscope.ledger.write`.

Each table is cast to its Arrow schema (:mod:`ledgerscope.ledger.schema`) and
combined into one chunk before it is written, so the bytes depend on the rows
alone, not on how DuckDB happened to batch them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ledgerscope.ingest.derive.rows import CANDIDATES_OF, RECORDS_OF
from ledgerscope.inputs.sources import Corpus
from ledgerscope.ledger import schema
from ledgerscope.ledger.read import connect
from ledgerscope.ledger.sources import source_rows
from ledgerscope.ledger.write import clear_staging, oracle_path, sources_path, write_partition, write_table
from ledgerscope.trace.spec import STAGE_ORDER

#: candidate rows in cascade order within a record (declared stages after the standard ones)
_STAGE_RANK = "coalesce(list_position([" + ", ".join(f"'{s}'" for s in STAGE_ORDER) + "], stage), 99)"

#: each table's rows of one (arm, phase), in the order the ledger keeps them (the candidates sorted
#: afterwards by :data:`_ORDER`); every name a plain table of the ingest's connection, so each writer
#: thread's cursor sees it
_QUERIES = {
    "records": RECORDS_OF,
    "candidates": CANDIDATES_OF.replace("SELECT t.arm,", f"SELECT {_STAGE_RANK} AS stage_rank, t.arm,", 1),
    "units": 'SELECT * FROM _ig_units WHERE arm = $1 AND phase = $2 ORDER BY doc_id, "start", "end", unit_id',
    "boundaries": "SELECT * FROM _ig_bounds WHERE arm = $1 AND phase = $2 ORDER BY doc_id",
}
#: the candidate rows' order, unique per row (a record's stage and rank name one row), applied by
#: Arrow: a partition's rows sort on integers and dictionary-free keys several times faster than
#: DuckDB's ORDER BY carrying every column along
_ORDER = {
    "candidates": [
        ("qid", "ascending"),
        ("stage_rank", "ascending"),
        ("stage", "ascending"),
        ("rank", "ascending"),
    ]
}
#: the written_at of every partition marker (an ingest writes no time: the same inputs, the same bytes)
WRITTEN_AT = "ingested"
#: partitions written at once (the Parquet encoder releases the GIL)
WRITERS = 2


def as_table(
    con, sql: str, params: list, table_schema: pa.Schema, order: list[tuple[str, str]] | None = None
) -> pa.Table:
    """Rows of ``sql`` (sorted by ``order``) with exactly the columns of ``table_schema``, in one chunk."""
    got = con.sql(sql, params=params).to_arrow_table()
    if order:
        got = got.take(pc.sort_indices(got, sort_keys=order))
    return got.select(table_schema.names).cast(table_schema).combine_chunks()


def _partition(con, database: str, ledger: Path, arm: str, phase: str, tids: tuple[int, int]) -> int:
    """One (arm, phase) written; ``tids``: the first and last trace number of its traces; ``database``:
    the connection's (a cursor starts in the default one)."""
    cur = con.cursor()
    cur.execute(f"USE {database}")
    try:
        tables = {
            name: as_table(
                cur,
                sql,
                [arm, phase, *tids] if "$3" in sql else [arm, phase],
                schema.TABLES[name],
                _ORDER.get(name),
            )
            for name, sql in _QUERIES.items()
        }
    finally:
        cur.close()
    write_partition(
        ledger,
        arm,
        phase,
        tables,
        {
            "arm": arm,
            "phase": phase,
            "from": "ingest",
            "written_at": WRITTEN_AT,
            **{name: t.num_rows for name, t in tables.items()},
        },
    )
    return tables["records"].num_rows


def write_ledger(
    con, ledger: Path, manifest: dict, arms: dict[str, list[str]], corpus: Corpus
) -> dict[tuple[str, str], int]:
    """Manifest, sources, every (arm, phase) partition, the oracle tables; then the reader's check.
    Returns the records written per (arm, phase)."""
    from concurrent.futures import ThreadPoolExecutor

    (ledger / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True, ensure_ascii=False))
    sources = pa.Table.from_pylist(
        source_rows(corpus),
        schema=schema.SOURCES,
    )
    write_table(sources_path(ledger), sources, schema.SOURCES)
    keys = [(arm, phase) for arm, phases in arms.items() for phase in phases]
    tids = {
        (a, p): (lo, hi)
        for a, p, lo, hi in con.execute(
            "SELECT arm, phase, min(tid), max(tid) FROM _ig_trace GROUP BY arm, phase"
        ).fetchall()
    }
    db = con.execute("SELECT current_database()").fetchall()[0][0]
    with ThreadPoolExecutor(max_workers=WRITERS) as pool:
        written = pool.map(lambda k: _partition(con, db, ledger, *k, tids[k]), keys)
        counts = dict(zip(keys, written, strict=True))
    for arm in arms:
        oracle = (
            as_table(con, "SELECT * FROM _ig_oracle_rows WHERE arm = $1 ORDER BY qid", [arm], schema.ORACLE)
            if _has(con, "_ig_oracle_rows")
            else None
        )
        if oracle is not None and oracle.num_rows:
            path = oracle_path(ledger, arm)
            path.parent.mkdir(parents=True, exist_ok=True)
            pq.write_table(oracle, path, compression="zstd")
    clear_staging(ledger)
    connect(ledger).close()  # the ledger passes the reader's checks before it appears
    return counts


def _has(con, name: str) -> bool:
    rows = con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = ?", [name]).fetchall()
    return bool(rows[0][0])
