"""A LangChain callback handler that fills a :class:`ledgerscope.trace.Recorder` (optional extra).

    from ledgerscope.trace.langchain import LedgerscopeCallbackHandler
    from ledgerscope.trace import Recorder

    rec = Recorder("traces.jsonl", chunks="chunks.jsonl", config="baseline")
    handler = LedgerscopeCallbackHandler(rec)
    chain.invoke(question, config={"callbacks": [handler], "metadata": {"qid": "q-0143"}})

Per top-level run (one request) it keeps the documents every retriever returned,
in order (``retrieved``), the last language-model prompt and its output (the
answer); when the run ends it records the request: the context is every
retrieved document whose content the prompt holds, in prompt order (what the
model read, as the OpenInference mapping does). A document's chunk id is its
``id``, else ``metadata[id_key]``; its source document ``metadata[doc_key]``
and start ``metadata[start_key]`` (code points, as LangChain's splitters
record ``start_index``) go to the chunk store. The question id comes from the
run's metadata (``qid_key``); a run without one is not recorded.

Needs ``langchain-core`` (``pip install ledgerscope[ingest]``); nothing else of
ledgerscope's is imported.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler

from ledgerscope.trace.recorder import Recorder


class LedgerscopeCallbackHandler(BaseCallbackHandler):
    """Records each top-level LangChain run as one ``ledgerscope-trace/1`` line."""

    def __init__(self, recorder: Recorder, qid_key: str = "qid", doc_key: str = "source",
                 start_key: str = "start_index", id_key: str = "chunk_id"):
        self.recorder = recorder
        self.qid_key, self.doc_key, self.start_key, self.id_key = qid_key, doc_key, start_key, id_key
        self._runs: dict[UUID, dict[str, Any]] = {}
        self._root: dict[UUID, UUID] = {}

    def _state(self, run_id: UUID, parent_run_id: UUID | None) -> dict[str, Any] | None:
        root = self._root.get(parent_run_id, parent_run_id) if parent_run_id else run_id
        self._root[run_id] = root
        return self._runs.get(root)

    def on_chain_start(self, serialized, inputs, *, run_id: UUID, parent_run_id: UUID | None = None,
                       metadata: dict[str, Any] | None = None, **kwargs: Any) -> None:
        if parent_run_id is None:
            self._root[run_id] = run_id
            self._runs[run_id] = {"qid": (metadata or {}).get(self.qid_key), "docs": [], "prompt": None,
                                  "answer": None, "question": inputs if isinstance(inputs, str) else None}
        else:
            self._state(run_id, parent_run_id)

    def on_retriever_start(self, serialized, query, *, run_id: UUID, parent_run_id: UUID | None = None,
                           **kwargs: Any) -> None:
        self._state(run_id, parent_run_id)

    def on_retriever_end(self, documents, *, run_id: UUID, parent_run_id: UUID | None = None,
                         **kwargs: Any) -> None:
        state = self._state(run_id, parent_run_id)
        if state is not None:
            state["docs"].extend(documents)

    def on_chat_model_start(self, serialized, messages, *, run_id: UUID, parent_run_id: UUID | None = None,
                            **kwargs: Any) -> None:
        state = self._state(run_id, parent_run_id)
        if state is not None and messages:
            state["prompt"] = "\n\n".join(str(m.content) for m in messages[0])

    def on_llm_start(self, serialized, prompts, *, run_id: UUID, parent_run_id: UUID | None = None,
                     **kwargs: Any) -> None:
        state = self._state(run_id, parent_run_id)
        if state is not None and prompts:
            state["prompt"] = prompts[0]

    def on_llm_end(self, response, *, run_id: UUID, parent_run_id: UUID | None = None,
                   **kwargs: Any) -> None:
        state = self._state(run_id, parent_run_id)
        if state is not None and response.generations and response.generations[0]:
            state["answer"] = response.generations[0][0].text

    def on_chain_end(self, outputs, *, run_id: UUID, parent_run_id: UUID | None = None,
                     **kwargs: Any) -> None:
        if parent_run_id is not None:
            return
        state = self._runs.pop(run_id, None)
        self._root = {k: v for k, v in self._root.items() if v != run_id}
        if state is None or state["qid"] is None:
            return
        self._record(state)

    def _chunk_id(self, doc) -> str:
        return str(getattr(doc, "id", None) or doc.metadata.get(self.id_key))

    def _record(self, state: dict[str, Any]) -> None:
        ids, seen = [], set()
        for doc in state["docs"]:
            cid = self._chunk_id(doc)
            if cid in seen:
                continue
            seen.add(cid)
            ids.append((cid, doc))
            start = doc.metadata.get(self.start_key)
            if self.recorder._chunks is not None and doc.metadata.get(self.doc_key):
                self.recorder.chunk(cid, doc.metadata[self.doc_key], doc.page_content,
                                    start=start, end=None if start is None else start + len(doc.page_content))
        prompt = state["prompt"] or ""
        found = sorted((prompt.find(doc.page_content), cid, doc.page_content) for cid, doc in ids
                       if doc.page_content and doc.page_content in prompt)
        self.recorder.record(qid=str(state["qid"]), retrieved=[cid for cid, _ in ids],
                             context=[(cid, text) for _, cid, text in found], answer=state["answer"],
                             prompt=state["prompt"], question=state["question"])
