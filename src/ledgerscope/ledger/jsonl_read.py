"""Reading a JSONL interchange directory (:mod:`.interchange`): every file checked against its table's
Arrow schema and every row against the manifest, then the tables as DuckDB tables with the ledger's
schemas, so :func:`.read.connect` reads such a directory like a Parquet ledger.

Apart from :mod:`.interchange` (which converts and so needs :func:`.read.connect`) to keep the
ledger package acyclic.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pajson

from ledgerscope.common.errors import InputError, Problem
from ledgerscope.ledger import schema
from ledgerscope.ledger.verify import load_manifest

if TYPE_CHECKING:
    from duckdb import DuckDBPyConnection


#: the interchange directory's tables (one ``.jsonl`` file each) and their Arrow schemas
TABLES = {**schema.TABLES, "oracle": schema.ORACLE, "sources": schema.SOURCES}


def _row_problems(src: Path, manifest: dict[str, Any], tables: dict[str, pa.Table]) -> list[Problem]:
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
                out.append(
                    Problem(path, None, "phase", f"row {i}: phase {phase!r} is not a phase of arm {arm!r}")
                )
            else:
                continue
            break  # one located example per file is enough
    seen: dict[tuple[Any, ...], int] = {}
    rec = tables["records"]
    for i, key in enumerate(
        zip(rec["arm"].to_pylist(), rec["phase"].to_pylist(), rec["qid"].to_pylist(), strict=True), start=1
    ):
        if key[2] is None:
            out.append(Problem(str(src / "records.jsonl"), None, "qid", f"row {i}: missing (null)"))
            break
        if key in seen:
            out.append(
                Problem(
                    str(src / "records.jsonl"),
                    None,
                    "qid",
                    f"row {i}: duplicate record {key} (first at row {seen[key]})",
                )
            )
            break
        seen[key] = i
    scores = tables["candidates"]["score"]
    bad = pc.invert(pc.is_finite(scores))
    if pc.any(bad).as_py():
        i = pc.index(bad, True).as_py()
        out.append(
            Problem(
                str(src / "candidates.jsonl"),
                None,
                "score",
                f"row {i + 1}: {scores[i].as_py()}; scores must be finite",
            )
        )
    return out + _cross_table_problems(src, tables)


_KEY = ["arm", "phase", "qid"]


def _cross_table_problems(src: Path, tables: dict[str, pa.Table]) -> list[Problem]:
    """Rows one table holds that the other contradicts: a candidate list whose record is missing, a
    record whose packed context has no candidate rows. (A Parquet ledger's partition markers count
    its rows; an interchange directory has only these cross-references to catch an emptied file.)"""
    out: list[Problem] = []
    records, candidates = tables["records"], tables["candidates"]
    record_keys = records.select(_KEY).group_by(_KEY).aggregate([])
    candidate_keys = candidates.select(_KEY).group_by(_KEY).aggregate([])
    orphans = candidate_keys.join(record_keys, _KEY, join_type="left anti")
    if orphans.num_rows:
        key = tuple(orphans.slice(0, 1).to_pylist()[0][k] for k in _KEY)
        out.append(
            Problem(
                str(src / "candidates.jsonl"),
                None,
                "qid",
                f"{orphans.num_rows:,} candidate list(s) without a record in records.jsonl, e.g. {key}",
            )
        )
    packed = records.filter(pc.greater(pc.list_value_length(records["packed_unit_ids"]), 0))
    bare = packed.select(_KEY).join(candidate_keys, _KEY, join_type="left anti")
    if bare.num_rows:
        key = tuple(bare.slice(0, 1).to_pylist()[0][k] for k in _KEY)
        out.append(
            Problem(
                str(src / "records.jsonl"),
                None,
                "packed_unit_ids",
                f"{bare.num_rows:,} record(s) with packed units but no candidate rows in "
                f"candidates.jsonl, e.g. {key}",
            )
        )
    return out


def _read(path: Path, table_schema: pa.Schema, optional: bool = False) -> pa.Table:
    """One table's file checked against its schema; an ``optional`` table's missing file reads as
    empty (an interchange directory written before the table existed)."""
    if not path.is_file():
        if optional:
            return table_schema.empty_table()
        raise InputError(Problem(str(path), None, "file", "missing from the interchange directory"))
    if path.stat().st_size == 0:  # no rows (Arrow's JSON reader refuses an empty file)
        return table_schema.empty_table()
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


def read_checked(src: str | Path) -> tuple[dict[str, Any], dict[str, pa.Table]]:
    """The manifest and every table of an interchange directory, with the checks a conversion makes:
    each file against its Arrow schema, the rows (keys, arms and phases in the manifest, duplicate
    records, finite scores), the sources against their digests, the fixtures against the sources."""
    src = Path(src)
    manifest = load_manifest(src)
    tables = {
        name: _read(src / f"{name}.jsonl", table_schema, name in schema.OPTIONAL_TABLES)
        for name, table_schema in TABLES.items()
    }
    problems = _row_problems(src, manifest, tables)
    from ledgerscope.inputs.fixtures import read_fixtures, resolve
    from ledgerscope.ledger.sources import sources_corpus

    s = tables["sources"]
    corpus = sources_corpus(
        src / "sources.jsonl",
        zip(*(s[c].to_pylist() for c in ("doc_id", "version", "text", "observed", "access")), strict=True),
    )
    fset, fixture_problems = read_fixtures(src / "fixtures.jsonl")
    problems += fixture_problems + resolve(fset, corpus)[2]
    if problems:
        raise InputError(problems)
    return manifest, tables


def connect_jsonl(src: str | Path, con: DuckDBPyConnection | None = None) -> DuckDBPyConnection:
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
