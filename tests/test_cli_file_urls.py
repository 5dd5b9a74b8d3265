"""``file://`` URLs on the command line: ``file:///abs`` and ``file://localhost/abs`` are the local path,
a URL naming another host is an input error (exit 2) for every command that takes a ledger or an
output location, checked before ``pathlib`` would collapse ``file://host/run`` into ``/host/run``;
a bucket URL given to a command without object-storage support is an input error too."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from ledgerscope.cli.main import app
from ledgerscope.cli.shared.file_urls import local_file_args, local_file_url

from .served import SAMPLE

SMALL = SAMPLE.parents[2] / "tests" / "data" / "ledger-format2"  # two partitions
runner = CliRunner()
HOSTED = "file://otherhost/run"
PAIR = ["--candidate", "candidate", "--baseline", "baseline"]


def test_local_file_urls_become_paths():
    assert local_file_url("file:///tmp/a%20b/run") == "/tmp/a b/run"
    assert local_file_url("FILE://LocalHost/tmp/run") == "/tmp/run"
    assert local_file_url("s3://bucket/run") == "s3://bucket/run" and local_file_url("run") == "run"
    assert local_file_args(["--out=file:///x", "--out", "file://localhost/y"]) == ["--out=/x", "--out", "/y"]


@pytest.mark.parametrize(
    "args",
    [
        ["diagnose", HOSTED],
        ["compare", HOSTED, *PAIR],
        ["compare", str(SAMPLE), *PAIR, "--baseline-ledger", HOSTED],
        ["report", HOSTED, *PAIR, "--out", "r.html"],
        ["report", str(SAMPLE), *PAIR, f"--out={HOSTED}/r.html"],
        ["export", HOSTED, "--out", "x.jsonl"],
        ["export", str(SAMPLE), "--out", HOSTED],
        ["open", HOSTED],
        ["serve", HOSTED],
        ["sweep", "--fixtures", "f.jsonl", "--arm", "a.toml", "--out", HOSTED],
        ["ingest", "t.jsonl", "--fixtures", "f.jsonl", "--out", HOSTED],
        ["convert", HOSTED, "--to", "parquet", "--out", "new"],
        ["rerun", HOSTED],
        ["rejudge", HOSTED, "--out", "new"],
    ],
)
def test_a_file_url_naming_another_host_is_an_input_error(args, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert "naming the host 'otherhost'" in result.output and "Traceback" not in result.output
    assert list(tmp_path.iterdir()) == []  # nothing written, no /host/run guessed


@pytest.mark.parametrize(
    "args",
    [
        ["convert", str(SAMPLE), "--to", "parquet", "--out", "s3://b/new"],
        ["rejudge", "gs://b/run", "--out", "new"],
        ["import", "label-studio", "x.json", "--out=az://c/fixtures.jsonl"],
    ],
)
def test_a_bucket_url_where_only_local_paths_go_is_an_input_error(args, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, args)
    assert result.exit_code == 2 and "takes local paths only" in result.output, result.output
    assert list(tmp_path.iterdir()) == []  # no local folder named s3:


def test_file_urls_name_the_local_ledger_and_output(tmp_path):
    out = tmp_path / "out dir" / "records.jsonl"
    out.parent.mkdir()
    url = "file://localhost" + str(out).replace(" ", "%20")
    result = runner.invoke(app, ["export", f"file://{SMALL}", "--format", "jsonl", "--out", url])
    assert result.exit_code == 0, result.output
    assert out.stat().st_size > 0 and not (tmp_path / "file:").exists()
