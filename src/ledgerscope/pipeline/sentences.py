"""A small, deterministic sentence splitter over code point offsets.

Used by the structural chunker and by the extractive reader. It splits after
``.``, ``!``, ``?`` (and their closing quotes/brackets) when whitespace
follows, and at blank lines and bullet/heading lines, and never after common
abbreviations or between digits (``3.5``). Every returned interval is
stripped of surrounding whitespace; together they hold all non-whitespace text.
"""

from __future__ import annotations

import re

_ABBREV = {
    "e.g", "i.e", "etc", "vs", "mr", "mrs", "ms", "dr", "no", "fig", "sec", "art", "inc", "ltd",
    "co", "corp", "st", "approx", "cf", "al", "u.s", "u.k", "p", "pp", "para",
}
_BOUNDARY = re.compile(r"[.!?…]+[\"'”’)\]]*(?=\s)|\n\s*\n|\n(?=\s*(?:[-*•#]|\d+[.)]\s))")


def split_sentences(text: str, start: int = 0, end: int | None = None) -> list[tuple[int, int]]:
    """Sentence intervals (absolute code points) inside ``text[start:end]``."""
    end = len(text) if end is None else end
    out: list[tuple[int, int]] = []
    pos = start
    for m in _BOUNDARY.finditer(text, start, end):
        cut = m.end()
        if m.group(0).startswith((".", "!", "?", "…")):
            word = re.search(r"([\w.]+)$", text[pos:m.start()])
            if word and word.group(1).lower().rstrip(".") in _ABBREV and m.group(0) == ".":
                continue
        _append(text, pos, cut, out)
        pos = cut
    _append(text, pos, end, out)
    return out


def _append(text: str, s: int, e: int, out: list[tuple[int, int]]) -> None:
    while s < e and text[s].isspace():
        s += 1
    while e > s and text[e - 1].isspace():
        e -= 1
    if s < e:
        out.append((s, e))
