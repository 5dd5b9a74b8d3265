"""docs/fixtures.md's three shapes, run as the guide writes them (no model: import and validate only)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ledgerscope.cli.main import app

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "fixtures.md"
EXAMPLES = ROOT / "docs" / "examples" / "fixtures"
CORPUS = EXAMPLES / "corpus"


def _run(*args: str):
    return CliRunner().invoke(app, list(args))


def _guide_commands() -> list[list[str]]:
    """Every ``ledgerscope import|validate`` line in the guide's code blocks, as arguments."""
    return [
        line.split()[1:]
        for line in re.findall(
            r"^ledgerscope (?:import|validate) .*$", GUIDE.read_text(encoding="utf-8"), re.M
        )
    ]


def test_every_command_in_the_guide_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    commands = _guide_commands()
    assert len(commands) == 5
    for args in commands:  # outputs go under tmp_path
        args = [str(tmp_path / a) if a.startswith("byod-") else a for a in args]
        res = _run(*args)
        assert res.exit_code == 0, (args, res.output)


def test_shape_2_locates_the_answer_sentence(tmp_path):
    res = _run(
        "import",
        "table",
        str(EXAMPLES / "questions_docs.csv"),
        "--corpus",
        str(CORPUS),
        "--out",
        str(tmp_path),
    )
    assert res.exit_code == 0, res.output
    fx = [json.loads(x) for x in (tmp_path / "fixtures.jsonl").read_text().splitlines()]
    assert fx[0]["spans"][0]["quote"] == "The daily meal allowance is 40 euros within the country."
    assert all("start" not in s for f in fx for s in f["spans"])  # quote selectors, not offsets


def test_shape_3_joint_evidence_and_a_control(tmp_path):
    res = _run(
        "import", "table", str(EXAMPLES / "sheet.csv"), "--corpus", str(CORPUS), "--out", str(tmp_path)
    )
    assert res.exit_code == 0, res.output
    fx = {f["qid"]: f for f in map(json.loads, (tmp_path / "fixtures.jsonl").read_text().splitlines())}
    joint = fx["desk-runner"]
    assert joint["segment"] == "joint-evidence" and joint["sufficient_sets"] == [["e1", "e2"]]
    assert {s["doc_id"] for s in joint["spans"]} == {"handbook/travel.md", "handbook/people.md"}
    assert fx["parking"]["answerable"] is False and fx["parking"]["spans"] == []


@pytest.mark.parametrize(
    "rows, where",
    [
        (
            "qid,question,doc_id,answer\nx,What is it?,handbook/nope.md,foo\n",
            ":2: doc_id: 'handbook/nope.md'",
        ),
        ("qid,question,doc_id,answer\ny,What colour?,handbook/leave.md,purple\n", ":2: answer: 'purple'"),
        (
            "qid,question,doc_id,evidence\nz,Why?,handbook/leave.md,Not in the text.\n",
            ":2: evidence: quote not",
        ),
        ("qid,question,doc,answer\nz,Why?,handbook/leave.md,x\n", ":1: header: unknown column(s) doc"),
    ],
)
def test_problems_are_located_and_nothing_is_written(tmp_path, rows, where):
    sheet = tmp_path / "sheet.csv"
    sheet.write_text(rows, encoding="utf-8")
    res = _run("import", "table", str(sheet), "--corpus", str(CORPUS), "--out", str(tmp_path / "out"))
    assert res.exit_code == 2 and where in res.output, res.output
    assert not (tmp_path / "out" / "fixtures.jsonl").exists()
