"""The kinds of the replaceable stages: one table per seam (:mod:`ledgerscope.pipeline.contracts.stages`)
from the kind an arm
configures to its factory, plus the kinds installed distributions register (:mod:`.plugins`).

A factory is named as ``"module:function"`` and imported only when a runtime is built, so the
configuration (:func:`.config.arm_from_dict`) validates a kind against these tables without importing
the stages that would build it (config sits below them). A table may also hold a callable itself
(a test, or code registering its own kind). A factory gets the arm's configuration, its embedding
model and its chunk tokenizer (a retriever's also gets its slot's table). A new kind is added
here, in one place.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from ledgerscope.pipeline.arm import plugins

Factory = Callable[..., object]
_RUNTIME = "ledgerscope.pipeline.run.runtime"
_SPLITTERS = "ledgerscope.pipeline.chunking.splitters"
_PLUGINS = "ledgerscope.pipeline.arm.plugin_stages"

#: ``chunker.kind`` -> factory (the external kinds: :mod:`ledgerscope.pipeline.chunking.splitters`, verified
#: by :mod:`ledgerscope.pipeline.chunking.external`)
CHUNKERS: dict[str, str | Factory] = {
    "token": f"{_RUNTIME}:token_chunker",
    "sentence": f"{_RUNTIME}:sentence_chunker",
    "langchain": f"{_SPLITTERS}:external_chunker",
    "llamaindex": f"{_SPLITTERS}:external_chunker",
    "chonkie": f"{_SPLITTERS}:external_chunker",
    "python": f"{_SPLITTERS}:external_chunker",
}
#: ``retrieval.lexical.kind`` / ``retrieval.ann.kind`` -> factory (any kind fits either slot)
RETRIEVERS: dict[str, str | Factory] = {
    "bm25": f"{_RUNTIME}:bm25_retriever",
    "hnsw": f"{_RUNTIME}:hnsw_slot_retriever",
    "exact": f"{_RUNTIME}:exact_slot_retriever",
    "python": f"{_PLUGINS}:python_retriever",
}
#: ``rerank.kind`` -> factory
RERANKERS: dict[str, str | Factory] = {
    "maxsim": f"{_RUNTIME}:maxsim_reranker",
    "cross-encoder": f"{_RUNTIME}:cross_encoder_reranker",
    "none": f"{_RUNTIME}:no_reranker",
    "endpoint": f"{_RUNTIME}:endpoint_reranker",
    "python": f"{_PLUGINS}:python_reranker",
}
#: ``generator.kind`` -> factory
GENERATORS: dict[str, str | Factory] = {
    "extractive": f"{_RUNTIME}:extractive_generator",
    "endpoint": f"{_RUNTIME}:endpoint_generator",
    "python": f"{_PLUGINS}:python_generator",
}
#: the seams' built-in tables, by the seam names entry points use (``SEAM:KIND``)
TABLES: dict[str, dict[str, str | Factory]] = {
    "chunker": CHUNKERS,
    "retriever": RETRIEVERS,
    "reranker": RERANKERS,
    "generator": GENERATORS,
}


def installed() -> tuple[dict[str, dict[str, plugins.PluginStage]], tuple[str, ...]]:
    """Plugin stages of installed distributions per seam, and the entry points that were refused."""
    builtins = tuple((seam, (*table, "python")) for seam, table in TABLES.items())
    return plugins.discovered(builtins)


def available(seam: str) -> dict[str, str | Factory | plugins.PluginStage]:
    """Every kind an arm may name for this seam: the built-in ones, then the installed plugins'."""
    return {**TABLES[seam], **installed()[0][seam]}


def plugin_problems(key: str, table: dict, where: str) -> list:
    """A ``python`` stage's ``callable`` or a plugin kind's target that cannot be imported.

    ``key`` is the arm's table (``generator``, ``rerank``, ``retrieval.ann`` ...). Importing the
    user's module here is what makes the error name the arm file and key before any model loads.
    """
    from ledgerscope.common.errors import Problem

    seam = _SEAM_OF.get(key.split(".")[0])
    kind = table.get("kind")
    if seam is None or not isinstance(kind, str):
        return []
    if seam == "chunker" and kind == "python":
        return []  # an external chunker: its callable is checked with its other keys (chunker_spec)
    if kind == "python" and "python" in TABLES[seam]:
        target = table.get("callable", "")
        if not target:
            return [
                Problem(
                    where,
                    None,
                    f"{key}.callable",
                    'kind = "python" needs callable = "package.module:function"',
                )
            ]
        try:
            plugins.load_target(target)
        except plugins.PluginImportError as exc:
            return [Problem(where, None, f"{key}.callable", str(exc))]
        return []
    stage = installed()[0][seam].get(kind)
    if stage is not None and kind not in TABLES[seam]:
        try:
            plugins.load_target(stage.target)
        except plugins.PluginImportError as exc:
            return [
                Problem(
                    where,
                    None,
                    f"{key}.kind",
                    f"plugin {kind!r} ({stage.distribution} {stage.version}): {exc}",
                )
            ]
    return []


_SEAM_OF = {"chunker": "chunker", "retrieval": "retriever", "rerank": "reranker", "generator": "generator"}


def resolve(factory: str | Factory) -> Factory:
    """The callable a table entry names (``"module:function"``), or the entry itself."""
    if callable(factory):
        return factory
    module, _, name = factory.partition(":")
    return getattr(importlib.import_module(module), name)
