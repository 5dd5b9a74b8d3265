"""JSONL interchange: a ledger as one JSON-lines file per table, and back.

Layout of an interchange directory::

    manifest.json  fixtures.jsonl
    sources.jsonl  units.jsonl  boundaries.jsonl  candidates.jsonl  records.jsonl  oracle.jsonl

Every row carries its ``arm`` and ``phase`` columns, so another team's pipeline
can produce a ledger by writing these files; :func:`from_jsonl` checks each
file against the table's Arrow schema (an unknown or mistyped field is an error
naming the file) and writes the partitioned Parquet ledger, always in the
current format (:data:`.schema.FORMAT`): the rows do not depend on the format,
so a format 1 ledger converted to JSONL and back is the same ledger in format 2.
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

from ledgerscope.common.atomic import clear_stale
from ledgerscope.common.errors import InputError, Problem
from ledgerscope.ledger import schema
from ledgerscope.ledger.layout import is_interchange  # noqa: F401 - part of this module's interface
from ledgerscope.ledger.read import connect
from ledgerscope.ledger.verify import load_manifest
from ledgerscope.ledger.write import oracle_path, write_partition, write_table

TABLES = {**schema.TABLES, "oracle": schema.ORACLE, "sources": schema.SOURCES}


def to_jsonl(ledger: str | Path, out: str | Path) -> dict[str, int]:
    """Write every table of ``ledger`` as JSONL under ``out`` (built beside it, renamed into place)."""
    ledger, out = Path(ledger), Path(out)
    _check_jsonl_out(ledger, out)
    con = connect(ledger)
    from ledgerscope.analysis.diagnosis.feed import load_ledger_fixtures

    load_ledger_fixtures(con, ledger)  # sources and fixtures checked too: no damage is passed on
    staging = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    clear_stale(out)  # what a killed conversion left
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


#: what an interchange directory may hold (so replacing one never deletes anything else)
_INTERCHANGE_FILES = {f"{name}.jsonl" for name in TABLES} | {"manifest.json", "fixtures.jsonl"}


def _check_jsonl_out(ledger: Path, out: Path) -> None:
    """``out`` is outside the ledger and is new or an earlier interchange directory (it is replaced)."""
    led, dst = ledger.resolve(), out.resolve()
    if dst == led or led in dst.parents or dst in led.parents:
        raise InputError(Problem(str(out), None, "out",
                                 "must lie outside the ledger (the ledger is only read)"))
    if dst.exists() and not dst.is_dir():
        raise InputError(Problem(str(out), None, "out", "exists and is not a directory"))
    if dst.is_dir():
        foreign = sorted(p.name for p in dst.iterdir() if p.name not in _INTERCHANGE_FILES)
        if foreign:
            raise InputError(Problem(str(out), None, "out",
                                     "refusing to replace a directory that holds more than an "
                                     f"interchange export (found {foreign[0]})"))


def _row_problems(src: Path, manifest: dict, tables: dict[str, pa.Table]) -> list[Problem]:
    """Rows a ledger cannot hold: keys missing, arm or phase not in the manifest, duplicate records,
    non-finite scores. Rows are numbered from 1 in their file."""
    out: list[Problem] = []
    labels = {arm: {p["label"] for p in entry["phases"]} for arm, entry in manifest["arms"].items()}
    for name in (*schema.TABLES, "oracle"):
        t = tables[name]
        path = str(src / f"{name}.jsonl")
        arms = t["arm"].to_pylist()
        phases = t["phase"].to_pylist() if "phase" in t.column_names else [None] * t.num_rows
        for i, (arm, phase) in enumerate(zip(arms, phases, strict=True), start=1):
            if arm not in labels:
                out.append(Problem(path, None, "arm", f"row {i}: arm {arm!r} is not in the manifest"))
            elif name != "oracle" and phase not in labels[arm]:
                out.append(Problem(path, None, "phase",
                                   f"row {i}: phase {phase!r} is not a phase of arm {arm!r}"))
            else:
                continue
            break  # one located example per file is enough
    seen: dict[tuple, int] = {}
    rec = tables["records"]
    for i, key in enumerate(zip(rec["arm"].to_pylist(), rec["phase"].to_pylist(), rec["qid"].to_pylist(),
                                strict=True), start=1):
        if key[2] is None:
            out.append(Problem(str(src / "records.jsonl"), None, "qid", f"row {i}: missing (null)"))
            break
        if key in seen:
            out.append(Problem(str(src / "records.jsonl"), None, "qid",
                               f"row {i}: duplicate record {key} (first at row {seen[key]})"))
            break
        seen[key] = i
    scores = tables["candidates"]["score"]
    bad = pc.invert(pc.is_finite(scores))
    if pc.any(bad).as_py():
        i = pc.index(bad, True).as_py()
        out.append(Problem(str(src / "candidates.jsonl"), None, "score",
                           f"row {i + 1}: {scores[i].as_py()}; scores must be finite"))
    return out


def _read(path: Path, table_schema: pa.Schema) -> pa.Table:
    if not path.is_file():
        raise InputError(Problem(str(path), None, "file", "missing from the interchange directory"))
    try:
        table = pajson.read_json(
            path,
            parse_options=pajson.ParseOptions(
                explicit_schema=table_schema, unexpected_field_behavior="error"
            ),
        )
        table.validate(full=True)  # the JSON reader lets invalid UTF-8 (e.g. encoded surrogates) through
        return table
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise InputError(Problem(str(path), None, "row", str(exc).splitlines()[0])) from None


def read_checked(src: str | Path) -> tuple[dict, dict[str, pa.Table]]:
    """The manifest and every table of an interchange directory, with the checks a conversion makes:
    each file against its Arrow schema, the rows (keys, arms and phases in the manifest, duplicate
    records, finite scores), the sources against their digests, the fixtures against the sources."""
    src = Path(src)
    manifest = load_manifest(src)
    tables = {
        name: _read(src / f"{name}.jsonl", table_schema) for name, table_schema in TABLES.items()
    }
    problems = _row_problems(src, manifest, tables)
    from ledgerscope.inputs.fixtures import read_fixtures, resolve
    from ledgerscope.ledger.read import sources_corpus

    s = tables["sources"]
    corpus = sources_corpus(src / "sources.jsonl", zip(*(s[c].to_pylist() for c in (
        "doc_id", "version", "text", "observed", "access")), strict=True))
    fset, fixture_problems = read_fixtures(src / "fixtures.jsonl")
    problems += fixture_problems + resolve(fset, corpus)[2]
    if problems:
        raise InputError(problems)
    return manifest, tables


def connect_jsonl(src: str | Path, con=None):
    """A DuckDB connection over an interchange directory: one table per ledger table, read once with
    its Arrow schema after :func:`read_checked`'s checks (the same rows the Parquet ledger
    :func:`from_jsonl` builds would give)."""
    import duckdb

    _, tables = read_checked(src)
    con = con if con is not None else duckdb.connect()
    for name, table in tables.items():
        con.register(f"_jsonl_{name}", table)
        try:
            con.execute(f"CREATE OR REPLACE TABLE {name} AS SELECT * FROM _jsonl_{name}")  # cursors see it
        finally:
            con.unregister(f"_jsonl_{name}")
    return con


def from_jsonl(src: str | Path, ledger: str | Path) -> dict[str, int]:
    """Build a Parquet ledger at ``ledger`` (must not exist) from an interchange directory."""
    src, ledger = Path(src), Path(ledger)
    if ledger.exists():
        raise InputError(
            Problem(str(ledger), None, "out", "already exists; choose a new ledger directory")
        )
    manifest, tables = read_checked(src)
    staging = ledger.with_name(f".{ledger.name}.{os.getpid()}.tmp")
    clear_stale(ledger)  # what a killed conversion left
    shutil.rmtree(staging, ignore_errors=True)
    try:
        staging.mkdir(parents=True)
        (staging / "manifest.json").write_text(
            json.dumps({**manifest, "format": schema.FORMAT}, indent=2, sort_keys=True, ensure_ascii=False)
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
            write_table(oracle_path(staging, arm), rows, schema.ORACLE)
        connect(staging).close()  # the built ledger passes the reader's checks before it appears
        os.replace(staging, ledger)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return {name: t.num_rows for name, t in tables.items()}
