"""The kinds of the replaceable stages: one table per seam (:mod:`.stages`) from the kind an arm
configures to its factory.

A factory is named as ``"module:function"`` and imported only when a runtime is built, so the
configuration (:func:`.config.check_arm`) validates a kind against these tables without importing
the stages that would build it (config sits below them). A table may also hold a callable itself
(a test, or code registering its own kind). A factory gets the arm's configuration, its embedding
model and its chunk tokenizer. A new kind is added here, in one place.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

Factory = Callable[..., object]
_RUNTIME = "ledgerscope.pipeline.runtime"
_SPLITTERS = "ledgerscope.pipeline.splitters"

#: ``chunker.kind`` -> factory (the external kinds: :mod:`.splitters`, verified by :mod:`.external`)
CHUNKERS: dict[str, str | Factory] = {
    "token": f"{_RUNTIME}:token_chunker",
    "sentence": f"{_RUNTIME}:sentence_chunker",
    "langchain": f"{_SPLITTERS}:external_chunker",
    "llamaindex": f"{_SPLITTERS}:external_chunker",
    "chonkie": f"{_SPLITTERS}:external_chunker",
    "python": f"{_SPLITTERS}:external_chunker",
}
#: ``rerank.kind`` -> factory
RERANKERS: dict[str, str | Factory] = {
    "maxsim": f"{_RUNTIME}:maxsim_reranker",
    "cross-encoder": f"{_RUNTIME}:cross_encoder_reranker",
    "none": f"{_RUNTIME}:no_reranker",
}
#: ``generator.kind`` -> factory
GENERATORS: dict[str, str | Factory] = {
    "extractive": f"{_RUNTIME}:extractive_generator",
    "endpoint": f"{_RUNTIME}:endpoint_generator",
}


def resolve(factory: str | Factory) -> Factory:
    """The callable a table entry names (``"module:function"``), or the entry itself."""
    if callable(factory):
        return factory
    module, _, name = factory.partition(":")
    return getattr(importlib.import_module(module), name)
