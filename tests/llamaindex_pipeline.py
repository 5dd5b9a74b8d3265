"""A LlamaIndex pipeline as a team runs it, instrumented by OpenInference, with what it really did.

``SentenceSplitter`` + ``VectorStoreIndex`` over :mod:`tests.framework_corpus`
(a hashing bag-of-words embedding of the test's own: no network, no model), a
completion model and a chat model of the test's own (an extractive reader
over the prompt), a postprocessor that keeps the two shortest nodes, an
evaluation harness's parent span over every request, one request whose model
times out, one that retrieves nothing (a metadata filter no node matches).
:func:`run` exports the spans as OTLP JSON, writes the chunk store with
:mod:`ledgerscope.trace.llama_index` and returns the truth: per (config, qid)
the nodes the retriever returned, the nodes the synthesizer read, the literal
prompts the model received, the answer, or the error.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from . import framework_corpus as fc

CONFIGS = ("completion", "chat")
TOP_K = 4
FAILS = {("completion", "q-session")}
EMPTY = {("completion", "q-refund")}


@dataclass
class Truth:
    retrieved: list[tuple[str, str, int, int]] = field(default_factory=list)  # node id, doc, start, end
    read: list[tuple[str, str, int, int]] = field(default_factory=list)
    prompts: list[str] = field(default_factory=list)
    answer: str | None = None
    error: str | None = None


def _classes():
    from llama_index.core.bridge.pydantic import Field, PrivateAttr
    from llama_index.core.embeddings import BaseEmbedding
    from llama_index.core.llms import (
        ChatMessage,
        ChatResponse,
        CompletionResponse,
        CustomLLM,
        LLMMetadata,
    )
    from llama_index.core.llms.callbacks import llm_chat_callback, llm_completion_callback
    from llama_index.core.postprocessor.types import BaseNodePostprocessor

    class HashEmbedding(BaseEmbedding):
        """Words hashed into 256 dimensions, normalised: deterministic, no model."""

        def _vec(self, text: str) -> list[float]:
            v = [0.0] * 256
            for w in re.findall(r"[a-z0-9]+", text.lower()):
                v[int(hashlib.md5(w.encode()).hexdigest(), 16) % 256] += 1.0
            n = sum(x * x for x in v) ** 0.5 or 1.0
            return [x / n for x in v]

        def _get_query_embedding(self, query: str) -> list[float]:
            return self._vec(query)

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return self._vec(query)

        def _get_text_embedding(self, text: str) -> list[float]:
            return self._vec(text)

    def _answer(prompt: str) -> str:
        question = prompt.rsplit("Query: ", 1)[-1].split("\n", 1)[0]
        return fc.sentence_reader(question, prompt.split("---------------------")[1])

    class CompletionReader(CustomLLM):
        """A completion model: reads the literal prompt, answers with its best sentence."""

        fail_on: list[str] = Field(default_factory=list)
        _seen: list = PrivateAttr(default_factory=list)

        @property
        def metadata(self) -> LLMMetadata:
            return LLMMetadata(model_name="completion-reader", is_chat_model=False)

        @llm_completion_callback()
        def complete(self, prompt: str, formatted: bool = False, **kwargs) -> CompletionResponse:
            self._seen.append(prompt)
            if any(f in prompt for f in self.fail_on):
                raise TimeoutError("the model did not answer within 30 s")
            return CompletionResponse(text=_answer(prompt))

        @llm_completion_callback()
        def stream_complete(self, prompt: str, formatted: bool = False, **kwargs):
            raise NotImplementedError

    class ChatReader(CompletionReader):
        """A chat model: the same reader over the messages."""

        @property
        def metadata(self) -> LLMMetadata:
            return LLMMetadata(model_name="chat-reader", is_chat_model=True)

        @llm_chat_callback()
        def chat(self, messages, **kwargs) -> ChatResponse:
            text = "\n\n".join(str(m.content) for m in messages)
            self._seen.append(text)
            return ChatResponse(message=ChatMessage(role="assistant", content=_answer(text)))

    class KeepShortest(BaseNodePostprocessor):
        """A postprocessor that keeps the ``n`` shortest nodes, in rank order (as a token budget might)."""

        n: int = 2

        def _postprocess_nodes(self, nodes, query_bundle=None):
            keep = {id(x) for x in sorted(nodes, key=lambda x: len(x.node.get_content()))[: self.n]}
            return [x for x in nodes if id(x) in keep]

    return HashEmbedding, CompletionReader, ChatReader, KeepShortest


def _node(n) -> tuple[str, str, int, int]:
    return (n.node.node_id, n.node.ref_doc_id, n.node.start_char_idx, n.node.end_char_idx)


def run(root: Path) -> dict:
    """Build, run, export; returns the paths and the truth (rules in the module docstring)."""
    from google.protobuf.json_format import MessageToDict
    from llama_index.core import Document, VectorStoreIndex
    from llama_index.core.node_parser import SentenceSplitter
    from llama_index.core.query_engine import RetrieverQueryEngine
    from llama_index.core.vector_stores import ExactMatchFilter, MetadataFilters
    from openinference.instrumentation import using_metadata
    from openinference.instrumentation.llama_index import LlamaIndexInstrumentor
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from ledgerscope.trace import Recorder
    from ledgerscope.trace.llama_index import record_index

    HashEmbedding, CompletionReader, ChatReader, KeepShortest = _classes()
    corpus, fixtures = fc.write(root)
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    instrumentor = LlamaIndexInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    truth: dict[tuple[str, str], Truth] = {}
    try:
        embed = HashEmbedding()
        docs = [Document(text=text, id_=doc_id) for doc_id, text in fc.DOCS.items()]
        index = VectorStoreIndex.from_documents(  # traced too: the index-building trace ingest skips
            docs, transformations=[SentenceSplitter(chunk_size=32, chunk_overlap=0)], embed_model=embed
        )
        harness = provider.get_tracer("evaluation-harness")
        for config in CONFIGS:
            llm = (CompletionReader if config == "completion" else ChatReader)(
                fail_on=[fc.QUESTIONS[q][0] for c, q in FAILS if c == config]
            )
            post = [KeepShortest(n=2)] if config == "completion" else []
            engine = index.as_query_engine(llm=llm, similarity_top_k=TOP_K, node_postprocessors=post)
            nothing = RetrieverQueryEngine.from_args(
                index.as_retriever(
                    similarity_top_k=TOP_K,
                    filters=MetadataFilters(filters=[ExactMatchFilter(key="language", value="none")]),
                ),
                llm=llm,
            )
            with harness.start_as_current_span(f"evaluate {config}"):
                for qid, (question, *_rest) in fc.QUESTIONS.items():
                    t = truth[(config, qid)] = Truth()
                    before = len(llm._seen)
                    with using_metadata({"qid": qid, "config": config}):
                        try:
                            response = (nothing if (config, qid) in EMPTY else engine).query(question)
                        except TimeoutError as exc:
                            t.error = f"TimeoutError: {exc}"
                        else:
                            t.answer = str(response)
                            t.read = [_node(n) for n in response.source_nodes]
                    t.prompts = llm._seen[before:]
        with Recorder(None, chunks=root / "chunks.jsonl") as rec:
            record_index(rec, index)
    finally:
        instrumentor.uninstrument()
        provider.force_flush()
    for (config, qid), t in truth.items():
        if (config, qid) not in EMPTY:
            t.retrieved = [
                _node(n)
                for n in index.as_retriever(similarity_top_k=TOP_K, embed_model=embed).retrieve(
                    fc.QUESTIONS[qid][0]
                )
            ]
    spans = root / "spans.otlp.json"
    spans.write_text(json.dumps(MessageToDict(encode_spans(memory.get_finished_spans()))), encoding="utf-8")
    return {
        "spans": spans,
        "chunks": root / "chunks.jsonl",
        "corpus": corpus,
        "fixtures": fixtures,
        "truth": truth,
        "index": index,
        "n_spans": len(memory.get_finished_spans()),
    }
