"""Every ledger table reads alike in DuckDB, polars, pandas and pyarrow.dataset, from its own directory.

Format 3 gives each table a directory, Hive-partitioned (``records/arm=A/phase=L/part-0.parquet``),
and keeps ``arm`` and ``phase`` in the files as strings too (ledger/schema.py says why). Each
engine is called the way docs/ledger.md shows: the same rows, ``arm`` and ``phase`` as strings,
labels that look like numbers (``0``, ``07``) unchanged. Two engines need one option for that:
``pandas.read_parquet(dir)`` with none refuses the directory (pyarrow cannot merge the files'
strings with its dictionary partition columns: an error, never wrong rows) and reads it with
``partitioning=None``; DuckDB's ``read_parquet(glob)`` casts labels that are all integers
(``0``..``7``, the default) to BIGINT unless ``hive_types_autocast = false``. Format 1 and 2
ledgers (one directory per partition) are still read and converted, never resumed.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import duckdb
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.dataset as ds
import pytest
from typer.testing import CliRunner

from ledgerscope.cli.main import app
from ledgerscope.common.errors import InputError
from ledgerscope.ledger import layout, schema
from ledgerscope.ledger.digest import table_digests
from ledgerscope.ledger.read import connect
from ledgerscope.ledger.upgrade import relayout
from ledgerscope.ledger.verify import finished_partitions
from ledgerscope.ledger.write import check_out
from ledgerscope.testing.ledger_files import marker_of, rerecord, table_file
from ledgerscope.testing.synthetic import make_synthetic_ledger

#: a mixed label set, and one where every label looks like a number (a Hive reader would make them ints)
LABEL_SETS = {"mixed": ("0", "5", "07", "a", "p5"), "numeric": ("0", "1", "5")}
#: every table with rows per arm (the partition tables and the oracle); ``repeats`` is written only by a
#: sweep with --repeats K > 1 (tests/test_repeats.py reads one)
KEYED_TABLES = (*(name for name in schema.TABLE_NAMES if name != "repeats"), "oracle")
runner = CliRunner()


@pytest.fixture(scope="module", params=sorted(LABEL_SETS))
def ledger(request, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp(f"engines-{request.param}") / "ledger"
    make_synthetic_ledger(path, questions=6, phase_labels=LABEL_SETS[request.param], arms=("cand-1", "0"))
    return path


def _keys(columns: list[list]) -> Counter:
    """The rows' key values, counted; every value a Python string."""
    odd = {type(v).__name__ for col in columns for v in col if not isinstance(v, str)}
    assert not odd, f"key values read as {sorted(odd)}, not strings"
    return Counter(zip(*columns, strict=True))


def _duckdb(rel, keys: tuple[str, ...]) -> tuple[Counter, tuple[str, ...]]:
    types = dict(zip(rel.columns, map(str, rel.types), strict=True))
    rows = rel.select(", ".join(keys)).fetchall()
    return _keys([[r[i] for r in rows] for i in range(len(keys))]), tuple(types[k] for k in keys)


def _polars(df: pl.DataFrame, keys: tuple[str, ...]) -> tuple[Counter, tuple[str, ...]]:
    return _keys([df[k].to_list() for k in keys]), tuple(str(df.schema[k]) for k in keys)


def _pandas(df: pd.DataFrame, keys: tuple[str, ...]) -> tuple[Counter, tuple[str, ...]]:
    def kind(col) -> str:
        dtype = df[col].dtype
        return (
            "string"
            if pd.api.types.is_string_dtype(dtype) and not isinstance(dtype, pd.CategoricalDtype)
            else str(dtype)
        )

    return _keys([df[k].tolist() for k in keys]), tuple(kind(k) for k in keys)


def _arrow(dataset: ds.Dataset, keys: tuple[str, ...]) -> tuple[Counter, tuple[str, ...]]:
    table = dataset.to_table()
    return _keys([table[k].to_pylist() for k in keys]), tuple(str(table.schema.field(k).type) for k in keys)


def key_columns(table: str) -> tuple[str, ...]:
    return ("arm",) if table == "oracle" else ("arm", "phase")


#: pyarrow's Hive partitioning with both keys read as strings (docs/ledger.md)
STRING_KEYS = ds.partitioning(pa.schema([("arm", pa.string()), ("phase", pa.string())]), flavor="hive")


