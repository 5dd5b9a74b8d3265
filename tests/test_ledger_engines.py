"""Every ledger table reads alike in DuckDB, polars, pandas and pyarrow.dataset, each with its defaults.

Format 2 writes ``arm`` and ``phase`` once, as strings inside the files, under directory
names that are not ``key=value`` pairs (ledger/schema.py says why). Each engine is called
the way its documentation shows, with no option: the same rows, ``arm`` and ``phase`` as
strings, labels that look like numbers (``0``, ``07``) unchanged. Format 1 ledgers (the
Hive names ``arm=A/phase=L``) are still read, converted, never resumed.
"""

from __future__ import annotations

import glob
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
from ledgerscope.ledger.verify import finished_partitions
from ledgerscope.ledger.write import check_out
from ledgerscope.testing.synthetic import make_synthetic_ledger

#: a mixed label set, and one where every label looks like a number (Hive paths would make them ints)
LABEL_SETS = {"mixed": ("0", "5", "07", "a", "p5"), "numeric": ("0", "1", "5")}
#: where each table's files lie in a format 2 ledger, as a user would write it
GLOBS = {
    # ``repeats`` is written only by a sweep with --repeats K > 1 (tests/test_repeats.py reads one)
    **{name: f"partitions/*/*/{name}.parquet" for name in schema.TABLES if name != "repeats"},
    "oracle": "oracle/*/oracle.parquet",
}
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


def engine_reads(ledger: Path, table: str) -> dict[str, tuple[Counter, tuple[str, ...]]]:
    """The key values (arm, and phase but in the oracle) of every row and their types,
    per engine and default call."""
    pattern, keys = str(ledger / GLOBS[table]), key_columns(table)
    files = sorted(glob.glob(pattern))
    reads = {
        "duckdb read_parquet(glob)": (_duckdb, lambda: duckdb.sql(f"FROM read_parquet('{pattern}')")),
        "polars read_parquet(glob)": (_polars, lambda: pl.read_parquet(pattern)),
        "polars scan_parquet(glob)": (_polars, lambda: pl.scan_parquet(pattern).collect()),
        "pandas read_parquet(files)": (_pandas, lambda: pd.read_parquet(files)),
        "pandas read_parquet(file) each": (_pandas, lambda: pd.concat([pd.read_parquet(f) for f in files])),
        "pyarrow dataset(files)": (_arrow, lambda: ds.dataset(files)),
        "pyarrow dataset(files, hive)": (_arrow, lambda: ds.dataset(files, partitioning="hive")),
    }
    if table == "oracle":  # one table per directory: the directory calls work too
        root = str(ledger / "oracle")
        reads["pandas read_parquet(dir)"] = (_pandas, lambda: pd.read_parquet(root))
        reads["polars read_parquet(dir)"] = (_polars, lambda: pl.read_parquet(root))
        reads["pyarrow dataset(dir)"] = (_arrow, lambda: ds.dataset(root))
        reads["pyarrow dataset(dir, hive)"] = (_arrow, lambda: ds.dataset(root, partitioning="hive"))
    out = {}
    for name, (summarise, read) in reads.items():
        try:
            out[name] = summarise(read(), keys)
        except Exception as exc:  # a failing engine is a finding, reported with the others
            out[name] = (Counter(), (f"{type(exc).__name__}: {str(exc)[:120]}",))
    return out


STRING_TYPES = {"VARCHAR", "String", "string", "large_string", "string_view"}


@pytest.mark.parametrize("table", sorted(GLOBS))
def test_every_engine_reads_every_table_alike_with_its_defaults(ledger, table):
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


def test_the_views_give_the_analyses_varchar_arm_and_phase(ledger):
    con = connect(ledger)
    for table in (*schema.TABLES, "oracle"):
        columns = {c[0]: c[1] for c in con.execute(f"DESCRIBE {table}").fetchall()}
        assert columns["arm"] == "VARCHAR"
        if table != "oracle":
            assert columns["phase"] == "VARCHAR"
        assert list(columns) == (schema.ORACLE if table == "oracle" else schema.TABLES[table]).names


