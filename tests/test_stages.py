"""The cascade's seams: components chosen by kind in one table, replaceable by any object that
fits the stage protocols, and one record row with exactly the ledger's columns.

No model loads here: a bag-of-words embedder stands in for the sentence-transformers one.
"""

from __future__ import annotations

import hashlib
import json
import re

import numpy as np
import pytest

from ledgerscope.common.errors import InputError
from ledgerscope.inputs.fixtures import load_fixtures
from ledgerscope.inputs.sources import load_corpus
from ledgerscope.ledger import schema
from ledgerscope.pipeline.arm.config import arm_from_dict, load_arm
from ledgerscope.pipeline.contracts.prompt import GenerationResult
from ledgerscope.pipeline.contracts.stages import Chunker, Generator, Reranker, Retriever, RetrieverIndex
from ledgerscope.pipeline.embedding.encoder import Encoded
from ledgerscope.pipeline.run import runtime
from ledgerscope.pipeline.run.cascade import build_phase, run_questions

from .sweep_data import write_inputs

DIM = 32


class BagOfWords:
    """Hashed word counts, L2-normalised: deterministic, no model, enough for dense retrieval."""

    name = "bag-of-words"

    def _vector(self, text: str) -> np.ndarray:
        v = np.zeros(DIM, dtype=np.float32)
        for w in re.findall(r"\w+", text.casefold()):
            v[int(hashlib.sha256(w.encode()).hexdigest(), 16) % DIM] += 1.0
        n = float(np.linalg.norm(v))
        return v / n if n else v

    def encode(self, texts) -> None:
        pass

    def vectors(self, texts: list[str]) -> np.ndarray:
        return np.stack([self._vector(t) for t in texts]) if texts else np.zeros((0, DIM), np.float32)

    def get(self, text: str) -> Encoded:
        return Encoded(self._vector(text), np.zeros((0, DIM), np.float32), np.zeros((0, 2), np.int32))

    def describe(self) -> dict:
        return {"name": self.name}


class Reversing:
    """A user reranker: the fused head in reverse (scores only, the cascade sorts)."""

    def score_candidates(self, question, candidates, fused_scores):
        return [float(i) for i in range(len(candidates))]

    def describe(self) -> dict:
        return {"kind": "reversing"}


class FirstBlock:
    """A user generator: quotes the first block and cites it, or abstains with no blocks."""

    def generate(self, question, blocks):
        if not blocks:
            return GenerationResult("no sources", [], True)
        return GenerationResult(f"{blocks[0].text} [{blocks[0].label}]", [blocks[0].label], False, 7)

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def describe(self) -> dict:
        return {"kind": "first-block"}


@pytest.fixture(scope="module")
def phase_inputs(tmp_path_factory):
    inputs = write_inputs(tmp_path_factory.mktemp("stages"))
    fixtures, corpus = load_fixtures(inputs["fixtures"], load_corpus(inputs["corpus"]))
    return load_arm(inputs["candidate"]), fixtures, corpus


def _runtime(cfg):
    return runtime.build_runtime(cfg, lambda name, batch: BagOfWords())


def test_built_components_fit_the_stage_protocols(phase_inputs):
    cfg, _, _ = phase_inputs
    rt = _runtime(cfg)
    assert isinstance(rt.chunker, Chunker) and isinstance(rt.reranker, Reranker)
    assert isinstance(rt.generator, Generator)
    for slot in (rt.retrievers.bm25, rt.retrievers.dense_exact, rt.retrievers.dense_ann):
        assert isinstance(slot, Retriever)
    assert rt.describe()["reranker"] == {
        "kind": "maxsim",
        "name": "late-interaction MaxSim over the embedding model's token vectors",
        "model": "bag-of-words",
    }
    assert rt.count_tokens("two words") == rt.chunk_counter.count("two words")


def test_configuration_kinds_are_the_factory_tables(monkeypatch):
    with pytest.raises(InputError) as err:
        arm_from_dict({"rerank": {"kind": "reversing"}})
    assert "must be one of maxsim, cross-encoder, none" in str(err.value)
    # a kind added to the table is a valid configuration and the component the runtime builds
    monkeypatch.setitem(runtime.RERANKERS, "reversing", lambda cfg, encoder, counter: Reversing())
    cfg = arm_from_dict({"rerank": {"kind": "reversing"}})
    assert isinstance(_runtime(cfg).reranker, Reversing)


def test_replaced_stages_flow_through_to_the_ledger_rows(phase_inputs):
    cfg, fixtures, corpus = phase_inputs
    texts = {s.doc_id: s.text for s in corpus}
    rt = _runtime(cfg)
    index = build_phase(rt, cfg.phase_list()[0], list(corpus))
    assert isinstance(index.dense_ann, RetrieverIndex)
    plain_records, plain = run_questions(rt, index, fixtures, texts, {})
    rt.reranker, rt.generator = Reversing(), FirstBlock()
    records, cands = run_questions(rt, index, fixtures, texts, {})

    def stage(sink, qid, name):
        return [r["unit_id"] for r in sink.rows() if r["qid"] == qid and r["stage"] == name]

    for fx, rec in zip(fixtures, records, strict=True):
        fused_head = stage(cands, fx.qid, "fused")[: cfg.rerank_depth]
        assert stage(cands, fx.qid, "reranked") == fused_head[::-1]
        assert stage(cands, fx.qid, "fused") == stage(plain, fx.qid, "fused")  # upstream unchanged
        packed = stage(cands, fx.qid, "packed")
        assert rec["packed_unit_ids"] == packed
        if packed:
            assert rec["answer"].endswith("[1]") and rec["prompt_tokens"] == 7
            assert json.loads(rec["citations_json"])[0]["unit_id"] == packed[0]
    assert any(rec["packed_unit_ids"] for rec in records)
    # the record row is built in one place, with exactly the ledger's columns
    for rec in records + plain_records:
        assert sorted(rec) == sorted(f.name for f in schema.RECORDS)


def test_every_kind_names_a_factory_that_exists():
    from ledgerscope.pipeline.arm import kinds

    for table in (kinds.CHUNKERS, kinds.RERANKERS, kinds.GENERATORS):
        for kind, entry in table.items():
            assert callable(kinds.resolve(entry)), kind
