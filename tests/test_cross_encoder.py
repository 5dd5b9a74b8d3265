"""The cross-encoder reranker path, on a tiny randomly initialised BERT the test builds and saves.

No cross-encoder with bundled weights exists offline, so this proves the real loading and scoring
code (`sentence_transformers.CrossEncoder` on a local path) rather than any model's quality. The
model is built once per session (``tiny_cross_encoder`` in conftest.py).
"""

from __future__ import annotations

import pytest

from ledgerscope.inputs.fixtures import load_fixtures
from ledgerscope.inputs.sources import load_corpus
from ledgerscope.ledger.read import connect
from ledgerscope.ledger.verify import load_manifest
from ledgerscope.pipeline.arm.config import arm_from_dict
from ledgerscope.pipeline.ranking.rerank import CrossEncoderReranker
from ledgerscope.pipeline.run.sweep import sweep

pytestmark = pytest.mark.slow


def test_cross_encoder_scores_query_candidate_pairs(tiny_cross_encoder):
    rr = CrossEncoderReranker(str(tiny_cross_encoder))
    scores = rr.score("How long are backups kept?", ["Backups are kept for 14 days.", "Sessions expire.", ""])
    assert scores.shape == (3,)
    assert len(set(scores.round(6).tolist())) > 1  # it reads the text: different pairs, different scores
    again = rr.score("How long are backups kept?", ["Backups are kept for 14 days.", "Sessions expire.", ""])
    assert (scores == again).all()


def test_sweep_with_a_named_cross_encoder(tiny_cross_encoder, rule_exception_inputs, tmp_path):
    paths = rule_exception_inputs
    fixtures, corpus = load_fixtures(paths["fixtures"], load_corpus(paths["corpus"]))
    arm = arm_from_dict(
        {
            "name": "ce",
            "capacity": 16,
            "phases": [0],
            "budget_tokens": 40,
            "rerank": {"kind": "cross-encoder", "model": str(tiny_cross_encoder)},
        }
    )
    sweep(fixtures, corpus, [arm], tmp_path / "ledger")
    manifest = load_manifest(tmp_path / "ledger")
    assert manifest["arms"]["ce"]["components"]["reranker"] == {
        "kind": "cross-encoder",
        "model": str(tiny_cross_encoder),
    }
    con = connect(tmp_path / "ledger")
    fused, reranked = (
        [
            r[0]
            for r in con.execute(
                f"SELECT unit_id FROM candidates WHERE stage = '{stage}' AND qid = 'backup-weekly' "
                "ORDER BY rank"
            ).fetchall()
        ]
        for stage in ("fused", "reranked")
    )
    assert sorted(reranked) == sorted(fused[: len(reranked)])  # a reordering of the reranker's input
