"""A small RAG pipeline that is not ledgerscope's: LangChain's text splitter, a plain BM25, a naive reader.

Used by the ingest tests as "the pipeline that is running": it answers the sample's
questions under a configuration, records each request with
:class:`ledgerscope.trace.Recorder` (seed 002's record) and its chunk store, and
can run as a LangChain chain (a retriever and a chat model) for the OpenInference
tests. Nothing here imports ledgerscope's pipeline.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "sample_ledgers"
CORPUS = SAMPLE / "corpus"
FIXTURES = SAMPLE / "fixtures.jsonl"

#: two configurations, as a team would compare them: chunk size and overlap (characters), context size
CONFIGS = {"small": (300, 0, 3), "large": (900, 100, 3)}
ABSTAIN = "I cannot answer from the provided sources."


def documents() -> dict[str, str]:
    return {
        p.relative_to(CORPUS).as_posix(): p.read_text(encoding="utf-8") for p in sorted(CORPUS.rglob("*.md"))
    }


def questions() -> list[dict]:
    return [json.loads(line) for line in FIXTURES.read_text(encoding="utf-8").splitlines() if line.strip()]


@dataclass(frozen=True)
class Chunk:
    chunk_id: str
    doc_id: str
    text: str
    start: int


def split(config: str) -> list[Chunk]:
    """LangChain's recursive splitter, with the start index it records."""
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    size, overlap, _ = CONFIGS[config]
    splitter = RecursiveCharacterTextSplitter(chunk_size=size, chunk_overlap=overlap, add_start_index=True)
    out = []
    for doc_id, text in documents().items():
        for i, d in enumerate(splitter.create_documents([text], metadatas=[{"source": doc_id}])):
            out.append(Chunk(f"{config}/{doc_id}#{i}", doc_id, d.page_content, d.metadata["start_index"]))
    return out


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


class BM25:
    """Okapi BM25 (k1 1.2, b 0.75) over the chunks' words."""

    def __init__(self, chunks: list[Chunk]):
        self.chunks = chunks
        self.tf = [Counter(_words(c.text)) for c in chunks]
        self.len = [sum(t.values()) for t in self.tf]
        self.avg = sum(self.len) / len(self.len)
        df: Counter = Counter()
        for t in self.tf:
            df.update(t.keys())
        n = len(chunks)
        self.idf = {w: math.log(1 + (n - f + 0.5) / (f + 0.5)) for w, f in df.items()}

    def search(self, query: str, k: int) -> list[tuple[Chunk, float]]:
        terms = _words(query)
        scored = []
        for c, tf, n in zip(self.chunks, self.tf, self.len, strict=True):
            s = sum(
                self.idf.get(w, 0.0) * tf[w] * 2.2 / (tf[w] + 1.2 * (0.25 + 0.75 * n / self.avg))
                for w in terms
                if tf[w]
            )
            scored.append((c, round(s, 6)))
        scored.sort(key=lambda x: (-x[1], x[0].chunk_id))
        return scored[:k]


def read(question: str, context: list[str]) -> tuple[str, list[str]]:
    """A naive extractive reader: the context sentence sharing most words with the question, cited."""
    q = set(_words(question)) - {"the", "a", "of", "on", "for", "is", "what", "how", "to", "in", "are"}
    best, label, score = ABSTAIN, None, 1
    for i, text in enumerate(context, start=1):
        for sent in re.split(r"(?<=[.!?])\s+", text):
            s = len(q & set(_words(sent)))
            if s > score:
                best, label, score = sent.strip(), str(i), s
    return (best, [] if label is None else [label])


def run(config: str, traces: Path, chunks: Path, n_retrieved: int = 20) -> None:
    """Answer every question under ``config``, recording traces and the chunk store (appended)."""
    from ledgerscope.trace import Recorder

    store = split(config)
    index = BM25(store)
    _, _, k = CONFIGS[config]
    with Recorder(traces, chunks=chunks, config=config, mode="a") as rec:
        for c in store:
            rec.chunk(c.chunk_id, c.doc_id, c.text, start=c.start, end=c.start + len(c.text), config=config)
        for q in questions():
            hits = index.search(q["question"], n_retrieved)
            context = [(c.chunk_id, c.text) for c, _ in hits[:k]]
            answer, cited = read(q["question"], [t for _, t in context])
            rec.record(
                qid=q["qid"],
                retrieved=[(c.chunk_id, s) for c, s in hits],
                context=context,
                answer=answer + (f" [{cited[0]}]" if cited else ""),
                citations=cited,
                question=q["question"],
            )


