"""The Ray executor against a real local Ray cluster (tests/conftest.py ``ray_cluster``).

2 arms x 2 phases over the rule-exception sample: the same ledger content as the local executor,
even when task processes are SIGKILLed mid-sweep (Ray retries them; partition writes are atomic),
and a cluster whose every TCP listener is on the loopback interface.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from ledgerscope.inputs.fixtures import load_fixtures
from ledgerscope.inputs.sources import load_corpus
from ledgerscope.ledger.digest import table_digests
from ledgerscope.ledger.read import connect as connect_ledger
from ledgerscope.pipeline.arm.config import arm_from_dict
from ledgerscope.pipeline.run.ray_executor import PoolPlan, RayExecutor, batch_plan, pool_plan
from ledgerscope.pipeline.run.sweep import sweep
from ledgerscope.testing.ledger_files import marker_paths
from tests.listeners import is_loopback, listeners

ARMS = (
    {"name": "stride16", "capacity": 16, "overlap": 0, "phases": [0, 5], "budget_tokens": 40, "top_k": 1},
    {"name": "stride8", "capacity": 12, "overlap": 4, "phases": [0, 3], "budget_tokens": 40, "top_k": 1},
)
PARTITIONS = {("stride16", "0"), ("stride16", "5"), ("stride8", "0"), ("stride8", "3")}


@pytest.fixture(scope="module")
def inputs(rule_exception_inputs):
    paths = rule_exception_inputs
    fixtures, corpus = load_fixtures(paths["fixtures"], load_corpus(paths["corpus"]))
    return fixtures, corpus, [arm_from_dict(a) for a in ARMS]


@pytest.fixture(scope="module")
def local_digests(inputs, tmp_path_factory):
    """The local executor's ledger of the same sweep: the reference."""
    out = tmp_path_factory.mktemp("ray-local") / "ledger"
    result = sweep(*inputs, out)
    assert set(result.written) == PARTITIONS
    return table_digests(out)


def _partition_keys(ledger: Path) -> list[tuple]:
    con = connect_ledger(ledger)
    return con.sql("SELECT arm, phase, qid FROM records ORDER BY ALL").fetchall()


def _task_pids() -> set[int]:
    """Worker processes running a partition task (Ray titles a worker ``ray::<function>``)."""
    out = set()
    for cmd in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if cmd.read_bytes().startswith(b"ray::partition_task"):
                out.add(int(cmd.parent.name))
        except OSError:
            continue
    return out


class Killer(threading.Thread):
    """SIGKILLs the first partition task it sees (mid-compute, nothing written yet), then, once the
    first partition is on disk, every task then running (one in its post-write pause among them)."""

    def __init__(self, ledger: Path):
        super().__init__(daemon=True)
        self.ledger, self.killed, self.after_write, self.stop = ledger, [], [], threading.Event()

    def run(self) -> None:
        while not self.stop.is_set() and not self.after_write:
            pids = _task_pids()
            done = marker_paths(self.ledger)
            target = self.killed if not self.killed else self.after_write if done else None
            if target is not None and pids:
                for pid in pids:
                    os.kill(pid, signal.SIGKILL)
                target.extend(pids)
            time.sleep(0.05)


@pytest.mark.slow
def test_killed_tasks_are_retried_without_loss_or_duplicates(ray_cluster, inputs, local_digests, tmp_path):
    out = tmp_path / "ledger"
    killer = Killer(out)
    killer.start()
    try:
        result = sweep(*inputs, out, executor=RayExecutor(max_retries=3))
    finally:
        killer.stop.set()
        killer.join()
    assert killer.killed and killer.after_write, "no partition task was killed: the test proved nothing"
    assert set(result.written) == PARTITIONS
    keys = _partition_keys(out)
    assert len(keys) == len(set(keys)) == 4 * 3  # 4 partitions x 3 questions, none twice
    assert table_digests(out) == local_digests
    assert not any((out / ".staging").glob("*")), "a killed attempt's staging was left behind"


@pytest.mark.slow
def test_local_cluster_listens_on_loopback_only(ray_cluster):
    found = listeners(os.getpid())
    names = " ".join(cmd for _, cmd in found)
    assert "gcs_server" in names and "raylet" in names, f"the cluster's servers were not found: {found}"
    wide = [(addr, cmd) for addr, cmd in found if not is_loopback(addr)]
    assert not wide, f"listening beyond loopback: {wide}"


def test_pool_leaves_a_cpu_for_the_read_task():
    assert pool_plan({"CPU": 2.0}) == PoolPlan(1, 1.0, 0.0)
    assert pool_plan({"CPU": 1.0}) == PoolPlan(1, 1.0, 0.0)
    assert pool_plan({"CPU": 16.0, "GPU": 2.0}) == PoolPlan(2, 1.0, 1.0)
    assert pool_plan({"CPU": 16.0, "GPU": 2.0}).device == "cuda"


def test_batch_plan_sends_each_text_once_longest_first():
    # partition 2 meets "bb" again: sent once; calls of TEXTS_PER_CALL_BATCHES * batch_size texts
    plan = batch_plan([["a", "ccc", "bb"], ["bb", "dddd", "e"]], batch_size=2)
    assert plan == [["dddd", "ccc", "bb", "a", "e"]]
    many = batch_plan([[f"t{i:03d}" for i in range(40)]], batch_size=2)
    sent = [t for call in many for t in call]
    assert [len(c) for c in many] == [16, 16, 8] and len(sent) == len(set(sent)) == 40


@pytest.mark.slow
def test_cli_sweep_with_ray_executor(ray_cluster, rule_exception_inputs, local_digests, tmp_path):
    """``ledgerscope sweep --executor ray`` joins the running cluster and writes the same ledger."""
    from typer.testing import CliRunner

    from ledgerscope.cli.main import app

    arms = []
    for spec in ARMS:
        path = tmp_path / f"{spec['name']}.toml"
        path.write_text("".join(f"{k} = {json.dumps(v)}\n" for k, v in spec.items()), encoding="utf-8")
        arms += ["--arm", str(path)]
    out = tmp_path / "ledger"
    args = [
        "sweep",
        "--fixtures",
        str(rule_exception_inputs["fixtures"]),
        "--corpus",
        str(rule_exception_inputs["corpus"]),
        *arms,
        "--out",
        str(out),
        "--quiet",
        "--executor",
        "ray",
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "4 partition(s) written" in " ".join(result.output.split())  # Rich wraps the line
    assert table_digests(out) == local_digests
    assert (out / "_SWEEP_DONE.json").is_file() and json.loads((out / "manifest.json").read_text())["arms"]
    # the same command again on the finished ledger runs nothing
    again = CliRunner().invoke(app, args)
    assert again.exit_code == 0, again.output
    assert "0 partition(s) written, 4 already done" in " ".join(again.output.split())


@pytest.mark.parametrize("flags", [["--executor", "dask"], ["--ray-address", "127.0.0.1:6379"]])
def test_cli_refuses_an_unknown_executor(rule_exception_inputs, tmp_path, flags):
    from typer.testing import CliRunner

    from ledgerscope.cli.main import app

    result = CliRunner().invoke(
        app,
        [
            "sweep",
            "--fixtures",
            str(rule_exception_inputs["fixtures"]),
            "--corpus",
            str(rule_exception_inputs["corpus"]),
            "--arm",
            str(rule_exception_inputs["candidate"]),
            "--out",
            str(tmp_path / "ledger"),
            "--quiet",
            *flags,
        ],
    )
    assert result.exit_code == 2, result.output
    assert "local or ray" in result.output
    assert not (tmp_path / "ledger").exists()
