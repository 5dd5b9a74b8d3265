"""The optional LLM judge and `ledgerscope judge calibrate`, against the real local llama.cpp server.

The agreement of the bundled SmolLM2 (135M parameters) with the deterministic judge is poor; these
tests check that calibration measures it and says so, not that the model judges well.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ledgerscope.analysis.stats.agreement import cohen_kappa, confusion_matrix, kappa_band
from ledgerscope.cli.main import app
from ledgerscope.inputs.fixtures import load_fixtures
from ledgerscope.inputs.sources import load_corpus
from ledgerscope.ledger.read import connect
from ledgerscope.ledger.verify import load_manifest
from ledgerscope.pipeline.arm.config import arm_from_dict, load_arm
from ledgerscope.pipeline.judging.answer_judges import answer_judge
from ledgerscope.pipeline.judging.judge_llm import RUBRIC, grading_prompt, parse_label

from .sweep_data import write_inputs
from .test_endpoint import _skip_reason
from .test_judge import _fx

runner = CliRunner()


# ---------------------------------------------------------------------------
# no server needed


def test_parse_label_takes_the_first_label_in_any_spelling():
    assert parse_label("Critical condition error.") == "critical-condition-error"
    assert parse_label("Label: false_assertion") == "false-assertion"
    assert parse_label("correct (the answer says 7 days), not wrong") == "correct"
    assert parse_label("I think the answer is fine") is None


def test_grading_prompt_holds_the_answer_key():
    fx = _fx()
    text = grading_prompt("It is the DPO.", fx)
    assert "Expected answer: The data protection officer" in text
    assert "Answer to grade: It is the DPO." in text
    control = grading_prompt("x", _fx(answerable=False, sufficient_sets=(), segment="unanswerable"))
    assert "Answerable from the sources: no" in control and "Expected answer" not in control


def test_kappa_and_confusion_matrix():
    pairs = [("a", "a"), ("a", "b"), ("b", "b"), ("b", "b")]
    stats = cohen_kappa(pairs)
    assert math.isclose(stats["observed"], 0.75) and math.isclose(stats["expected"], 0.5)
    assert math.isclose(stats["kappa"], 0.5) and kappa_band(stats["kappa"]) == "moderate"
    labels, matrix = confusion_matrix(pairs, ["b", "a"])
    assert labels == ["b", "a"] and matrix == [[2, 0], [1, 1]]
    assert cohen_kappa([])["kappa"] is None
    assert cohen_kappa([("a", "a")] * 3)["kappa"] is None  # chance agreement 1: undefined
    assert kappa_band(-0.1) == "poor" and kappa_band(0.9) == "almost perfect"


def test_the_judge_table_defaults_to_the_deterministic_judge():
    cfg = arm_from_dict({"name": "a"})
    assert cfg.judge["kind"] == "deterministic"
    assert answer_judge(cfg.judge).kind == "deterministic"
    from ledgerscope.common.errors import InputError

    with pytest.raises(InputError, match=r"judge\.base_url"):
        arm_from_dict({"name": "a", "judge": {"kind": "endpoint"}})
    with pytest.raises(InputError, match=r"judge\.kind"):
        arm_from_dict({"name": "a", "judge": {"kind": "oracle"}})


def test_calibrate_needs_an_endpoint_for_a_deterministic_arm():
    ledger = Path(__file__).resolve().parents[1] / "sample_ledgers" / "quillstack" / "ledger"
    out = runner.invoke(app, ["judge", "calibrate", str(ledger), "--arm", "candidate"])
    assert out.exit_code == 2 and "judged deterministically" in out.output


# ---------------------------------------------------------------------------
# against the real server


@pytest.fixture(scope="module")
def server():
    from ledgerscope.pipeline.generation.endpoint import bundled_smollm2_path, start_local_server

    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    srv, _ = start_local_server(bundled_smollm2_path(), n_ctx=2048, n_parallel=1)
    yield srv
    srv.close()


@pytest.fixture(scope="module")
def ledger(server, tmp_path_factory) -> Path:
    from ledgerscope.pipeline.run.sweep import sweep

    root = tmp_path_factory.mktemp("judged")
    inputs = write_inputs(root, phases="[0, 5]")
    llm_arm = root / "llm.toml"
    text = inputs["candidate"].read_text().replace('name = "candidate"', 'name = "llm"')
    llm_arm.write_text(
        text + f'\n[judge]\nkind = "endpoint"\nbase_url = "{server.base_url}"\n'
        'model = "smollm2"\nmax_tokens = 8\n'
    )
    fixtures, corpus = load_fixtures(inputs["fixtures"], load_corpus(inputs["corpus"]))
    out = root / "ledger"
    sweep(fixtures, corpus, [load_arm(inputs["candidate"]), load_arm(llm_arm)], out)
    return out


@pytest.mark.slow
def test_an_endpoint_judged_sweep_records_the_rubric_and_llm_verdicts(ledger):
    manifest = load_manifest(ledger)
    judge = manifest["arms"]["llm"]["components"]["judge"]
    assert judge["kind"] == "endpoint" and judge["rubric"] == RUBRIC
    assert manifest["arms"]["candidate"]["components"]["judge"]["kind"] == "deterministic"
    reasons = [
        r
        for (r,) in connect(ledger)
        .sql("SELECT answer_reason FROM records WHERE arm = 'llm' AND NOT support_only")
        .fetchall()
    ]
    assert reasons and all(r.startswith("llm judge") for r in reasons), reasons


@pytest.mark.slow
def test_calibrate_reports_a_confusion_matrix_and_kappa(ledger, server):
    recorded = runner.invoke(app, ["judge", "calibrate", str(ledger), "--arm", "llm", "--json"])
    assert recorded.exit_code == 0, recorded.output
    result = json.loads(recorded.output)
    assert result["llm_verdicts"] == "recorded in the ledger"
    n = len(result["labels"])
    assert len(result["matrix"]) == n and all(len(row) == n for row in result["matrix"])
    assert sum(map(sum, result["matrix"])) == result["compared"] > 0
    assert result["labels"][:5] == [
        "correct",
        "critical-condition-error",
        "abstained",
        "wrong",
        "false-assertion",
    ]
    # a deterministically judged arm, graded now by the endpoint named on the command line
    asked = runner.invoke(
        app,
        [
            "judge",
            "calibrate",
            str(ledger),
            "--arm",
            "candidate",
            "--base-url",
            server.base_url,
            "--model",
            "smollm2",
        ],
    )
    assert asked.exit_code == 0, asked.output
    assert "Cohen's kappa" in asked.output and "rows: deterministic judge" in asked.output
    assert "should not replace the deterministic ones" in asked.output
