"""Writing a ledger: manifest first, then one partition at a time, its files before its commit marker.

Only the current format is written (:data:`.layout.CURRENT`, format 3); a ledger of an
older format is read, never resumed.

A partition's tables are written under ``.staging/`` and moved into their table
directories (``records/arm=A/phase=L/part-0.parquet``, ...), each file replacing
whatever an earlier attempt left; then its commit marker
``_commits/arm=A/phase=L.json`` is written, atomically. Readers take only partitions
with a marker, so an interrupted sweep leaves either a committed partition or files
nobody reads (replaced by the next attempt), and a resumed sweep skips exactly the
committed ones. The marker records each table file's size and SHA-256 (``files``),
which the reader checks (:func:`ledgerscope.ledger.verify.verify_ledger`): a truncated
or corrupted file is reported by name instead of being read.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ledgerscope.common.atomic import atomic_path, atomic_write_text, fsync_path
from ledgerscope.common.errors import InputError, Problem
from ledgerscope.ledger import schema
from ledgerscope.ledger.layout import CURRENT
from ledgerscope.ledger.verify import file_record, load_manifest


def table_path(ledger: Path, table: str, arm: str, phase: str) -> Path:
    """Where this version writes partition table ``table`` of (arm, phase)."""
    return CURRENT.table_file(ledger, table, arm, phase)


def oracle_path(ledger: Path, arm: str) -> Path:
    """Where this version writes the arm's oracle table."""
    return CURRENT.oracle_path(ledger, arm)


def oracle_resources_path(ledger: Path, arm: str) -> Path:
    """Where this version writes the resource record of the arm's oracle run."""
    return CURRENT.oracle_resources_path(ledger, arm)


def sources_path(ledger: Path) -> Path:
    """Where this version writes the ledger's sources table."""
    return CURRENT.sources_path(ledger)


def is_done(ledger: Path, arm: str, phase: str) -> bool:
    """The partition is committed here, or (a directory standing for a bucket) in the bucket."""
    from ledgerscope.ledger.storage import is_published

    return CURRENT.is_committed(ledger, arm, phase) or is_published(ledger, arm, phase)


def write_table(path: Path, rows: list[dict[str, Any]] | pa.Table, table_schema: pa.Schema) -> None:
    table = rows if isinstance(rows, pa.Table) else pa.Table.from_pylist(rows, schema=table_schema)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, compression="zstd")


def write_partition(
    ledger: Path,
    arm: str,
    phase: str,
    tables: dict[str, list[dict[str, Any]] | pa.Table],
    meta: dict[str, Any],
) -> None:
    """Write all tables of one (arm, phase) partition, then its commit marker."""
    staging = ledger / ".staging" / f"arm={arm}__phase={phase}.{os.getpid()}"
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    for name, rows in tables.items():
        table = rows if isinstance(rows, pa.Table) else pa.Table.from_pylist(rows, schema=schema.TABLES[name])
        pq.write_table(table, staging / f"{name}.parquet", compression="zstd")
    files = {CURRENT.file_key(name, arm, phase): file_record(staging / f"{name}.parquet") for name in tables}
    # a caller that must write the same bytes twice (ingest) gives its own written_at
    meta = {"written_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **meta, "files": files}
    marker = CURRENT.marker_path(ledger, arm, phase)
    marker.unlink(missing_ok=True)  # a partition written again is uncommitted until its new files are in
    for name in schema.TABLE_NAMES:
        if name not in tables:  # an earlier attempt's file of a table this one lacks
            CURRENT.table_file(ledger, name, arm, phase).unlink(missing_ok=True)
    for name in tables:
        final = CURRENT.table_file(ledger, name, arm, phase)
        final.parent.mkdir(parents=True, exist_ok=True)
        os.replace(staging / f"{name}.parquet", final)
        fsync_path(final.parent)
    shutil.rmtree(staging, ignore_errors=True)
    marker.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(marker, json.dumps(meta, indent=2, sort_keys=True))
    from ledgerscope.ledger.storage import publish_partition

    publish_partition(ledger, arm, phase)  # a directory standing for a bucket: files, then the marker


def clear_staging(ledger: Path) -> None:
    shutil.rmtree(ledger / ".staging", ignore_errors=True)


def check_out(ledger: Path, identity: str) -> None:
    """Before any model loads: ``ledger`` is new, empty, or a ledger of this very sweep (to resume).

    Hidden entries (a temporary file a killed run left) do not count.
    """
    if ledger.exists() and not ledger.is_dir():
        raise InputError(Problem(str(ledger), None, "out", "exists and is not a directory"))
    if not ledger.is_dir():
        return
    path = ledger / "manifest.json"
    if not path.exists():
        if any(not p.name.startswith(".") for p in ledger.iterdir()):
            raise InputError(
                Problem(
                    str(ledger),
                    None,
                    "out",
                    "exists, is not empty and holds no manifest.json (not a ledger); write to a new --out",
                )
            )
        return
    _check_same_sweep(ledger, identity)


def write_or_check_manifest(ledger: Path, manifest: dict[str, Any]) -> None:
    """Write the manifest before any retrieval, or check a resumed sweep matches it."""
    path = ledger / "manifest.json"
    if path.is_file():
        _check_same_sweep(ledger, manifest["identity"])
        return
    ledger.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(manifest, indent=2, sort_keys=True, ensure_ascii=False))


def _check_same_sweep(ledger: Path, identity: str) -> None:
    """A sweep resumes only a ledger of its own format built from the same inputs (its identity)."""
    path = ledger / "manifest.json"
    old = load_manifest(ledger)
    _check_format(old, path)
    if old.get("identity") != identity:
        raise InputError(
            Problem(
                str(path),
                None,
                "manifest",
                "this ledger was built from different fixtures, sources or arm configurations "
                f"(identity {old.get('identity')} vs {identity}); write to a new --out",
            )
        )


def _check_format(manifest: dict[str, Any], path: Path) -> None:
    """A sweep resumes only a ledger of the format it writes (an older one is read, not extended)."""
    if manifest.get("format") != schema.FORMAT:
        raise InputError(
            Problem(
                str(path),
                None,
                "format",
                f"this ledger is of the older format {manifest.get('format')}; it can be read, not resumed "
                f"(this version writes {schema.FORMAT}); write to a new --out",
            )
        )