def test_a_format_2_ledger_names_no_partition_with_key_value(ledger):
    manifest = json.loads((ledger / "manifest.json").read_text())
    assert manifest["format"] == schema.FORMAT == "ledgerscope-ledger/2"
    named = [p.relative_to(ledger).as_posix() for p in ledger.rglob("*") if not p.name.startswith(".")]
    assert named and not [n for n in named if "=" in n]
    assert "partitions/arm-cand-1/phase-0/records.parquet" in named
    assert "oracle/arm-0/oracle.parquet" in named


# --- format 1 -----------------------------------------------------------------


def as_format_1(ledger: Path, out: Path) -> Path:
    """The same ledger as format 1 wrote it: Hive directory names, the same files, format 1 manifest."""
    shutil.copytree(ledger, out)
    for part in finished_partitions(out, layout.CURRENT):
        arm, phase = layout.CURRENT.partition_key(part)
        target = out / "partitions" / f"arm={arm}" / f"phase={phase}"
        target.parent.mkdir(parents=True, exist_ok=True)
        part.rename(target)
    for path in sorted((out / "oracle").glob("arm-*")):
        path.rename(path.with_name("arm=" + path.name[len("arm-") :]))
    for arm_dir in sorted((out / "partitions").glob("arm-*")):
        arm_dir.rmdir()
    manifest = json.loads((out / "manifest.json").read_text())
    (out / "manifest.json").write_text(json.dumps({**manifest, "format": "ledgerscope-ledger/1"}))
    assert not [p for p in out.rglob("*-*") if p.name.startswith(("arm-", "phase-"))]
    return out


@pytest.fixture(scope="module")
def format_1(ledger, tmp_path_factory) -> Path:
    return as_format_1(ledger, tmp_path_factory.mktemp("format1") / "ledger")


def test_format_1_ledger_reads_to_the_same_views(ledger, format_1):
    assert layout.ledger_layout(format_1) is layout.VERSION_1
    assert len(finished_partitions(format_1)) == len(finished_partitions(ledger)) > 0
    assert table_digests(format_1) == table_digests(ledger)


def test_format_1_ledger_diagnoses_as_before(ledger, format_1):
    outputs = []
    for path in (ledger, format_1):
        result = runner.invoke(app, ["diagnose", str(path), "--json"])
        assert result.exit_code == 0, result.output
        outputs.append(result.output)
    assert outputs[0] == outputs[1] and outputs[0].count("\n") > 10


def test_format_1_row_checks_use_its_directory_names(format_1, tmp_path):
    """A record filed under another partition is still found in a format 1 ledger."""
    import pyarrow.parquet as pq

    from ledgerscope.ledger.verify import file_record

    damaged = tmp_path / "damaged"
    shutil.copytree(format_1, damaged)
    part = finished_partitions(damaged)[0]
    records = part / "records.parquet"
    table = pq.read_table(records)
    table = table.set_column(
        table.schema.get_field_index("phase"), "phase", pa.array(["elsewhere"] * table.num_rows, pa.string())
    )
    pq.write_table(table, records)
    marker = json.loads((part / "_SUCCESS.json").read_text())
    marker["files"]["records.parquet"] = file_record(records)
    (part / "_SUCCESS.json").write_text(json.dumps(marker))
    with pytest.raises(InputError) as err:
        connect(damaged)
    assert "another partition's file" in str(err.value)
    connect(format_1).close()  # undamaged, the same check passes


def test_format_1_ledger_is_not_resumed(format_1):
    identity = json.loads((format_1 / "manifest.json").read_text())["identity"]
    with pytest.raises(InputError) as err:
        check_out(format_1, identity)
    assert "older format" in str(err.value)


def test_format_1_ledger_converts_to_format_2_and_back_unchanged(ledger, format_1, tmp_path):
    inter, back = tmp_path / "jsonl", tmp_path / "back"
    assert runner.invoke(app, ["convert", str(format_1), "--to", "jsonl", "--out", str(inter)]).exit_code == 0
    result = runner.invoke(app, ["convert", str(inter), "--to", "parquet", "--out", str(back)])
    assert result.exit_code == 0, result.output
    assert layout.ledger_layout(back) is layout.CURRENT
    assert json.loads((back / "manifest.json").read_text())["format"] == schema.FORMAT
    assert table_digests(back) == table_digests(ledger)
    assert all("=" not in p.name for p in back.rglob("*"))


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
