"""Declared text normalisations, each with an offset map back to the text it came from.

A chunk store's text is often the source *cleaned*: whitespace re-spaced, Unicode NFKC, HTML
entities unescaped, PDF soft hyphens dropped and ligatures spelt out, Markdown headers moved into
metadata. Locating such a chunk compares the two texts after the same normalisation and maps the
match back to exact source offsets; it never guesses. Every normalisation here is a pure function
``text -> Mapped``: the normalised text and, for each of its characters, the ``[start, end)`` of the
input it stands for (an expanded ligature's letters all stand for the ligature; an entity's one
character for the whole entity), so a match ``[h, e)`` in the normalised text is the source interval
``[starts[h], ends[e - 1])``.

:data:`LEVELS` is the fixed order the locator tries them in; level *k* applies the content
normalisations of levels 2..k in order, then whitespace (runs of whitespace one space, ends
stripped), so a PDF extraction that also re-spaced its lines still matches. A user's own
normalisation is a plugin (``module:function``) tried last: it returns the normalised text and
either nothing else (then it must keep the length: one character for one) or the per-character
``starts`` and ``ends`` as above.
"""

from __future__ import annotations

import html
import importlib
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass

#: the locator's levels, in the order tried after an exact search fails
WHITESPACE = "whitespace"
NFKC = "nfkc"
HTML = "html-entities"
PDF = "soft-hyphens-ligatures"
MARKDOWN = "markdown-headers"
LEVELS = (WHITESPACE, NFKC, HTML, PDF, MARKDOWN)

_LIGATURES = {
    "\ufb00": "ff",
    "\ufb01": "fi",
    "\ufb02": "fl",
    "\ufb03": "ffi",
    "\ufb04": "ffl",
    "\ufb05": "st",
    "\ufb06": "st",
    "\u0132": "IJ",
    "\u0133": "ij",
    "\u0152": "OE",
    "\u0153": "oe",
}
_SOFT = {"\u00ad", "\u200b", "\u2060", "\ufeff"}  # soft hyphen, zero-width space/joiner, BOM
_ENTITY = re.compile(r"&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});?")
_ATX = re.compile(r"^ {0,3}#{1,6}(?:[ \t][^\n]*)?(?:\n|$)", re.M)


@dataclass(frozen=True)
class Mapped:
    """A normalised text; ``starts[i]``/``ends[i]``: the input interval its character ``i`` stands for
    (both None: the identity, the text unchanged)."""

    text: str
    starts: list[int] | None = None
    ends: list[int] | None = None

    def source(self, h: int, e: int) -> tuple[int, int]:
        """The input interval of the normalised interval ``[h, e)`` (non-empty)."""
        if self.starts is None or self.ends is None:
            return h, e
        return self.starts[h], self.ends[e - 1]


def identity(text: str) -> Mapped:
    return Mapped(text)


def _build(text: str, pieces) -> Mapped:
    """A Mapped from ``(input start, input end, output text)`` pieces in input order; the identity
    when nothing changed."""
    out: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    for s, e, rep in pieces:
        out.append(rep)
        starts.extend([s] * len(rep))
        ends.extend([e] * len(rep))
    joined = "".join(out)
    if joined == text:
        return Mapped(text)
    return Mapped(joined, starts, ends)


def whitespace(text: str) -> Mapped:
    """Every run of whitespace one space (standing for the whole run), both ends stripped."""

    def pieces():
        pending = None
        seen = False
        for i, ch in enumerate(text):
            if ch.isspace():
                if seen and pending is None:
                    pending = i
                continue
            if pending is not None:
                yield pending, i, " "
                pending = None
            seen = True
            yield i, i + 1, ch

    return _build(text, pieces())


def nfkc(text: str) -> Mapped:
    """Unicode NFKC, one base character with its combining marks at a time (so offsets stay exact)."""
    if text.isascii():
        return identity(text)

    def pieces():
        i, n = 0, len(text)
        while i < n:
            j = i + 1
            while j < n and unicodedata.combining(text[j]):
                j += 1
            yield i, j, unicodedata.normalize("NFKC", text[i:j])
            i = j

    return _build(text, pieces())


