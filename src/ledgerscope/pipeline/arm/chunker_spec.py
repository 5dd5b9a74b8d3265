"""What an arm with an external chunker declares, checked before anything loads.

The kinds ``langchain``, ``llamaindex``, ``chonkie`` and ``python`` hand the cutting to a splitter
ledgerscope does not own (:mod:`ledgerscope.pipeline.chunking.splitters` builds them,
:mod:`ledgerscope.pipeline.chunking.external` verifies what they return). This module holds what
the configuration needs without importing any of them: which ``[chunker]`` keys apply to which kind
(the keys themselves, their types and ranges are :mod:`.schema`'s), that the splitter or callable
named exists, and the phase span.

The phase rule (recorded in the manifest): **phase p forces one cut at token p of each document (by
the arm's tokenizer) and runs the splitter separately on each side; phase 0 is the unperturbed
splitter.** ``phases = "auto:N"`` spreads the forced cut over the splitter's declared chunk size in
tokens (``options.chunk_size``): label k cuts at token ``round(k * S / N)``. A chunk size measured in
characters (LangChain's default ``len``, chonkie's ``"character"`` tokenizer, or ``length =
"characters"``) counts as ``ceil(chunk_size / 4)`` tokens (the usual four characters per token);
``phase_span_tokens`` gives S directly and is needed by ``auto:N`` with ``kind = "python"``.
"""

from __future__ import annotations

import importlib
import importlib.util
import math
import re
from typing import Any

from ledgerscope.common.errors import Problem

#: the external kinds, each with the distribution that provides it and the extra that installs it
ECOSYSTEMS = {
    "langchain": ("langchain_text_splitters", "langchain-text-splitters", "langchain"),
    "llamaindex": ("llama_index.core.node_parser", "llama-index-core", "llamaindex"),
    "chonkie": ("chonkie", "chonkie", "chonkie"),
}
EXTERNAL_KINDS = (*ECOSYSTEMS, "python")
#: the splitter classes each ecosystem offers by name (LangChain: any TextSplitter subclass)
SPLITTERS = {
    "llamaindex": ("SentenceSplitter", "TokenTextSplitter"),
    "chonkie": ("TokenChunker", "SentenceChunker", "RecursiveChunker"),
}
CHARS_PER_TOKEN = 4
PHASE_RULE = (
    "phase p forces one cut at token p of each document (the arm's tokenizer) and runs the "
    "splitter separately on each side; phase 0 is the unperturbed splitter"
)


def is_external(kind: Any) -> bool:
    return kind in EXTERNAL_KINDS


def measure(kind: str, table: dict) -> str:
    """``characters`` or ``tokens``: what ``options.chunk_size`` counts for this splitter."""
    length = table.get("length", "library")
    if length != "library":
        return length
    if kind == "langchain":
        return "characters"
    if kind == "chonkie":
        return (
            "characters"
            if table.get("options", {}).get("tokenizer", "character") == "character"
            else "tokens"
        )
    return "tokens"


def span_tokens(kind: str, table: dict) -> int | None:
    """The chunk size in the arm's tokens that ``auto:N`` spreads the forced cut over (None: unknown)."""
    explicit = table.get("phase_span_tokens")
    if isinstance(explicit, int) and not isinstance(explicit, bool) and explicit >= 1:
        return explicit
    options = table.get("options")
    size = options.get("chunk_size") if isinstance(options, dict) else None
    if kind == "python" or isinstance(size, bool) or not isinstance(size, int) or size < 1:
        return None
    if measure(kind, table) == "characters":
        return max(1, math.ceil(size / CHARS_PER_TOKEN))
    return size


def needs_span(kind: str) -> str:
    """Why ``auto:N`` could not be resolved for this kind (the message names the keys to set)."""
    if kind == "python":
        return "auto:N spreads the forced cut over a chunk size in tokens: set chunker.phase_span_tokens"
    return (
        "auto:N spreads the forced cut over the splitter's chunk size in tokens: set "
        "chunker.options.chunk_size (or chunker.phase_span_tokens)"
    )


