"""LlamaIndex, instrumented by OpenInference, ingested: the ledger against what the pipeline really did.

One module-scoped run of :mod:`tests.llamaindex_pipeline` (SentenceSplitter +
VectorStoreIndex, a completion and a chat model of the test's own, a
postprocessor, an evaluation harness's parent span, a model timeout, an empty
retrieval); each test compares the ingested ledger with the run's truth:
requests, failures, the nodes the synthesizer read, support, prompt tokens.
No network, no model download.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from . import framework_corpus as fc
from . import llamaindex_pipeline as lp

pytest.importorskip("llama_index.core")
pytest.importorskip("openinference.instrumentation.llama_index")


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> dict:
    return lp.run(tmp_path_factory.mktemp("llamaindex"))


def _ingest(
    run: dict, out: Path, spans: list[Path] | None = None, chunks: Path | None = None, skip: bool = False
):
    from ledgerscope.ingest.build import IngestOptions
    from ledgerscope.ingest.spans.openinference import SpanKeys, ingest_spans

    opts = IngestOptions(
        spans or [run["spans"]], chunks or run["chunks"], run["fixtures"], out, corpus=run["corpus"]
    )
    return ingest_spans(opts, SpanKeys(), skip)


@pytest.fixture(scope="module")
def ledger(run, tmp_path_factory):
    out = tmp_path_factory.mktemp("ledger") / "ledger"
    return out, _ingest(run, out)


def _records(ledger) -> dict[tuple[str, str], dict]:
    from ledgerscope.ledger.read import connect

    con = connect(ledger[0])
    cur = con.execute("SELECT * FROM records")
    cols = [d[0] for d in cur.description]
    return {(r["arm"], r["qid"]): r for r in (dict(zip(cols, row, strict=True)) for row in cur.fetchall())}


def test_every_request_under_the_harness_span_is_one_record(run, ledger):
    """Sixteen requests ran under two harness parent spans (two trace ids): sixteen records, each its own
    question's; the index-building traces are skipped and counted, not an error."""
    records = _records(ledger)
    assert set(records) == set(run["truth"])
    report = ledger[1]
    assert report.skipped == {
        "trace(s) without a request (no question id, no retriever or LLM span: index building)": 2
    }
    assert report.chunked == {"chat": "recorded", "completion": "recorded"}  # the whole index, by the helper


def test_a_model_timeout_is_an_infrastructure_failure(run, ledger, diagnosed):
    records = _records(ledger)
    for key, truth in run["truth"].items():
        rec = records[key]
        if truth.error:
            assert rec["answer_verdict"] == "infrastructure-failure", key
            assert "TimeoutError: the model did not answer" in rec["generator_error"], key
            assert rec["answer"] is None
        else:
            assert rec["answer_verdict"] != "infrastructure-failure" and rec["generator_error"] is None, key
            assert rec["answer"] == truth.answer, key
    assert ledger[1].failed == {"completion": 1}
    rows = diagnosed
    for key in lp.FAILS:  # never "answer ignores it": the model never answered
        assert (rows[key]["step"], rows[key]["label"]) == (9, "infrastructure-failure")
        assert rows[key]["step_name"] == "infrastructure failure (not judged)"


def test_the_context_is_the_nodes_the_synthesizer_read(run, ledger):
    """Packed ids are the response's source nodes, in order (after the postprocessor), in both the
    completion prompt (llm.prompts, quotes unescaped) and the chat messages."""
    records = _records(ledger)
    for key, truth in run["truth"].items():
        if truth.error:
            continue
        assert list(records[key]["packed_unit_ids"]) == [n[0] for n in truth.read], key


def test_support_flags_are_what_the_pipeline_handed_on(run, ledger):
    records = _records(ledger)
    checked = 0
    for key, truth in run["truth"].items():
        rec = records[key]
        if fc.QUESTIONS[key[1]][1] is None or truth.error:
            continue
        assert rec["support_fused"] == fc.support(key[1], [n[1:] for n in truth.retrieved]), key
        assert rec["support_packed"] == fc.support(key[1], [n[1:] for n in truth.read]), key
        checked += 1
    assert checked == 13  # seven answerable questions, two configs, one request failed


def test_prompt_tokens_count_the_literal_prompt(run, ledger):
    from ledgerscope.ingest.build import count_tokens
    from ledgerscope.pipeline.embedding.encoder import BUNDLED_MINILM, TokenCounter

    tokenizer = TokenCounter(BUNDLED_MINILM).tokenizer
    records = _records(ledger)
    for key, truth in run["truth"].items():
        if not truth.prompts:
            assert records[key]["prompt_tokens"] is None, key
            continue
        assert len(truth.prompts) == 1
        assert records[key]["prompt_tokens"] == count_tokens(tokenizer, truth.prompts)[0], key


