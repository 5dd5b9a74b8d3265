"""Recording what a running RAG pipeline did, for ``ledgerscope ingest``: light enough to run inside it.

Everything here imports only the standard library (the framework helpers import their own
framework, and only when used), so a service that records traces pays for neither ledgerscope's
analysis stack nor torch. ``tests/test_architecture.py`` checks what a bare import loads.

- :mod:`.spec`: the ``ledgerscope-trace/1`` format's names (fields, stages, their order).
- :mod:`.recorder`: :class:`Recorder`, one trace line per request and the chunk store.
- :mod:`.langchain`: a LangChain callback handler that drives a recorder.
- :mod:`.llama_index`: a LlamaIndex index's nodes as the chunk store.
"""

from ledgerscope.trace.recorder import CODEPOINT, FORMAT, Recorder

__all__ = ["CODEPOINT", "FORMAT", "Recorder"]
