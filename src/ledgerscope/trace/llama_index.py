"""The chunk store of a LlamaIndex index, from its nodes (``ledgerscope[llamaindex]``).

    from ledgerscope.trace import Recorder
    from ledgerscope.trace.llama_index import record_index

    index = VectorStoreIndex.from_documents(docs, transformations=[SentenceSplitter(...)])
    with Recorder("unused.jsonl", chunks="chunks.jsonl", config="sentences") as rec:
        record_index(rec, index)          # every node: the whole index, so step 2 is diagnosed

Each node is one chunk: its ``node_id`` (the ``document.id`` OpenInference's
LlamaIndex instrumentor records on every retrieved node, so the spans and the
store agree), its source document (``ref_doc_id`` by default, or a metadata key
such as ``file_path``, made relative to ``root`` when given: document ids name
documents of the corpus relative to its root), its text and
``start_char_idx``/``end_char_idx`` (code points of the document's text, as
the splitters record them; verified by slicing at ingest, located when absent).

Then ``ledgerscope ingest SPANS --from openinference --chunks chunks.jsonl ...``
(``docs/ingest_llamaindex.md``). The module imports LlamaIndex only to read
node text without metadata; nothing else of ledgerscope's.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

from ledgerscope.trace.recorder import Recorder


def node_doc_id(node: Any, doc_key: str | None = None, root: str | os.PathLike | None = None) -> str:
    """The node's source document id: ``ref_doc_id`` (or ``metadata[doc_key]``), relative to ``root``."""
    value = node.metadata.get(doc_key) if doc_key else node.ref_doc_id
    if not isinstance(value, str) or not value:
        raise ValueError(
            f"node {node.node_id!r} names no source document "
            f"({'metadata[' + repr(doc_key) + ']' if doc_key else 'ref_doc_id'})"
        )
    if root is not None and _absolute(value):
        value = os.path.relpath(value, root)
    return Path(value).as_posix() if root is not None else value


def _absolute(value: str) -> bool:
    return PurePosixPath(value).is_absolute() or PureWindowsPath(value).is_absolute()


def record_nodes(
    recorder: Recorder,
    nodes: Iterable[Any],
    *,
    doc_key: str | None = None,
    root: str | os.PathLike | None = None,
    config: str | None = None,
    doc_id: Callable[[Any], str] | None = None,
) -> int:
    """Every node as a chunk of the store (rules in the module docstring); returns how many.

    ``doc_id`` replaces the rule for the source document id altogether (a function of the node)."""
    from llama_index.core.schema import MetadataMode

    n = 0
    for node in nodes:
        source = doc_id(node) if doc_id is not None else node_doc_id(node, doc_key, root)
        text = node.get_content(metadata_mode=MetadataMode.NONE)
        start, end = getattr(node, "start_char_idx", None), getattr(node, "end_char_idx", None)
        if start is None or end is None:
            start = end = None
        recorder.chunk(node.node_id, source, text, start=start, end=end, config=config)
        n += 1
    return n


def record_index(recorder: Recorder, index: Any, **kwargs: Any) -> int:
    """Every node of an index's docstore (the whole index) as the chunk store; returns how many."""
    return record_nodes(recorder, index.docstore.docs.values(), **kwargs)
