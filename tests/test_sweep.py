"""The sweep end to end: real model, real indexes, real ledger on disk."""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from ledgerscope.inputs.fixtures import load_fixtures
from ledgerscope.inputs.sources import load_corpus
from ledgerscope.ledger.read import connect
from ledgerscope.ledger.verify import load_manifest
from ledgerscope.pipeline.arm.config import load_arm
from ledgerscope.pipeline.run.rerun import rerun_record
from ledgerscope.pipeline.run.sweep import sweep
from ledgerscope.testing.ledger_files import marker_paths, rerecord, table_file

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def inputs(rule_exception_inputs):
    """The shared rule-exception inputs (conftest.py)."""
    return rule_exception_inputs


@pytest.fixture(scope="module")
def ledger(rule_exception_ledger):
    """Their shared two-arm sweep (conftest.py): read only; a test that edits it copies it."""
    return rule_exception_ledger


def records(ledger: Path) -> list[dict]:
    con = connect(ledger)
    return con.sql("SELECT * FROM records ORDER BY arm, phase_offset, qid").to_arrow_table().to_pylist()


def test_boundary_reverses_the_answer_between_phases(ledger):
    recs = [r for r in records(ledger) if r["arm"] == "candidate" and r["qid"] == "temp-retention"]
    by_verdict: dict[str, list[dict]] = {}
    for r in recs:
        by_verdict.setdefault(r["answer_verdict"], []).append(r)
    # some phases apply the default rule (the qualifier was cut away from the packed context) ...
    critical = by_verdict.get("critical-condition-error", [])
    assert critical, [(r["phase"], r["answer"]) for r in recs]
    for r in critical:
        assert "This limit is 7 days for requests marked temporary." not in r["packed_context"]
        assert "30 days" in r["answer"]
        assert r["support_packed"] is False
    # ... and at other phases the same question is answered correctly
    assert by_verdict.get("correct"), [(r["phase"], r["answer"]) for r in recs]


def test_ledger_layout_and_manifest(ledger, inputs):
    manifest = load_manifest(ledger)
    assert set(manifest["arms"]) == {"candidate", "baseline"}
    cand = manifest["arms"]["candidate"]
    assert [p["label"] for p in cand["phases"]] == ["0", "1", "2", "5", "9"]
    assert cand["stride"] == 16 and manifest["arms"]["baseline"]["stride"] == 8
    assert "MaxSim" in cand["components"]["reranker"]["name"]
    corpus = load_corpus(inputs["corpus"])
    for doc in corpus:
        assert manifest["sources"][doc.doc_id] == doc.version
    parts = sorted(p.relative_to(ledger).as_posix() for p in marker_paths(ledger))
    assert parts[0] == "_commits/arm=baseline/phase=0.json" and len(parts) == 10
    assert (ledger / "records" / "arm=baseline" / "phase=0" / "part-0.parquet").is_file()
    con = connect(ledger)
    # every unit's text is the exact source slice, and units stay inside their document
    sources = {r[0]: r[1] for r in con.execute("SELECT doc_id, text FROM sources").fetchall()}
    for doc_id, start, end, text in con.execute('SELECT doc_id, start, "end", text FROM units').fetchall():
        assert 0 <= start < end <= len(sources[doc_id]) and sources[doc_id][start:end] == text
    # the packed context is what the generator saw, within the evidence budget
    for r in records(ledger):
        assert r["evidence_tokens"] <= r["budget_tokens"]
        if r["packed_unit_ids"]:
            assert r["packed_context"].startswith("[1] (")
    stages = {row[0] for row in con.execute("SELECT DISTINCT stage FROM candidates").fetchall()}
    assert {"bm25", "dense_exact", "dense_ann", "union", "fused", "reranked", "packed"} <= stages


