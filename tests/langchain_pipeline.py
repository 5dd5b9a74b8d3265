"""A LangChain pipeline as a team runs it, recorded by ledgerscope's callback handler, with its truth.

LangChain's ``RecursiveCharacterTextSplitter`` over :mod:`tests.framework_corpus`
(documents without ids, ``start_index`` recorded), a word-overlap retriever, and
three configurations recorded into the same two files: ``chat`` (a chat model,
run under an evaluation harness's parent run, one request timing out, one
retrieving nothing), ``completion`` (a completion model, run as a batch) and
``lambda`` (an answer step that is a plain function, no model call; its store
not indexed: partial). :func:`run` returns the files and the truth per
(config, qid): the documents retrieved, the documents the prompt held, the
prompt, the answer or the error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from . import framework_corpus as fc

K, CONTEXT = 4, 3
FAILS = {("chat", "q-session")}
EMPTY = {("chat", "q-refund")}


@dataclass
class Truth:
    retrieved: list = field(default_factory=list)  # LangChain documents, in rank order
    read: list = field(default_factory=list)
    prompts: list[str] = field(default_factory=list)
    answer: str | None = None
    error: str | None = None


def split() -> list:
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    splitter = RecursiveCharacterTextSplitter(chunk_size=90, chunk_overlap=0, add_start_index=True)
    return splitter.create_documents(list(fc.DOCS.values()), metadatas=[{"source": d} for d in fc.DOCS])


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


def components(chunks: list, prompts: list[str]):
    """(retriever, chat model, completion model) of the test's own; the models log every prompt."""
    from langchain_core.language_models.chat_models import SimpleChatModel
    from langchain_core.language_models.llms import LLM
    from langchain_core.retrievers import BaseRetriever

    class WordRetriever(BaseRetriever):
        empty_for: tuple[str, ...] = ()

        def _get_relevant_documents(self, query, *, run_manager):
            if query in self.empty_for:
                return []
            ranked = sorted(
                chunks,
                key=lambda d: (
                    -len(_words(query) & _words(d.page_content)),
                    d.metadata["source"],
                    d.metadata["start_index"],
                ),
            )
            return ranked[:K]

    def answer(prompt: str) -> str:
        question = prompt.rsplit("Question: ", 1)[-1]
        return fc.sentence_reader(question, prompt.split("Sources:\n", 1)[-1].rsplit("Question: ", 1)[0])

    class ChatReader(SimpleChatModel):
        fail_on: tuple[str, ...] = ()

        @property
        def _llm_type(self) -> str:
            return "chat-reader"

        def _call(self, messages, stop=None, run_manager=None, **kwargs) -> str:
            text = "\n\n".join(str(m.content) for m in messages)
            prompts.append(text)
            if any(f in text for f in self.fail_on):
                raise TimeoutError("the model did not answer within 30 s")
            return answer(text)

    class CompletionReader(LLM):
        @property
        def _llm_type(self) -> str:
            return "completion-reader"

        def _call(self, prompt, stop=None, run_manager=None, **kwargs) -> str:
            prompts.append(prompt)
            return answer(prompt)

    return WordRetriever, ChatReader, CompletionReader


def chains(chunks: list, prompts: list[str]) -> dict:
    """One runnable per config: ``invoke(question)`` returns the answer."""
    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.prompts import ChatPromptTemplate, PromptTemplate
    from langchain_core.runnables import RunnableLambda, RunnablePassthrough

    WordRetriever, ChatReader, CompletionReader = components(chunks, prompts)
    fmt = RunnableLambda(lambda docs: "\n\n".join(d.page_content for d in docs[:CONTEXT]))
    empty = [fc.QUESTIONS[q][0] for c, q in EMPTY]
    inputs = {"context": WordRetriever(empty_for=tuple(empty)) | fmt, "question": RunnablePassthrough()}
    chat = ChatPromptTemplate.from_messages(
        [
            ("system", "Answer from the sources only."),
            ("human", "Sources:\n{context}\n\nQuestion: {question}"),
        ]
    )
    completion = PromptTemplate.from_template("Sources:\n{context}\n\nQuestion: {question}")
    fails = [fc.QUESTIONS[q][0] for c, q in FAILS]
    return {
        "chat": inputs | chat | ChatReader(fail_on=tuple(fails)) | StrOutputParser(),
        "completion": {"context": WordRetriever() | fmt, "question": RunnablePassthrough()}
        | completion
        | CompletionReader()
        | StrOutputParser(),
        "lambda": {"context": WordRetriever() | fmt, "question": RunnablePassthrough()}
        | RunnableLambda(lambda x: fc.sentence_reader(x["question"], x["context"])),
    }


def run(root: Path) -> dict:
    """Record the three configs into ``root``/traces.jsonl and chunks.jsonl (rules above)."""
    from langchain_core.runnables import RunnableLambda

    from ledgerscope.trace import Recorder
    from ledgerscope.trace.langchain import LedgerscopeCallbackHandler

    corpus, fixtures = fc.write(root)
    chunks = split()
    prompts: list[str] = []
    runnables = chains(chunks, prompts)
    truth: dict[tuple[str, str], Truth] = {}
    traces, store = root / "traces.jsonl", root / "chunks.jsonl"
    counts = {}
    for i, config in enumerate(("chat", "completion", "lambda")):
        rec = Recorder(traces, chunks=store, config=config, mode="a" if i else "x")
        handler = LedgerscopeCallbackHandler(rec, quiet=True)
        if config != "lambda":
            handler.index(chunks)  # the whole index: step 2 diagnosed
        chain = runnables[config]
        qids = list(fc.QUESTIONS)

        def one(qid: str, config=config, chain=chain) -> None:
            t = truth[(config, qid)] = Truth()
            question = fc.QUESTIONS[qid][0]
            before = len(prompts)
            try:
                t.answer = chain.invoke(question, config={"metadata": {"qid": qid}})
            except TimeoutError as exc:
                t.error = f"TimeoutError: {exc}"
            t.prompts = prompts[before:]

        if config == "chat":  # an evaluation harness: one parent run over every request
            RunnableLambda(lambda qs: [one(q) for q in qs]).invoke(qids, config={"callbacks": [handler]})
        elif config == "completion":  # a batch, sequential so the prompts log stays in order
            for qid in qids:
                one_config = {"callbacks": [handler], "metadata": {"qid": qid}}
                t = truth[(config, qid)] = Truth()
                before = len(prompts)
                t.answer = chain.batch([fc.QUESTIONS[qid][0]], config=[one_config])[0]
                t.prompts = prompts[before:]
        else:
            for qid in qids:
                t = truth[(config, qid)] = Truth()
                t.answer = chain.invoke(
                    fc.QUESTIONS[qid][0], config={"callbacks": [handler], "metadata": {"qid": qid}}
                )
            chain.invoke("Who wrote the changelog?", config={"callbacks": [handler]})  # no qid: skipped
        counts[config] = handler.close()
    for (config, qid), t in truth.items():
        question = fc.QUESTIONS[qid][0]
        t.retrieved = (
            []
            if (config, qid) in EMPTY
            else sorted(
                chunks,
                key=lambda d: (
                    -len(_words(question) & _words(d.page_content)),
                    d.metadata["source"],
                    d.metadata["start_index"],
                ),
            )[:K]
        )
        t.read = t.retrieved[:CONTEXT]
    return {
        "traces": traces,
        "chunks": store,
        "corpus": corpus,
        "fixtures": fixtures,
        "truth": truth,
        "counts": counts,
        "split": chunks,
    }
