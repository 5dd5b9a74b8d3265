"""Exact BM25 over unit text, as a sparse term-by-unit weight matrix.

Scoring a query is one sparse column slice and a sum, so every unit is
scored exhaustively (this is the *exact* lexical retriever of the diagnosis
tree). Analyzer: Unicode word characters, casefolded, English stopwords
removed, no stemming (kept transparent on purpose).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ledgerscope.pipeline.contracts.stages import Ranked
from ledgerscope.pipeline.contracts.units import Unit

_WORD = re.compile(r"\w+", re.UNICODE)
STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "been",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "for",
        "from",
        "had",
        "has",
        "have",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "may",
        "might",
        "must",
        "not",
        "of",
        "on",
        "or",
        "our",
        "shall",
        "should",
        "so",
        "such",
        "than",
        "that",
        "the",
        "their",
        "them",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "to",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "while",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
    ]
)


def analyze(text: str) -> list[str]:
    return [t for t in _WORD.findall(text.casefold()) if t not in STOPWORDS]


class BM25Index:
    """Okapi BM25 (k1, b) over a fixed list of texts."""

    def __init__(self, texts: list[str], k1: float = 1.5, b: float = 0.75):
        from scipy import sparse

        self.k1, self.b = k1, b
        vocab: dict[str, int] = {}
        rows, cols, vals = [], [], []
        lengths = np.zeros(len(texts), dtype=np.float64)
        for i, text in enumerate(texts):
            counts: dict[int, int] = {}
            terms = analyze(text)
            lengths[i] = len(terms)
            for t in terms:
                j = vocab.setdefault(t, len(vocab))
                counts[j] = counts.get(j, 0) + 1
            rows.extend([i] * len(counts))
            cols.extend(counts.keys())
            vals.extend(counts.values())
        self.vocab = vocab
        n = len(texts)
        tf = sparse.csc_matrix(
            (np.asarray(vals, dtype=np.float64), (rows, cols)), shape=(n, max(1, len(vocab)))
        )
        df = np.diff(tf.indptr).astype(np.float64)
        self.idf = np.log(1.0 + (n - df + 0.5) / (df + 0.5))
        avgdl = lengths.mean() if n else 1.0
        norm = k1 * (1.0 - b + b * lengths / (avgdl or 1.0))
        weights = tf.tocoo()
        w = weights.data * (k1 + 1.0) / (weights.data + norm[weights.row]) * self.idf[weights.col]
        self.matrix = sparse.csc_matrix((w, (weights.row, weights.col)), shape=tf.shape)
        self.n = n

    def scores(self, query: str) -> np.ndarray:
        ids = [self.vocab[t] for t in analyze(query) if t in self.vocab]
        if not ids or self.n == 0:
            return np.zeros(self.n)
        # repeated query terms count once per occurrence, as in the BM25 sum over q
        return np.asarray(self.matrix[:, ids].sum(axis=1)).ravel()

    def search(self, query: str, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-k unit indices and scores (ties broken by index), zero scores dropped."""
        s = self.scores(query)
        return top_k(s, k, drop_nonpositive=True)


@dataclass(frozen=True)
class BM25Retriever:
    """The lexical retriever slot: exact BM25 over unit text, the ``top_n`` best per question."""

    top_n: int
    k1: float = 1.5
    b: float = 0.75

    def build_index(self, units: Sequence[Unit]) -> BM25Search:
        return BM25Search(BM25Index([u.text for u in units], self.k1, self.b), self.top_n)


@dataclass(frozen=True)
class BM25Search:
    index: BM25Index
    top_n: int

    def search(self, questions: Sequence[str]) -> list[Ranked]:
        """One ranked list per question; a question text asked again (one hypothesis of many
        documents) is scored once: BM25 of a text is the same every time."""
        found: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        out = []
        for question in questions:
            hit = found.get(question)
            if hit is None:
                hit = found[question] = self.index.search(question, self.top_n)
            idx, scores = hit
            out.append(Ranked(idx.tolist(), scores.tolist()))
        return out


def top_k(scores: np.ndarray, k: int, drop_nonpositive: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Indices of the k best scores, best first; ties by lower index (deterministic)."""
    n = len(scores)
    if n == 0 or k <= 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    if k < n // 4 and not np.isnan(scores).any():
        # only the units scoring at least the k-th best can be among the k best (ties included)
        cut = np.partition(scores, n - k)[n - k]
        pool = np.flatnonzero(scores >= cut)
        order = pool[np.lexsort((pool, -scores[pool]))][:k]
    else:
        order = np.lexsort((np.arange(n), -scores))[: min(k, n)]
    if drop_nonpositive:
        order = order[scores[order] > 0]
    return order, scores[order]
