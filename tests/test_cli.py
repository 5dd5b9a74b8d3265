"""The command line as a user meets it: start-up cost, exit codes, messages."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import tomllib
from pathlib import Path

from typer.testing import CliRunner

from ledgerscope.cli.main import app

SEED = Path(__file__).parent / "data" / "seed000_fixture.json"
runner = CliRunner()


def test_cli_import_stays_light():
    code = (
        "import sys, ledgerscope.cli.main; heavy = [m for m in ('torch', 'textual', "
        "'sentence_transformers', "
        "'duckdb', 'pyarrow', 'scipy', 'transformers') if m in sys.modules]; print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_help_starts_fast():
    best = min(_timed([sys.executable, "-m", "ledgerscope.cli.main", "--help"]) for _ in range(3))
    assert best < 1.0


def _timed(cmd) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, capture_output=True, check=True)
    return time.perf_counter() - t


def test_validate_ok_prints_summary():
    result = runner.invoke(app, ["validate", str(SEED)])
    assert result.exit_code == 0, result.output
    assert "1 fixture(s) valid" in result.output and "rule-exception" in result.output


def test_validate_reports_each_problem_and_exits_2(tmp_path):
    obj = json.loads(SEED.read_text())
    obj["source_text"] = obj["source_text"].replace("30", "31")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(obj))
    result = runner.invoke(app, ["validate", str(bad)])
    assert result.exit_code == 2
    assert f"{bad}: source_version:" in result.output
    assert "sha256:ad0875163c10c4b7fd2d6efed6efae515cef0f8ea236b45216cb8ef12c8a5563" in result.output
    assert not list(tmp_path.glob("*.tmp"))


COMMON_KEYS = ["capacity", "overlap", "phases", "edge_policy", "budget_tokens", "top_k", "rerank_depth"]


def test_config_default_is_valid_toml_with_the_common_keys_first():
    result = runner.invoke(app, ["config", "default"])
    assert result.exit_code == 0
    data = tomllib.loads(result.output)
    assert set(COMMON_KEYS) <= data.keys()  # top-level keys, not inside a table
    # the key lines in the order printed: the arm's name, then the common keys in this order, then
    # everything else (tables and their keys)
    keys = [
        line.split("=", 1)[0].strip()
        for line in result.output.splitlines()
        if "=" in line and not line.lstrip().startswith("#")
    ]
    assert keys[: len(COMMON_KEYS) + 1] == ["name", *COMMON_KEYS]


def test_sweep_rejects_bad_arm_before_loading_any_model(tmp_path):
    arm = tmp_path / "arm.toml"
    arm.write_text('name = "x"\ncapacity = 8\noverlap = 8\n')
    result = runner.invoke(
        app, ["sweep", "--fixtures", str(SEED), "--arm", str(arm), "--out", str(tmp_path / "ledger")]
    )
    assert result.exit_code == 2
    assert "overlap" in result.output
    assert not (tmp_path / "ledger").exists()


def test_bad_ledger_path_is_a_clean_error(tmp_path):
    result = runner.invoke(app, ["diagnose", str(tmp_path)])
    assert result.exit_code == 2
    assert "manifest.json is missing" in result.output
