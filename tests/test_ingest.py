"""Ingesting a pipeline that ledgerscope did not run: flags, verdicts, pairing, bytes, interruptions.

The pipeline (tests/ingest_pipeline.py: LangChain's splitter, a plain BM25, a naive
reader) answers the sample's questions under two configurations and records seed
002's per-request record with ledgerscope.trace.Recorder. The ingested ledger's
support flags are recomputed here from its intervals with pipeline/support.py, the
chunks' intervals are the splitter's own start indexes, and compare pairs the two
configurations as it pairs swept arms.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ledgerscope.common.errors import InputError
from ledgerscope.ingest.build import IngestOptions, ingest
from ledgerscope.ledger.read import connect

from . import ingest_pipeline as pipe

pytest.importorskip("langchain_text_splitters")


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("pipeline")
    for config in pipe.CONFIGS:
        pipe.run(config, root / "traces.jsonl", root / "chunks.jsonl")
    return root


def _opts(root: Path, out: Path, **kw) -> IngestOptions:
    return IngestOptions(
        [root / "traces.jsonl"], root / "chunks.jsonl", pipe.FIXTURES, out, corpus=pipe.CORPUS, **kw
    )


@pytest.fixture(scope="module")
def ingested(recorded, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("ledger") / "ledger"
    ingest(_opts(recorded, out))
    return out


class _Unit:
    def __init__(self, doc_id, version, start, end):
        self.doc_id, self.version, self.start, self.end = doc_id, version, start, end


def test_flags_equal_those_recomputed_from_the_intervals(ingested):
    from ledgerscope.analysis.diagnosis.feed import load_ledger_fixtures
    from ledgerscope.rules import support

    con = connect(ingested)
    fixtures, texts = load_ledger_fixtures(con, ingested)
    versions = dict(con.execute("SELECT doc_id, version FROM sources").fetchall())
    units = {}
    unit_rows = con.execute('SELECT arm, doc_id, "start", "end" FROM units WHERE phase = \'0\'').fetchall()
    for arm, doc, s, e in unit_rows:
        units.setdefault(arm, []).append(_Unit(doc, versions[doc], s, e))
    lists: dict[tuple, list] = {}
    for arm, qid, stage, doc, s, e in con.execute(
        'SELECT arm, qid, stage, doc_id, "start", "end" FROM candidates ORDER BY arm, qid, stage, "rank"'
    ).fetchall():
        lists.setdefault((arm, qid, stage), []).append(_Unit(doc, versions[doc], s, e))
    records = con.execute(
        "SELECT arm, qid, answerable, support_chunked, support_fused, support_packed, "
        "covered_set, single_unit_complete, support_exact, support_reranked FROM records"
    ).fetchall()
    assert len(records) == 2 * len(pipe.questions())
    checked = 0
    for arm, qid, _answerable, chunked, fused, packed, covered, single, exact, reranked in records:
        fx = fixtures[qid]
        if not (fx.answerable and fx.sufficient_sets):
            assert (chunked, fused, packed, covered, single) == (None,) * 5
            continue
        assert chunked == support.keeps(fx, units[arm], texts)
        assert fused == support.keeps(fx, lists[(arm, qid, "fused")], texts)
        assert packed == support.keeps(fx, lists.get((arm, qid, "packed"), []), texts)
        assert covered == support.kept_set(fx, lists.get((arm, qid, "packed"), []), texts)
        assert single == support.single_unit_complete(fx, lists.get((arm, qid, "packed"), []), texts)
        assert exact is None and reranked is None  # not recorded by a seed-002 trace
        checked += 1
    assert checked > 60
    # the sample has records of every kind: kept and lost at each recorded stage
    got = con.execute(
        "SELECT count(*) FILTER (WHERE support_fused AND NOT support_packed), "
        "count(*) FILTER (WHERE NOT support_fused), count(*) FILTER (WHERE support_packed) "
        "FROM records"
    ).fetchall()[0]
    assert all(n > 0 for n in got), got


def test_intervals_are_the_splitters_own(ingested):
    con = connect(ingested)
    rows = con.execute(
        'SELECT unit_id, doc_id, "start", "end", text FROM units WHERE phase = \'0\''
    ).fetchall()
    by_id = {c.chunk_id: c for config in pipe.CONFIGS for c in pipe.split(config)}
    assert len(rows) == len(by_id)
    for uid, doc, s, e, text in rows:
        c = by_id[uid]
        assert (doc, s, e, text) == (c.doc_id, c.start, c.start + len(c.text), c.text)


def test_verdicts_tokens_and_manifest(ingested):
    con = connect(ingested)
    manifest = json.loads((ingested / "manifest.json").read_text())
    assert manifest["ingested"]["oracle"] == "not run"
    assert manifest["ingested"]["tree_stages_not_recorded"]["small"] == [
        "exact",
        "production",
        "union",
        "reranked",
    ]
    assert manifest["arms"]["small"]["config"]["kind"] == "ingested"
    verdicts = dict(con.execute("SELECT answer_verdict, count(*) FROM records GROUP BY 1").fetchall())
    assert {"correct", "abstained"} <= set(verdicts), verdicts
    assert (
        con.execute(
            "SELECT count(*) FROM records WHERE citation_verdict IS NULL OR "
            "evidence_tokens IS NULL OR oracle_verdict IS NOT NULL"
        ).fetchall()[0][0]
        == 0
    )
    # evidence tokens: the named tokenizer's count of each context text, summed
    from ledgerscope.pipeline.embedding.encoder import TokenCounter

    counter = TokenCounter("bundled:all-MiniLM-L6-v2")
    texts = dict(con.execute("SELECT unit_id, text FROM units WHERE phase = '0'").fetchall())
    for ids, n in con.execute("SELECT packed_unit_ids, evidence_tokens FROM records LIMIT 20").fetchall():
        assert n == sum(counter.count(texts[i]) for i in ids)


def test_diagnosis_names_the_stages_not_recorded(ingested):
    from ledgerscope.analysis.diagnosis.sql import diagnosis_lines

    rows = [json.loads(line) for line in diagnosis_lines(connect(ingested), ingested)]
    steps = {r["step"] for r in rows}
    assert steps <= {0, 2, 6, 8, 9, 10}, steps
    collapsed = [r for r in rows if r["label"].startswith("lost-in-steps-")]
    assert {r["label"] for r in collapsed} >= {"lost-in-steps-7-8"}
    for r in collapsed:
        assert r["step_name"].startswith("support lost in steps")
        assert "stages-not-recorded" in r["flags"]
        assert r["evidence"]["stages_not_recorded"] == ["exact", "production", "union", "reranked"]
        walk = {w["step"]: w for w in r["walk"]}
        assert walk[3]["passed"] is None and "not recorded" in walk[3]["detail"]
        assert "not recorded, so the loss lies somewhere in steps" in r["walk"][-1]["detail"]


def test_compare_pairs_the_two_configurations(ingested):
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "ledgerscope.cli",
            "compare",
            str(ingested),
            "--candidate",
            "small",
            "--baseline",
            "large",
            "--json",
            "--n-resamples",
            "200",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    comparison = json.loads(out.stdout)["comparison"]
    assert comparison["candidate"]["arm"] == "small" and comparison["baseline"]["arm"] == "large"
    assert comparison["matching"]["matched_records"] == 56
    assert comparison["matching"]["matched_questions"] == 56
    assert comparison["matching"]["candidate_unmatched_records"] == 0


def _tree_digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_the_same_traces_give_the_same_bytes(recorded, ingested, tmp_path):
    again = tmp_path / "again"
    ingest(_opts(recorded, again))
    assert _tree_digest(again) == _tree_digest(ingested)


def test_an_interrupted_ingest_leaves_no_ledger(recorded, tmp_path, monkeypatch):
    from ledgerscope.ingest import write as ingest_write

    calls = []

    def failing(*args, **kw):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args, **kw)

    real = ingest_write.write_partition
    monkeypatch.setattr(ingest_write, "write_partition", failing)
    out = tmp_path / "ledger"
    with pytest.raises(KeyboardInterrupt):
        ingest(_opts(recorded, out))
    assert not out.exists() and [p.name for p in tmp_path.iterdir()] == []


def test_a_killed_ingest_leaves_no_ledger_and_the_next_run_clears_it(recorded, tmp_path):
    out = tmp_path / "ledger"
    cmd = [
        sys.executable,
        "-m",
        "ledgerscope.cli",
        "ingest",
        str(recorded / "traces.jsonl"),
        "--chunks",
        str(recorded / "chunks.jsonl"),
        "--fixtures",
        str(pipe.FIXTURES),
        "--corpus",
        str(pipe.CORPUS),
        "--out",
        str(out),
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=os.environ)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not any(p.name.startswith(".ledger.") for p in tmp_path.iterdir()):
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not out.exists()
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["ledger"]


def test_out_must_be_new_and_qids_must_be_in_the_fixtures(recorded, ingested, tmp_path):
    with pytest.raises(InputError, match="already exists"):
        ingest(_opts(recorded, ingested))
    lines = (recorded / "traces.jsonl").read_text().splitlines()
    bad = json.loads(lines[3])
    bad["qid"] = "no-such-question"
    (tmp_path / "t.jsonl").write_text("\n".join([*lines[:3], json.dumps(bad)]) + "\n")
    opts = IngestOptions(
        [tmp_path / "t.jsonl"], recorded / "chunks.jsonl", pipe.FIXTURES, tmp_path / "x", corpus=pipe.CORPUS
    )
    with pytest.raises(InputError) as exc:
        ingest(opts)
    first = str(exc.value.problems[0])
    assert first.startswith(f"{tmp_path / 't.jsonl'}:4: qid: 'no-such-question' is not in")
    assert not (tmp_path / "x").exists()


def _rerun(ledger: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "ledgerscope.cli",
            "rerun",
            str(ledger),
            "--arm",
            "small",
            "--qid",
            "re-free-upload",
            "--phase",
            "0",
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=pipe.REPO,
    )


def test_rerun_says_the_pipeline_is_external_or_runs_the_declared_runner(ingested):
    res = _rerun(ingested)
    assert res.returncode == 2 and "ledgerscope cannot re-execute it: give --runner" in res.stderr
    same = _rerun(ingested, "--runner", "tests.ingest_pipeline:rerun_runner")
    assert same.returncode == 0, same.stderr + same.stdout
    assert "identical to the recorded record" in same.stdout
    changed = _rerun(ingested, "--runner", "tests.ingest_pipeline:rerun_runner_changed", "--json")
    assert changed.returncode == 1, changed.stderr
    assert [d["field"] for d in json.loads(changed.stdout)["differences"]] == ["candidates.packed"]
    missing = _rerun(ingested, "--runner", "tests.ingest_pipeline:nope")
    assert missing.returncode == 2
    assert "--runner: runner: 'tests.ingest_pipeline' has no 'nope'" in missing.stderr


@pytest.mark.slow
def test_the_oracle_runs_only_with_a_named_generator(recorded, tmp_path):
    from ledgerscope.analysis.diagnosis.sql import diagnosis_lines

    out = tmp_path / "ledger"
    arm = pipe.SAMPLE / "arms" / "baseline.toml"
    report = ingest(_opts(recorded, out, oracle_arm=arm))
    assert report.oracle.startswith("run: the extractive generator of baseline.toml")
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["ingested"]["oracle"] == report.oracle
    assert manifest["arms"]["small"]["components"]["generator"]["oracle"] == report.oracle
    con = connect(out)
    assert con.execute("SELECT count(*) FROM oracle").fetchall()[0][0] == 2 * len(pipe.questions())
    assert con.execute("SELECT count(*) FROM records WHERE oracle_verdict IS NULL").fetchall()[0][0] == 0
    labels = {json.loads(line)["label"] for line in diagnosis_lines(con, out)}
    assert "retrieval-failure-oracle-success" in labels or "both-fail" in labels, labels


def test_the_langchain_callback_handler_records_what_the_recorder_does(recorded, tmp_path):
    """The same pipeline run as LangChain runnables with the callback handler: the same context per
    record as the hand-written Recorder calls, and the literal prompt (its tokens counted)."""
    pytest.importorskip("langchain_core")
    from ledgerscope.trace import Recorder
    from ledgerscope.trace.langchain import LedgerscopeCallbackHandler

    with Recorder(tmp_path / "t.jsonl", chunks=tmp_path / "c.jsonl", config="small") as rec:
        handler = LedgerscopeCallbackHandler(rec)
        chain = pipe.langchain_pipeline("small")
        for q in pipe.questions():
            chain.invoke(q["question"], config={"callbacks": [handler], "metadata": {"qid": q["qid"]}})
    out = tmp_path / "ledger"
    ingest(
        IngestOptions(
            [tmp_path / "t.jsonl"],
            tmp_path / "c.jsonl",
            pipe.FIXTURES,
            out,
            corpus=pipe.CORPUS,
            chunks_partial=True,
        )
    )
    mine = dict(connect(out).execute("SELECT qid, packed_unit_ids FROM records").fetchall())
    hand = dict(
        connect(_built(recorded, tmp_path))
        .execute("SELECT qid, packed_unit_ids FROM records WHERE arm = 'small'")
        .fetchall()
    )
    assert len(mine) == 56 and mine == hand
    assert connect(out).execute("SELECT count(*) FROM records WHERE prompt_tokens > 0").fetchall()[0][0] == 56


def _built(recorded: Path, tmp_path: Path) -> Path:
    out = tmp_path / "hand"
    ingest(_opts(recorded, out))
    return out
