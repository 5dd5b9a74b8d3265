"""Values computed from texts' token vectors, kept exactly as long as those vectors are in use.

NLI-style fixtures ask one hypothesis of every document, so the reranker and the reader meet the
same (question, unit text) pair many times per phase. A memo keyed by the texts alone would be
wrong once an encoder evicts and re-encodes a text (a new batch could round differently), and it
would grow with every partition of a sweep. So each entry holds weak references to the arrays it
was computed from: it counts only while they are the very arrays the caller holds now, and it
leaves the memo when one of them is freed (the sweep drops a partition's vectors after writing it,
so the memos hold one partition's pairs, not the whole sweep's).
"""

from __future__ import annotations

import weakref
from collections.abc import Hashable, Sequence
from typing import Any

#: entries kept before the memo starts over (a bound on memory, not a tuning knob)
DEFAULT_LIMIT = 200_000


class ArrayMemo:
    """``key -> value``, valid while the arrays it came from are alive and the same objects."""

    def __init__(self, limit: int = DEFAULT_LIMIT) -> None:
        self.limit = limit
        self._entries: dict[Hashable, tuple[tuple[weakref.ref, ...], Any, object]] = {}

    def get(self, key: Hashable, arrays: Sequence[object]) -> Any | None:
        """The value for ``key``, or None when absent or computed from other arrays."""
        hit = self._entries.get(key)
        if hit is None or any(ref() is not arr for ref, arr in zip(hit[0], arrays, strict=True)):
            return None
        return hit[1]

    def put(self, key: Hashable, arrays: Sequence[object], value: Any) -> None:
        if len(self._entries) >= self.limit:
            self._entries.clear()
        token = object()  # which entry a callback may remove: a newer one under the key stays
        entries = self._entries  # the callback holds the dict, never the entry (no cycle)

        def gone(_ref: weakref.ref, key: Hashable = key, token: object = token) -> None:
            held = entries.get(key)
            if held is not None and held[2] is token:
                del entries[key]

        entries[key] = (tuple(weakref.ref(a, gone) for a in arrays), value, token)

    def __len__(self) -> int:
        return len(self._entries)


class PairMemo(ArrayMemo):
    """``(text a, text b) -> value`` from the two texts' arrays."""

    def get(self, a: str, b: str, a_arr: object, b_arr: object) -> Any | None:  # type: ignore[override]
        return super().get((a, b), (a_arr, b_arr))

    def put(self, a: str, b: str, a_arr: object, b_arr: object, value: Any) -> None:  # type: ignore[override]
        super().put((a, b), (a_arr, b_arr), value)
