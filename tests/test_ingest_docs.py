"""The framework pages' examples, run as a new user would: ingest_langchain.md, ingest_llamaindex.md.

Each page's Python block and commands (the blocks after its ``<!-- example: ... -->``
markers) run in a copy of the sample's corpus and fixtures; the ledger must hold one
record per question and config, and ``compare`` must pair the two configs.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "sample_ledgers"


def _block(page: str, marker: str) -> str:
    text = (REPO / "docs" / page).read_text(encoding="utf-8")
    m = re.search(rf"<!-- example: {marker} -->\s*```[a-z]*\n(.*?)```", text, re.S)
    assert m, marker
    return m.group(1)


def _run_page(tmp_path: Path, page: str, name: str) -> tuple[Path, list[subprocess.CompletedProcess]]:
    shutil.copytree(SAMPLE / "corpus", tmp_path / "corpus")
    shutil.copy(SAMPLE / "fixtures.jsonl", tmp_path / "fixtures.jsonl")
    (tmp_path / "pipeline.py").write_text(_block(page, name), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "pipeline.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    results = [done]
    for line in _block(page, f"{name}-commands").splitlines():
        cmd = shlex.split(line)
        assert cmd[0] == "ledgerscope"
        res = subprocess.run(
            [sys.executable, "-m", "ledgerscope.cli", *cmd[1:]],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert res.returncode == 0, (line, res.stderr[-3000:])
        results.append(res)
    ledger = tmp_path / shlex.split(_block(page, f"{name}-commands").splitlines()[0]).pop()
    return ledger, results


def _n_questions() -> int:
    return sum(1 for line in (SAMPLE / "fixtures.jsonl").read_text().splitlines() if line.strip())


def test_the_langchain_page_runs_as_written(tmp_path):
    pytest.importorskip("langchain_text_splitters")
    from ledgerscope.ledger.read import connect

    ledger, results = _run_page(tmp_path, "ingest_langchain.md", "langchain")
    assert "56 request(s) recorded, 0 failed" in results[0].stderr
    counts = dict(connect(ledger).execute("SELECT arm, count(*) FROM records GROUP BY arm").fetchall())
    assert counts == {"chunks-400": _n_questions(), "chunks-800": _n_questions()}
    assert "chunker output recorded" in results[1].stdout  # handler.index(): the whole index
    assert "chunks-800" in results[2].stdout


def test_the_llamaindex_page_runs_as_written(tmp_path):
    pytest.importorskip("llama_index.core")
    pytest.importorskip("openinference.instrumentation.llama_index")
    from ledgerscope.ledger.read import connect

    ledger, results = _run_page(tmp_path, "ingest_llamaindex.md", "llamaindex")
    counts = dict(connect(ledger).execute("SELECT arm, count(*) FROM records GROUP BY arm").fetchall())
    assert counts == {"sentences-256": _n_questions(), "sentences-512": _n_questions()}
    assert re.search(r"skipped: [1-9]\d* trace\(s\) without a request \(no question id", results[1].stdout)
    manifest = json.loads((ledger / "manifest.json").read_text())
    assert manifest["ingested"]["chunked"] == {"sentences-256": "recorded", "sentences-512": "recorded"}