def html_entities(text: str) -> Mapped:
    """HTML character references (``&amp;``, ``&#233;``, ``&nbsp;``) as the characters they name."""
    if "&" not in text:
        return identity(text)

    def pieces():
        pos = 0
        for m in _ENTITY.finditer(text):
            for i in range(pos, m.start()):
                yield i, i + 1, text[i]
            yield m.start(), m.end(), html.unescape(m.group())
            pos = m.end()
        for i in range(pos, len(text)):
            yield i, i + 1, text[i]

    return _build(text, pieces())


def soft_hyphens_ligatures(text: str) -> Mapped:
    """Soft hyphens and zero-width characters dropped; typographic ligatures spelt out (PDF text)."""
    if text.isascii():
        return identity(text)
    return _build(
        text, ((i, i + 1, "" if ch in _SOFT else _LIGATURES.get(ch, ch)) for i, ch in enumerate(text))
    )


def markdown_headers(text: str) -> Mapped:
    """ATX header lines (``# Title``) removed, as header splitters move them into metadata."""
    if "#" not in text:
        return identity(text)

    def pieces():
        pos = 0
        for m in _ATX.finditer(text):
            for i in range(pos, m.start()):
                yield i, i + 1, text[i]
            pos = m.end()
        for i in range(pos, len(text)):
            yield i, i + 1, text[i]

    return _build(text, pieces())


STEPS: dict[str, Callable[[str], Mapped]] = {
    NFKC: nfkc,
    HTML: html_entities,
    PDF: soft_hyphens_ligatures,
    MARKDOWN: markdown_headers,
}


def compose(outer: Mapped, inner: Mapped) -> Mapped:
    """``inner`` applied to ``outer.text``, mapped back to ``outer``'s input."""
    if inner.starts is None or inner.ends is None:
        return outer if inner.text == outer.text else Mapped(inner.text, outer.starts, outer.ends)
    if outer.starts is None or outer.ends is None:
        return inner
    return Mapped(
        inner.text, [outer.starts[s] for s in inner.starts], [outer.ends[e - 1] for e in inner.ends]
    )


def content_levels(text: str, plugin: Callable[[str], Mapped] | None = None):
    """``(level, content)`` for each level in order (``plugin`` last when given): the content steps up
    to that level applied in order, whitespace not yet; a step that changes nothing gives the very
    object the level before gave."""
    m = Mapped(text)
    yield WHITESPACE, m
    for name, step in STEPS.items():
        m = compose(m, step(m.text))
        yield name, m
    if plugin is not None:
        yield "plugin", compose(m, plugin(m.text))


def at_level(text: str, level: str, plugin: Callable[[str], Mapped] | None = None) -> Mapped:
    """``text`` normalised at ``level`` (one of :data:`LEVELS`, ``"plugin"``, or ``"exact"``: unchanged):
    the content steps up to it in order, then whitespace."""
    if level == "exact":
        return Mapped(text)
    for name, m in content_levels(text, plugin):
        if name == level:
            return compose(m, whitespace(m.text))
    raise ValueError(f"unknown normalisation level {level!r}")


def load_plugin(spec: str) -> tuple[str, Callable[[str], Mapped]]:
    """``module:function`` as a normalisation (its name ``plugin:module:function``); raises ValueError
    with the reason when it cannot be loaded."""
    mod, _, name = spec.partition(":")
    if not mod or not name:
        raise ValueError(f"{spec!r}: expected module:function")
    try:
        fn = getattr(importlib.import_module(mod), name)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"{spec!r}: {exc}") from None

    def run(text: str) -> Mapped:
        got = fn(text)
        if isinstance(got, str):
            if len(got) != len(text):
                raise ValueError(f"normalisation {spec} changed the length without returning offsets")
            return Mapped(got, list(range(len(got))), list(range(1, len(got) + 1)))
        out, starts, ends = got
        if not (len(out) == len(starts) == len(ends)):
            raise ValueError(f"normalisation {spec} returned offsets not aligned with its text")
        return Mapped(out, list(starts), list(ends))

    return f"plugin:{spec}", run
