"""Interruptions: SIGKILL at seeded random points of a sweep and of an export.

* A sweep killed three times at random points after its model loaded, then resumed, holds
  exactly the records of an uninterrupted sweep: the same (arm, phase, qid) keys, none lost, none
  duplicated, the same answers, contexts and candidate lists. Between kills the partial ledger
  opens cleanly and holds only finished partitions.
* An export killed mid-write leaves the earlier file (or no file), never a partial one. The only
  leftover is the temporary ``.NAME.<pid>.<random>.tmp`` beside it, which no reader looks at and
  the next export to the same path removes.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from ledgerscope.ledger.read import connect
from ledgerscope.testing.ledger_files import marker_paths

pytestmark = pytest.mark.slow
SEED = 20261129
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}

# Runs the real CLI; only writes a marker file once the arms' runtimes (the model) are built,
# so a kill delay can be measured from "model loaded" on fresh and resumed runs alike.
_SHIM = """
import pathlib, sys
import ledgerscope.pipeline.run.sweep as sw
_build, _ready = sw.build_runtime, pathlib.Path(sys.argv[1])
def build_runtime(cfg, *args, **kwargs):
    rt = _build(cfg, *args, **kwargs)
    _ready.write_text(cfg.name)
    return rt
sw.build_runtime = build_runtime
sys.argv = ["ledgerscope", *sys.argv[2:]]
from ledgerscope.cli.main import main
main()
"""


def _records(ledger: Path) -> list[tuple]:
    return connect(ledger).execute("SELECT arm, phase, qid FROM records").fetchall()


def _comparable(ledger: Path) -> list[tuple]:
    con = connect(ledger)
    recs = con.execute(
        "SELECT arm, phase, qid, answer, answer_verdict, packed_context, support_packed "
        "FROM records ORDER BY ALL"
    ).fetchall()
    cands = con.execute(
        "SELECT arm, phase, qid, stage, rank, unit_id FROM candidates ORDER BY ALL"
    ).fetchall()
    return recs + cands


@pytest.fixture(scope="module")
def reference(rule_exception_inputs, rule_exception_ledger):
    """Inputs and an uninterrupted sweep of them (shared, conftest.py)."""
    return rule_exception_inputs, rule_exception_ledger


def test_sweep_killed_at_random_points_resumes_to_exactly_the_same_records(reference, tmp_path):
    inputs, ref = reference
    out, ready = tmp_path / "ledger", tmp_path / "ready"
    argv = [
        "sweep",
        "--quiet",
        "--fixtures",
        str(inputs["fixtures"]),
        "--corpus",
        str(inputs["corpus"]),
        "--arm",
        str(inputs["candidate"]),
        "--arm",
        str(inputs["baseline"]),
        "--out",
        str(out),
    ]
    cmd = [sys.executable, "-c", _SHIM, str(ready), *argv]
    env = {**ENV, "LEDGERSCOPE_PARTITION_PAUSE_S": "0.3"}  # spreads the 10 partitions over seconds
    rng = random.Random(SEED)
    kills = []
    for run in range(3):
        ready.unlink(missing_ok=True)
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 120
        while not ready.exists():
            assert proc.poll() is None, proc.stderr.read().decode()
            assert time.monotonic() < deadline, "the model never loaded"
            time.sleep(0.02)
        # a random kill point that is always mid-sweep, whatever the machine's speed: wait until a
        # random number of partitions (of those still to do) is finished, then a random moment
        # shorter than the 0.3 s pause that follows each partition
        done_now = len(list(marker_paths(out)))
        target = rng.randint(done_now, 9)
        t0 = time.monotonic()
        while len(list(marker_paths(out))) < target:
            assert proc.poll() is None, proc.stderr.read().decode()
            assert time.monotonic() < deadline, "the sweep stalled"
            time.sleep(0.01)
        time.sleep(rng.uniform(0.0, 0.25))
        delay = time.monotonic() - t0
        finished_first = proc.poll() is not None
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        done = len(list(marker_paths(out)))
        kills.append(
            {
                "run": run + 1,
                "delay_s": round(delay, 2),
                "partitions_done": done,
                "staging_left": sorted(p.name for p in (out / ".staging").glob("*"))
                if (out / ".staging").is_dir()
                else [],
                "exited_before_kill": finished_first,
            }
        )
        # between kills the ledger opens and holds finished partitions only, each a subset of the
        # reference; a kill that lands before the driver wrote the manifest (the second arm's model
        # was still loading) leaves no ledger yet, and so no finished partition
        if not (out / "manifest.json").exists():
            assert done == 0, kills[-1]
            continue
        got = Counter(_records(out))
        assert all(n == 1 for n in got.values()), got
        assert set(got) <= set(_records(ref))
        assert len(got) == 3 * done
    # every kill landed mid-sweep (the seeded delays are fixed; how far each run got depends on the machine)
    assert all(k["partitions_done"] < 10 and not k["exited_before_kill"] for k in kills), kills
    final = subprocess.run(
        cmd, env={**env, "LEDGERSCOPE_PARTITION_PAUSE_S": "0"}, capture_output=True, text=True, timeout=180
    )
    assert final.returncode == 0, final.stderr
    resumed, uninterrupted = Counter(_records(out)), Counter(_records(ref))
    assert resumed == uninterrupted and sum(resumed.values()) == 30  # none lost, none duplicated
    assert _comparable(out) == _comparable(ref)
    assert not (out / ".staging").exists() or not any((out / ".staging").iterdir())
    print("kill points:", json.dumps(kills))


# ---------------------------------------------------------------------------
# export


@pytest.fixture(scope="module")
def big_ledger(tmp_path_factory) -> Path:
    """Big enough that writing a JSONL export takes about a second."""
    from ledgerscope.testing.synthetic import make_synthetic_ledger

    out = tmp_path_factory.mktemp("big") / "ledger"
    make_synthetic_ledger(out, questions=300, phases=4)
    return out


def _export(ledger: Path, out: Path, where: str = ""):
    """``ledgerscope export`` in a child process (forked from the fuzz harness's clean fork server)."""
    from tests import fuzz_harness as fh

    argv = ["export", str(ledger), "--format", "jsonl", "--out", str(out), "--where", where]
    proc = fh._context().Process(target=fh._child, args=(argv, os.devnull, os.devnull, True))
    proc.start()
    return proc


def _kill_mid_write(proc, out: Path, delay: float) -> list[Path]:
    """SIGKILL ``proc`` ``delay`` s after its temporary file has bytes in it; the temporaries seen."""
    deadline = time.monotonic() + 60
    while True:
        temps = [p for p in out.parent.glob(f".{out.name}.{proc.pid}.*.tmp") if p.stat().st_size > 0]
        if temps:
            break
        assert proc.is_alive(), "the export finished before it could be interrupted"
        assert time.monotonic() < deadline
        time.sleep(0.005)
    time.sleep(delay)
    assert proc.is_alive(), "the export finished before it could be interrupted"
    os.kill(proc.pid, signal.SIGKILL)
    proc.join()
    return temps


def _export_done(ledger: Path, out: Path, where: str = "") -> None:
    from tests import fuzz_harness as fh

    run = fh.run_cli(["export", str(ledger), "--format", "jsonl", "--out", str(out), "--where", where], 120)
    assert run.rc == 0, run.stderr


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_export_killed_mid_write_leaves_the_old_file_or_none(big_ledger, tmp_path):
    rng = random.Random(SEED)
    out = tmp_path / "selection.jsonl"
    # no earlier file: killed mid-write, there is still none
    temps = _kill_mid_write(_export(big_ledger, out, ""), out, rng.uniform(0, 0.3))
    assert not out.exists()
    assert all(t.exists() for t in temps)  # SIGKILL leaves the temporary (nothing can remove it)
    # a complete export ...
    _export_done(big_ledger, out, "arm = 'candidate'")
    assert not any(t.exists() for t in temps)  # ... removed the dead process's temporary
    old = out.read_bytes()
    assert len(_lines(out)) == 1200
    # ... then an export over it, killed at a random point mid-write: the old file stays, whole
    temps = _kill_mid_write(_export(big_ledger, out, ""), out, rng.uniform(0, 0.3))
    assert out.read_bytes() == old
    assert temps[0].stat().st_size > 0  # a partial file existed, under the temporary name only
    leftovers = sorted(p.name for p in tmp_path.iterdir() if p.name != out.name)
    assert all(n.startswith(f".{out.name}.") and n.endswith(".tmp") for n in leftovers), leftovers
    _export_done(big_ledger, out)
    assert len(_lines(out)) == 2400
    assert sorted(p.name for p in tmp_path.iterdir()) == [out.name]  # stale temporaries cleaned
