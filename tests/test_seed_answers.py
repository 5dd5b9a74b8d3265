"""Acceptance: the seed 000 fixture verbatim (no declared default) swept with a budget that cuts the
qualifier away at some phases names critical-condition errors there and correct answers elsewhere, and
the ledger's answer contract says the default was inferred from the span ``rule``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ledgerscope.inputs.fixtures import load_fixtures
from ledgerscope.ledger.read import connect
from ledgerscope.pipeline.arm.config import arm_from_dict
from ledgerscope.pipeline.run.sweep import sweep

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
SEED = ROOT / "tests" / "data" / "seed000_fixture.json"
QUALIFIER = "This limit is 7 days for requests marked temporary."
#: 8-token units at every phase of the stride, and room for one unit only: at some phases the unit
#: that packs holds the rule and not the qualifier's value
ARM = {
    "name": "verbatim",
    "capacity": 8,
    "overlap": 0,
    "phases": list(range(8)),
    "budget_tokens": 24,
    "top_k": 1,
}


@pytest.fixture(scope="module")
def ledger(tmp_path_factory) -> Path:
    fixtures, corpus = load_fixtures(SEED)
    assert fixtures[0].answer.default is None  # verbatim: the seed declares no default
    out = tmp_path_factory.mktemp("seed") / "ledger"
    sweep(fixtures, corpus, [arm_from_dict(ARM)], out)
    return out


def test_critical_errors_where_the_qualifier_is_cut_correct_elsewhere(ledger):
    rows = (
        connect(ledger)
        .sql(
            "SELECT phase, answer_verdict, answer_reason, packed_context, answer FROM records ORDER BY phase"
        )
        .fetchall()
    )
    by_verdict: dict[str, list] = {}
    for row in rows:
        by_verdict.setdefault(row[1], []).append(row)
    assert by_verdict.get("critical-condition-error"), rows
    assert by_verdict.get("correct"), rows
    for _phase, _verdict, reason, context, answer in by_verdict["critical-condition-error"]:
        assert QUALIFIER not in context and "7 days" not in context  # the budget cut it away
        assert "30 days" in answer
        assert "inferred from span 'rule'" in reason


def test_the_answer_contract_says_the_default_was_inferred_from_rule(ledger):
    (line,) = (ledger / "fixtures.jsonl").read_text(encoding="utf-8").splitlines()
    contract = json.loads(line)["answer"]
    assert contract["default"] == "30 days"
    assert contract["default_inferred_from"] == "rule"
    assert contract["expected"] == "At most 7 days."
