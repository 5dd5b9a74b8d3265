"""The external chunkers' adapters: each ecosystem's splitter as a function from text to pieces.

``chunker.kind``:

* ``langchain``: any ``langchain_text_splitters`` splitter class (``splitter``) built with
  ``options`` as keyword arguments; ``split_text`` (no offsets), or ``create_documents`` when
  ``options.add_start_index`` is true (its ``start_index`` taken as given offsets, then verified).
* ``llamaindex``: ``SentenceSplitter`` or ``TokenTextSplitter`` from ``llama_index.core.node_parser``;
  ``get_nodes_from_documents`` (its ``start_char_idx`` / ``end_char_idx`` as given offsets, often
  missing).
* ``chonkie``: ``TokenChunker``, ``SentenceChunker`` or ``RecursiveChunker``; ``chunk`` (its
  ``start_index`` / ``end_index`` as given offsets).
* ``python``: ``callable = "package.module:function"``, ``(text: str) -> list[tuple[int, int]]`` of
  code-point intervals; sorted, each non-empty inside the text, none overlapping another, or the
  sweep stops with an error naming the arm file and ``chunker.callable``.

``length`` says what the splitter's ``chunk_size`` counts: ``library`` (its own default: characters
for LangChain and chonkie, tiktoken tokens for LlamaIndex), ``characters``, or ``tokens`` (the arm's
tokenizer, the one phases count in). Each is verified and perturbed by :mod:`.external`.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import io
import itertools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ledgerscope.common.errors import InputError, Problem
from ledgerscope.pipeline.arm import chunker_spec
from ledgerscope.pipeline.chunking.external import ExternalChunker, Piece, SplitterOutputError

if TYPE_CHECKING:
    from ledgerscope.pipeline.embedding.encoder import TokenCounter

Split = Callable[[str], Sequence[Piece]]


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _token_ids(counter: TokenCounter) -> Callable[[str], list[int]]:
    tok = counter.tokenizer
    return lambda text: tok.encode(text, add_special_tokens=False).ids


def _build(cls: type, options: dict, where: str) -> Any:
    """``cls(**options)``; a rejected option is the arm's error (file and key), not a traceback."""
    try:
        return cls(**options)
    except Exception as exc:  # each library validates its options its own way
        call = f"{cls.__name__}({', '.join(options)})"
        raise InputError(
            Problem(where, None, "chunker.options", f"{call}: {type(exc).__name__}: {exc}")
        ) from None


def langchain_split(table: dict, counter: TokenCounter, where: str) -> Split:
    cls = chunker_spec.langchain_splitters()[table["splitter"]]
    options = dict(table.get("options", {}))
    length = table.get("length", "library")
    if length == "tokens":
        ids = _token_ids(counter)
        options["length_function"] = lambda text: len(ids(text))
    elif length == "characters":
        options["length_function"] = len
    splitter = _build(cls, options, where)
    if options.get("add_start_index"):

        def split(text: str) -> list[Piece]:
            docs = splitter.create_documents([text])
            return [Piece(d.page_content, d.metadata.get("start_index")) for d in docs]
    else:

        def split(text: str) -> list[Piece]:
            return [Piece(t) for t in splitter.split_text(text)]

    return split


def llamaindex_split(table: dict, counter: TokenCounter, where: str) -> Split:
    import llama_index.core.node_parser as node_parser
    from llama_index.core import Document
    from llama_index.core.schema import MetadataMode

    options = dict(table.get("options", {}))
    length = table.get("length", "library")
    if length == "tokens":
        options["tokenizer"] = _token_ids(counter)
    elif length == "characters":
        options["tokenizer"] = list
    splitter = _build(getattr(node_parser, table["splitter"]), options, where)

    def split(text: str) -> list[Piece]:
        # LlamaIndex prints a warning about metadata length for small chunk sizes; there is no
        # metadata here (and a print would break the sweep's progress display)
        with contextlib.redirect_stdout(io.StringIO()):
            nodes = splitter.get_nodes_from_documents([Document(text=text)], show_progress=False)
        return [
            Piece(n.get_content(metadata_mode=MetadataMode.NONE), n.start_char_idx, n.end_char_idx)
            for n in nodes
        ]

    return split


