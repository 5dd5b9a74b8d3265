"""`ledgerscope import musique`: the committed MuSiQue-Ans slice as a corpus and joint-evidence fixtures."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from ledgerscope.cli.main import app
from ledgerscope.inputs.importers.musique import import_musique
from ledgerscope.inputs.validate import validate_fixtures

SLICE = Path(__file__).resolve().parent / "data" / "musique" / "musique_ans_train_100.jsonl"


def _fixtures(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "fixtures.jsonl").read_text(encoding="utf-8").splitlines()]


def test_the_slice_imports_one_joint_set_per_question_with_a_sentence_per_hop(tmp_path):
    report = import_musique(SLICE, tmp_path)
    assert (report.questions, report.spans, report.skipped) == (100, 237, [])
    fixtures = _fixtures(tmp_path)
    assert all(len(f["sufficient_sets"]) == 1 for f in fixtures)
    assert all(len(f["sufficient_sets"][0]) == len(f["spans"]) == f["annotations"]["hops"] for f in fixtures)
    assert all(not f["annotations"].get("support_fallback") for f in fixtures)  # every hop's answer found
    first = fixtures[0]
    assert first["answer"] == {
        "expected": "G. Stanley Hall",
        "missing_condition": "abstain",
        "aliases": ["Stanley Hall"],
    }
    assert [s["dependency"] for s in first["spans"]] == ["primary", "joint"]
    # the hop's sentence is the one that states it, not the paragraph's first mention of the answer
    assert first["spans"][1]["quote"].startswith("Hall, who was the first president of the American")
    assert len({s["doc_id"] for s in first["spans"]}) == 2  # across documents
    _fx, _merged, problems = validate_fixtures(tmp_path / "fixtures.jsonl", tmp_path / "corpus.jsonl")
    assert problems == []


def test_unanswerable_a_missing_hop_answer_and_bad_lines(tmp_path):
    text = "Oslo is a city. It has a fjord."
    para = {"idx": 0, "title": "Oslo", "paragraph_text": text, "is_supporting": True}
    rows = [
        {
            "id": "a",
            "question": "What does the city have?",
            "answer": "a fjord",
            "answerable": True,
            "question_decomposition": [
                {"question": "What does Oslo have?", "answer": "a lake", "paragraph_support_idx": 0}
            ],
            "paragraphs": [para],
        },
        {
            "id": "b",
            "question": "Who founded it?",
            "answer": "",
            "answerable": False,
            "question_decomposition": [],
            "paragraphs": [para],
        },
        {"id": "c", "question": "No paragraphs?"},
    ]
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    report = import_musique(src, tmp_path / "out")
    assert report.questions == 2 and report.documents == 1
    assert report.skipped == ["line 3: no list 'paragraphs'; skipped"]
    fallback, control = _fixtures(tmp_path / "out")
    assert fallback["annotations"]["support_fallback"] == [1]  # "a lake" is not stated: the paragraph
    assert fallback["spans"][0]["quote"] == para["paragraph_text"]
    assert control["answerable"] is False and control["spans"] == []


def test_the_cli_imports_and_a_broken_file_is_exit_2(tmp_path):
    ok = CliRunner().invoke(app, ["import", "musique", str(SLICE), "--out", str(tmp_path / "m")])
    assert ok.exit_code == 0, ok.output
    assert "100 questions" in ok.output
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x"\n', encoding="utf-8")
    res = CliRunner().invoke(app, ["import", "musique", str(bad), "--out", str(tmp_path / "n")])
    assert res.exit_code == 2 and "bad.jsonl" in res.output and "Traceback" not in res.output
