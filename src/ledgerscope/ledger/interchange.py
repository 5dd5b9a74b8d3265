"""JSONL interchange: a ledger as one JSON-lines file per table, and back.

Layout of an interchange directory::

    manifest.json  fixtures.jsonl
    sources.jsonl  units.jsonl  boundaries.jsonl  candidates.jsonl  records.jsonl  oracle.jsonl

Every row carries its ``arm`` and ``phase`` columns, so another team's pipeline
can produce a ledger by writing these files; :func:`from_jsonl` checks each
file against the table's Arrow schema (an unknown or mistyped field is an error
naming the file) and writes the partitioned Parquet ledger.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pajson
import pyarrow.parquet as pq

from ..errors import InputError, Problem
from . import schema
from .read import connect, load_manifest
from .write import write_partition, write_table

TABLES = {**schema.TABLES, "oracle": schema.ORACLE, "sources": schema.SOURCES}


def to_jsonl(ledger: str | Path, out: str | Path) -> dict[str, int]:
    """Write every table of ``ledger`` as JSONL under ``out`` (built beside it, renamed into place)."""
    ledger, out = Path(ledger), Path(out)
    con = connect(ledger)
    staging = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    counts = {}
    try:
        for table in TABLES:
            path = staging / f"{table}.jsonl"
            with path.open("w", encoding="utf-8") as fh:
                reader = con.sql(f"SELECT * FROM {table}").to_arrow_reader(batch_size=20_000)
                n = 0
                for batch in reader:
                    for row in batch.to_pylist():
                        fh.write(
                            json.dumps(row, ensure_ascii=False, allow_nan=False, default=str) + "\n"
                        )
                        n += 1
            counts[table] = n
        shutil.copy(ledger / "manifest.json", staging / "manifest.json")
        shutil.copy(ledger / "fixtures.jsonl", staging / "fixtures.jsonl")
        if out.exists():
            shutil.rmtree(out)
        os.replace(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return counts


def _read(path: Path, table_schema: pa.Schema) -> pa.Table:
    if not path.is_file():
        raise InputError(Problem(str(path), None, "file", "missing from the interchange directory"))
    try:
        return pajson.read_json(
            path,
            parse_options=pajson.ParseOptions(
                explicit_schema=table_schema, unexpected_field_behavior="error"
            ),
        )
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise InputError(Problem(str(path), None, "row", str(exc).splitlines()[0])) from None


def from_jsonl(src: str | Path, ledger: str | Path) -> dict[str, int]:
    """Build a Parquet ledger at ``ledger`` (must not exist) from an interchange directory."""
    src, ledger = Path(src), Path(ledger)
    if ledger.exists():
        raise InputError(
            Problem(str(ledger), None, "out", "already exists; choose a new ledger directory")
        )
    manifest = load_manifest(src)
    tables = {
        name: _read(src / f"{name}.jsonl", table_schema) for name, table_schema in TABLES.items()
    }
    staging = ledger.with_name(f".{ledger.name}.{os.getpid()}.tmp")
    shutil.rmtree(staging, ignore_errors=True)
    try:
        staging.mkdir(parents=True)
        (staging / "manifest.json").write_text(
            json.dumps(manifest, indent=2, sort_keys=True, ensure_ascii=False)
        )
        shutil.copy(src / "fixtures.jsonl", staging / "fixtures.jsonl")
        pq.write_table(tables["sources"], staging / "sources.parquet", compression="zstd")
        keys = sorted(
            {
                (a, p)
                for a, p in zip(
                    tables["records"]["arm"].to_pylist(),
                    tables["records"]["phase"].to_pylist(),
                    strict=True,
                )
            }
        )
        for arm, phase in keys:
            parts = {}
            for name in schema.TABLES:
                t = tables[name]
                mask = pc.and_(pc.equal(t["arm"], arm), pc.equal(t["phase"], phase))
                parts[name] = t.filter(mask)
            write_partition(
                staging, arm, phase, parts, {"arm": arm, "phase": phase, "from": "jsonl"}
            )
        oracle = tables["oracle"]
        for arm in sorted(set(oracle["arm"].to_pylist())):
            rows = oracle.filter(pc.equal(oracle["arm"], arm)).to_pylist()
            write_table(staging / "oracle" / f"arm={arm}" / "oracle.parquet", rows, schema.ORACLE)
        os.replace(staging, ledger)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return {name: t.num_rows for name, t in tables.items()}