def _source_slice_tokenizer(counter: TokenCounter):
    """The arm's tokenizer for chonkie, decoding a token run to the exact source text it covers
    (a WordPiece decode would lower-case and re-space it, so no unit would be found in the source)."""
    from chonkie.tokenizer import Tokenizer

    tok = counter.tokenizer

    class SourceSliceTokenizer(Tokenizer):
        def __init__(self) -> None:
            super().__init__()
            self._spans: list[tuple[str, int, int]] = []

        def __repr__(self) -> str:
            return f"SourceSliceTokenizer({counter.name})"

        def tokenize(self, text: str) -> list[str]:
            return [text[s:e] for s, e in tok.encode(text, add_special_tokens=False).offsets]

        def encode(self, text: str) -> list[int]:
            base = len(self._spans)
            self._spans.extend((text, s, e) for s, e in tok.encode(text, add_special_tokens=False).offsets)
            return list(range(base, len(self._spans)))

        def decode(self, tokens: Sequence[int]) -> str:
            if not tokens:
                return ""
            text, s, _ = self._spans[tokens[0]]
            return text[s : self._spans[tokens[-1]][2]]

        def count_tokens(self, text: str) -> int:
            return len(tok.encode(text, add_special_tokens=False).ids)

        def reset(self) -> None:
            self._spans.clear()

    return SourceSliceTokenizer()


def chonkie_split(table: dict, counter: TokenCounter, where: str) -> Split:
    import chonkie

    options = dict(table.get("options", {}))
    length = table.get("length", "library")
    tokenizer = None
    if length == "tokens":
        tokenizer = options["tokenizer"] = _source_slice_tokenizer(counter)
    elif length == "characters":
        options["tokenizer"] = "character"
    chunker = _build(getattr(chonkie, table["splitter"]), options, where)

    def split(text: str) -> list[Piece]:
        if tokenizer is not None:
            tokenizer.reset()
        return [Piece(c.text, c.start_index, c.end_index) for c in chunker.chunk(text)]

    return split


def check_intervals(result: Any, text_len: int) -> list[tuple[int, int]]:
    """A callable's intervals, checked: a list of (start, end) integer pairs, each non-empty and
    inside the text, none overlapping another (SplitterOutputError says which is wrong)."""
    if not isinstance(result, list | tuple):
        raise SplitterOutputError(f"returned {type(result).__name__}, not a list of (start, end) intervals")
    out: list[tuple[int, int]] = []
    for i, item in enumerate(result):
        ok = (
            isinstance(item, list | tuple)
            and len(item) == 2
            and all(isinstance(x, int) and not isinstance(x, bool) for x in item)
        )
        if not ok:
            raise SplitterOutputError(f"interval {i}: {item!r} is not a pair of integers")
        s, e = item
        if not 0 <= s < e <= text_len:
            raise SplitterOutputError(
                f"interval {i}: [{s}, {e}) is out of range or empty for a text of {text_len} code points"
            )
        out.append((s, e))
    ordered = sorted(out)
    for (s0, e0), (s1, e1) in itertools.pairwise(ordered):
        if s1 < e0:
            raise SplitterOutputError(f"intervals [{s0}, {e0}) and [{s1}, {e1}) overlap")
    return ordered


def python_split(table: dict, counter: TokenCounter, where: str) -> Split:
    target = table["callable"]
    try:
        fn = chunker_spec.resolve_callable(target)
    except ImportError as exc:
        raise InputError(
            Problem(where, None, "chunker.callable", f"{target!r} cannot be imported: {exc}")
        ) from None

    def split(text: str) -> list[Piece]:
        return [Piece(text[s:e], s, e) for s, e in check_intervals(fn(text), len(text))]

    return split


_ADAPTERS = {
    "langchain": langchain_split,
    "llamaindex": llamaindex_split,
    "chonkie": chonkie_split,
    "python": python_split,
}


def external_chunker(cfg, encoder, counter: TokenCounter) -> ExternalChunker:
    """The factory of every external kind (:mod:`ledgerscope.pipeline.arm.kinds`): the adapter under the
    phase rule."""
    table, where = cfg.chunker, getattr(cfg, "where", "<config>")
    kind = table["kind"]
    split = _ADAPTERS[kind](table, counter, where)
    info: dict = {
        "kind": kind,
        "phase_rule": chunker_spec.PHASE_RULE,
        "span_tokens": chunker_spec.span_tokens(kind, table),
        "tokenizer": counter.describe(),
        "offsets": "verified by slicing; every unit not verified as given is in the repairs table",
    }
    if kind == "python":
        info["callable"] = table["callable"]
    else:
        dist = chunker_spec.ECOSYSTEMS[kind][1]
        info.update(
            splitter=table["splitter"],
            options=dict(table.get("options", {})),
            length=table.get("length", "library"),
            measure=chunker_spec.measure(kind, table),
            library=f"{dist} {_version(dist)}",
        )
    key = "chunker.callable" if kind == "python" else "chunker.splitter"
    return ExternalChunker(split, where, key, info)
