"""Second-stage rerankers that read query and candidate jointly.

* ``maxsim`` (default): token-level late interaction (ColBERT-style MaxSim)
  over the embedding model's own token vectors: for each query token, its
  best cosine against the unit's tokens, averaged over query tokens. It reuses
  the forward pass that produced the unit's dense vector, so it costs no extra
  model calls.
* ``cross-encoder``: ``sentence_transformers.CrossEncoder`` for any model name
  or path a user gives.
* ``none``: the fused order passes through unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ledgerscope.common.pair_memo import PairMemo
from ledgerscope.pipeline.contracts.units import Unit
from ledgerscope.pipeline.embedding.encoder import Encoded


def maxsim(query_tokens: np.ndarray, unit_tokens: np.ndarray) -> float:
    """Mean over query tokens of the best cosine with any unit token."""
    if len(query_tokens) == 0 or len(unit_tokens) == 0:
        return 0.0
    sims = query_tokens.astype(np.float32) @ unit_tokens.astype(np.float32).T
    return float(sims.max(axis=1).mean())


def column_means(maxes: np.ndarray) -> np.ndarray:
    """``maxes[:, j].mean()`` for every column j, bit for bit, in three numpy calls.

    Each column becomes a contiguous row, so ``np.add.reduce`` sums it pairwise exactly as
    ``.mean()`` sums a 1-D array; the division is the one ``.mean()`` makes (by an ``intp``
    count, in float64, rounded back to the input's dtype)."""
    sums = np.add.reduce(np.ascontiguousarray(maxes.T), axis=1)
    return (sums / np.intp(maxes.shape[0])).astype(maxes.dtype)


def segment_maxsim(sims: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """MaxSim of each column segment of ``sims`` (query tokens x concatenated unit tokens):
    segment j spans ``starts[j]`` to the next start (the last one to the end); none is empty."""
    return column_means(np.maximum.reduceat(sims, starts, axis=1))


def maxsim_many(query_tokens: np.ndarray, units_tokens: Sequence[np.ndarray]) -> np.ndarray:
    """MaxSim of one query against many units: the same small product per unit as :func:`maxsim`
    (a single large product may round differently), the max and mean over all units at once."""
    out = np.zeros(len(units_tokens))
    if len(query_tokens) == 0:
        return out
    q = np.ascontiguousarray(query_tokens, dtype=np.float32)
    live = [j for j, t in enumerate(units_tokens) if len(t)]
    if not live:
        return out
    sims = [np.dot(q, units_tokens[j].T) for j in live]
    starts = np.cumsum([0] + [s.shape[1] for s in sims[:-1]])
    out[live] = segment_maxsim(np.concatenate(sims, axis=1), starts)
    return out


@dataclass(frozen=True)
class MaxSimReranker:
    """``rerank.kind = "maxsim"``: late interaction over the embedding model's token vectors."""

    encode: Callable[[str], Encoded]
    model: str
    #: scores already computed, by (question, unit text): one hypothesis asked of many documents
    #: meets the same candidates again
    known: PairMemo = field(default_factory=PairMemo, compare=False, repr=False)

    def score_candidates(
        self, question: str, candidates: Sequence[Unit], fused_scores: Sequence[float]
    ) -> np.ndarray:
        q = self.encode(question).tokens
        tokens = [self.encode(u.text).tokens for u in candidates]
        known = self.known
        scores = [known.get(question, u.text, q, t) for u, t in zip(candidates, tokens, strict=True)]
        todo = [j for j, s in enumerate(scores) if s is None]
        if todo:
            fresh = maxsim_many(q, [tokens[j] for j in todo])
            for j, s in zip(todo, fresh, strict=True):
                scores[j] = s
                known.put(question, candidates[j].text, q, tokens[j], s)
        return np.array(scores, dtype=np.float64)

    def describe(self) -> dict:
        return {
            "kind": "maxsim",
            "name": "late-interaction MaxSim over the embedding model's token vectors",
            "model": self.model,
        }


@dataclass(frozen=True)
class PassThroughReranker:
    """``rerank.kind = "none"``: the fused scores, so the fused order passes through unchanged."""

    kind: str | None = "none"

    def score_candidates(
        self, question: str, candidates: Sequence[Unit], fused_scores: Sequence[float]
    ) -> np.ndarray:
        return np.array(fused_scores, dtype=np.float64)

    def describe(self) -> dict:
        return {"kind": self.kind}


class CrossEncoderReranker:
    """``rerank.kind = "cross-encoder"``: any sentence-transformers cross-encoder (name or local path)."""

    def __init__(self, model: str, batch_size: int = 32):
        from sentence_transformers import CrossEncoder

        self.name = model
        self.model = CrossEncoder(model, device="cpu")
        self.batch_size = batch_size

    def score(self, query: str, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros(0)
        scores = self.model.predict(
            [(query, t) for t in texts], batch_size=self.batch_size, show_progress_bar=False
        )
        scores = np.asarray(scores, dtype=np.float64)
        return scores if scores.ndim == 1 else scores[:, -1]

    def score_candidates(
        self, question: str, candidates: Sequence[Unit], fused_scores: Sequence[float]
    ) -> np.ndarray:
        return self.score(question, [u.text for u in candidates])

    def describe(self) -> dict:
        return {"kind": "cross-encoder", "model": self.name}
