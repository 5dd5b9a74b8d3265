"""What one (arm, phase) partition cost: the resource record written into its ``_SUCCESS.json``.

Seed 000 asks for indexed units, unique and repeated source tokens, stored bytes, embedding usage,
query latency and billed cost, with one-time indexing apart from per-query cost. A partition is
one complete index of the corpus (the phase's cut) and one pass of every question, so it records:

* ``index``: units, source and unit tokens (the overlap factor), stored bytes (vectors, HNSW,
  BM25) and the seconds chunking, embedding and index builds took: the one-time cost;
* ``embedding``, ``rerank``, ``generator``: what each stage sent in this partition (texts,
  tokens, requests, cache hits, pairs), the tokens billed by the server's ``usage`` where it
  reported them, else counted by ledgerscope's tokenizer, and ``token_source`` saying which;
* ``per_query``: what one question costs the production pipeline (its query embedding tokens,
  rerank pairs and requests, generator tokens and requests), whatever the sweep's caches saved;
* ``latency_ms``: per stage, every question's milliseconds and their p50/p95/p99. A stage the
  cascade runs for all questions at once (query embedding, the three searches) is timed as one
  batch and shared evenly: its quantiles are equal, and ``batched`` names those stages.

Records themselves stay free of timings, so a resumed or capped sweep writes the same tables.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

FORMAT = "ledgerscope-resources/1"
#: per-query stages in cascade order; ``dense_exact`` is the diagnosis's reference, not production
STAGES = ("embed_query", "bm25", "dense_ann", "dense_exact", "fuse", "rerank", "pack", "generate")
BATCHED = ("embed_query", "bm25", "dense_ann", "dense_exact")
#: the stages a production query runs (its total latency)
PRODUCTION = ("embed_query", "bm25", "dense_ann", "fuse", "rerank", "pack", "generate")


class Laps:
    """Per-question seconds per stage for one partition's questions."""

    def __init__(self, n: int):
        self.n = n
        self.seconds = {stage: [0.0] * n for stage in STAGES}
        self.pairs = [0] * n  # rerank pairs each question's production query sends
        self.results: list[Any] = []  # each question's generation result (its tokens)
        self.own = 0.0  # seconds spent recording (the target: at most 2 % of the sweep)

    def share(self, stage: str, seconds: float) -> None:
        """A batched stage: every question gets an equal share of its wall time."""
        if self.n:
            each = seconds / self.n
            self.seconds[stage] = [each] * self.n

    def add(self, i: int, times: dict[str, float]) -> None:
        for stage, seconds in times.items():
            self.seconds[stage][i] += seconds

    def quantiles(self) -> dict[str, Any]:
        t0 = time.perf_counter()
        out: dict[str, Any] = {}
        total = np.zeros(self.n)
        for stage in STAGES:
            ms = np.asarray(self.seconds[stage]) * 1000.0
            if stage in PRODUCTION:
                total += ms
            out[stage] = summarize(ms)
        out["query"] = summarize(total)
        self.own += time.perf_counter() - t0
        return out

    def per_query(self) -> dict[str, list[float]]:
        return {stage: [round(s * 1000.0, 4) for s in v] for stage, v in self.seconds.items()}


def summarize(ms: np.ndarray) -> dict[str, float | None]:
    """p50/p95/p99 and mean of milliseconds (numpy's linear interpolation); None when empty."""
    if len(ms) == 0:
        return {"p50": None, "p95": None, "p99": None, "mean": None}
    q = np.percentile(ms, [50, 95, 99])
    return {
        "p50": round(float(q[0]), 4),
        "p95": round(float(q[1]), 4),
        "p99": round(float(q[2]), 4),
        "mean": round(float(ms.mean()), 4),
    }


@contextlib.contextmanager
def timed(times: dict[str, float], stage: str) -> Iterator[None]:
    t0 = time.perf_counter()
    try:
        yield
    finally:
        times[stage] = times.get(stage, 0.0) + time.perf_counter() - t0


# --- what the components counted -------------------------------------------------------------


