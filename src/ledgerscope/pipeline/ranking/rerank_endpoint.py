"""Reranking through a rerank server (``[rerank] kind = "endpoint"``).

The common rerank API, spoken by Text Embeddings Inference, infinity, vLLM, Cohere, Jina and
:mod:`ledgerscope.pipeline.servers.model_server`: ``POST {base_url}{path}`` (``path`` = ``/v1/rerank`` by
default, or
``/rerank``) with ``{"model", "query", "documents": [texts]}``, answered by a list of
``{"index", "relevance_score"}`` (TEI's ``"score"`` is read too), bare or as ``{"results": [...]}``.

Rules. Every document must come back exactly once with a finite score; anything else is an
unusable answer. A request that fails after its retries (:mod:`ledgerscope.common.http_json`) raises
:class:`RerankFailure` (a :class:`ledgerscope.pipeline.contracts.stages.StageFailure`): that question's
record is an
infrastructure failure, its reranked list recorded in the fused order without scores. Never a
made-up score.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ledgerscope.common.http_json import AttemptError, EndpointUnreachable, JsonClient
from ledgerscope.pipeline.contracts.stages import StageFailure
from ledgerscope.pipeline.contracts.units import Unit


class RerankFailure(StageFailure):
    def __init__(self, message: str, attempts: Sequence[str] = ()):
        super().__init__("rerank", message, attempts)


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def read_scores(data: Any, n: int) -> np.ndarray:
    """One score per document, in document order, from any of the accepted response shapes."""
    items = data.get("results", data.get("data")) if isinstance(data, dict) else data
    if not isinstance(items, list):
        raise AttemptError("response", "no list of results in the response", True)
    scores: list[float | None] = [None] * n
    for pos, item in enumerate(items):
        index = item.get("index") if isinstance(item, dict) else None
        score = None
        if isinstance(item, dict):
            score = item.get("relevance_score", item.get("score"))
        if (
            not isinstance(index, int)
            or isinstance(index, bool)
            or not 0 <= index < n
            or scores[index] is not None
        ):
            raise AttemptError(
                "response", f"result {pos}: index {index!r} is not a new position in 0..{n - 1}", False
            )
        if not _finite(score):
            raise AttemptError(
                "response", f"result {pos}: relevance_score {score!r} is not a finite number", False
            )
        scores[index] = float(score)
    missing = [i for i, s in enumerate(scores) if s is None]
    if missing:
        raise AttemptError(
            "response",
            f"{len(items)} result(s) for {n} document(s); no score for document(s) {missing[:5]}",
            False,
        )
    return np.asarray(scores, dtype=np.float64)


class EndpointReranker:
    """Scores the fused head with one request per question; see the module docstring."""

    kind = "endpoint"

    def __init__(
        self,
        base_url: str,
        model: str = "",
        path: str = "/v1/rerank",
        api_key_env: str | None = None,
        timeout: float = 60.0,
        retries: int = 2,
        backoff: float = 0.5,
    ):
        self.client = JsonClient(base_url, api_key_env, timeout, retries, backoff)
        self.model = model
        self.path = path or "/v1/rerank"
        self.requests = 0
        self.pairs = 0  # (question, document) pairs sent, every attempt counted

    @property
    def url(self) -> str:
        return self.client.root + self.path

    def describe(self) -> dict:
        return {
            "kind": self.kind,
            "api": "rerank",
            **self.client.describe(),
            "path": self.path,
            "model": self.model,
        }

    def _request(self, question: str, documents: list[str]) -> tuple[np.ndarray | None, list[str]]:
        payload: dict[str, Any] = {"query": question, "documents": documents, "return_documents": False}
        if self.model:
            payload["model"] = self.model
        scores, errors = self.client.post(self.path, payload, lambda data: read_scores(data, len(documents)))
        self.requests += len(errors) + (scores is not None)
        self.pairs += len(documents) * (len(errors) + (scores is not None))
        return scores, errors

    def score_candidates(
        self, question: str, candidates: Sequence[Unit], fused_scores: Sequence[float]
    ) -> np.ndarray:
        if not candidates:
            return np.zeros(0)
        scores, errors = self._request(question, [u.text for u in candidates])
        if scores is None:
            raise RerankFailure(
                f"{self.url}: {errors[-1] if errors else 'no attempt'} ({len(errors)} attempt(s))", errors
            )
        return scores

    def probe(self) -> None:
        """One request before any work: the server answers in the rerank shape."""
        why = self.client.unreachable(min(self.client.timeout, 10.0))
        if why:
            raise EndpointUnreachable(f"rerank endpoint {self.url} is unreachable: {why}")
        scores, errors = self._request("ledgerscope probe", ["ledgerscope probe document"])
        if scores is None:
            raise EndpointUnreachable(
                f"rerank endpoint {self.url} did not score a probe document: "
                f"{errors[-1] if errors else 'no attempt'}"
            )
