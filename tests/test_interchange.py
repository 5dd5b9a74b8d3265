"""JSONL interchange round trip on the committed sample ledger."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from ledgerscope.cli.main import app
from ledgerscope.ledger.digest import table_digests

LEDGER = Path(__file__).resolve().parents[1] / "sample_ledgers" / "quillstack" / "ledger"
runner = CliRunner()


@pytest.fixture(scope="module")
def interchange(tmp_path_factory) -> Path:
    """The sample ledger converted to JSONL once for the module (only read by the tests)."""
    inter = tmp_path_factory.mktemp("interchange") / "jsonl"
    result = runner.invoke(app, ["convert", str(LEDGER), "--to", "jsonl", "--out", str(inter)])
    assert result.exit_code == 0, result.output
    assert not list(inter.parent.glob(".*.tmp"))
    return inter


def test_ledger_round_trips_through_jsonl(interchange, tmp_path):
    inter, back = interchange, tmp_path / "back"
    rows = [json.loads(line) for line in (inter / "records.jsonl").read_text().splitlines()]
    assert rows and {"arm", "phase", "qid", "packed_context", "answer_verdict"} <= set(rows[0])
    r2 = runner.invoke(app, ["convert", str(inter), "--to", "parquet", "--out", str(back)])
    assert r2.exit_code == 0, r2.output
    assert table_digests(back) == table_digests(LEDGER)
    assert not list(tmp_path.glob(".*.tmp"))


def test_bad_interchange_row_names_the_file(interchange, tmp_path):
    inter = tmp_path / "jsonl"
    shutil.copytree(interchange, inter)
    with (inter / "records.jsonl").open("a") as fh:
        fh.write(json.dumps({"arm": "candidate", "phase": "0", "qid": 7, "surprise": True}) + "\n")
    result = runner.invoke(app, ["convert", str(inter), "--to", "parquet", "--out", str(tmp_path / "back")])
    assert result.exit_code == 2
    assert "records.jsonl" in result.output
    assert not (tmp_path / "back").exists()


def test_every_reader_reads_the_jsonl_directory_with_the_same_figures(interchange, tmp_path):
    """diagnose --json, compare --json, export and the diagnose summary on the interchange directory
    equal the Parquet ledger's (issue 14: a JSONL ledger used to diagnose as 'source not in the
    corpus' and open as '0 of 0 questions')."""
    inter = interchange
    outputs = {}
    for name, src in (("parquet", LEDGER), ("jsonl", inter)):
        diag = runner.invoke(app, ["diagnose", str(src), "--json"])
        summary = runner.invoke(app, ["diagnose", str(src)], env={"COLUMNS": "120"})
        comp = runner.invoke(
            app,
            [
                "compare",
                str(src),
                "--candidate",
                "candidate",
                "--baseline",
                "baseline",
                "--json",
                "--n-resamples",
                "500",
            ],
        )
        out = tmp_path / f"export-{name}.jsonl"
        exp = runner.invoke(
            app,
            ["export", str(src), "--where", "step BETWEEN 6 AND 8", "--format", "jsonl", "--out", str(out)],
        )
        assert diag.exit_code == summary.exit_code == comp.exit_code == exp.exit_code == 0, name
        exported = [json.loads(line) for line in out.read_text().splitlines()]
        outputs[name] = (diag.output, summary.output, json.loads(comp.output), exported)
    assert len(outputs["parquet"][0].splitlines()) == 896
    assert outputs["jsonl"] == outputs["parquet"]


def test_a_table_holding_nan_is_refused_by_name(tmp_path):
    """JSON has no NaN: the conversion names the table and column instead of writing one."""
    from ledgerscope.common.errors import InputError
    from ledgerscope.ledger.interchange import _write_table_jsonl

    con = duckdb.connect()
    con.execute("CREATE VIEW candidates AS SELECT 1 AS unit, 'nan'::DOUBLE AS fused_score")
    with pytest.raises(InputError, match="candidates holds NaN"):
        _write_table_jsonl(con, "candidates", tmp_path / "candidates.jsonl")
    assert not (tmp_path / "candidates.jsonl").exists()
