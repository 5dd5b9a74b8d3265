"""OpenInference spans through a real Phoenix server, ingested into a ledger that diagnose reads.

A LangChain pipeline (tests/ingest_pipeline.py's BM25 retriever and reader as
LangChain runnables), instrumented by OpenInference's LangChain instrumentor,
exports its spans over OTLP/HTTP to a Phoenix server this module starts on
127.0.0.1 (telemetry off, its SQLite in a temporary working directory) and stops
after; the spans are pulled back through Phoenix's client, written as Phoenix's
span export, ingested with ``--from openinference`` and diagnosed. The same spans,
written as an OTLP JSON file by the SDK's own encoder, give the same records.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from . import ingest_pipeline as pipe

pytestmark = pytest.mark.slow
pytest.importorskip("phoenix.client")
pytest.importorskip("openinference.instrumentation.langchain")
pytest.importorskip("opentelemetry.exporter.otlp.proto.http")

PROJECT = "ledgerscope-ingest-test"
#: Phoenix's first start (migrations included) took about 60 s on a loaded 2-core machine
START_TIMEOUT = 300


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory):
    """A Phoenix server on 127.0.0.1: (base URL, seconds it took to answer /healthz)."""
    work = tmp_path_factory.mktemp("phoenix")
    port, grpc = _free_port(), _free_port()
    env = {
        **os.environ,
        "PHOENIX_WORKING_DIR": str(work),
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(grpc),
        "PHOENIX_TELEMETRY_ENABLED": "false",
    }
    log = (work / "server.log").open("wb")
    t0 = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "phoenix.server.main", "serve"],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=work,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        while True:
            if proc.poll() is not None:
                pytest.fail(f"phoenix exited {proc.returncode}: {(work / 'server.log').read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{url}/healthz", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() - t0 > START_TIMEOUT:
                pytest.fail(f"phoenix did not answer within {START_TIMEOUT} s")
            time.sleep(0.5)
        started = time.monotonic() - t0
        print(f"\nphoenix answered /healthz after {started:.1f} s")
        yield url, started
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@pytest.fixture(scope="module")
def exported(phoenix, tmp_path_factory):
    """Run the instrumented pipeline for both configurations; (Phoenix export file, OTLP JSON file)."""
    from google.protobuf.json_format import MessageToDict
    from openinference.instrumentation.langchain import LangChainInstrumentor
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    url, _ = phoenix
    root = tmp_path_factory.mktemp("spans")
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"openinference.project.name": PROJECT}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{url}/v1/traces")))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    instrumentor = LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        for config in pipe.CONFIGS:
            chain = pipe.langchain_pipeline(config)
            for q in pipe.questions():
                chain.invoke(q["question"], config={"metadata": {"qid": q["qid"], "config": config}})
    finally:
        instrumentor.uninstrument()
        provider.force_flush()
        provider.shutdown()
    otlp = root / "spans.otlp.json"
    otlp.write_text(json.dumps(MessageToDict(encode_spans(memory.get_finished_spans()))))
    from phoenix.client import Client

    client = Client(base_url=url)
    want = len(memory.get_finished_spans())
    deadline = time.monotonic() + 120
    while True:
        spans = client.spans.get_spans(project_identifier=PROJECT, limit=100_000)
        if len(spans) >= want or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert len(spans) == want
    export = root / "phoenix-spans.jsonl"
    export.write_text("".join(json.dumps(s) + "\n" for s in spans))
    return export, otlp


def _ingest(spans: Path, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "ledgerscope.cli",
            "ingest",
            str(spans),
            "--from",
            "openinference",
            "--fixtures",
            str(pipe.FIXTURES),
            "--corpus",
            str(pipe.CORPUS),
            "--out",
            str(out),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_phoenix_spans_ingest_into_a_ledger_diagnose_reads(exported, tmp_path):
    export, _ = exported
    out = tmp_path / "ledger"
    res = _ingest(export, out)
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    assert report["traces"] == 2 * len(pipe.questions())
    assert report["chunked"]["small"].startswith("not recorded: the chunk store is the spans' documents")
    assert report["chunks"]["counts"] == {"verified": report["chunks"]["counts"]["verified"]}  # start_index
    diag = subprocess.run(
        [sys.executable, "-m", "ledgerscope.cli", "diagnose", str(out), "--json"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert diag.returncode == 0, diag.stderr
    rows = [json.loads(line) for line in diag.stdout.splitlines()]
    assert len(rows) == 2 * len(pipe.questions())
    walked = [r for r in rows if r["segment"] != "unanswerable"]
    assert all("stages-not-recorded" in r["flags"] for r in walked)
    assert all(r["walk"][1]["passed"] is None for r in walked)  # step 2: the chunker's output not recorded
    assert {r["step"] for r in rows} - {0, 6, 8, 9, 10} == set()
    summary = subprocess.run(
        [sys.executable, "-m", "ledgerscope.cli", "diagnose", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert summary.returncode == 0 and "records per step" in summary.stdout


def test_the_context_is_what_the_llm_read(exported, tmp_path):
    """Context ids come from the LLM span's prompt: the documents whose content it holds, in prompt order."""
    from ledgerscope.ledger.read import connect

    export, _ = exported
    out = tmp_path / "ledger"
    assert _ingest(export, out).returncode == 0
    con = connect(out)
    for arm, qid, packed in con.execute("SELECT arm, qid, packed_unit_ids FROM records").fetchall():
        chain_hits = pipe.BM25(pipe.split(arm)).search(
            next(q["question"] for q in pipe.questions() if q["qid"] == qid), 20
        )
        assert packed == [c.chunk_id for c, _ in chain_hits[: pipe.CONFIGS[arm][2]]], (arm, qid)
        break
    n = con.execute("SELECT count(*) FROM records WHERE len(packed_unit_ids) = 3").fetchall()[0][0]
    assert n == 2 * len(pipe.questions())


def test_otlp_json_gives_the_same_records(exported, tmp_path):
    from ledgerscope.ledger.read import connect

    export, otlp = exported
    a, b = tmp_path / "a", tmp_path / "b"
    assert _ingest(export, a).returncode == 0
    res = _ingest(otlp, b)
    assert res.returncode == 0, res.stderr
    cols = (
        "arm, phase, qid, support_fused, support_packed, packed_unit_ids, answer, answer_verdict, "
        "citation_verdict, evidence_tokens, prompt_tokens"
    )
    rows = [
        connect(x).execute(f"SELECT {cols} FROM records ORDER BY arm, phase, qid").fetchall() for x in (a, b)
    ]
    assert rows[0] == rows[1] and len(rows[0]) == 2 * len(pipe.questions())
