"""One CLI vocabulary: arm names, a second ledger, settings a rule declares, the version, machine
conditions, and every option in ``--help`` and in the README's table."""

from __future__ import annotations

import contextlib
import errno
import re
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from ledgerscope.cli.main import app

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "sample_ledgers" / "quillstack" / "ledger"
RULE = ROOT / "sample_ledgers" / "release_rule.toml"
runner = CliRunner()


def _commands() -> list[tuple[str, object]]:
    """Every command with its full name (``import squad``), groups walked."""
    root = typer.main.get_command(app)
    out = []

    def walk(prefix: str, cmd) -> None:
        if hasattr(cmd, "commands"):  # a group (typer may vendor its own click)
            for name, sub in cmd.commands.items():
                walk(f"{prefix} {name}".strip(), sub)
        else:
            out.append((prefix, cmd))

    walk("", root)
    return out


def test_version_prints_the_package_and_the_ledger_formats():
    from ledgerscope.ledger import schema

    res = runner.invoke(app, ["--version"])
    assert res.exit_code == 0
    lines = res.output.splitlines()
    assert re.fullmatch(r"ledgerscope \d+\.\d+\.\d+\S*", lines[0])
    assert f"writes {schema.FORMAT}" in lines[1] and "reads " + schema.FORMAT in lines[1]


def test_diagnose_with_an_unknown_arm_names_the_arms_there_are():
    res = runner.invoke(app, ["diagnose", str(SAMPLE), "--arm", "nope"])
    assert res.exit_code == 2
    assert "no arm 'nope' in this ledger; arms present: baseline, candidate" in res.output


def test_compare_refuses_settings_that_disagree_with_the_rule():
    args = ["compare", str(SAMPLE), "--candidate", "candidate", "--baseline", "baseline", "--rule", str(RULE)]
    res = runner.invoke(app, [*args, "--n-resamples", "50", "--seed", "3"])
    assert res.exit_code == 2
    assert "--n-resamples 50 disagrees with the rule's n_resamples = 10000" in res.output
    assert "--seed 3 disagrees with the rule's seed = 0" in res.output
    res = runner.invoke(app, [*args, "--n-resamples", "10000", "--json"])  # agreeing is fine
    assert res.exit_code == 3 and '"outcome": "reject"' in res.output  # 3: the decision is REJECT


def test_report_refuses_them_too(tmp_path):
    res = runner.invoke(
        app,
        [
            "report",
            str(SAMPLE),
            "--candidate",
            "candidate",
            "--baseline",
            "baseline",
            "--rule",
            str(RULE),
            "--seed",
            "1",
            "--out",
            str(tmp_path / "r.html"),
        ],
    )
    assert res.exit_code == 2 and "--seed 1 disagrees" in res.output
    assert not (tmp_path / "r.html").exists()


def test_baseline_is_an_arm_and_the_old_spellings_still_work(capsys):
    from ledgerscope.cli.shared.vocabulary import arm_vocabulary as _arm_vocabulary

    assert _arm_vocabulary("base", None, None) == ("base", None)
    assert _arm_vocabulary(str(SAMPLE), None, None) == (None, SAMPLE)  # a ledger directory: old spelling
    assert "--baseline-ledger (deprecated spelling" in capsys.readouterr().err
    assert _arm_vocabulary(None, "base", None) == ("base", None)
    assert "--baseline-arm is deprecated" in capsys.readouterr().err
    assert _arm_vocabulary("base", None, SAMPLE) == ("base", SAMPLE)


def test_every_command_that_names_arms_uses_the_same_options():
    for name, cmd in _commands():
        opts = {o for p in cmd.params for o in p.opts}
        if "--baseline" in opts:
            assert "--candidate" in opts, name
        if name in ("compare", "report", "open", "serve"):
            assert {"--candidate", "--baseline", "--baseline-ledger"} <= opts, name


def _readme_rows() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return [line for line in text.splitlines() if line.startswith("| `ledgerscope ")]


@pytest.mark.parametrize("name,cmd", _commands(), ids=[n for n, _ in _commands()])
def test_every_option_is_in_help_and_in_the_readme_table(name, cmd):
    res = runner.invoke(app, [*name.split(), "--help"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    rows = [
        r
        for r in _readme_rows()
        if r.startswith(f"| `ledgerscope {name} ") or r.startswith(f"| `ledgerscope {name}`")
    ]
    assert rows, f"no README row for {name}"
    for param in cmd.params:
        if getattr(param, "param_type_name", "") != "option" or param.name == "help":
            continue
        longest = max(param.opts, key=len)
        assert longest in res.output, (name, longest)
        assert any(longest in r for r in rows), (name, longest)


def test_serve_binds_loopback_unless_told_otherwise():
    from ledgerscope.cli.serve import is_loopback

    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.5") and not is_loopback("example.org")
    res = runner.invoke(app, ["serve", str(SAMPLE), "--host", "0.0.0.0"])
    assert res.exit_code == 2
    assert "not a loopback address and the app has no authentication" in res.output
    assert "--allow-remote" in res.output


def _run_with(errno_value: int, filename: str | None, args: list[str]) -> subprocess.CompletedProcess:
    """The CLI in a subprocess where renaming a finished file into place fails with ``errno_value``."""
    code = (
        "import errno, os, sys\n"
        "def fail(*a, **k):\n"
        f"    raise OSError({errno_value}, os.strerror({errno_value}), {filename!r})\n"
        "os.replace = fail\n"
        "from ledgerscope.cli.main import app\n"
        f"sys.argv = ['ledgerscope', *{args!r}]\n"
        "app()\n"
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(
    "err,what",
    [
        (errno.ENOSPC, "no space left on the device"),
        (errno.EACCES, "permission denied"),
        (errno.EROFS, "read-only file system"),
    ],
)
def test_machine_conditions_name_the_path_and_what_to_do(tmp_path, err, what):
    out = tmp_path / "x.jsonl"
    for filename in (None, str(tmp_path / "elsewhere.tmp")):
        res = _run_with(
            err,
            filename,
            [
                "export",
                str(SAMPLE),
                "--format",
                "jsonl",
                "--out",
                str(out),
                "--where",
                "qid = 're-free-upload'",
            ],
        )
        assert res.returncode == 74, res.stderr
        assert "internal error" not in res.stderr and "please report" not in res.stderr
        assert f"{filename or out}: {what};" in res.stderr, res.stderr
    assert not out.exists()


def test_a_real_full_disk(tmp_path):
    mount = tmp_path / "small"
    mount.mkdir()
    ok = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], capture_output=True)
    if ok.returncode != 0:
        pytest.skip("cannot mount a small tmpfs here (needs root)")
    try:
        out = mount / "all.jsonl"
        res = subprocess.run(
            [
                sys.executable,
                "-m",
                "ledgerscope.cli",
                "export",
                str(SAMPLE),
                "--format",
                "jsonl",
                "--out",
                str(out),
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert res.returncode == 74, res.stderr
        assert f"{out}: no space left on the device; free some space there or write elsewhere" in res.stderr
        assert not out.exists() and not list(mount.iterdir())
    finally:
        with contextlib.suppress(Exception):
            subprocess.run(["umount", str(mount)], check=False)
