"""Hints for the commonest wrong document id: a path the pipeline saw instead of the corpus-relative id.

LangChain's loaders put absolute paths in ``metadata["source"]``; LlamaIndex's
``SimpleDirectoryReader`` puts them in ``file_path`` and a bare name in
``file_name``. Document ids in a chunk store name documents of the corpus
relative to its root, so such an id is "not in the corpus"; the hint names the
corpus document it most likely means (the unique one whose id ends the path, or
whose base name it is).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import PurePosixPath, PureWindowsPath


def document_hint(doc_id: str, corpus_ids: Iterable[str]) -> str | None:
    """A hint for a document id the corpus lacks, when it looks like an absolute path or a base name."""
    ids = list(corpus_ids)
    absolute = PurePosixPath(doc_id).is_absolute() or PureWindowsPath(doc_id).is_absolute()
    norm = doc_id.replace("\\", "/")
    if absolute:
        ends = [d for d in ids if norm.endswith("/" + d)]
        if ends:
            best = max(ends, key=len)
            return (
                f"document ids are relative to the corpus root; this is an absolute path: did you mean "
                f"{best!r}? (record the path relative to the corpus, e.g. "
                "os.path.relpath(path, corpus_root))"
            )
        return "document ids are relative to the corpus root; this is an absolute path"
    if "/" not in norm:
        same = [d for d in ids if PurePosixPath(d).name == doc_id]
        if len(same) == 1:
            return (
                f"document ids are relative to the corpus root; this is a base name: did you mean "
                f"{same[0]!r}?"
            )
        if len(same) > 1:
            return (
                f"document ids are relative to the corpus root; {len(same)} corpus documents have this name"
            )
    return None
