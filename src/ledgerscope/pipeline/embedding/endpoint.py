"""Embeddings from an OpenAI-compatible ``POST /v1/embeddings`` server (``[embedding] kind = "endpoint"``).

vLLM, Text Embeddings Inference, Ollama, llama.cpp's server, infinity and
:mod:`ledgerscope.pipeline.servers.model_server` speak this API: ``{"model", "input": [texts],
"encoding_format": "float"}``
answered by ``{"data": [{"index", "embedding"}], ...}``. :class:`EndpointEmbedder` fits the
:class:`ledgerscope.pipeline.contracts.stages.Embedder` protocol (and the cache interface the sweep uses:
``encode``, ``drop``,
``forward_texts``); it has no token vectors (``token_vectors = False``), so the MaxSim reranker
cannot run on it and ``get`` says so.

Rules. Texts go in batches of ``batch_size``, each with the shared client's retries, backoff and
timeout (:mod:`ledgerscope.common.http_json`). A response with the wrong number of vectors, a vector of the
wrong
dimension, a non-finite or an all-zero vector is unusable (not retried: the same request gets the
same answer). A batch that fails after its retries marks its texts failed; asking for their
vectors raises :class:`EmbeddingFailure` (a :class:`ledgerscope.pipeline.contracts.stages.StageFailure`),
which the dense
retrievers turn into an infrastructure failure of the records that needed them. No vector is
ever made up. :meth:`EndpointEmbedder.probe` sends one text when the runtime is built, so a
server that is down, or answers in the wrong shape, stops the sweep before any partition is
written.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from ledgerscope.common.http_json import AttemptError, EndpointUnreachable, JsonClient
from ledgerscope.pipeline.contracts.stages import StageFailure

PROBE_TEXT = "ledgerscope embedding probe"


class EmbeddingFailure(StageFailure):
    """Vectors the endpoint did not deliver; ``failed`` holds the texts without one."""

    def __init__(self, message: str, failed: Iterable[str], attempts: Sequence[str] = ()):
        super().__init__("embedding", message, attempts)
        self.failed = frozenset(failed)


def usage_tokens(data: object) -> int | None:
    """The tokens an OpenAI-compatible response says it billed (``usage.prompt_tokens``, else
    ``usage.total_tokens``), or None when it says nothing."""
    usage = data.get("usage") if isinstance(data, dict) else None
    if not isinstance(usage, dict):
        return None
    for key in ("prompt_tokens", "total_tokens"):
        value = usage.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
    return None


class TokenVectorsUnavailable(RuntimeError):
    """An embedding endpoint returns pooled vectors only (MaxSim needs per-token vectors)."""


class EndpointEmbedder:
    """Pooled, L2-normalised vectors from an embeddings server, cached by text."""

    kind = "endpoint"
    token_vectors = False

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key_env: str | None = None,
        batch_size: int = 64,
        timeout: float = 60.0,
        retries: int = 2,
        backoff: float = 0.5,
        path: str = "/v1/embeddings",
        dimensions: int = 0,
    ):
        self.client = JsonClient(base_url, api_key_env, timeout, retries, backoff)
        self.name = model
        self.path = path or "/v1/embeddings"
        self.batch_size = max(1, int(batch_size))
        self.dim: int | None = int(dimensions) or None
        self.response_model: str | None = None
        self._cache: dict[str, np.ndarray] = {}
        self._failed: dict[str, str] = {}
        self._attempts: dict[str, list[str]] = {}
        self._last_usage: int | None = None
        self.forward_texts = 0  # texts sent and embedded
        self.requests = 0
        self.request_seconds = 0.0
        #: tokens the server billed (OpenAI ``usage``) and the texts whose responses said so
        self.usage_tokens = 0
        self.usage_texts = 0
        #: a response without ``usage``: its texts counted by this tokenizer (set by the runtime)
        self.count_tokens: Callable[[str], int] | None = None
        self.counted_tokens = 0

    @property
    def url(self) -> str:
        return self.client.root + self.path

    def describe(self) -> dict[str, Any]:
        """For the manifest: the server, model and settings; the key's variable name, never its value."""
        return {
            "kind": self.kind,
            "api": "openai-embeddings",
            **self.client.describe(),
            "path": self.path,
            "model": self.name,
            "dim": self.dim,
            "batch_size": self.batch_size,
            "response_model": self.response_model,
        }

    # -- the API ------------------------------------------------------------

    def _read(self, batch: list[str]) -> Callable[[Any], np.ndarray]:
        def read(data: Any) -> np.ndarray:
            return self._vectors_from(data, len(batch))

        return read

    def _vectors_from(self, data: Any, expected: int) -> np.ndarray:
        """The response's vectors in input order, checked; an unusable one fails the attempt."""
        items = data.get("data") if isinstance(data, dict) else None
        if not isinstance(items, list):
            raise AttemptError("response", "no 'data' list in the response", True)
        if len(items) != expected:
            raise AttemptError("response", f"{len(items)} vector(s) for {expected} input(s)", False)
        rows: list[list[float] | None] = [None] * expected
        for pos, item in enumerate(items):
            index = item.get("index", pos) if isinstance(item, dict) else None
            vector = item.get("embedding") if isinstance(item, dict) else None
            if (
                not isinstance(index, int)
                or isinstance(index, bool)
                or not 0 <= index < expected
                or rows[index] is not None
            ):
                raise AttemptError(
                    "response",
                    f"item {pos}: index {index!r} is not a new position in 0..{expected - 1}",
                    False,
                )
            if not isinstance(vector, list) or not vector:
                raise AttemptError(
                    "response",
                    f"item {pos}: 'embedding' is not a list of numbers (request encoding_format = float)",
                    False,
                )
            rows[index] = vector
        dims = {len(r) for r in rows if r is not None}
        want = self.dim or next(iter(dims))
        if dims != {want}:
            raise AttemptError(
                "response",
                f"vector dimension {sorted(dims)} where {want} was expected "
                f"({'embedding.dimensions' if self.dim else 'the first vector'})",
                False,
            )
        try:
            matrix = np.asarray(rows, dtype=np.float64)
        except (TypeError, ValueError):
            raise AttemptError("response", "a vector holds something other than numbers", False) from None
        if not np.isfinite(matrix).all():
            raise AttemptError("response", "a vector holds NaN or infinity", False)
        norms = np.linalg.norm(matrix, axis=1)
        if (norms == 0).any():
            raise AttemptError("response", "the server returned an all-zero vector", False)
        if isinstance(data, dict) and isinstance(data.get("model"), str):
            self.response_model = data["model"]
        self._last_usage = usage_tokens(data)
        return (matrix / norms[:, None]).astype(np.float32)

    def _embed_batch(self, batch: list[str]) -> None:
        payload = {"model": self.name, "input": batch, "encoding_format": "float"}
        started = time.perf_counter()
        vectors, errors = self.client.post(self.path, payload, self._read(batch))
        self.request_seconds += time.perf_counter() - started
        self.requests += len(errors) + (vectors is not None)
        if vectors is None:
            message = f"{self.url}: {errors[-1] if errors else 'no attempt'} ({len(errors)} attempt(s))"
            for t in batch:
                self._failed[t] = message
                self._attempts[t] = errors
            return
        if self.dim is None:
            self.dim = int(vectors.shape[1])
        if self._last_usage is not None:
            self.usage_tokens += self._last_usage
            self.usage_texts += len(batch)
        elif self.count_tokens is not None:
            self.counted_tokens += sum(self.count_tokens(t) for t in batch)
        for t, v in zip(batch, vectors, strict=True):
            self._cache[t] = v
        self.forward_texts += len(batch)

    # -- the Embedder protocol and the sweep's cache interface ------------------

    def encode(self, texts: Iterable[str], progress: Callable[[int], None] | None = None) -> None:
        """Embed every text not cached (texts that failed before are tried again), in batches."""
        todo = sorted({t for t in texts if t not in self._cache}, key=lambda t: (-len(t), t))
        for t in todo:
            self._failed.pop(t, None)
        for i in range(0, len(todo), self.batch_size):
            batch = todo[i : i + self.batch_size]
            self._embed_batch(batch)
            if progress:
                progress(len(batch))

    def vectors(self, texts: list[str]) -> np.ndarray:
        """One row per text; :class:`EmbeddingFailure` when any of them has no vector."""
        self.encode(t for t in texts if t not in self._failed)
        failed = [t for t in texts if t not in self._cache]
        if failed:
            message = self._failed.get(failed[0], "not embedded")
            raise EmbeddingFailure(
                f"{len(set(failed))} text(s) without a vector: {message}",
                failed,
                self._attempts.get(failed[0], []),
            )
        if not texts:
            return np.zeros((0, self.dim or 0), dtype=np.float32)
        return np.stack([self._cache[t] for t in texts])

    def get(self, text: str):
        raise TokenVectorsUnavailable(
            f"the embedding endpoint {self.url} returns pooled vectors only; token vectors (MaxSim, the "
            "extractive reader) come from a local model"
        )

    def drop(self, texts: Iterable[str]) -> None:
        for t in texts:
            self._cache.pop(t, None)
            self._failed.pop(t, None)
            self._attempts.pop(t, None)

    def forget(self, keep: set[str] | None = None) -> None:
        if keep is None:
            self._cache.clear()
        else:
            self._cache = {k: v for k, v in self._cache.items() if k in keep}
        self._failed.clear()
        self._attempts.clear()

    # -- before any work ----------------------------------------------------------

    def probe(self) -> None:
        """One request: the server answers, with one vector of a consistent size (learnt here)."""
        why = self.client.unreachable(min(self.client.timeout, 10.0))
        if why:
            raise EndpointUnreachable(f"embedding endpoint {self.url} is unreachable: {why}")
        payload = {"model": self.name, "input": [PROBE_TEXT], "encoding_format": "float"}
        vectors, errors = self.client.post(self.path, payload, self._read([PROBE_TEXT]))
        self.requests += len(errors) + (vectors is not None)  # the probe is a request the server serves
        if vectors is not None and self._last_usage is not None:
            self.usage_tokens += self._last_usage
        if vectors is None:
            raise EndpointUnreachable(
                f"embedding endpoint {self.url} did not embed a probe text: "
                f"{errors[-1] if errors else 'no attempt'}"
            )
        self.dim = int(vectors.shape[1])
