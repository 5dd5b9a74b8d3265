"""A small, deterministic sentence splitter over code point offsets.

Used by the structural chunker, the extractive reader and the SQuAD importer's sentence
support rule (so the importer's support sentences are the reader's sentences). It splits after
``.``, ``!``, ``?`` (and their closing quotes/brackets) when whitespace
follows, and at blank lines and bullet/heading lines, and never after common
abbreviations, between digits (``3.5``) or after a numbered-list marker (``1.``
at the start of a line). Every returned interval is
stripped of surrounding whitespace; together they hold all non-whitespace text.
"""

from __future__ import annotations

import re

_ABBREV = {
    "e.g",
    "i.e",
    "etc",
    "vs",
    "mr",
    "mrs",
    "ms",
    "dr",
    "no",
    "fig",
    "sec",
    "art",
    "inc",
    "ltd",
    "co",
    "corp",
    "st",
    "approx",
    "cf",
    "al",
    "u.s",
    "u.k",
    "p",
    "pp",
    "para",
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
            word = re.search(r"([\w.]+)$", text[pos : m.start()])
            if word and word.group(1).lower().rstrip(".") in _ABBREV and m.group(0) == ".":
                continue
            if m.group(0) == "." and _list_marker(text, pos, m.start()):
                continue
        _append(text, pos, cut, out)
        pos = cut
    _append(text, pos, end, out)
    return out


def _list_marker(text: str, pos: int, dot: int) -> bool:
    """Whether the ``.`` at ``dot`` ends a numbered-list marker (``1.`` at the start of a line)."""
    i = dot
    while i > pos and text[i - 1].isdecimal():
        i -= 1
    if i == dot:
        return False
    while i > pos and text[i - 1] in " \t":
        i -= 1
    return i == 0 or text[i - 1] in "\r\n"


def _append(text: str, s: int, e: int, out: list[tuple[int, int]]) -> None:
    while s < e and text[s].isspace():
        s += 1
    while e > s and text[e - 1].isspace():
        e -= 1
    if s < e:
        out.append((s, e))