def test_an_empty_retrieval_is_a_record_lost_at_retrieval(run, ledger, diagnosed):
    (key,) = lp.EMPTY
    rec = _records(ledger)[key]
    assert list(rec["packed_unit_ids"]) == [] and rec["support_fused"] is False
    assert rec["abstained"] is True and rec["answer_verdict"] == "abstained"
    rows = diagnosed
    assert rows[key]["label"] == "lost-in-steps-3-6", rows[key]


@pytest.fixture(scope="module")
def diagnosed(ledger) -> dict[tuple[str, str], dict]:
    """``diagnose --json`` on the ledger, once for the module."""
    return _diagnose(ledger[0])


def _diagnose(out: Path) -> dict[tuple[str, str], dict]:
    res = subprocess.run(
        [sys.executable, "-m", "ledgerscope.cli", "diagnose", str(out), "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    return {(r["arm"], r["qid"]): r for r in map(json.loads, res.stdout.splitlines())}


def test_the_postprocessor_is_the_selected_stage(run, ledger, diagnosed):
    """retrieve/_retrieve are one fused list; the postprocessor's output is ``selected``: a loss between
    them is "steps 7-8", never "3-8"."""
    report = ledger[1]
    assert report.recorded == {"chat": ["fused", "packed"], "completion": ["fused", "selected", "packed"]}
    rows = diagnosed
    lost_after = [
        k
        for k, t in run["truth"].items()
        if k[0] == "completion"
        and not t.error
        and fc.QUESTIONS[k[1]][1] is not None
        and fc.support(k[1], [n[1:] for n in t.retrieved])
        and not fc.support(k[1], [n[1:] for n in t.read])
    ]
    assert lost_after, "the corpus should make the postprocessor drop some gold node"
    for key in lost_after:
        assert rows[key]["label"] == "lost-in-steps-7-8", rows[key]
        detail = rows[key]["walk"][-1]["detail"]
        assert "; step 7 not recorded, so the loss lies somewhere in steps 7-8" in detail, detail
    assert not any("3-8" in r["label"] for r in rows.values())


def test_two_question_ids_in_one_request_and_a_request_without_one(run, tmp_path):
    """A harness span naming one question over a query naming another: exit 2 naming both. A query
    with no question id: exit 2, or skipped and counted with --skip-unidentified."""
    from ledgerscope.common.errors import InputError

    spans = json.loads(run["spans"].read_text())
    doc_spans = spans["resourceSpans"][0]["scopeSpans"]
    # the harness span of the chat config names q-audit: every request below it is now inside q-audit's
    harness = next(s for ss in doc_spans for s in ss["spans"] if s["name"] == "evaluate chat")
    harness.setdefault("attributes", []).append({"key": "qid", "value": {"stringValue": "q-audit"}})
    bad = tmp_path / "two.json"
    bad.write_text(json.dumps(spans))
    with pytest.raises(InputError) as err:
        _ingest(run, tmp_path / "a", [bad])
    text = str(err.value)
    assert "names question 'q-hold' inside the request of question 'q-audit'" in text
    assert "two.json (resourceSpans[0].scopeSpans[" in text
    # no question id on the completion config's requests
    spans = json.loads(run["spans"].read_text())
    for ss in spans["resourceSpans"][0]["scopeSpans"]:
        for s in ss["spans"]:
            s["attributes"] = [
                a
                for a in s.get("attributes", [])
                if a["key"] != "metadata" or "completion" not in json.dumps(a)
            ]
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps(spans))
    with pytest.raises(InputError) as err:
        _ingest(run, tmp_path / "b", [bare])
    assert "a request without a question id" in str(err.value)
    report = _ingest(run, tmp_path / "c", [bare], skip=True)
    assert (
        report.traces == 8
        and report.skipped["request-shaped trace(s) without a question id (--skip-unidentified)"] == 1
    )


def test_the_same_spans_twice_stop_the_ingest(run, tmp_path):
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "ledgerscope.cli",
            "ingest",
            str(run["spans"]),
            str(run["spans"]),
            "--from",
            "openinference",
            "--chunks",
            str(run["chunks"]),
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
    assert res.returncode == 2 and "appears twice" in res.stderr and "Traceback" not in res.stderr
    assert not (tmp_path / "x").exists()


def test_an_absolute_path_as_document_id_gets_a_hint(run, tmp_path):
    from ledgerscope.common.errors import InputError
    from ledgerscope.trace import Recorder
    from ledgerscope.trace.llama_index import record_nodes

    store = tmp_path / "abs.jsonl"
    with Recorder(None, chunks=store) as rec:
        record_nodes(rec, run["index"].docstore.docs.values(), doc_id=lambda n: f"/home/me/kb/{n.ref_doc_id}")
    with pytest.raises(InputError) as err:
        _ingest(run, tmp_path / "a", chunks=store)
    assert "did you mean 'docs/" in str(err.value)