def run_staged(config: str, traces: Path, chunks: Path, n_retrieved: int = 20, rerank: int = 8) -> None:
    """The staged shape: a BM25 list, a "reranker" (the BM25 top ``rerank`` reordered by a second
    score, shorter chunks first) and the context from it; every other question records no citations."""
    from ledgerscope.trace import Recorder

    store = split(config)
    index = BM25(store)
    _, _, k = CONFIGS[config]
    with Recorder(traces, chunks=chunks, config=config, mode="a") as rec:
        for c in store:
            rec.chunk(c.chunk_id, c.doc_id, c.text, start=c.start, end=c.start + len(c.text), config=config)
        for i, q in enumerate(questions()):
            hits = index.search(q["question"], n_retrieved)
            reranked = sorted(hits[:rerank], key=lambda h: (len(h[0].text), h[0].chunk_id))
            context = [(c.chunk_id, c.text) for c, _ in reranked[:k]]
            answer, cited = read(q["question"], [t for _, t in context])
            rec.record(
                qid=q["qid"],
                retrieved=[],
                context=context,
                answer=answer,
                stages={
                    "bm25": [(c.chunk_id, s) for c, s in hits],
                    "reranked": [(c.chunk_id, float(-len(c.text))) for c, _ in reranked],
                },
                citations=cited if i % 2 == 0 else None,
            )


def langchain_pipeline(config: str):
    """The same pipeline as LangChain runnables (a retriever, a chat model), for OpenInference's
    LangChain instrumentor: ``invoke(question, config={"metadata": {"qid": ...}})`` returns the answer."""
    from langchain_core.callbacks import CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.language_models.chat_models import SimpleChatModel
    from langchain_core.prompts import ChatPromptTemplate
    from langchain_core.retrievers import BaseRetriever
    from langchain_core.runnables import RunnableLambda

    store = split(config)
    index = BM25(store)
    _, _, k = CONFIGS[config]

    class BM25Retriever(BaseRetriever):
        def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun):
            return [
                Document(
                    page_content=c.text,
                    metadata={"source": c.doc_id, "start_index": c.start, "chunk_id": c.chunk_id},
                )
                for c, _ in index.search(query, 20)
            ]

    class Reader(SimpleChatModel):
        @property
        def _llm_type(self) -> str:
            return "naive-reader"

        def _call(self, messages, stop=None, run_manager=None, **kwargs) -> str:
            text = messages[-1].content
            question = text.rsplit("Question: ", 1)[-1]
            sources = text.split("Sources:\n", 1)[-1].rsplit("\n\nQuestion: ", 1)[0].split("\n\n---\n\n")
            answer, cited = read(question, sources)
            return answer + (f" [{cited[0]}]" if cited else "")

    retriever, llm = BM25Retriever(), Reader()
    prompt = ChatPromptTemplate.from_messages(
        [
            ("system", "Answer the question using only the sources."),
            ("human", "Sources:\n{context}\n\nQuestion: {question}"),
        ]
    )

    def answer(question: str) -> str:
        docs = retriever.invoke(question)
        context = "\n\n---\n\n".join(d.page_content for d in docs[:k])
        msgs = prompt.invoke({"context": context, "question": question})
        return llm.invoke(msgs).content

    return RunnableLambda(answer)


_INDEXES: dict[str, BM25] = {}


def rerun_runner(question: str, qid: str, config: str, phase: str) -> dict:
    """``ledgerscope rerun --runner tests.ingest_pipeline:rerun_runner``: one question, as :func:`run`."""
    index = _INDEXES.setdefault(config, BM25(split(config)))
    hits = index.search(question, 20)
    context = [c.text for c, _ in hits[: CONFIGS[config][2]]]
    answer, cited = read(question, context)
    return {
        "retrieved_ids": [c.chunk_id for c, _ in hits],
        "context_ids": [c.chunk_id for c, _ in hits[:3]],
        "context_text": context,
        "answer": answer + (f" [{cited[0]}]" if cited else ""),
    }


def rerun_runner_changed(question: str, qid: str, config: str, phase: str) -> dict:
    """The same pipeline after a change: one fewer chunk of context."""
    out = rerun_runner(question, qid, config, phase)
    return {**out, "context_ids": out["context_ids"][:2]}
