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
from dataclasses import dataclass

import numpy as np

from ledgerscope.pipeline.encoder import Encoded
from ledgerscope.pipeline.units import Unit


def maxsim(query_tokens: np.ndarray, unit_tokens: np.ndarray) -> float:
    """Mean over query tokens of the best cosine with any unit token."""
    if len(query_tokens) == 0 or len(unit_tokens) == 0:
        return 0.0
    sims = query_tokens.astype(np.float32) @ unit_tokens.astype(np.float32).T
    return float(sims.max(axis=1).mean())


def maxsim_many(query_tokens: np.ndarray, units_tokens: Sequence[np.ndarray]) -> np.ndarray:
    """MaxSim of one query against many units (one small product per unit, no copies)."""
    out = np.zeros(len(units_tokens))
    if len(query_tokens) == 0:
        return out
    q = np.ascontiguousarray(query_tokens, dtype=np.float32)
    for j, t in enumerate(units_tokens):
        if len(t):
            out[j] = np.dot(q, t.T).max(axis=1).mean()
    return out


@dataclass(frozen=True)
class MaxSimReranker:
    """``rerank.kind = "maxsim"``: late interaction over the embedding model's token vectors."""

    encode: Callable[[str], Encoded]
    model: str

    def score_candidates(self, question: str, candidates: Sequence[Unit],
                         fused_scores: Sequence[float]) -> np.ndarray:
        q = self.encode(question)
        return maxsim_many(q.tokens, [self.encode(u.text).tokens for u in candidates])

    def describe(self) -> dict:
        return {"kind": "maxsim",
                "name": "late-interaction MaxSim over the embedding model's token vectors",
                "model": self.model}


@dataclass(frozen=True)
class PassThroughReranker:
    """``rerank.kind = "none"``: the fused scores, so the fused order passes through unchanged."""

    kind: str | None = "none"

    def score_candidates(self, question: str, candidates: Sequence[Unit],
                         fused_scores: Sequence[float]) -> np.ndarray:
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
        scores = self.model.predict([(query, t) for t in texts], batch_size=self.batch_size,
                                    show_progress_bar=False)
        scores = np.asarray(scores, dtype=np.float64)
        return scores if scores.ndim == 1 else scores[:, -1]

    def score_candidates(self, question: str, candidates: Sequence[Unit],
                         fused_scores: Sequence[float]) -> np.ndarray:
        return self.score(question, [u.text for u in candidates])

    def describe(self) -> dict:
        return {"kind": "cross-encoder", "model": self.name}


def order_by(scores: np.ndarray, keys: Sequence[int]) -> list[int]:
    """Positions sorted by score (desc), ties by the incoming order (stable)."""
    return sorted(range(len(keys)), key=lambda i: (-scores[i], i))
