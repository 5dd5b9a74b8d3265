"""LangChain with ledgerscope's callback handler, ingested: the ledger against what the pipeline did.

One module-scoped run of :mod:`tests.langchain_pipeline`: splitter documents
without ids, three configs recorded into the same two files (an evaluation
harness's parent run, a batch, an answer step with no model), a model timeout,
an empty retrieval, a run without a question id. Each test compares the
ledger with the run's truth: requests, failures, chunk ids, packed context,
support, prompt tokens. No network, no model download.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from . import framework_corpus as fc
from . import langchain_pipeline as lp

pytest.importorskip("langchain_core")
pytest.importorskip("langchain_text_splitters")


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> dict:
    return lp.run(tmp_path_factory.mktemp("langchain"))


@pytest.fixture(scope="module")
def ledger(run, tmp_path_factory):
    from ledgerscope.ingest.build import IngestOptions, ingest

    out = tmp_path_factory.mktemp("ledger") / "ledger"
    opts = IngestOptions([run["traces"]], run["chunks"], run["fixtures"], out, corpus=run["corpus"])
    return out, ingest(opts)


def _records(out: Path) -> dict[tuple[str, str], dict]:
    from ledgerscope.ledger.read import connect

    cur = connect(out).execute("SELECT * FROM records")
    cols = [d[0] for d in cur.description]
    return {(r["arm"], r["qid"]): r for r in (dict(zip(cols, row, strict=True)) for row in cur.fetchall())}


def _cid(doc) -> str:
    from ledgerscope.trace.spec import derived_chunk_id

    return derived_chunk_id(doc.metadata["source"], doc.metadata["start_index"], doc.page_content)


def _intervals(docs) -> list[tuple[str, int, int]]:
    return [
        (d.metadata["source"], d.metadata["start_index"], d.metadata["start_index"] + len(d.page_content))
        for d in docs
    ]


def test_every_request_is_one_record_and_the_handler_says_so(run, ledger):
    assert set(_records(ledger[0])) == set(run["truth"])
    assert run["counts"] == {
        "chat": {"recorded": 7, "failed": 1, "skipped": 0, "not_recorded": 0},
        "completion": {"recorded": 8, "failed": 0, "skipped": 0, "not_recorded": 0},
        "lambda": {"recorded": 8, "failed": 0, "skipped": 1, "not_recorded": 0},
    }
    assert ledger[1].failed == {"chat": 1}


def test_chunk_ids_are_stable_and_the_store_is_the_index(run, ledger):
    """Splitter documents carry no id: each gets the derived id (never "None"); two configs indexed the
    same chunks into one store (one chunk each); the third, not indexed, declared its store partial."""
    lines = [json.loads(x) for x in run["chunks"].read_text().splitlines()]
    by_id: dict[str, list[dict]] = {}
    for line in lines:
        by_id.setdefault(line["chunk_id"], []).append(line)
    assert set(by_id) == {_cid(d) for d in run["split"]} and "None" not in by_id
    assert ledger[1].resolution.counts["verified"] == len(run["split"])
    chunked = ledger[1].chunked
    assert chunked["chat"] == chunked["completion"] == "recorded"
    assert chunked["lambda"].startswith("not recorded: the chunk store declares itself partial")


def test_failures_and_answers_are_what_the_chain_returned(run, ledger):
    records = _records(ledger[0])
    for key, truth in run["truth"].items():
        rec = records[key]
        if truth.error:
            assert rec["answer_verdict"] == "infrastructure-failure", key
            assert rec["generator_error"] == "TimeoutError: the model did not answer within 30 s", key
        else:
            assert rec["generator_error"] is None and rec["answer"] == truth.answer, key


def test_packed_context_and_support_are_what_the_model_read(run, ledger):
    records = _records(ledger[0])
    for key, truth in run["truth"].items():
        rec = records[key]
        assert list(rec["packed_unit_ids"]) == [_cid(d) for d in truth.read], key
        if fc.QUESTIONS[key[1]][1] is None:
            continue
        assert rec["support_fused"] == fc.support(key[1], _intervals(truth.retrieved)), key
        assert rec["support_packed"] == fc.support(key[1], _intervals(truth.read)), key
    (empty,) = lp.EMPTY
    assert records[empty]["support_fused"] is False and list(records[empty]["packed_unit_ids"]) == []


def test_prompt_tokens_count_the_prompt_the_model_received(run, ledger):
    from ledgerscope.ingest.build import count_tokens
    from ledgerscope.pipeline.embedding.encoder import BUNDLED_MINILM, TokenCounter

    tokenizer = TokenCounter(BUNDLED_MINILM).tokenizer
    records = _records(ledger[0])
    for key, truth in run["truth"].items():
        want = count_tokens(tokenizer, truth.prompts)[0] if truth.prompts else None
        assert records[key]["prompt_tokens"] == want, key


def test_compare_pairs_the_configs_and_counts_the_failure(ledger):
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "ledgerscope.cli",
            "compare",
            str(ledger[0]),
            "--candidate",
            "completion",
            "--baseline",
            "chat",
            "--json",
            "--n-resamples",
            "200",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    assert '"infrastructure_failure": 1' in res.stdout
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "ledgerscope.cli",
            "compare",
            str(ledger[0]),
            "--candidate",
            "completion",
            "--baseline",
            "chat",
            "--n-resamples",
            "200",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": "120"},
    )
    assert (
        "failed requests (infrastructure failures: never judged, outside every answer metric): "
        "completion 0, chat 1" in " ".join(res.stdout.split())
    )
    cited = next(line for line in res.stdout.splitlines() if "cited-ok" in line)
    assert not re.search(r"\d", cited), cited  # no citations recorded: no figure, never 0.00
    html = ledger[0].parent / "report.html"
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "ledgerscope.cli",
            "report",
            str(ledger[0]),
            "--candidate",
            "completion",
            "--baseline",
            "chat",
            "--n-resamples",
            "200",
            "--out",
            str(html),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    page = html.read_text()
    assert (
        "failed requests (infrastructure failures: never judged, outside every answer metric): "
        "completion 0, chat 1" in page
    )
    assert "<td>9 infrastructure failure (not judged)</td><td>0 (0%)</td><td>1 (" in page


def test_document_ids_from_a_vector_store_are_not_chunk_ids():
    """A vector store's random ``Document.id`` changes every run: the derived id is used instead."""
    from langchain_core.documents import Document

    from ledgerscope.trace.langchain import LedgerscopeCallbackHandler
    from ledgerscope.trace.spec import derived_chunk_id

    doc = Document(
        id="5f0c9e1e-uuid",
        page_content="Refunds are available.",
        metadata={"source": "docs/billing.md", "start_index": 70},
    )
    handler = LedgerscopeCallbackHandler(recorder=None, quiet=True)
    assert handler.chunk_id(doc) == derived_chunk_id("docs/billing.md", 70, "Refunds are available.")
    assert LedgerscopeCallbackHandler(recorder=None, use_document_ids=True).chunk_id(doc) == "5f0c9e1e-uuid"
    doc.metadata["chunk_id"] = "billing#2"
    assert handler.chunk_id(doc) == "billing#2"