def engine_reads(ledger: Path, table: str) -> dict[str, tuple[Counter, tuple[str, ...]]]:
    """The key values (arm, and phase but in the oracle) of every row and their types, per engine
    and the call docs/ledger.md shows for it."""
    root, keys = str(ledger / table), key_columns(table)
    pattern = f"{root}/**/*.parquet"
    reads = {
        "duckdb read_parquet(glob, no autocast)": (
            _duckdb,
            lambda: duckdb.sql(f"FROM read_parquet('{pattern}', hive_types_autocast = false)"),
        ),
        "duckdb read_parquet(glob, no hive)": (
            _duckdb,
            lambda: duckdb.sql(f"FROM read_parquet('{pattern}', hive_partitioning = false)"),
        ),
        "polars read_parquet(dir)": (_polars, lambda: pl.read_parquet(root)),
        "polars read_parquet(glob)": (_polars, lambda: pl.read_parquet(pattern)),
        "polars scan_parquet(glob, hive)": (
            _polars,
            lambda: pl.scan_parquet(pattern, hive_partitioning=True).collect(),
        ),
        "pandas read_parquet(dir, partitioning=None)": (
            _pandas,
            lambda: pd.read_parquet(root, partitioning=None),
        ),
        "pyarrow dataset(dir)": (_arrow, lambda: ds.dataset(root)),
        "pyarrow dataset(dir, string hive keys)": (
            _arrow,
            lambda: ds.dataset(root, partitioning=STRING_KEYS),
        ),
    }
    out = {}
    for name, (summarise, read) in reads.items():
        try:
            out[name] = summarise(read(), keys)
        except Exception as exc:  # a failing engine is a finding, reported with the others
            out[name] = (Counter(), (f"{type(exc).__name__}: {str(exc)[:120]}",))
    return out


STRING_TYPES = {"VARCHAR", "String", "string", "large_string", "string_view"}


@pytest.mark.parametrize("table", KEYED_TABLES)
def test_every_engine_reads_every_table_alike_from_its_directory(ledger, table):
    keys = key_columns(table)
    rows = connect(ledger).execute(f"SELECT {', '.join(keys)} FROM {table}").fetchall()
    expected = _keys([[r[i] for r in rows] for i in range(len(keys))])
    assert expected, "the ledger has rows in every table"
    reads = engine_reads(ledger, table)
    wrong = {
        name: (types, sum(got.values()))
        for name, (got, types) in reads.items()
        if got != expected or not set(types) <= STRING_TYPES
    }
    assert not wrong, f"{table}: expected {sum(expected.values())} rows, {keys} as strings: {wrong}"
    if table != "oracle":  # "07" stays "07", "p5" stays "p5"
        manifest = json.loads((ledger / "manifest.json").read_text())
        labels = {p["label"] for a in manifest["arms"].values() for p in a["phases"]}
        assert {phase for _, phase in expected} == labels


def test_every_engine_reads_the_sources_table_whole(ledger):
    root = ledger / "sources"
    want = sorted(r[0] for r in connect(ledger).execute("SELECT doc_id FROM sources").fetchall())
    got = {
        "duckdb": duckdb.sql(f"SELECT doc_id FROM read_parquet('{root}/**/*.parquet')").fetchall(),
        "polars": [(d,) for d in pl.read_parquet(root)["doc_id"].to_list()],
        "pandas": [(d,) for d in pd.read_parquet(root)["doc_id"]],
        "pyarrow": [(d,) for d in ds.dataset(root).to_table()["doc_id"].to_pylist()],
    }
    read = {name: sorted(r[0] for r in rows) for name, rows in got.items()}
    assert want and read == dict.fromkeys(got, want)


def test_the_default_calls_that_need_an_option(ledger):
    """pandas' default call raises (it never returns rows); DuckDB's reads integer-looking labels as
    BIGINT, a label such as ``07`` as VARCHAR (docs/ledger.md gives both the option that keeps strings)."""
    with pytest.raises(pa.ArrowTypeError, match="Unable to merge"):
        pd.read_parquet(ledger / "records")
    rel = duckdb.sql(f"FROM read_parquet('{ledger}/records/**/*.parquet')")
    labels = {r[0] for r in rel.select("phase").fetchall()}
    numeric = all(label.isdigit() and str(int(label)) == label for label in map(str, labels))
    assert dict(zip(rel.columns, map(str, rel.types), strict=True))["phase"] == (
        "BIGINT" if numeric else "VARCHAR"
    )


