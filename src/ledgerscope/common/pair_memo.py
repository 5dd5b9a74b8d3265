"""Values computed from two texts' token vectors, kept while those vectors are still the ones in use.

NLI-style fixtures ask one hypothesis of every document, so the reranker and the reader meet the
same (question, unit text) pair many times per phase. A memo keyed by the two texts alone would be
wrong once an encoder evicts and re-encodes a text (a new batch can round differently), so each
entry holds weak references to the two arrays it was computed from and counts only while both are
the very arrays the caller holds now.
"""

from __future__ import annotations

import weakref
from typing import Any

#: entries kept before the memo starts over (a bound on memory, not a tuning knob)
DEFAULT_LIMIT = 200_000


class PairMemo:
    """``(text a, text b) -> value``, valid while the arrays it came from are alive and the same."""

    def __init__(self, limit: int = DEFAULT_LIMIT) -> None:
        self.limit = limit
        self._entries: dict[tuple[str, str], tuple[weakref.ref, weakref.ref, Any]] = {}

    def get(self, a: str, b: str, a_arr: object, b_arr: object) -> Any | None:
        """The value for this pair, or None when absent or computed from other arrays."""
        hit = self._entries.get((a, b))
        if hit is None or hit[0]() is not a_arr or hit[1]() is not b_arr:
            return None
        return hit[2]

    def put(self, a: str, b: str, a_arr: object, b_arr: object, value: Any) -> None:
        if len(self._entries) >= self.limit:
            self._entries.clear()
        self._entries[(a, b)] = (weakref.ref(a_arr), weakref.ref(b_arr), value)

    def __len__(self) -> int:
        return len(self._entries)
