"""As a new user would: docs/ingest.md's recorder example, ingested, opened in the TUI at 80x24.

The example and the commands are read from the page itself (the blocks after its
``<!-- example: ... -->`` markers), run in a copy of the sample's corpus and
fixtures, and every failing record's diagnosis is checked in the Diagnosis pane;
the Source pane shows the pipeline's own chunks. Then the JSONL form of a ledger:
``open`` on a ``convert --to jsonl`` directory lists the same questions and shows
the same record detail as on the Parquet ledger.
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

from ledgerscope.analysis.diagnosis.sql import diagnosis_lines
from ledgerscope.ledger.read import connect
from ledgerscope.tui.app import LedgerscopeApp
from ledgerscope.tui.data import LedgerSession
from ledgerscope.tui.widgets.query_list import QueryList

from .test_tui_app import pane, press, settle

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "ingest.md"
SAMPLE = REPO / "sample_ledgers"
pytestmark = [pytest.mark.anyio, pytest.mark.slow]


@pytest.fixture()
def anyio_backend():
    return "asyncio"


def _block(marker: str) -> str:
    text = DOC.read_text(encoding="utf-8")
    m = re.search(rf"<!-- example: {marker} -->\s*```[a-z]*\n(.*?)```", text, re.S)
    assert m, marker
    return m.group(1)


@pytest.fixture(scope="module")
def example(tmp_path_factory) -> Path:
    """The page's example run as the page says; the ledger it makes."""
    work = tmp_path_factory.mktemp("newuser")
    shutil.copytree(SAMPLE / "corpus", work / "corpus")
    shutil.copy(SAMPLE / "fixtures.jsonl", work / "fixtures.jsonl")
    code = _block("recorder")
    assert len(code.strip().splitlines()) <= 16  # "ten lines" of pipeline and recorder, give or take imports
    (work / "pipeline.py").write_text(code, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    run = subprocess.run(
        [sys.executable, "pipeline.py"], cwd=work, env=env, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr
    commands = [shlex.split(line) for line in _block("commands").splitlines() if line.strip()]
    assert commands[0][:2] == ["ledgerscope", "ingest"]
    for cmd in commands[:2]:  # ingest, diagnose (open is the TUI, driven below)
        done = subprocess.run(
            [sys.executable, "-m", "ledgerscope.cli", *cmd[1:]],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
        assert not done.stderr
    assert commands[2][:2] == ["ledgerscope", "open"]
    return work / commands[2][2]


async def test_the_example_opens_at_80x24_with_the_diagnosis_of_each_failure(example):
    rows = {r["qid"]: r for r in map(json.loads, diagnosis_lines(connect(example), example))}
    failing = {q for q, r in rows.items() if r["step"] != 0}
    assert len(rows) == 56 and failing
    app = LedgerscopeApp(LedgerSession(example), tune_gc=False)
    seen = set()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        ql = app.query_one(QueryList)
        assert (app.main.count, app.main.total) == (56, 56)
        await press(pilot, "3")
        source = pane(app, "source")
        assert re.search(r"[\w/.-]+\.md@\d+", source), source[:400]  # the pipeline's own chunk ids
        await press(pilot, "6")
        for _ in range(56):
            qid = ql.current.qid
            if qid in failing:
                text = pane(app, "diagnosis")
                r = rows[qid]
                assert f"step {r['step']} · {r['step_name']}" in text, (qid, text[:300])
                if 2 <= r["step"] <= 8:
                    assert "not recorded" in text
                assert re.search(r"exact\s+not recorded", text)  # the survival lines too
                seen.add(qid)
            await press(pilot, "j")
    assert seen == failing


async def test_open_reads_a_jsonl_ledger_like_the_parquet_one(tmp_path):
    ledger = SAMPLE / "quillstack" / "ledger"
    jsonl = tmp_path / "jsonl"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "ledgerscope.cli",
            "convert",
            str(ledger),
            "--to",
            "jsonl",
            "--out",
            str(jsonl),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    texts = {}
    for name, path in (("parquet", ledger), ("jsonl", jsonl)):
        app = LedgerscopeApp(LedgerSession(path), tune_gc=False)
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            ql = app.query_one(QueryList)
            await press(pilot, "j", "j", "]")
            shown = [app.main.count, app.main.total, ql.current.qid, app.main.detail.phase]
            for key, view in (("6", "diagnosis"), ("3", "source"), ("4", "context")):
                await press(pilot, key)
                shown.append(pane(app, view))
            texts[name] = tuple(shown)
    assert texts["parquet"][:2] == (56, 56)  # never "0 of 0 questions"
    assert "the walk" in texts["parquet"][4] and "packed context" in texts["parquet"][6]
    assert texts["jsonl"] == texts["parquet"]