def test_a_rerun_into_the_same_files_is_refused(run):
    from ledgerscope.trace import Recorder

    with pytest.raises(ValueError, match="mode='a'"):
        Recorder(run["traces"], chunks=run["chunks"], config="chat")


def test_a_document_without_a_source_is_named_by_the_ingest(run, tmp_path):
    """The handler records the request (nothing escapes into LangChain) and says at close() that the
    document could not go to the store; the ingest then stops naming the chunk."""
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever

    from ledgerscope.trace import Recorder
    from ledgerscope.trace.langchain import LedgerscopeCallbackHandler

    class Loose(BaseRetriever):
        def _get_relevant_documents(self, query, *, run_manager):
            return [Document(page_content="Refunds are available within 14 days of a charge.")]

    handler = LedgerscopeCallbackHandler(
        Recorder(tmp_path / "t.jsonl", chunks=tmp_path / "c.jsonl", config="loose"), quiet=True
    )
    Loose().invoke("refunds?", config={"callbacks": [handler], "metadata": {"qid": "q-refund"}})
    assert handler.close()["recorded"] == 1 and "no metadata['source']" in handler.notes[0]
    (tmp_path / "c.jsonl").write_text(run["chunks"].read_text())
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "ledgerscope.cli",
            "ingest",
            str(tmp_path / "t.jsonl"),
            "--chunks",
            str(tmp_path / "c.jsonl"),
            "--fixtures",
            str(run["fixtures"]),
            "--corpus",
            str(run["corpus"]),
            "--out",
            str(tmp_path / "x"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 2 and "t.jsonl:1: " in res.stderr and "is not in the chunk store" in res.stderr


@pytest.fixture(scope="module")
def spans(run, tmp_path_factory) -> dict:
    """The same chains instrumented by OpenInference instead of the handler: the chat config under a
    harness run (a timeout, an empty retrieval), the model-less config; spans as OTLP JSON."""
    pytest.importorskip("openinference.instrumentation.langchain")
    from google.protobuf.json_format import MessageToDict
    from langchain_core.runnables import RunnableLambda
    from openinference.instrumentation.langchain import LangChainInstrumentor
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    memory, provider = InMemorySpanExporter(), TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    instrumentor = LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    chains = lp.chains(run["split"], [])
    try:

        def harness(qids):
            for qid in qids:
                with contextlib.suppress(TimeoutError):  # recorded as the request's failure
                    chains["chat"].invoke(
                        fc.QUESTIONS[qid][0], config={"metadata": {"qid": qid, "config": "chat"}}
                    )

        RunnableLambda(harness).invoke(list(fc.QUESTIONS))
        for qid, (question, *_rest) in fc.QUESTIONS.items():
            chains["lambda"].invoke(question, config={"metadata": {"qid": qid, "config": "lambda"}})
    finally:
        instrumentor.uninstrument()
    out = tmp_path_factory.mktemp("spans") / "spans.json"
    out.write_text(json.dumps(MessageToDict(encode_spans(memory.get_finished_spans()))))
    return {"spans": out}


def test_openinference_spans_of_the_same_chains_give_the_same_requests(run, spans, tmp_path):
    """One record per request under the harness run, the timeout a failure, the model-less step's
    context what it read; chunk ids derived by the handler's rule, so the handler's store serves."""
    from ledgerscope.ingest.build import IngestOptions
    from ledgerscope.ingest.spans.openinference import SpanKeys, ingest_spans

    out = tmp_path / "ledger"
    report = ingest_spans(
        IngestOptions([spans["spans"]], run["chunks"], run["fixtures"], out, corpus=run["corpus"]), SpanKeys()
    )
    records = _records(out)
    assert set(records) == {k for k in run["truth"] if k[0] in ("chat", "lambda")}
    assert report.failed == {"chat": 1}
    for key, rec in records.items():
        truth = run["truth"][key]
        assert list(rec["packed_unit_ids"]) == [_cid(d) for d in truth.read], key
        if truth.error:
            assert rec["answer_verdict"] == "infrastructure-failure", key
        else:
            assert rec["answer"] == truth.answer, key