def test_an_uncommitted_partition_is_ignored_by_the_project(ledger, tmp_path):
    """Files without a commit marker are a write that did not finish: the views leave them out."""
    copy = tmp_path / "ledger"
    shutil.copytree(ledger, copy)
    arm, phase = finished_partitions(copy)[0]
    n = connect(copy).execute("SELECT count(*) FROM records").fetchall()[0][0]
    marker = layout.CURRENT.marker_path(copy, arm, phase)
    marker.unlink()
    con = connect(copy)
    left = con.execute("SELECT count(*) FROM records WHERE arm = ? AND phase = ?", [arm, phase]).fetchall()
    assert left[0][0] == 0 and con.execute("SELECT count(*) FROM records").fetchall()[0][0] < n


def test_the_views_give_the_analyses_varchar_arm_and_phase(ledger):
    con = connect(ledger)
    for table in (*schema.TABLES, "oracle"):
        columns = {c[0]: c[1] for c in con.execute(f"DESCRIBE {table}").fetchall()}
        assert columns["arm"] == "VARCHAR"
        if table != "oracle":
            assert columns["phase"] == "VARCHAR"
        assert list(columns) == (schema.ORACLE if table == "oracle" else schema.TABLES[table]).names


def test_a_format_3_ledger_has_a_directory_per_table(ledger):
    manifest = json.loads((ledger / "manifest.json").read_text())
    assert manifest["format"] == schema.FORMAT == "ledgerscope-ledger/3"
    named = {p.relative_to(ledger).as_posix() for p in ledger.rglob("*") if p.is_file()}
    assert "records/arm=cand-1/phase=0/part-0.parquet" in named
    assert "oracle/arm=0/part-0.parquet" in named and "sources/part-0.parquet" in named
    assert "_commits/arm=cand-1/phase=0.json" in named
    top = {p.name for p in ledger.iterdir()}
    assert {*KEYED_TABLES, "sources", "_commits"} <= top and "partitions" not in top
    for table in (*KEYED_TABLES, "sources"):  # nothing but the table's files
        assert {p.suffix for p in (ledger / table).rglob("*") if p.is_file()} == {".parquet"}


# --- formats 1 and 2 ------------------------------------------------------------


def as_format_1(ledger: Path, out: Path) -> Path:
    """The same ledger as format 1 wrote it: ``partitions/arm=A/phase=L/``, format 1 manifest."""
    relayout(ledger, out, layout.VERSION_1)
    return out


def as_format_2(ledger: Path, out: Path) -> Path:
    """The same ledger as format 2 wrote it: ``partitions/arm-A/phase-L/``, format 2 manifest."""
    relayout(ledger, out, layout.VERSION_2)
    return out


