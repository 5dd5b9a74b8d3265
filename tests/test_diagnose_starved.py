"""Deliberately starved configurations land on the steps they starve, with unit and rank evidence."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ledgerscope.analysis.diagnosis.feed import diagnose_ledger
from ledgerscope.inputs.fixtures import load_fixtures
from ledgerscope.inputs.sources import load_corpus, make_source
from ledgerscope.ledger.read import connect
from ledgerscope.pipeline.arm.config import arm_from_dict
from ledgerscope.pipeline.run.sweep import sweep

pytestmark = pytest.mark.slow
CONTRACTNLI = Path(__file__).resolve().parents[2] / "shared" / "data" / "contractnli" / "dev.json"


@pytest.fixture(scope="module")
def starved(starved_arms_ledger):
    return {
        (r["arm"], r["phase"], r["qid"]): r
        for r in diagnose_ledger(connect(starved_arms_ledger), starved_arms_ledger)
    }


def test_sql_diagnosis_matches_on_starved_arms(starved_arms_ledger, sql_matches_python):
    steps = sql_matches_python(connect(starved_arms_ledger), starved_arms_ledger)
    assert {6, 7, 8} <= set(steps), steps


@pytest.mark.parametrize(
    ("arm", "step", "stage", "cutoff"),
    [
        ("starved-fusion", 6, "fused", 1),
        ("starved-rerank", 7, "reranked", 1),
        ("starved-budget", 8, "packed", None),
    ],
)
def test_starved_stage_is_the_diagnosed_step_with_unit_and_rank(starved, arm, step, stage, cutoff):
    rows = [r for (a, _, qid), r in starved.items() if a == arm and qid == "temp-retention"]
    assert rows and all(r["step"] == step for r in rows), [(r["phase"], r["step"]) for r in rows]
    for r in rows:
        ev = r["evidence"]
        assert ev["stage"] == stage
        if cutoff is not None:
            assert ev["cutoff"] == cutoff
        assert ev["units"], ev
        for unit in ev["units"]:
            assert unit["unit_id"].startswith("policy/retention.md@")
            assert isinstance(unit["input_rank"], int) and unit["input_rank"] >= 1
        assert {s["span"] for s in ev["spans"]} <= {"rule", "qualifier"}


@pytest.mark.skipif(not CONTRACTNLI.is_file(), reason="shared ContractNLI data not present")
def test_weak_hnsw_shows_ann_misses(rule_exception_inputs, sql_matches_python, tmp_path):
    paths = rule_exception_inputs
    corpus = load_corpus(paths["corpus"])
    for doc in json.loads(CONTRACTNLI.read_text())["documents"][
        :2
    ]:  # real text, so HNSW has a graph to miss in
        corpus.add(make_source(f"nda/{doc['id']}.txt", doc["text"]))
    fixtures, corpus = load_fixtures(paths["fixtures"], corpus)
    arm = arm_from_dict(
        {
            "name": "weak-hnsw",
            "capacity": 48,
            "phases": [0, 16],
            "budget_tokens": 200,
            "retrieval": {
                "bm25_top_n": 0,
                "dense_top_n": 3,
                "ann_top_n": 3,
                "hnsw": {"M": 2, "ef_construction": 2, "ef_search": 1},
            },
        }
    )
    sweep(fixtures, corpus, [arm], tmp_path / "ledger")
    rows = list(diagnose_ledger(connect(tmp_path / "ledger"), tmp_path / "ledger"))
    assert sql_matches_python(connect(tmp_path / "ledger"), tmp_path / "ledger")[4] > 0
    ann = [r for r in rows if r["step"] == 4]
    assert ann, [(r["qid"], r["phase"], r["step"]) for r in rows]
    ev = ann[0]["evidence"]
    assert ev["stage"] == "production" and ev["units"]
    assert all(u.get("input_rank") for u in ev["units"])  # its rank in the exact dense list
