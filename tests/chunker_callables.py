"""Python-callable chunkers for tests/test_external_chunkers.py (``chunker.kind = "python"``)."""

from __future__ import annotations

import re


def paragraphs(text: str) -> list[tuple[int, int]]:
    """One interval per paragraph (blank-line separated), surrounding whitespace excluded."""
    return [(m.start(), m.end()) for m in re.finditer(r"\S(?:.*?\S)?(?=\s*(?:\n\s*\n|\Z))", text, re.S)]


def out_of_range(text: str) -> list[tuple[int, int]]:
    return [(0, len(text) + 5)]


def overlapping(text: str) -> list[tuple[int, int]]:
    n = len(text)
    return [(0, n // 2 + 1), (n // 2, n)] if n >= 4 else [(0, n)]


not_callable = 42
