"""Every chunk onto a source interval, or reported: verified, repaired, located, or never guessed.

Declared rules, in order, for a chunk of document ``doc_id``:

1. the document must be in the corpus (and be the version the chunk names, if it names one);
2. given offsets are translated from their coordinate system exactly
   (:mod:`ledgerscope.inputs.coords`) and verified by slicing: the slice equals
   the chunk's text -> ``verified``;
3. otherwise (offsets that do not slice to the text, or do not translate), or
   with no offsets: the text is *located*. Candidates are its exact
   occurrences; only when there is none, the occurrences after whitespace
   normalisation (every run of whitespace one space, both ends stripped), whose
   source interval runs from the first to the last non-whitespace character
   matched. A ``prefix``/``suffix`` the chunk carries keeps only the
   occurrences it surrounds (compared after the same normalisation). One
   candidate left: located (``repaired`` when offsets were given: the new
   interval and the old are both reported). Several: with given offsets the
   nearest to the given start wins (a tie is ambiguous); without, the chunk is
   ``ambiguous``. None: ``unlocatable``.

Unlocatable and ambiguous chunks are reported per document with examples and
never given an interval.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from ledgerscope.common.errors import CoordinateError
from ledgerscope.ingest.chunkstore import Chunk
from ledgerscope.inputs.coords import CODEPOINT, to_codepoint_span
from ledgerscope.inputs.sources import Corpus

RESOLVED = ("verified", "repaired", "located", "located-whitespace")
UNRESOLVED = ("unlocatable", "ambiguous", "document-missing", "version-differs")


@dataclass(frozen=True)
class Resolution:
    """Where one chunk lies (``start``/``end`` in code points), or why it lies nowhere."""

    chunk: Chunk
    status: str
    start: int | None = None
    end: int | None = None
    note: str = ""

    @property
    def resolved(self) -> bool:
        return self.status in RESOLVED


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


def _occurrences(haystack: str, needle: str) -> list[int]:
    hits, pos = [], haystack.find(needle)
    while pos != -1:
        hits.append(pos)
        pos = haystack.find(needle, pos + 1)
    return hits


@dataclass
class _Doc:
    text: str
    _norm: tuple[str, list[int]] | None = None

    @property
    def norm(self) -> tuple[str, list[int]]:
        if self._norm is None:
            self._norm = normalise(self.text)
        return self._norm


def _candidates(doc: _Doc, chunk: Chunk) -> tuple[list[tuple[int, int]], str]:
    """Occurrences of the chunk's text as (start, end) code point intervals, and how they were found."""
    text = doc.text
    hits = _occurrences(text, chunk.text)
    if hits:
        n = len(chunk.text)
        keep = [h for h in hits
                if (not chunk.prefix or text[max(0, h - len(chunk.prefix)):h] == chunk.prefix)
                and (not chunk.suffix or text[h + n:h + n + len(chunk.suffix)] == chunk.suffix)]
        return [(h, h + n) for h in keep], "exact"
    needle, _ = normalise(chunk.text)
    if not needle:
        return [], "exact"
    norm, where = doc.norm
    out = []
    pre, _ = normalise(chunk.prefix)
    suf, _ = normalise(chunk.suffix)
    for h in _occurrences(norm, needle):
        e = h + len(needle)
        if pre and not norm[:h].rstrip().endswith(pre):
            continue
        if suf and not norm[e:].lstrip().startswith(suf):
            continue
        out.append((where[h], where[e - 1] + 1))
    return out, "whitespace"


def resolve_chunk(chunk: Chunk, corpus: Corpus, docs: dict[str, _Doc] | None = None) -> Resolution:
    """The rules of the module docstring for one chunk."""
    src = corpus.get(chunk.doc_id)
    if src is None:
        return Resolution(chunk, "document-missing", note=f"document {chunk.doc_id!r} is not in the corpus")
    if chunk.version is not None and chunk.version != src.version:
        return Resolution(chunk, "version-differs",
                          note=f"chunk of version {chunk.version[:80]}, the corpus holds {src.version}")
    doc = (docs or {}).get(chunk.doc_id) or _Doc(src.text)
    if docs is not None:
        docs[chunk.doc_id] = doc
    hint = None
    given = ""
    if chunk.start is not None and chunk.end is not None:
        system = chunk.system or CODEPOINT
        given = f"[{chunk.start}, {chunk.end}) {system}"
        try:
            s, e = to_codepoint_span(src.text, chunk.start, chunk.end, system)
        except CoordinateError as exc:
            given += f" does not translate ({exc})"
            hint = min(chunk.start, len(src.text))
        else:
            if src.text[s:e] == chunk.text:
                return Resolution(chunk, "verified", s, e)
            given += f" slices {src.text[s:e][:40]!r}"
            hint = s
    found, how = _candidates(doc, chunk)
    if not found:
        why = "its text occurs nowhere in the document, exactly or with whitespace normalised"
        return Resolution(chunk, "unlocatable", note=why + (f"; offsets {given}" if given else ""))
    if len(found) > 1:
        if hint is None:
            return Resolution(chunk, "ambiguous", note=f"its text occurs {len(found)} times ({how}) "
                              "and no prefix/suffix or offsets tell them apart")
        found.sort(key=lambda se: (abs(se[0] - hint), se[0]))
        if abs(found[0][0] - hint) == abs(found[1][0] - hint):
            return Resolution(chunk, "ambiguous", note=f"offsets {given}; the two nearest of "
                              f"{len(found)} occurrences are equally near")
    s, e = found[0]
    if hint is not None or given:
        return Resolution(chunk, "repaired", s, e, f"offsets {given}; repaired to [{s}, {e}) codepoint "
                          f"({'nearest ' if len(found) > 1 else ''}{how} match)")
    return Resolution(chunk, "located" if how == "exact" else "located-whitespace", s, e,
                      "" if how == "exact" else "text differs from the source in whitespace only")


def resolve_chunks(chunks: Iterable[Chunk], corpus: Corpus) -> list[Resolution]:
    docs: dict[str, _Doc] = {}
    return [resolve_chunk(c, corpus, docs) for c in chunks]


@dataclass
class ResolutionReport:
    """Counts per status and per document, with a few examples of each problem."""

    counts: Counter = field(default_factory=Counter)
    per_doc: dict[str, Counter] = field(default_factory=dict)
    examples: dict[str, list[str]] = field(default_factory=dict)

    @classmethod
    def of(cls, resolutions: Iterable[Resolution], examples: int = 3) -> ResolutionReport:
        rep = cls()
        for r in resolutions:
            rep.counts[r.status] += 1
            rep.per_doc.setdefault(r.chunk.doc_id, Counter())[r.status] += 1
            if r.status not in ("verified", "located"):
                ex = rep.examples.setdefault(r.status, [])
                if len(ex) < examples:
                    ex.append(f"{r.chunk.chunk_id} (line {r.chunk.line}, {r.chunk.doc_id}): {r.note}")
        return rep

    def to_json(self) -> dict:
        return {"counts": dict(sorted(self.counts.items())),
                "per_document": {d: dict(sorted(c.items())) for d, c in sorted(self.per_doc.items())
                                 if set(c) - {"verified", "located"}},
                "examples": {k: v for k, v in sorted(self.examples.items())}}