def test_boundaries_record_actual_cuts(ledger):
    con = connect(ledger)
    rows = con.execute(
        "SELECT phase_offset, cut_tokens FROM boundaries WHERE arm = 'candidate' "
        "AND doc_id = 'policy/retention.md'"
        " ORDER BY phase_offset"
    ).fetchall()
    for offset, cuts in rows:
        first = offset if offset else 16
        assert cuts[0] == first and all(b - a == 16 for a, b in itertools.pairwise(cuts))


def test_unanswerable_control_is_scored_by_abstention(ledger):
    recs = [r for r in records(ledger) if r["qid"] == "no-such-thing"]
    assert {r["answer_verdict"] for r in recs} <= {"abstained", "false-assertion"}
    assert all(r["support_packed"] is None for r in recs)


def test_rerun_reproduces_a_record_exactly(ledger):
    before = _digest_tree(ledger)
    diff = rerun_record(ledger, "candidate", "temp-retention", "1")
    assert diff.identical, diff.lines()
    assert diff.fresh["answer"]
    assert _digest_tree(ledger) == before  # the ledger is never modified


def test_rerun_reports_a_difference(ledger, tmp_path):
    import shutil

    copy = tmp_path / "ledger"
    shutil.copytree(ledger, copy)
    part = table_file(copy, "records", "candidate", "1")
    table = pq.read_table(part).to_pylist()
    for row in table:
        if row["qid"] == "temp-retention":
            row["answer"] = "tampered"
    import pyarrow as pa

    from ledgerscope.ledger import schema

    pq.write_table(pa.Table.from_pylist(table, schema=schema.RECORDS), part)
    # re-record the file's digest, or the reader refuses the edited file as corrupted

    rerecord(copy, part)
    diff = rerun_record(copy, "candidate", "temp-retention", "1")
    assert not diff.identical
    assert [d["field"] for d in diff.differences] == ["answer"]


def _digest_tree(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _comparable(ledger: Path) -> list[tuple]:
    """Records and candidates with nothing run-specific in them."""
    con = connect(ledger)
    recs = con.execute(
        "SELECT arm, phase, qid, answer, answer_verdict, packed_context, support_packed "
        "FROM records ORDER BY ALL"
    ).fetchall()
    cands = con.execute(
        "SELECT arm, phase, qid, stage, rank, unit_id FROM candidates ORDER BY ALL"
    ).fetchall()
    return recs + cands


def test_killed_sweep_resumes_to_the_same_ledger(ledger, inputs, tmp_path):
    out = tmp_path / "killed"
    cmd = [
        sys.executable,
        "-m",
        "ledgerscope.cli.main",
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
    env = {**os.environ, "LEDGERSCOPE_PARTITION_PAUSE_S": "0.4", "HF_HUB_OFFLINE": "1"}
    for kill_after in (1, 4):  # SIGKILL after the 1st, then after the 4th finished partition
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 120
        while len(list(marker_paths(out))) < kill_after:
            assert proc.poll() is None, proc.stderr.read().decode()
            assert time.monotonic() < deadline
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        done = len(list(marker_paths(out)))
        assert kill_after <= done < 10
    final = subprocess.run(
        cmd,
        env={**env, "LEDGERSCOPE_PARTITION_PAUSE_S": "0"},
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert final.returncode == 0, final.stderr
    assert "already done" in final.stdout
    assert not (out / ".staging").exists() or not any((out / ".staging").iterdir())
    assert _comparable(out) == _comparable(ledger)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["identity"] == load_manifest(ledger)["identity"]


def test_resume_refuses_a_different_configuration(ledger, inputs, tmp_path):
    from ledgerscope.common.errors import InputError

    other = tmp_path / "other.toml"
    other.write_text(inputs["candidate"].read_text().replace("capacity = 16", "capacity = 20"))
    fixtures, corpus = load_fixtures(inputs["fixtures"], load_corpus(inputs["corpus"]))
    with pytest.raises(InputError, match="different"):
        sweep(fixtures, corpus, [load_arm(other), load_arm(inputs["baseline"])], ledger)
