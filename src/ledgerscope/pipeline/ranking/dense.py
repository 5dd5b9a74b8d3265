"""Dense retrieval: exact (numpy inner product) and approximate (hnswlib HNSW).

Both run on every query and both are recorded: the diagnosis tree needs to
tell "exact dense hits but ANN misses" (step 4) apart from representation
misses (step 3).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

import numpy as np

from ledgerscope.pipeline.contracts.stages import Embedder, Ranked, StageFailure
from ledgerscope.pipeline.contracts.units import Unit
from ledgerscope.pipeline.ranking.lexical import top_k


class ExactIndex:
    def __init__(self, vectors: np.ndarray):
        self.vectors = np.ascontiguousarray(vectors, dtype=np.float32)

    def search_many(self, queries: np.ndarray, k: int) -> list[tuple[np.ndarray, np.ndarray]]:
        if len(self.vectors) == 0:
            return [(np.zeros(0, dtype=np.int64), np.zeros(0)) for _ in range(len(queries))]
        sims = queries.astype(np.float32) @ self.vectors.T
        return [top_k(row, k) for row in sims]


class HnswIndex:
    """hnswlib inner-product index, built single-threaded with a fixed seed (reproducible)."""

    def __init__(
        self, vectors: np.ndarray, M: int = 16, ef_construction: int = 200, ef_search: int = 64, seed: int = 0
    ):
        import hnswlib

        self.n, dim = vectors.shape
        self.index = hnswlib.Index(space="ip", dim=dim)
        self.index.init_index(
            max_elements=max(1, self.n), ef_construction=ef_construction, M=M, random_seed=seed
        )
        if self.n:
            self.index.add_items(
                np.ascontiguousarray(vectors, dtype=np.float32), np.arange(self.n), num_threads=1
            )
        self.ef_search = ef_search

    def search_many(self, queries: np.ndarray, k: int) -> list[tuple[np.ndarray, np.ndarray]]:
        k = min(k, self.n)
        if k == 0:
            return [(np.zeros(0, dtype=np.int64), np.zeros(0)) for _ in range(len(queries))]
        self.index.set_ef(max(self.ef_search, k))
        labels, dists = self.index.knn_query(
            np.ascontiguousarray(queries, dtype=np.float32), k=k, num_threads=1
        )
        return [
            (labels[i].astype(np.int64), (1.0 - dists[i]).astype(np.float64)) for i in range(len(queries))
        ]


VectorIndex = ExactIndex | HnswIndex


@dataclass(frozen=True)
class DenseRetriever:
    """A dense retriever slot: the embedder's unit vectors in a vector index, ``top_n`` per question."""

    embedder: Embedder
    top_n: int
    make_index: Callable[[np.ndarray], VectorIndex]

    def build_index(self, units: Sequence[Unit]) -> DenseSearch:
        vectors = self.embedder.vectors([u.text for u in units])
        return DenseSearch(self.embedder, self.make_index(vectors), self.top_n)


@dataclass(frozen=True)
class DenseSearch:
    embedder: Embedder
    index: VectorIndex
    top_n: int

    def search(self, questions: Sequence[str]) -> list[Ranked]:
        """One list per question; a question without a vector (:class:`StageFailure` from an
        embedding endpoint) gets an empty list carrying the failure, the others are searched."""
        try:
            return self._search(self.embedder.vectors(list(questions)))
        except StageFailure as exc:
            failed = getattr(exc, "failed", None) or set(questions)
            ok = sorted({q for q in questions if q not in failed})
            found = dict(zip(ok, self._search(self.embedder.vectors(ok)), strict=True)) if ok else {}
            return [found.get(q) or Ranked([], [], exc.describe()) for q in questions]

    def _search(self, vectors: np.ndarray) -> list[Ranked]:
        hits = self.index.search_many(vectors, self.top_n)
        return [Ranked(idx.tolist(), scores.tolist()) for idx, scores in hits]


def exact_retriever(embedder: Embedder, top_n: int) -> DenseRetriever:
    """Exhaustive inner product: the reference the ANN index is diagnosed against."""
    return DenseRetriever(embedder, top_n, ExactIndex)


def hnsw_retriever(
    embedder: Embedder,
    top_n: int,
    M: int = 16,
    ef_construction: int = 200,
    ef_search: int = 64,
    seed: int = 0,
) -> DenseRetriever:
    """The production dense retriever (hnswlib, seeded, single-threaded build)."""
    make = partial(HnswIndex, M=M, ef_construction=ef_construction, ef_search=ef_search, seed=seed)
    return DenseRetriever(embedder, top_n, make)
