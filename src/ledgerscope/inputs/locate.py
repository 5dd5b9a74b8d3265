"""Finding a piece of text in its source: the one locator every chunk-offset and quote check uses.

Every place where ledgerscope is handed text it must place in an immutable source uses these
functions: trace ingestion (:mod:`ledgerscope.ingest.derive.resolve`, chunks a running pipeline recorded),
the external chunkers of a sweep (:mod:`ledgerscope.pipeline.chunking.external`, units a LangChain,
LlamaIndex or chonkie splitter returned) and fixture quotes
(:func:`ledgerscope.inputs.coords.resolve_quote`). The rules, shared:

* candidates are the text's exact occurrences; only when there is none, its occurrences after the
  caller's declared normalisations (:mod:`.normalise`), tried in their fixed order, the first that
  finds any winning; each mapped back to the exact source interval from the first to the last
  character matched (whitespace at either end of the needle is not part of a normalised match);
* a ``prefix`` / ``suffix`` keeps only the occurrences it surrounds (compared after the same
  normalisation for normalised candidates);
* **one tie rule**: of several candidates the nearest to an expected position wins; two equally
  near are a tie, which the caller reports as ambiguous (it never picks one, the earlier included);
  without an expected position several candidates are ambiguous;
* text with *added* parts (a header, a situating sentence, an embedding prefix) around a source
  slice is placed by :func:`align`: its longest part that occurs in the source (exactly, or at the
  first normalisation level that finds one), shrunk to begin after whitespace and end before it
  where text is added there (an added text's last letters may match the source), which must be
  unique, at least :data:`MIN_ALIGNED` characters and a fifth of the text; every other part is a
  source slice when it occurs exactly
  once in the source (a chunk joined from several slices), else generated context.

Pure functions over strings; no knowledge of chunks, corpora or ledgers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ledgerscope.inputs.normalise import WHITESPACE, Mapped, at_level, compose, content_levels, identity
from ledgerscope.inputs.normalise import whitespace as _whitespace

#: how a candidate was found: exactly, or the normalisation level's name
EXACT = "exact"
__all__ = [
    "EXACT",
    "WHITESPACE",
    "Aligned",
    "Haystack",
    "align",
    "candidates",
    "nearest",
    "normalise",
    "occurrences",
]
#: the shortest source-aligned part :func:`align` accepts (characters, after normalisation)
MIN_ALIGNED = 40
#: probe length and the most occurrences of a probe :func:`align` follows (a common phrase is skipped)
_PROBE = 16
_MAX_HITS = 16


def normalise(text: str) -> tuple[str, list[int]]:
    """Whitespace runs as one space, ends stripped; and each kept character's index in ``text``
    (a space: the last character of its run)."""
    m = _whitespace(text)
    if m.starts is None or m.ends is None:  # nothing to collapse: every character stands for itself
        return text, list(range(len(text)))
    return m.text, [e - 1 if ch == " " else s for ch, s, e in zip(m.text, m.starts, m.ends, strict=True)]


def occurrences(haystack: str, needle: str) -> list[int]:
    """Every start of ``needle`` in ``haystack`` (overlapping occurrences included)."""
    hits, pos = [], haystack.find(needle)
    while pos != -1:
        hits.append(pos)
        pos = haystack.find(needle, pos + 1)
    return hits


@dataclass
class Haystack:
    """A text to search, with each normalisation level computed once, on first need; ``plugin``: a
    user's normalisation for the level ``"plugin"``."""

    text: str
    plugin: Callable[[str], Mapped] | None = None
    _levels: dict[str, Mapped] = field(default_factory=dict)

    def at(self, level: str) -> Mapped:
        """The text at ``level``; a level whose steps change nothing here is the very object of the
        level before (so a caller can skip it)."""
        if level == EXACT:
            return identity(self.text)
        if not self._levels:
            self._levels = levels_of(self.text, self.plugin)
        return self._levels[level]

    @property
    def norm(self) -> tuple[str, list[int]]:
        return normalise(self.text)


def levels_of(text: str, plugin: Callable[[str], Mapped] | None = None) -> dict[str, Mapped]:
    """``text`` at every level, each computed once from the one before; a level whose content steps
    change nothing is the previous level's object."""
    out: dict[str, Mapped] = {}
    prev_content = prev = None
    for level, content in content_levels(text, plugin):
        if content is not prev_content or prev is None:
            prev = compose(content, _whitespace(content.text))
            prev_content = content
        out[level] = prev
    return out


def _exact(text: str, needle: str, prefix: str, suffix: str) -> list[tuple[int, int]]:
    n = len(needle)
    return [
        (h, h + n)
        for h in occurrences(text, needle)
        if (not prefix or text[max(0, h - len(prefix)) : h] == prefix)
        and (not suffix or text[h + n : h + n + len(suffix)] == suffix)
    ]


def _normalised(doc: Haystack, level: str, wanted: str, prefix: str, suffix: str) -> list[tuple[int, int]]:
    m = doc.at(level)
    if not wanted:
        return []
    pre = at_level(prefix, level, doc.plugin).text if prefix else ""
    suf = at_level(suffix, level, doc.plugin).text if suffix else ""
    norm = m.text
    out = []
    for h in occurrences(norm, wanted):
        e = h + len(wanted)
        if pre and not norm[:h].rstrip().endswith(pre):
            continue
        if suf and not norm[e:].lstrip().startswith(suf):
            continue
        out.append(m.source(h, e))
    return out