def usage_snapshot(rt: Any) -> dict[str, float]:
    """The counters of an arm's components now (the partition records the difference)."""
    enc, rer, gen = rt.encoder, rt.reranker, rt.generator
    out = {
        "emb_texts": float(getattr(enc, "forward_texts", 0)),
        "emb_tokens": float(getattr(enc, "forward_tokens", 0)),
        "emb_usage_tokens": float(getattr(enc, "usage_tokens", 0)),
        "emb_usage_texts": float(getattr(enc, "usage_texts", 0)),
        "emb_counted_tokens": float(getattr(enc, "counted_tokens", 0)),
        "emb_requests": float(getattr(enc, "requests", 0)),
        "emb_batches": float(getattr(enc, "forward_batches", 0)),
        "emb_seconds": float(getattr(enc, "forward_seconds", getattr(enc, "request_seconds", 0.0)) or 0.0),
        "rerank_requests": float(getattr(rer, "requests", 0)),
        "rerank_pairs": float(getattr(rer, "pairs", 0)),
    }
    for key, value in (getattr(gen, "usage", None) or {}).items():
        out[f"gen_{key}"] = float(value)
    return out


def usage_delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {k: after.get(k, 0.0) - before.get(k, 0.0) for k in after}


def model_name(component: Any, attribute: str = "model") -> str | None:
    """A component's model as a name (a loaded model object is not one: then its configured name)."""
    value = getattr(component, attribute, None)
    if isinstance(value, str):
        return value
    for alt in ("model_name", "name", "path"):
        other = getattr(component, alt, None)
        if isinstance(other, str):
            return other
    return None


def is_endpoint(component: Any) -> bool:
    return getattr(component, "kind", "") in ("endpoint", "openai-compatible-endpoint")


def embedding_usage(rt: Any, delta: dict[str, float], texts: int) -> dict[str, Any]:
    """What the arm's embedding stage did in this partition; billed tokens from ``usage`` when the
    server reported them for every text it embedded, else the local model's (or tokenizer's) count."""
    enc = rt.encoder
    encoded = int(delta["emb_texts"])
    billed = is_endpoint(enc) and encoded and int(delta["emb_usage_texts"]) == encoded
    if billed:
        tokens, source = int(delta["emb_usage_tokens"]), "usage"
    elif is_endpoint(enc):
        tokens = int(delta["emb_counted_tokens"] + delta["emb_usage_tokens"])
        source = "tokenizer" if not delta["emb_usage_texts"] else "usage and tokenizer"
    else:
        tokens, source = int(delta["emb_tokens"]), "tokenizer"
    return {
        "kind": getattr(enc, "kind", "sentence-transformers"),
        "model": model_name(enc, "name"),
        "texts": texts,
        "encoded": encoded,
        "cache_hits": max(0, texts - encoded),
        "tokens": tokens,
        "token_source": source,
        "requests": int(delta["emb_requests"]),
        "forward_batches": int(delta["emb_batches"]),
        "seconds": round(delta["emb_seconds"], 4),
    }


def generator_usage(rt: Any, delta: dict[str, float], results: Sequence[Any]) -> dict[str, Any]:
    """The generator's requests and tokens: the server's ``usage`` for an endpoint that reports it,
    else the prompt tokens ledgerscope counted (the records' ``prompt_tokens``)."""
    gen = rt.generator
    prompt = sum(r.prompt_tokens or 0 for r in results)
    completion = sum(r.completion_tokens or 0 for r in results)
    if is_endpoint(gen):
        requests = int(delta.get("gen_requests", 0))
        source = "usage" if not delta.get("gen_without_usage") else "usage (partly missing)"
        return {
            "kind": gen.kind,
            "model": model_name(gen),
            "requests": requests,
            "prompt_tokens": int(delta.get("gen_prompt_tokens", 0)),
            "completion_tokens": int(delta.get("gen_completion_tokens", 0)),
            "token_source": source,
            "tokenize_requests": int(delta.get("gen_tokenize_requests", 0)),
        }
    return {
        "kind": getattr(gen, "kind", type(gen).__name__),
        "model": model_name(gen),
        "requests": 0,
        "calls": len(results),
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "token_source": "tokenizer",
    }


# --- stored bytes ----------------------------------------------------------------------------


def hnsw_bytes(n: int, dim: int, m: int) -> int:
    """hnswlib's memory for ``n`` vectors (its layout: level 0 holds 2M links, a vector and a label
    per element; upper levels, reached by 1/ln(M) of the elements per level, M links each)."""
    if n <= 0:
        return 0
    level0 = n * ((2 * m) * 4 + 4 + dim * 4 + 8)
    upper = n * (1.0 / max(1.0, m - 1)) * (m * 4 + 4)  # geometric levels with mult = 1/ln(M)
    return int(level0 + upper)


def bm25_bytes(search: Any) -> int | None:
    index = getattr(search, "index", None)
    matrix = getattr(index, "matrix", None)
    if matrix is None:
        return None
    vocab = getattr(index, "vocab", {})
    return int(
        matrix.data.nbytes
        + matrix.indices.nbytes
        + matrix.indptr.nbytes
        + index.idf.nbytes
        + sum(len(t) + 8 for t in vocab)
    )


