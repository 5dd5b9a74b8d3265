"""Fusion of the production retrievers' ranked lists (RRF, CombSUM, CombMNZ)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from operator import itemgetter


def fuse(
    runs: Mapping[str, Sequence[tuple[int, float]]],
    method: str = "rrf",
    k: int = 60,
    weights: Mapping[str, float] | None = None,
) -> list[tuple[int, float]]:
    """Fuse ``{retriever: [(unit index, score), ...best first]}`` into one ranked list.

    RRF: sum over runs of w / (k + rank), ranks from 1. CombSUM: sum of
    min-max-normalised scores (per run); CombMNZ: CombSUM times the number of
    runs that returned the unit. Ties break by unit index.
    """
    weights = weights or {}
    total: dict[int, float] = {}
    hits: dict[int, int] = {}
    for name, run in runs.items():
        w = float(weights.get(name, 1.0))
        if method == "rrf":
            for rank, (idx, _) in enumerate(run, start=1):
                total[idx] = total.get(idx, 0.0) + w / (k + rank)
                hits[idx] = hits.get(idx, 0) + 1
            continue
        scores = [s for _, s in run]
        lo, hi = (min(scores), max(scores)) if scores else (0.0, 1.0)
        span = (hi - lo) or 1.0
        for idx, s in run:
            total[idx] = total.get(idx, 0.0) + w * (s - lo) / span
            hits[idx] = hits.get(idx, 0) + 1
    if method == "combmnz":
        total = {i: v * hits[i] for i, v in total.items()}
    if any(v != v for v in total.values()):  # NaN: keep the tuple order it always had
        return sorted(total.items(), key=lambda kv: (-kv[1], kv[0]))
    # score descending, ties by unit index: a stable sort by score (reverse keeps stability)
    # over the items in index order, without a key tuple per item
    ranked = sorted(total.items())
    ranked.sort(key=itemgetter(1), reverse=True)
    return ranked