@pytest.fixture(scope="module", params=["1", "2"])
def older(request, ledger, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp(f"format{request.param}") / "ledger"
    return (as_format_1 if request.param == "1" else as_format_2)(ledger, path)


def test_older_ledger_reads_to_the_same_views(ledger, older):
    assert layout.ledger_layout(older) in (layout.VERSION_1, layout.VERSION_2)
    assert (older / "partitions").is_dir() and not (older / "records").exists()
    assert len(finished_partitions(older)) == len(finished_partitions(ledger)) > 0
    assert table_digests(older) == table_digests(ledger)


def test_older_ledger_diagnoses_as_before(ledger, older):
    outputs = []
    for path in (ledger, older):
        result = runner.invoke(app, ["diagnose", str(path), "--json"])
        assert result.exit_code == 0, result.output
        outputs.append(result.output)
    assert outputs[0] == outputs[1] and outputs[0].count("\n") > 10


def test_older_row_checks_use_its_directory_names(older, tmp_path):
    """A record filed under another partition is still found in a format 1 or 2 ledger."""
    import pyarrow.parquet as pq

    damaged = tmp_path / "damaged"
    shutil.copytree(older, damaged)
    records = table_file(damaged, "records", *finished_partitions(damaged)[0])
    table = pq.read_table(records)
    table = table.set_column(
        table.schema.get_field_index("phase"), "phase", pa.array(["elsewhere"] * table.num_rows, pa.string())
    )
    pq.write_table(table, records)
    rerecord(damaged, records)
    with pytest.raises(InputError) as err:
        connect(damaged)
    assert "another partition's file" in str(err.value)
    connect(older).close()  # undamaged, the same check passes


def test_older_ledger_is_not_resumed(older):
    identity = json.loads((older / "manifest.json").read_text())["identity"]
    with pytest.raises(InputError) as err:
        check_out(older, identity)
    assert "older format" in str(err.value)


def test_older_ledger_converts_through_jsonl_to_format_3(ledger, older, tmp_path):
    inter, back = tmp_path / "jsonl", tmp_path / "back"
    assert runner.invoke(app, ["convert", str(older), "--to", "jsonl", "--out", str(inter)]).exit_code == 0
    result = runner.invoke(app, ["convert", str(inter), "--to", "parquet", "--out", str(back)])
    assert result.exit_code == 0, result.output
    assert layout.ledger_layout(back) is layout.CURRENT
    assert json.loads((back / "manifest.json").read_text())["format"] == schema.FORMAT
    assert table_digests(back) == table_digests(ledger)


def test_older_ledger_upgrades_to_a_new_directory_and_in_place(ledger, older, tmp_path):
    new = tmp_path / "new"
    result = runner.invoke(app, ["convert", str(older), "--to", "parquet", "--out", str(new)])
    assert result.exit_code == 0, result.output
    assert layout.ledger_layout(new) is layout.CURRENT and (older / "partitions").is_dir()
    assert table_digests(new) == table_digests(ledger)
    assert sorted(finished_partitions(new)) == sorted(finished_partitions(ledger))
    copy = tmp_path / "copy"
    shutil.copytree(older, copy)
    result = runner.invoke(app, ["convert", str(copy), "--to", "parquet", "--out", str(copy)])
    assert result.exit_code == 0, result.output
    assert layout.ledger_layout(copy) is layout.CURRENT and not (copy / "partitions").exists()
    assert table_digests(copy) == table_digests(ledger)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["copy", "new"]  # no staging left behind
    again = runner.invoke(app, ["convert", str(older), "--to", "parquet", "--out", str(new)])
    assert again.exit_code == 2 and "already exists" in again.output


def test_a_marker_names_only_its_own_partitions_files(ledger, tmp_path):
    """A format 3 marker listing another partition's file is refused, not followed."""
    copy = tmp_path / "ledger"
    shutil.copytree(ledger, copy)
    (a, p), (a2, p2) = finished_partitions(copy)[:2]
    marker, key = marker_of(copy, table_file(copy, "records", a, p))
    meta = json.loads(marker.read_text())
    meta["files"][layout.CURRENT.file_key("records", a2, p2)] = meta["files"].pop(key)
    marker.write_text(json.dumps(meta))
    with pytest.raises(InputError) as err:
        connect(copy)
    assert "not a file record of this partition" in str(err.value)


def test_a_manifest_names_no_directory_it_cannot_hold(ledger, tmp_path):
    """Arm names and phase labels become directory names: no path steps, no separators."""
    for arm, label in (("../up", "0"), ("cand-1", "a/b"), ("cand-1", ".hidden"), ("x=y", "0")):
        copy = tmp_path / f"bad{len(list(tmp_path.iterdir()))}"
        shutil.copytree(ledger, copy)
        manifest = json.loads((copy / "manifest.json").read_text())
        entry = manifest["arms"]["cand-1"]
        entry["phases"][0]["label"] = label
        manifest["arms"] = {arm: entry}
        (copy / "manifest.json").write_text(json.dumps(manifest))
        with pytest.raises(InputError) as err:
            connect(copy)
        assert "names a directory" in str(err.value)


def test_an_empty_table_declared_in_sql_binds_as_its_arrow_schema():
    """A table with no files reads as an empty DuckDB table declared from ``schema.COLUMNS`` (no
    pyarrow); its columns and types are the ones DuckDB reads from the Arrow schema."""
    import duckdb

    from ledgerscope.ledger import schema

    con = duckdb.connect()
    for name in schema.COLUMNS:
        con.execute(f"CREATE TABLE sql_{name} ({schema.duckdb_columns(name)})")
        con.register(f"arrow_{name}", getattr(schema, name.upper()).empty_table())
        described = [con.execute(f"DESCRIBE {kind}_{name}").fetchall() for kind in ("sql", "arrow")]
        assert [r[:2] for r in described[0]] == [r[:2] for r in described[1]], name
