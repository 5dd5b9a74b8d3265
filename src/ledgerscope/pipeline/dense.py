"""Dense retrieval: exact (numpy inner product) and approximate (hnswlib HNSW).

Both run on every query and both are recorded: the diagnosis tree needs to
tell "exact dense hits but ANN misses" (step 4) apart from representation
misses (step 3).
"""

from __future__ import annotations

import numpy as np

from ledgerscope.pipeline.lexical import top_k


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

    def __init__(self, vectors: np.ndarray, M: int = 16, ef_construction: int = 200,
                 ef_search: int = 64, seed: int = 0):
        import hnswlib

        self.n, dim = vectors.shape
        self.index = hnswlib.Index(space="ip", dim=dim)
        self.index.init_index(max_elements=max(1, self.n), ef_construction=ef_construction, M=M,
                              random_seed=seed)
        if self.n:
            self.index.add_items(np.ascontiguousarray(vectors, dtype=np.float32),
                                 np.arange(self.n), num_threads=1)
        self.ef_search = ef_search

    def search_many(self, queries: np.ndarray, k: int) -> list[tuple[np.ndarray, np.ndarray]]:
        k = min(k, self.n)
        if k == 0:
            return [(np.zeros(0, dtype=np.int64), np.zeros(0)) for _ in range(len(queries))]
        self.index.set_ef(max(self.ef_search, k))
        labels, dists = self.index.knn_query(np.ascontiguousarray(queries, dtype=np.float32), k=k,
                                             num_threads=1)
        return [(labels[i].astype(np.int64), (1.0 - dists[i]).astype(np.float64))
                for i in range(len(queries))]