def candidates(
    doc: Haystack, needle: str, prefix: str = "", suffix: str = "", levels: Sequence[str] = (WHITESPACE,)
) -> tuple[list[tuple[int, int]], str]:
    """Occurrences of ``needle`` in ``doc`` as (start, end) intervals, and how they were found
    (:data:`EXACT`, else the first of ``levels`` that finds any; with none found, the last tried)."""
    if not needle:
        return [], EXACT
    if needle in doc.text:
        return _exact(doc.text, needle, prefix, suffix), EXACT
    how = EXACT
    wanted = levels_of(needle, doc.plugin)
    seen: tuple | None = None
    for level in levels:
        how = level
        key = (doc.at(level), wanted[level].text)
        if seen is not None and key[0] is seen[0] and key[1] == seen[1]:
            continue  # nothing this level undoes here: the level before's answer stands
        seen = key
        found = _normalised(doc, level, wanted[level].text, prefix, suffix)
        if found:
            return found, level
    return [], how


def nearest(found: list[tuple[int, int]], hint: int) -> tuple[tuple[int, int] | None, bool]:
    """The candidate starting nearest ``hint``, and whether the two nearest are equally near (a tie
    the caller must report as ambiguous, never resolve). ``(None, False)`` when none."""
    if not found:
        return None, False
    ranked = sorted(found, key=lambda se: (abs(se[0] - hint), se[0]))
    tie = len(ranked) > 1 and abs(ranked[0][0] - hint) == abs(ranked[1][0] - hint)
    return ranked[0], tie


@dataclass(frozen=True)
class Aligned:
    """:func:`align`'s answer: the source interval(s) of the longest aligned part (several: the same
    part occurs more than once), the level that found it, and the needle's other parts in order as
    ``(position, text, source interval or None)``; ``position`` is ``before`` or ``after``."""

    found: list[tuple[int, int]]
    how: str
    parts: list[tuple[str, str, tuple[int, int] | None]]


def _segments(d: str, n: str) -> dict[tuple[int, int], set[int]]:
    """Maximal common segments of ``n`` and ``d`` grown from probes: ``(n_start, n_end) -> d starts``."""
    out: dict[tuple[int, int], set[int]] = {}
    if len(n) < _PROBE:
        return out
    step = _PROBE // 2
    starts = sorted({*range(0, len(n) - _PROBE + 1, step), len(n) - _PROBE})
    covered_to = -1
    for q in starts:
        if q + _PROBE <= covered_to:
            continue  # inside a segment already grown
        hits = occurrences(d, n[q : q + _PROBE])
        if not hits or len(hits) > _MAX_HITS:
            continue
        for p in hits:
            a = 0
            while q - a > 0 and p - a > 0 and n[q - a - 1] == d[p - a - 1]:
                a += 1
            b = _PROBE
            while q + b < len(n) and p + b < len(d) and n[q + b] == d[p + b]:
                b += 1
            out.setdefault((q - a, q + b), set()).add(p - a)
            covered_to = max(covered_to, q + b)
    return out


def align(doc: Haystack, needle: str, levels: Sequence[str] = (WHITESPACE,)) -> Aligned | None:
    """The longest part of ``needle`` that occurs in ``doc`` (rules in the module docstring), or None
    when no part long enough occurs."""
    wanted = levels_of(needle, doc.plugin)
    seen: tuple | None = None
    for level in (EXACT, *levels):
        d = doc.at(level)
        n = identity(needle) if level == EXACT else wanted[level]
        if seen is not None and d is seen[0] and n.text == seen[1]:
            continue  # nothing this level undoes here
        seen = (d, n.text)
        segs = _segments(d.text, n.text)
        if not segs:
            continue
        (ns, ne), _ = max(segs.items(), key=lambda kv: (kv[0][1] - kv[0][0], -kv[0][0]))
        ns, ne = _on_word_edges(n.text, ns, ne)
        if ne - ns < max(MIN_ALIGNED, len(n.text.strip()) // 5):
            continue
        part = n.text[ns:ne]
        found = [d.source(h, h + len(part)) for h in occurrences(d.text, part)]
        a, b = n.source(ns, ne)
        parts = [
            (pos, text, _slice_of(doc, text, level))
            for pos, text in (("before", needle[:a]), ("after", needle[b:]))
            if text.strip()
        ]
        return Aligned(found, level, parts)
    return None


def _on_word_edges(n: str, ns: int, ne: int) -> tuple[int, int]:
    """``[ns, ne)`` shrunk to begin after whitespace (or at the start of ``n``) and end before it (or at
    the end), whitespace at both ends dropped: an added text's last letters that happen to match the
    source before the slice are not the slice."""
    while 0 < ns < ne and not n[ns - 1].isspace():
        ns += 1
    while ns < ne < len(n) and not n[ne].isspace():
        ne -= 1
    while ns < ne and n[ns].isspace():
        ns += 1
    while ne > ns and n[ne - 1].isspace():
        ne -= 1
    return ns, ne


def _slice_of(doc: Haystack, text: str, level: str) -> tuple[int, int] | None:
    """The source interval of an added part when it occurs exactly once in the source (a joined
    slice), else None (generated text)."""
    found, _ = candidates(doc, text.strip(), levels=() if level == EXACT else (level,))
    return found[0] if len(found) == 1 else None
