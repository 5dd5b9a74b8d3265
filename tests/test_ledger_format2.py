"""A format 2 ledger (committed under tests/data/ledger-format2: two partitions of the quillstack
sample, written before format 3) reads as it did before format 3, and upgrades to the same tables.

The digests in tests/data/ledger-format2-digests.json were taken with the format 2 reader, before
the change: every row of every table, canonically ordered (:func:`ledgerscope.ledger.digest.table_digests`).
When the digest's serialisation moved into DuckDB they were re-recorded, after the old digests were
checked to still hold on the same reader.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ledgerscope.analysis.resources import read_oracle, read_partitions
from ledgerscope.cli.main import app
from ledgerscope.ledger import layout
from ledgerscope.ledger.digest import table_digests

DATA = Path(__file__).parent / "data"
FORMAT_2 = DATA / "ledger-format2"
runner = CliRunner()


@pytest.fixture(scope="module")
def upgraded(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("upgraded") / "ledger"
    result = runner.invoke(app, ["convert", str(FORMAT_2), "--to", "parquet", "--out", str(out)])
    assert result.exit_code == 0, result.output
    return out


def test_the_fixture_is_format_2():
    assert layout.ledger_layout(FORMAT_2) is layout.VERSION_2
    assert json.loads((FORMAT_2 / "manifest.json").read_text())["format"] == "ledgerscope-ledger/2"


def test_reading_format_2_gives_the_same_records_as_before():
    before = json.loads((DATA / "ledger-format2-digests.json").read_text())
    assert table_digests(FORMAT_2) == before["digests"]
    assert {arm: sorted(p) for arm, p in read_partitions(FORMAT_2).items()} == before["resources"]


def test_upgrading_keeps_every_table_and_resource_record(upgraded):
    assert layout.ledger_layout(upgraded) is layout.CURRENT
    assert table_digests(upgraded) == table_digests(FORMAT_2)
    assert read_partitions(upgraded) == read_partitions(FORMAT_2)
    for arm in ("baseline", "candidate"):
        assert read_oracle(upgraded, arm) == read_oracle(FORMAT_2, arm) is not None
    assert (upgraded / "runs").is_dir() and not (upgraded / "partitions").exists()


def test_format_2_and_its_upgrade_diagnose_alike(upgraded):
    before = sorted((p.relative_to(FORMAT_2), p.stat().st_size) for p in FORMAT_2.rglob("*"))
    outputs = []
    for path in (FORMAT_2, upgraded):
        result = runner.invoke(app, ["diagnose", str(path), "--json"])
        assert result.exit_code == 0, result.output
        outputs.append(result.output)
    assert outputs[0] == outputs[1] and len(outputs[0]) > 1000
    # reading (and upgrading to another directory) never writes into the ledger
    assert sorted((p.relative_to(FORMAT_2), p.stat().st_size) for p in FORMAT_2.rglob("*")) == before
