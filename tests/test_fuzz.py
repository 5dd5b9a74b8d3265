"""Malformed input, fuzzed: every CLI command ends in a located error (exit 2), never a traceback,
the catch-all, a hang, a partial output, a changed input, or (sweep) a model load.

The cases and the judging live in ``tests/fuzz_harness.py``; ``scripts/fuzz_inputs.py`` runs
the same cases longer. Each command runs in a child forked from a clean fork server (fast, and
the child refuses to import torch, so a sweep that gets past validation is caught).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledgerscope.testing.ledger_files import table_files
from tests import fuzz_harness as fh

pytestmark = pytest.mark.slow  # about 30 s, no model

PAIRS = [(k, m) for k in fh.KINDS for m in fh.mutations(k)]


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    ledger = fh.make_base_ledger(tmp_path_factory.mktemp("fuzz-base"))
    fh.interchange_of(ledger)
    return ledger


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), derandomize=False)
@given(pair=st.sampled_from(PAIRS), seed=st.integers(0, 2**31 - 1), pick=st.randoms(use_true_random=False))
def test_malformed_inputs_end_in_located_errors(base, tmp_path_factory, pair, seed, pick):
    kind, mutation = pair
    case = fh.build_case(kind, mutation, seed, tmp_path_factory.mktemp("case"), base)
    names = [c[0] for c in case.commands]
    only = names if len(names) <= 2 else pick.sample(names, 2)  # a ledger has 9 readers: two per example
    results = fh.check_case(case, only=only, timeout=60)
    assert results
    assert not fh.failures(results), "\n".join(fh.failures(results))


def test_every_mutation_is_listed_once_per_kind():
    assert len(PAIRS) == len(set(PAIRS)) >= 130
    assert {k for k, _ in PAIRS} == set(fh.KINDS)


# ---------------------------------------------------------------------------
# the sweep validates before any model loads; the catch-all; the real console script


def _inputs(tmp_path: Path) -> dict[str, Path]:
    corpus = fh.write_corpus_dir(tmp_path)
    fixtures = tmp_path / "fixtures.jsonl"
    fixtures.write_text("".join(json.dumps(r) + "\n" for r in fh.canonical_rows()), encoding="utf-8")
    arm = tmp_path / "arm.toml"
    arm.write_text(fh.ARM, encoding="utf-8")
    return {"corpus": corpus, "fixtures": fixtures, "arm": arm}


def _sweep(paths: dict[str, Path], out: Path, *arms: Path) -> fh.Run:
    argv = [
        "sweep",
        "--quiet",
        "--fixtures",
        str(paths["fixtures"]),
        "--corpus",
        str(paths["corpus"]),
        "--out",
        str(out),
    ]
    for a in arms or (paths["arm"],):
        argv += ["--arm", str(a)]
    return fh.run_cli(argv)


def test_valid_sweep_inputs_get_as_far_as_the_model(tmp_path):
    run = _sweep(_inputs(tmp_path), tmp_path / "ledger")
    assert run.model_reached, run.stderr  # the harness's blocker works: validation alone passes
    assert not (tmp_path / "ledger").exists()  # nothing was written before the model loaded


@pytest.mark.parametrize(
    "problem",
    ["out-is-a-file", "out-not-a-ledger", "out-other-sweep", "out-bad-manifest", "duplicate-arm-names"],
)
def test_sweep_output_problems_are_found_before_the_model_loads(tmp_path, problem):
    paths = _inputs(tmp_path)
    out = tmp_path / "ledger"
    arms: tuple[Path, ...] = ()
    if problem == "out-is-a-file":
        out.write_text("not a directory")
    elif problem == "out-not-a-ledger":
        out.mkdir()
        (out / "notes.txt").write_text("someone's files")
    elif problem in ("out-other-sweep", "out-bad-manifest"):
        base = fh.make_base_ledger(tmp_path / "other")  # a ledger of some other sweep
        out = base
        if problem == "out-bad-manifest":
            (base / "manifest.json").write_text("{ truncated")
    else:
        arms = (paths["arm"], paths["arm"])
    before = fh.checksums([out]) if out.exists() else {}
    run = _sweep(paths, out, *arms)
    assert run.rc == 2 and not run.model_reached, run.stderr
    err = run.stderr.decode()
    assert "Traceback" not in err and fh.ERROR_LINE.match(err.splitlines()[0]), err
    assert (fh.checksums([out]) if out.exists() else {}) == before


def test_an_unexpected_exception_is_one_line_and_exit_70(monkeypatch, capsys, tmp_path):
    import ledgerscope.cli.main as cli
    import ledgerscope.ledger.read as read

    def boom(*args, **kwargs):
        raise RuntimeError("\x1b[31msomething nobody anticipated\x1b[0m")

    monkeypatch.setattr(read, "connect", boom)
    with pytest.raises(SystemExit) as exc:
        cli.app(["diagnose", str(tmp_path)], prog_name="ledgerscope")
    assert exc.value.code == cli.EXIT_INTERNAL == 70
    err = capsys.readouterr().err
    assert err.splitlines() == [
        "ledgerscope: internal error: RuntimeError: \\x1b[31msomething nobody anticipated\\x1b[0m "
        "(please report)"
    ]


def test_console_script_on_a_truncated_parquet_file(base, tmp_path):
    """The installed entry point, end to end: a located message, exit 2, no traceback."""
    import shutil

    ledger = tmp_path / "ledger"
    shutil.copytree(base, ledger)
    victim = next(f for f in table_files(ledger, "candidates") if "=candidate" in f.parent.parent.name)
    victim.write_bytes(victim.read_bytes()[:100])
    exe = Path(sys.executable).with_name("ledgerscope")
    for argv in (
        ["diagnose", str(ledger)],
        ["compare", str(ledger), "--candidate", "candidate", "--baseline", "baseline"],
    ):
        proc = subprocess.run([str(exe), *argv], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2, proc.stderr
        assert "Traceback" not in proc.stderr and proc.stdout == ""
        expected = f"{victim}: bytes: 100 bytes, but the commit marker records "
        assert proc.stderr.startswith(expected), proc.stderr
