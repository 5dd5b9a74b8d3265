"""Finding a piece of text in its source: the one locator every chunk-offset check uses.

Both places where ledgerscope is handed chunk text it must place in an immutable source use these
functions: trace ingestion (:mod:`ledgerscope.ingest.resolve`, chunks a running pipeline recorded)
and the external chunkers of a sweep (:mod:`ledgerscope.pipeline.chunking.external`, units a LangChain,
LlamaIndex or chonkie splitter returned). The rules, shared:

* candidates are the text's exact occurrences; only when there is none, its occurrences after
  whitespace normalisation (every run of whitespace one space, both ends stripped), each mapped
  back to the source interval from the first to the last non-whitespace character matched;
* a ``prefix`` / ``suffix`` keeps only the occurrences it surrounds (compared after the same
  normalisation for the whitespace candidates);
* of several candidates the nearest to an expected position wins; two equally near are a tie,
  which the caller reports as ambiguous (it never picks one).

Pure functions over strings; no knowledge of chunks, corpora or ledgers.
"""

from __future__ import annotations

from dataclasses import dataclass

#: how a candidate was found
EXACT = "exact"
WHITESPACE = "whitespace"


def normalise(text: str) -> tuple[str, list[int]]:
    """Whitespace runs as one space, ends stripped; and each kept character's index in ``text``."""
    out: list[str] = []
    where: list[int] = []
    pending = False
    for i, ch in enumerate(text):
        if ch.isspace():
            pending = bool(out)
            continue
        if pending:
            out.append(" ")
            where.append(i - 1)
            pending = False
        out.append(ch)
        where.append(i)
    return "".join(out), where


def occurrences(haystack: str, needle: str) -> list[int]:
    """Every start of ``needle`` in ``haystack`` (overlapping occurrences included)."""
    hits, pos = [], haystack.find(needle)
    while pos != -1:
        hits.append(pos)
        pos = haystack.find(needle, pos + 1)
    return hits


@dataclass
class Haystack:
    """A text to search, with its whitespace normalisation computed once, on first need."""

    text: str
    _norm: tuple[str, list[int]] | None = None

    @property
    def norm(self) -> tuple[str, list[int]]:
        if self._norm is None:
            self._norm = normalise(self.text)
        return self._norm


def candidates(doc: Haystack, needle: str, prefix: str = "",
               suffix: str = "") -> tuple[list[tuple[int, int]], str]:
    """Occurrences of ``needle`` in ``doc`` as (start, end) intervals, and how they were found
    (:data:`EXACT`, or :data:`WHITESPACE` when the text occurs only with whitespace normalised)."""
    text = doc.text
    hits = occurrences(text, needle)
    if hits:
        n = len(needle)
        keep = [h for h in hits
                if (not prefix or text[max(0, h - len(prefix)):h] == prefix)
                and (not suffix or text[h + n:h + n + len(suffix)] == suffix)]
        return [(h, h + n) for h in keep], EXACT
    wanted, _ = normalise(needle)
    if not wanted:
        return [], EXACT
    norm, where = doc.norm
    pre, _ = normalise(prefix)
    suf, _ = normalise(suffix)
    out = []
    for h in occurrences(norm, wanted):
        e = h + len(wanted)
        if pre and not norm[:h].rstrip().endswith(pre):
            continue
        if suf and not norm[e:].lstrip().startswith(suf):
            continue
        out.append((where[h], where[e - 1] + 1))
    return out, WHITESPACE


def nearest(found: list[tuple[int, int]], hint: int) -> tuple[tuple[int, int] | None, bool]:
    """The candidate starting nearest ``hint`` (ties: the earlier start), and whether the two nearest
    are equally near (a tie the caller must not resolve by guessing). ``(None, False)`` when none."""
    if not found:
        return None, False
    ranked = sorted(found, key=lambda se: (abs(se[0] - hint), se[0]))
    tie = len(ranked) > 1 and abs(ranked[0][0] - hint) == abs(ranked[1][0] - hint)
    return ranked[0], tie
