"""Every chunk onto a source interval, or reported: verified, repaired, located, or never guessed.

The locator itself (occurrences, prefix/suffix, the declared normalisations, the one tie rule,
added text) is :mod:`ledgerscope.inputs.locate`, shared with the sweep's external chunkers.

Declared rules, in order, for a chunk of document ``doc_id``:

1. the document must be in the corpus (else ``document-missing``); a chunk naming another version
   than the corpus holds is located in the current one by the rules below and flagged
   ``version-drifted`` (``version-differs`` when its text is not there);
2. given offsets are translated from their coordinate system exactly
   (:mod:`ledgerscope.inputs.coords`) and verified by slicing: the slice equals
   the chunk's text -> ``verified``;
3. otherwise (offsets that do not slice to the text, or do not translate), or
   with no offsets: the text is *located*. Candidates are its exact
   occurrences; only when there is none, its occurrences under the declared
   normalisations in their fixed order (whitespace, NFKC, HTML entities, soft
   hyphens and ligatures, Markdown headers, a user's plugin:
   :mod:`ledgerscope.inputs.normalise`), mapped back to exact source offsets. A
   ``prefix``/``suffix`` the chunk carries keeps only the occurrences it
   surrounds. One candidate left: located (``located``, ``located-whitespace``,
   ``located-normalised``; ``repaired`` when offsets were given). Several: with
   given offsets the nearest to the given start wins (a tie is ambiguous);
   without, the chunk is ``ambiguous``;
4. none: the chunk may be added text around a source slice (a header, a situating sentence, an
   embedding prefix): it is placed by its longest source-aligned part
   (:func:`ledgerscope.inputs.locate.align`), ``located-in-context``, the rest recorded as
   generated context (or as a further source slice when it occurs once in the source); that part
   is unique, or the nearest to the given start, or the chunk is ``ambiguous``;
5. none of these: ``unlocatable``.

The unplaced (``unlocatable``, ``ambiguous``, ``document-missing``, ``version-differs``) are
reported per document with examples; they become units without an interval, never a guessed one.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace

from ledgerscope.common.errors import CoordinateError
from ledgerscope.ingest.read.chunkstore import Chunk
from ledgerscope.inputs.coords import CODEPOINT, to_codepoint_span
from ledgerscope.inputs.locate import (
    EXACT,
    Haystack,
    align,
    candidates,
    nearest,
    normalise,  # noqa: F401 - part of this module's interface
)
from ledgerscope.inputs.normalise import LEVELS, WHITESPACE, Mapped
from ledgerscope.inputs.sources import Corpus

RESOLVED = (
    "verified",
    "repaired",
    "located",
    "located-whitespace",
    "located-normalised",
    "located-in-context",
    "version-drifted",
)
UNRESOLVED = ("unlocatable", "ambiguous", "document-missing", "version-differs")


@dataclass(frozen=True)
class Resolution:
    """Where one chunk lies (``start``/``end`` in code points), or why it lies nowhere; ``how``: the
    normalisation that placed it (``exact`` when none did); ``context``: its added parts, each
    ``{"position", "text", "length", "kind"}`` (``generated``, or ``source`` with ``start``/``end``)."""

    chunk: Chunk
    status: str
    start: int | None = None
    end: int | None = None
    note: str = ""
    how: str = EXACT
    context: tuple[dict, ...] = ()

    @property
    def resolved(self) -> bool:
        return self.status in RESOLVED


@dataclass
class Locator:
    """The corpus's texts as haystacks (each normalisation computed once per document) and the
    declared normalisation levels, plugin included."""

    corpus: Corpus
    levels: tuple[str, ...] = LEVELS
    plugin: Callable[[str], Mapped] | None = None
    docs: dict[str, Haystack] = field(default_factory=dict)
    #: how a unit placed by the plugin records it (``plugin:module:function``)
    plugin_name: str = "plugin"

    def __post_init__(self) -> None:
        if self.plugin is not None and "plugin" not in self.levels:
            self.levels = (*self.levels, "plugin")

    def doc(self, doc_id: str) -> Haystack:
        if doc_id not in self.docs:
            self.docs[doc_id] = Haystack(self.corpus.sources[doc_id].text, self.plugin)
        return self.docs[doc_id]


def resolve_chunk(
    chunk: Chunk, corpus: Corpus, docs: dict[str, Haystack] | None = None, locator: Locator | None = None
) -> Resolution:
    """The rules of the module docstring for one chunk."""
    loc = locator or Locator(corpus, docs=docs if docs is not None else {})
    src = corpus.get(chunk.doc_id)
    if src is None:
        return Resolution(chunk, "document-missing", note=f"document {chunk.doc_id!r} is not in the corpus")
    r = _resolve_text(chunk, src.text, loc)
    if chunk.version is None or chunk.version == src.version:
        return r
    old = f"chunk of version {chunk.version[:80]}, the corpus holds {src.version}"
    if not r.resolved:
        return Resolution(chunk, "version-differs", note=f"{old}; {r.note}")
    return Resolution(
        chunk,
        "version-drifted",
        r.start,
        r.end,
        f"{old}; its text is still there ({r.status})",
        r.how,
        r.context,
    )


def _given(chunk: Chunk, text: str) -> tuple[str, int | None, tuple[int, int] | None]:
    """(how the given offsets read, the hint they give, the verified interval when they slice)."""
    if chunk.start is None or chunk.end is None:
        return "", None, None
    system = chunk.system or CODEPOINT
    given = f"[{chunk.start}, {chunk.end}) {system}"
    try:
        s, e = to_codepoint_span(text, chunk.start, chunk.end, system)
    except CoordinateError as exc:
        return given + f" does not translate ({exc})", min(chunk.start, len(text)), None
    if text[s:e] == chunk.text:
        return given, s, (s, e)
    return given + f" slices {text[s:e][:40]!r}", s, None


def _resolve_text(chunk: Chunk, text: str, loc: Locator) -> Resolution:
    given, hint, verified = _given(chunk, text)
    if verified is not None:
        return Resolution(chunk, "verified", *verified)
    doc = loc.doc(chunk.doc_id)
    found, how = candidates(doc, chunk.text, chunk.prefix, chunk.suffix, loc.levels)
    context: tuple[dict, ...] = ()
    if not found:
        aligned = align(doc, chunk.text, loc.levels)
        if aligned is None:
            why = "its text occurs nowhere in the document, exactly or under any declared normalisation"
            return Resolution(chunk, "unlocatable", note=why + (f"; offsets {given}" if given else ""))
        found, how = aligned.found, aligned.how
        context = tuple(_part(pos, t, iv) for pos, t, iv in aligned.parts)
    picked = _pick(chunk, found, how, hint, given, bool(context))
    if isinstance(picked, Resolution):
        return picked
    s, e = picked
    if context:
        kinds = ", ".join(f"{p['kind']} text {p['position']} ({p['length']} chars)" for p in context)
        return Resolution(
            chunk,
            "located-in-context",
            s,
            e,
            f"placed by its longest source-aligned part "
            f"({_how(how)}); {kinds}" + (f"; offsets {given}" if given else ""),
            how,
            context,
        )
    if given:
        return Resolution(
            chunk,
            "repaired",
            s,
            e,
            f"offsets {given}; repaired to [{s}, {e}) codepoint "
            f"({'nearest ' if len(found) > 1 else ''}{_how(how)} match)",
            how,
        )
    status = {EXACT: "located", WHITESPACE: "located-whitespace"}.get(how, "located-normalised")
    note = "" if how == EXACT else f"text differs from the source: {how}"
    return Resolution(chunk, status, s, e, note, how)


def _pick(
    chunk: Chunk, found: list[tuple[int, int]], how: str, hint: int | None, given: str, partial: bool
) -> tuple[int, int] | Resolution:
    """The one candidate, or the nearest to the given offsets, or the chunk reported ambiguous."""
    if len(found) == 1:
        return found[0]
    what = "its longest source-aligned part" if partial else "its text"
    if hint is None:
        return Resolution(
            chunk,
            "ambiguous",
            note=f"{what} occurs {len(found)} times ({_how(how)}) "
            "and no prefix/suffix or offsets tell them apart",
            how=how,
        )
    best, tie = nearest(found, hint)
    if tie or best is None:
        return Resolution(
            chunk,
            "ambiguous",
            note=f"offsets {given}; the two nearest of {len(found)} occurrences of {what} are equally near",
            how=how,
        )
    return best


def _how(how: str) -> str:
    return "exact" if how == EXACT else f"{how}-normalised"


def _part(position: str, text: str, interval: tuple[int, int] | None) -> dict:
    part = {
        "position": position,
        "text": text,
        "length": len(text),
        "kind": "generated" if interval is None else "source",
    }
    if interval is not None:
        part["start"], part["end"] = interval
    return part


def resolve_chunks(
    chunks: Iterable[Chunk],
    corpus: Corpus,
    levels: Sequence[str] = LEVELS,
    plugin: Callable[[str], Mapped] | None = None,
    plugin_name: str = "plugin",
) -> list[Resolution]:
    loc = Locator(corpus, tuple(levels), plugin, plugin_name=plugin_name)
    out = [resolve_chunk(c, corpus, locator=loc) for c in chunks]
    return [replace(r, how=plugin_name) if r.how == "plugin" else r for r in out]


@dataclass
class ResolutionReport:
    """Counts per status and per document, with a few examples of each problem."""

    counts: Counter = field(default_factory=Counter)
    per_doc: dict[str, Counter] = field(default_factory=dict)
    examples: dict[str, list[str]] = field(default_factory=dict)
    #: per document, a few of its unplaced chunks (id, status, why)
    unlocated: dict[str, list[str]] = field(default_factory=dict)

    @classmethod
    def of(cls, resolutions: Iterable[Resolution], examples: int = 3) -> ResolutionReport:
        rep = cls()
        for r in resolutions:
            rep.counts[r.status] += 1
            rep.per_doc.setdefault(r.chunk.doc_id, Counter())[r.status] += 1
            if r.status not in ("verified", "located"):  # every other way is shown
                ex = rep.examples.setdefault(r.status, [])
                if len(ex) < examples:
                    ex.append(f"{r.chunk.chunk_id} (line {r.chunk.line}, {r.chunk.doc_id}): {r.note}")
            if not r.resolved:
                ex = rep.unlocated.setdefault(r.chunk.doc_id, [])
                if len(ex) < examples:
                    ex.append(f"{r.chunk.chunk_id} ({r.status}, line {r.chunk.line}): {r.note[:200]}")
        return rep

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def n_unlocated(self) -> int:
        return sum(self.counts[s] for s in UNRESOLVED)

    def unlocated_per_document(self) -> dict[str, dict]:
        """Per document with unplaced chunks: how many, and a few of them."""
        return {
            d: {"unlocated": sum(c[s] for s in UNRESOLVED), "examples": self.unlocated.get(d, [])}
            for d, c in sorted(self.per_doc.items())
            if any(c[s] for s in UNRESOLVED)
        }

    def to_json(self) -> dict:
        return {
            "counts": dict(sorted(self.counts.items())),
            "per_document": {
                d: dict(sorted(c.items()))
                for d, c in sorted(self.per_doc.items())
                if set(c) - {"verified", "located"}
            },
            "examples": {k: v for k, v in sorted(self.examples.items())},
            "unlocated": {
                "count": self.n_unlocated,
                "of": self.total,
                "per_document": self.unlocated_per_document(),
            },
        }
