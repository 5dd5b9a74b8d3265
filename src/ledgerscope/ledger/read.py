"""Reading a ledger: DuckDB views over the finished partitions, plus the manifest.

Only partitions that carry ``_SUCCESS.json`` are read (a partition directory
exists only once complete, but a hand-copied ledger may hold stragglers).
Views: ``units``, ``boundaries``, ``candidates``, ``records``, ``oracle``,
``sources``. Reading never writes into the ledger directory.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import InputError, Problem
from . import schema


def load_manifest(ledger: str | Path) -> dict:
    path = Path(ledger) / "manifest.json"
    if not path.is_file():
        raise InputError(
            Problem(str(path), None, "manifest", "not a ledger: manifest.json is missing")
        )
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(Problem(str(path), None, "manifest", f"not valid JSON: {exc}")) from None
    if manifest.get("format") != schema.FORMAT:
        raise InputError(
            Problem(
                str(path),
                None,
                "format",
                f"unknown ledger format {manifest.get('format')!r} (expected {schema.FORMAT})",
            )
        )
    return manifest


def finished_partitions(ledger: str | Path) -> list[Path]:
    root = Path(ledger) / "partitions"
    return sorted(p.parent for p in root.glob("arm=*/phase=*/_SUCCESS.json"))


def _sql_list(paths: list[Path]) -> str:
    return "[" + ", ".join("'" + str(p).replace("'", "''") + "'" for p in paths) + "]"


def connect(ledger: str | Path, con=None):
    """A DuckDB connection with one view per ledger table (empty views when none written)."""
    import duckdb

    ledger = Path(ledger)
    load_manifest(ledger)
    con = con or duckdb.connect()
    parts = finished_partitions(ledger)
    for name, table_schema in schema.TABLES.items():
        files = [p / f"{name}.parquet" for p in parts if (p / f"{name}.parquet").is_file()]
        _view(con, name, files, table_schema)
    oracle_files = sorted((ledger / "oracle").glob("arm=*/oracle.parquet"))
    _view(con, "oracle", oracle_files, schema.ORACLE)
    src = ledger / "sources.parquet"
    _view(con, "sources", [src] if src.is_file() else [], schema.SOURCES)
    return con


def _view(con, name: str, files: list[Path], table_schema) -> None:
    if files:
        con.execute(
            f"CREATE OR REPLACE VIEW {name} AS SELECT * FROM read_parquet({_sql_list(files)}, "
            "hive_partitioning = false, "
            "union_by_name = true)"
        )
    else:  # an empty table with the right columns, so queries still bind
        import pyarrow as pa

        empty = pa.Table.from_pylist([], schema=table_schema)
        con.register(f"_{name}_empty", empty)
        con.execute(f"CREATE OR REPLACE VIEW {name} AS SELECT * FROM _{name}_empty")
