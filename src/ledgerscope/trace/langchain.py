"""A LangChain callback handler that fills a :class:`ledgerscope.trace.Recorder` (``ledgerscope[langchain]``).

    from ledgerscope.trace import Recorder
    from ledgerscope.trace.langchain import LedgerscopeCallbackHandler

    rec = Recorder("traces.jsonl", chunks="chunks.jsonl", config="baseline")
    handler = LedgerscopeCallbackHandler(rec)
    handler.index(split_documents)            # the whole index: the chunker's output is diagnosed too
    chain.invoke(question, config={"callbacks": [handler], "metadata": {"qid": "q-0143"}})
    handler.close()                           # says how many requests were recorded, failed, skipped

Declared rules (``docs/ingest_langchain.md`` shows them at work):

* a request is the run whose metadata names the question id (``qid_key``)
  while its parent run's does not (an evaluation harness's parent run, a
  batch, nested chains: one request each); a run below it naming another
  question id is a request of its own;
* its retrieved list is the documents of its outermost retrievers, in order
  (a retriever inside another, as in an ensemble, feeds the outer one); the
  model calls' prompts are what the model read, and the context is every
  retrieved document whose content a prompt holds, in prompt order; the
  last call's output is the answer;
* with no model call (an answer step that is a plain function) the answer is
  the request's output, and the context is every retrieved document whose
  content the input of the last step handed retrieved text holds (what the
  answer step read), in its order; a request that retrieved nothing and
  called no model abstained;
* a request that raised (``on_chain_error``, or its last model call failed) is
  recorded with its ``error``: an infrastructure failure, never judged. A
  problem inside the handler never escapes into LangChain (which would swallow
  it and lose the request): it is recorded as the request's ``error``;
* a chunk id is ``metadata[id_key]``, else derived from ``metadata[doc_key]``,
  ``metadata[start_key]`` and the content (:func:`.spec.derived_chunk_id`,
  the rule the span mapping uses), never ``Document.id`` (vector stores give
  random ids that change every run) unless ``use_document_ids=True``;
* the chunk store gets every document a request retrieved, declared
  ``partial`` (only what was retrieved), unless :meth:`index` recorded the
  whole index first; chunks carry the recorder's config;
* :meth:`close` records any request that never ended as failed, closes the
  recorder and returns (and prints) the counts: recorded, failed, skipped (a
  run that retrieved or called a model with no question id).

Needs ``langchain-core``; nothing else of ledgerscope's is imported.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterable
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler

from ledgerscope.trace.recorder import Recorder
from ledgerscope.trace.spec import derived_chunk_id

_ANSWER_KEYS = ("answer", "output", "result", "response", "text", "content")


class _Request:
    """What one request did, as the callbacks saw it."""

    def __init__(self, qid: str, question: str | None, config: str | None, phase: str | None):
        self.qid, self.question, self.config, self.phase = qid, question, config, phase
        self.retrievals: list[tuple[UUID, list]] = []  # (retriever run, its documents)
        self.retrievers: set[UUID] = set()
        self.prompts: list[str] = []
        self.answer: str | None = None
        self.llm_error: str | None = None
        self.problems: list[str] = []
        self.inputs: list[str] = []  # the text handed to each step that started after a retrieval


class LedgerscopeCallbackHandler(BaseCallbackHandler):
    """Records each request of a LangChain pipeline as one ``ledgerscope-trace/1`` line."""

    raise_error = False

    def __init__(
        self,
        recorder: Recorder,
        qid_key: str = "qid",
        doc_key: str = "source",
        start_key: str = "start_index",
        id_key: str = "chunk_id",
        use_document_ids: bool = False,
        quiet: bool = False,
    ):
        self.recorder = recorder
        self.qid_key, self.doc_key, self.start_key, self.id_key = qid_key, doc_key, start_key, id_key
        self.use_document_ids, self.quiet = use_document_ids, quiet
        self._lock = threading.RLock()
        self._parent: dict[UUID, UUID | None] = {}
        self._request_of: dict[UUID, UUID | None] = {}  # run -> the run that is its request's root
        self._requests: dict[UUID, _Request] = {}
        self._loose: dict[UUID, bool] = {}  # root runs without a qid -> did they retrieve or call a model
        self._indexed = False
        self.counts = {"recorded": 0, "failed": 0, "skipped": 0, "not_recorded": 0}
        self.notes: list[str] = []

    # -- the index ---------------------------------------------------------------------------------

    def index(self, documents: Iterable[Any]) -> int:
        """Record every chunk of the index (LangChain documents, e.g. a splitter's output), so the
        store is the whole index and the chunker's output (step 2) is diagnosed. Returns how many."""
        n = 0
        for doc in documents:
            self._store(doc, partial=False)
            n += 1
        self._indexed = True
        return n

    def chunk_id(self, doc: Any) -> str:
        """A document's chunk id (rules in the module docstring)."""
        meta = getattr(doc, "metadata", None) or {}
        cid = meta.get(self.id_key)
        if self.use_document_ids and not cid:
            cid = getattr(doc, "id", None)
        if isinstance(cid, int) and not isinstance(cid, bool):
            cid = str(cid)
        if isinstance(cid, str) and cid:
            return cid
        source, start = meta.get(self.doc_key), meta.get(self.start_key)
        return derived_chunk_id(
            source if isinstance(source, str) else None,
            start if isinstance(start, int) and not isinstance(start, bool) else None,
            str(doc.page_content),
        )

    def _store(self, doc: Any, partial: bool) -> str:
        cid = self.chunk_id(doc)
        meta = getattr(doc, "metadata", None) or {}
        source, start = meta.get(self.doc_key), meta.get(self.start_key)
        if not isinstance(source, str) or not source:
            raise ValueError(
                f"document {cid[:60]!r} has no metadata[{self.doc_key!r}] naming its source "
                "document: it cannot go to the chunk store"
            )
        if isinstance(start, bool) or not isinstance(start, int):
            start = None
        if self.recorder._chunks is not None:
            text = str(doc.page_content)
            self.recorder.chunk(
                cid,
                source,
                text,
                start=start,
                end=None if start is None else start + len(text),
                partial=partial,
            )
        return cid

    # -- which request a run belongs to ---------------------------------------------------------------

    def _start(
        self, run_id: UUID, parent_run_id: UUID | None, metadata: dict | None, question: Any = None
    ) -> _Request | None:
        with self._lock:
            self._parent[run_id] = parent_run_id
            outer = self._request_of.get(parent_run_id) if parent_run_id is not None else None
            qid = (metadata or {}).get(self.qid_key)
            qid = None if qid in (None, "") else str(qid)
            if qid is not None and (outer is None or self._requests[outer].qid != qid):
                meta = metadata or {}
                self._requests[run_id] = _Request(
                    qid,
                    question if isinstance(question, str) else None,
                    _text(meta.get("config")),
                    _text(meta.get("phase")),
                )
                outer = run_id
            self._request_of[run_id] = outer
            if outer is None and (parent_run_id is None or parent_run_id not in self._request_of):
                self._loose.setdefault(run_id, False)
            return None if outer is None else self._requests[outer]

    def _request(self, run_id: UUID) -> _Request | None:
        with self._lock:
            root = self._request_of.get(run_id)
            if root is None:
                top = self._top(run_id)
                if top in self._loose:
                    self._loose[top] = True
                return None
            return self._requests.get(root)

    def _top(self, run_id: UUID) -> UUID:
        """The outermost run this handler saw above ``run_id``."""
        seen = {run_id}
        while (up := self._parent.get(run_id)) is not None and up in self._parent and up not in seen:
            seen.add(up)
            run_id = up
        return run_id

    def _guard(self, run_id: UUID, what: str, fn, *args) -> None:
        """Run one callback's work; a problem is kept for the request's ``error``, never raised."""
        try:
            fn(*args)
        except Exception as exc:  # LangChain would swallow it and lose the request
            req = self._requests.get(self._request_of.get(run_id) or run_id)
            message = f"ledgerscope handler, {what}: {type(exc).__name__}: {exc}"
            if req is not None:
                req.problems.append(message)
            else:
                self.notes.append(message)

    # -- callbacks --------------------------------------------------------------------------------

    def on_chain_start(
        self,
        serialized,
        inputs,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        def work():
            req = self._start(run_id, parent_run_id, metadata, inputs)
            if req is not None and req.retrievals:
                req.inputs.append(_text_of(inputs))

        self._guard(run_id, "on_chain_start", work)

    def on_retriever_start(
        self,
        serialized,
        query,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        def work():
            req = self._start(run_id, parent_run_id, metadata, query)
            if req is not None:
                req.retrievers.add(run_id)
            self._request(run_id)

        self._guard(run_id, "on_retriever_start", work)

    def on_retriever_end(
        self, documents, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        def work():
            req = self._request(run_id)
            if req is not None:
                req.retrievals.append((run_id, list(documents)))
            self._finish(run_id, None, None)  # a retriever run that is a request (or a loose run) ends

        self._guard(run_id, "on_retriever_end", work)

    def on_retriever_error(
        self, error: BaseException, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        self._guard(run_id, "on_retriever_error", self._failed_run, run_id, error)

    def on_chat_model_start(
        self,
        serialized,
        messages,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        def prompt() -> str | None:
            return "\n\n".join(_content(m) for m in messages[0]) if messages else None

        self._guard(
            run_id, "on_chat_model_start", self._model_started, run_id, parent_run_id, metadata, prompt
        )

    def on_llm_start(
        self,
        serialized,
        prompts,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        def prompt() -> str | None:
            return "\n\n".join(str(p) for p in prompts) if prompts else None

        self._guard(run_id, "on_llm_start", self._model_started, run_id, parent_run_id, metadata, prompt)

    def _model_started(
        self,
        run_id: UUID,
        parent_run_id: UUID | None,
        metadata: dict[str, Any] | None,
        prompt: Callable[[], str | None],
    ) -> None:
        """A chat or completion model's call began: its request, and the prompt it was sent (read
        inside the guard: a message of an unexpected shape is recorded, never raised)."""
        req = self._start(run_id, parent_run_id, metadata)
        self._request(run_id)
        text = prompt()
        if req is not None and text:
            req.prompts.append(text)

    def on_llm_end(self, response, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any) -> None:
        def work():
            req = self._request(run_id)
            if req is not None and response.generations and response.generations[0]:
                gen = response.generations[0][0]
                message = getattr(gen, "message", None)
                req.answer = gen.text or (_content(message) if message is not None else "")
                req.llm_error = None
            self._finish(run_id, None, None)

        self._guard(run_id, "on_llm_end", work)

    def on_llm_error(
        self, error: BaseException, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        def work():
            req = self._request(run_id)
            if req is not None:
                req.llm_error = f"{type(error).__name__}: {error}"
            self._failed_run(run_id, error)

        self._guard(run_id, "on_llm_error", work)

    def on_chain_end(
        self, outputs, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        self._guard(run_id, "on_chain_end", self._finish, run_id, outputs, None)

    def on_chain_error(
        self, error: BaseException, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        self._guard(run_id, "on_chain_error", self._failed_run, run_id, error)

    # -- recording --------------------------------------------------------------------------------

    def _failed_run(self, run_id: UUID, error: BaseException) -> None:
        if self._request_of.get(run_id) == run_id:
            self._finish(run_id, None, f"{type(error).__name__}: {error}")
        elif run_id in self._loose:
            self._end_loose(run_id)

    def _finish(self, run_id: UUID, outputs: Any, error: str | None) -> None:
        """The end of a run: a request's root records it; a root run without a question id is counted."""
        with self._lock:
            req = self._requests.pop(run_id, None) if self._request_of.get(run_id) == run_id else None
        if req is None:
            if run_id in self._loose:
                self._end_loose(run_id)
            return
        try:
            self._record(req, outputs, error)
        except Exception as exc:  # never into LangChain; a line still says what happened
            self._record_failure(req, f"ledgerscope handler: {type(exc).__name__}: {exc}")
        with self._lock:
            self._forget(run_id)

    def _end_loose(self, run_id: UUID) -> None:
        with self._lock:
            did = self._loose.pop(run_id, False)
            self._forget(run_id)
        if did:
            self._count("skipped")

    def _count(self, what: str) -> None:
        with self._lock:
            self.counts[what] += 1

    def _forget(self, root: UUID) -> None:
        """Drop the run bookkeeping of a finished top-level run (a long-running service stays small)."""
        if self._top(root) != root:
            return
        gone = [r for r in self._parent if self._top(r) == root]
        for r in gone:
            self._parent.pop(r, None)
            self._request_of.pop(r, None)

    def _retrieved(self, req: _Request) -> list[Any]:
        """The documents of the request's outermost retrievers, in order, each chunk once."""
        out, seen = [], set()
        for run, docs in req.retrievals:
            up, inner = self._parent.get(run), False
            while up is not None and not inner:
                inner = up in req.retrievers
                up = self._parent.get(up)
            if inner:
                continue
            for doc in docs:
                cid = self.chunk_id(doc)
                if cid not in seen:
                    seen.add(cid)
                    out.append((cid, doc))
        return out

    def _record(self, req: _Request, outputs: Any, error: str | None) -> None:
        docs = self._retrieved(req)
        for _, doc in docs:
            try:
                self._store(doc, partial=not self._indexed)
            except ValueError as exc:  # the ingest stops on the chunk, naming it; say so at close()
                if len(self.notes) < 100:
                    self.notes.append(str(exc))
        prompt = "\n\n".join(req.prompts) if req.prompts else None
        abstained = None
        if prompt is not None:
            found = sorted(
                (prompt.find(doc.page_content), cid)
                for cid, doc in docs
                if doc.page_content and doc.page_content in prompt
            )
            context = [(cid, next(str(d.page_content) for c, d in docs if c == cid)) for _, cid in found]
            answer = req.answer
        else:
            read = next(
                (
                    t
                    for t in reversed(req.inputs)
                    if any(d.page_content and d.page_content in t for _, d in docs)
                ),
                "",
            )
            found = sorted(
                (read.find(doc.page_content), cid)
                for cid, doc in docs
                if doc.page_content and doc.page_content in read
            )
            context = [(cid, next(str(d.page_content) for c, d in docs if c == cid)) for _, cid in found]
            answer = _answer(outputs)
            abstained = True if not docs and error is None else None
        error = error or req.llm_error or ("; ".join(req.problems) if req.problems else None)
        self.recorder.record(
            qid=req.qid,
            retrieved=[cid for cid, _ in docs],
            context=context,
            context_text=None if context else [],
            answer=None if error else answer,
            prompt=prompt,
            question=req.question,
            config=req.config,
            phase=req.phase,
            abstained=abstained,
            error=error,
        )
        self._count("failed" if error else "recorded")

    def _record_failure(self, req: _Request, message: str) -> None:
        try:
            self.recorder.record(
                qid=req.qid,
                retrieved=[],
                context=[],
                context_text=[],
                answer=None,
                config=req.config,
                phase=req.phase,
                error=message,
            )
            self._count("failed")
        except Exception as exc:  # the recorder itself failed: counted, said at close()
            self._count("not_recorded")
            self.notes.append(f"request {req.qid!r} not recorded: {type(exc).__name__}: {exc}")

    def close(self) -> dict[str, int]:
        """Record every request that never ended as failed, close the recorder, say the counts."""
        with self._lock:
            pending = list(self._requests.values())
            self._requests.clear()
        for req in pending:
            self._record_failure(req, "the request never ended (still running when the handler closed)")
        self.recorder.close()
        if not self.quiet:
            c = self.counts
            line = (
                f"ledgerscope: {c['recorded']} request(s) recorded, {c['failed']} failed (recorded as "
                f"infrastructure failures), {c['skipped']} skipped (no {self.qid_key!r} in the run's "
                "metadata)"
            )
            if c["not_recorded"]:
                line += f", {c['not_recorded']} NOT recorded"
            print(line, *self.notes[:5], sep="\n  ", file=sys.stderr)
        return dict(self.counts)


def _text(value: Any) -> str | None:
    return None if value in (None, "") else str(value)


def _text_of(value: Any, depth: int = 0) -> str:
    """The text a step was handed: strings, documents' content, messages' text, nested in mappings and
    lists (what an answer step that is a plain function can read)."""
    if depth > 8:
        return ""
    if isinstance(value, str):
        return value
    if hasattr(value, "page_content"):
        return str(value.page_content)
    if hasattr(value, "content"):
        return _content(value)
    if isinstance(value, dict):
        return "\n\n".join(_text_of(v, depth + 1) for v in value.values())
    if isinstance(value, list | tuple):
        return "\n\n".join(_text_of(v, depth + 1) for v in value)
    return ""


def _content(message: Any) -> str:
    """A message's text (a string, or the text parts of a list of content blocks)."""
    content = getattr(message, "content", message)
    if isinstance(content, list):
        return "".join(
            b if isinstance(b, str) else str(b.get("text", "")) if isinstance(b, dict) else ""
            for b in content
        )
    return str(content)


def _answer(outputs: Any) -> str | None:
    """A request's answer from its output when no model call happened: a string, a message's text,
    or a mapping's answer field."""
    if isinstance(outputs, str):
        return outputs
    if hasattr(outputs, "content"):
        return _content(outputs)
    if isinstance(outputs, dict):
        for key in _ANSWER_KEYS:
            if key in outputs and outputs[key] is not None:
                return _answer(outputs[key])
    return None