def problems(table: dict, where: str, applies: dict[str, tuple[str, ...]]) -> list[Problem]:
    """The ``[chunker]`` table of an external kind: keys that do not apply to it, the splitter or
    callable it names (and that it imports). Each key's type and range are the schema's.

    Importing the user's callable module (``python``) and LangChain's splitters module (to check the
    class exists) happens here, so the error names the arm file and key before any model loads;
    LlamaIndex and chonkie are only looked up as installed (their classes are a fixed list).
    """
    kind = table.get("kind")
    out: list[Problem] = []

    def bad(key: str, reason: str) -> None:
        out.append(Problem(where, None, f"chunker.{key}", reason))

    for key, kinds in applies.items():  # the keys only some kinds read (the schema says which)
        if key in table and kind not in kinds:
            bad(key, f"does not apply to kind {kind!r} (only to {', '.join(kinds)})")
    options = table.get("options")
    if table.get("length", "library") != "library" and isinstance(options, dict) and "tokenizer" in options:
        bad(
            "length",
            f"length = {table['length']!r} chooses the tokenizer; options.tokenizer would be "
            "overridden (drop one of them)",
        )
    if kind == "python":
        out.extend(_callable_problems(table.get("callable"), where))
    elif kind in ECOSYSTEMS:
        out.extend(_splitter_problems(kind, table.get("splitter"), where))
    return out


def _callable_problems(target: Any, where: str) -> list[Problem]:
    key = "chunker.callable"
    if not isinstance(target, str) or not target:
        return [Problem(where, None, key, 'kind = "python" needs callable = "package.module:function"')]
    module, sep, name = target.partition(":")
    if (
        not sep
        or not re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*", module)
        or not re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*", name)
    ):
        return [Problem(where, None, key, f'{target!r}: expected "package.module:function"')]
    try:
        fn = resolve_callable(target)
    except ImportError as exc:
        return [Problem(where, None, key, f"{target!r} cannot be imported: {exc}")]
    if not callable(fn):
        return [Problem(where, None, key, f"{target!r} is not callable")]
    return []


def resolve_callable(target: str):
    """The object ``"package.module:attr.path"`` names; ImportError (with the reason) when it cannot."""
    module, _, name = target.partition(":")
    try:
        obj = importlib.import_module(module)
    except Exception as exc:  # the user's module may fail in any way while importing
        raise ImportError(f"importing {module!r} failed: {type(exc).__name__}: {exc}") from None
    for part in name.split("."):
        if not hasattr(obj, part):
            raise ImportError(f"module {module!r} has no attribute {name!r}")
        obj = getattr(obj, part)
    return obj


def _splitter_problems(kind: str, splitter: Any, where: str) -> list[Problem]:
    key = "chunker.splitter"
    module, dist, extra = ECOSYSTEMS[kind]
    known = SPLITTERS.get(kind)
    if not isinstance(splitter, str) or not splitter:
        names = f" ({', '.join(known)})" if known else ""
        return [Problem(where, None, key, f"kind = {kind!r} needs the splitter's class name{names}")]
    if known is not None and splitter not in known:
        return [Problem(where, None, key, f"{splitter!r} is not one of {', '.join(known)}")]
    try:
        installed = (
            importlib.util.find_spec(module.split(".")[0]) is not None
            and importlib.util.find_spec(module) is not None
        )
    except (ImportError, ValueError):
        installed = False
    if not installed:
        return [
            Problem(
                where,
                None,
                "chunker.kind",
                f"{kind}: {dist} is not installed (pip install 'ledgerscope[{extra}]')",
            )
        ]
    if kind == "langchain":
        names = langchain_splitters()
        if splitter not in names:
            return [
                Problem(
                    where,
                    None,
                    key,
                    f"{splitter!r} is not a splitter class of "
                    f"langchain_text_splitters (known: {', '.join(sorted(names))})",
                )
            ]
    return []


def langchain_splitters() -> dict[str, type]:
    """LangChain's text splitter classes by name (every public TextSplitter subclass)."""
    import langchain_text_splitters as lts

    out = {}
    for name in getattr(lts, "__all__", dir(lts)):
        obj = getattr(lts, name, None)
        if isinstance(obj, type) and issubclass(obj, lts.TextSplitter) and obj is not lts.TextSplitter:
            out[name] = obj
    return out