def stored_bytes(rt: Any, index: Any) -> dict[str, int | None]:
    """Bytes the production index holds: pooled vectors (float32), the HNSW graph, BM25's matrix."""
    n = len(index.units)
    dim = int(getattr(rt.encoder, "dim", 0) or 0)
    ann = getattr(index.dense_ann, "index", None)
    m = int(rt.config.retrieval.get("hnsw", {}).get("M", 16))
    return {
        "vectors": n * dim * 4 if dim else None,
        "hnsw": hnsw_bytes(n, dim, m) if dim and type(ann).__name__ == "HnswIndex" else None,
        "bm25": bm25_bytes(index.bm25),
    }


def index_record(rt: Any, index: Any, seconds: dict[str, float]) -> dict[str, Any]:
    """The one-time side: units, unique source tokens, unit tokens, the overlap factor, bytes."""
    unit_tokens = sum(u.token_end - u.token_start for u in index.units)
    source_tokens = sum(b.n_tokens for b in index.boundaries)
    return {
        "units": len(index.units),
        "documents": len(index.boundaries),
        "unique_source_tokens": source_tokens,
        "unit_tokens": unit_tokens,
        "repeated_source_tokens": max(0, unit_tokens - source_tokens),
        "overlap_factor": round(unit_tokens / source_tokens, 4) if source_tokens else None,
        "bytes": stored_bytes(rt, index),
        "seconds": {k: round(v, 4) for k, v in seconds.items()},
    }


class StageMarks:
    """The ``on_stage`` callback of :func:`.cascade.build_phase`, timing the steps between calls."""

    def __init__(self, then: Any):
        self.then, self.last, self.seconds = then, time.perf_counter(), {}

    def __call__(self, stage: str) -> None:
        now = time.perf_counter()
        self.seconds[stage] = self.seconds.get(stage, 0.0) + now - self.last
        self.last = now
        self.then(stage)


def partition_resources(
    rt: Any,
    index: Any,
    fixtures: Sequence[Any],
    laps: Laps,
    delta: dict[str, float],
    build_seconds: dict[str, float],
) -> dict[str, Any]:
    """The partition's resource record (see the module docstring)."""
    t0 = time.perf_counter()
    questions = [f.question for f in fixtures]
    texts = len({u.text for u in index.units} | set(questions))
    n = len(fixtures)
    gen = generator_usage(rt, delta, laps.results)
    q_tokens = sum(rt.chunk_counter.count(q) for q in questions)
    reranks = is_endpoint(rt.reranker)
    per_query = {
        "embedding_tokens": round(q_tokens / n, 4) if n else None,
        "rerank_pairs": round(sum(laps.pairs) / n, 4) if n else None,
        "rerank_requests": (sum(1 for p in laps.pairs if p) / n if n and reranks else 0.0),
        "generator_requests": 1.0 if is_endpoint(rt.generator) else 0.0,
        "prompt_tokens": round(sum(r.prompt_tokens or 0 for r in laps.results) / n, 4) if n else None,
        "completion_tokens": round(sum(r.completion_tokens or 0 for r in laps.results) / n, 4) if n else None,
    }
    out = {
        "format": FORMAT,
        "questions": n,
        "index": index_record(rt, index, build_seconds),
        "embedding": embedding_usage(rt, delta, texts),
        "rerank": {
            "kind": getattr(rt.reranker, "kind", None) or type(rt.reranker).__name__,
            "model": model_name(rt.reranker) or rt.config.rerank.get("model"),
            "pairs": sum(laps.pairs),
            "requests": int(delta["rerank_requests"]),
            "sent_pairs": int(delta["rerank_pairs"]),
        },
        "generator": gen,
        "per_query": per_query,
        "latency_ms": laps.quantiles(),
        "batched": list(BATCHED),
        "latency_per_query_ms": laps.per_query(),
    }
    out["recording_seconds"] = round(laps.own + time.perf_counter() - t0, 6)
    return out


def write_oracle_resources(path: Path, rt: Any, delta: dict[str, float], questions: int) -> None:
    """What the arm's oracle run sent (one generation per answerable question), at ``path`` (the
    layout's place for it): part of what the sweep cost, not of what a query costs."""
    from ledgerscope.common.atomic import atomic_write_text

    record = {
        "format": FORMAT,
        "questions": questions,
        "generator": generator_usage(rt, delta, []),
        "embedding": {"encoded": int(delta["emb_texts"]), "requests": int(delta["emb_requests"])},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(record, indent=2, sort_keys=True))
