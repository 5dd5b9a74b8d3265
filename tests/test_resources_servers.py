"""Acceptance: a sweep through real loopback servers records the requests and tokens they served.

ledgerscope's model server (MiniLM embeddings, a cross-encoder for rerank) counts what it served
itself (``GET /v1/usage``); llama.cpp's server counts its prompt and generated tokens
(``GET /metrics``) and logs every completion it served. The ledger's records (partitions, oracle,
the run's probes) must add up to exactly those counts.
"""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path

import pytest

from ledgerscope.analysis.resources import arm_resources, read_oracle, read_partitions
from ledgerscope.inputs.fixtures import load_fixtures
from ledgerscope.inputs.sources import load_corpus
from ledgerscope.pipeline.arm.config import arm_from_dict
from ledgerscope.pipeline.run.runs import read_runs
from ledgerscope.pipeline.run.sweep import sweep

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=30) as r:
        return r.read().decode()


def _served(servers: dict) -> dict:
    """What both servers say they served so far."""
    usage = json.loads(_get(servers["models"] + "/v1/usage"))
    metrics = dict(re.findall(r"^llamacpp:(\w+) ([0-9.e+]+)$", _get(servers["llm"] + "/metrics"), re.M))
    log = Path(servers["llm_log"]).read_text(encoding="utf-8", errors="replace")
    return {
        **usage,
        "chat_requests": len(re.findall(r"print_timing: .*total time", log)),
        "prompt_tokens": int(
            float(metrics["prompt_tokens_total"]) + float(metrics["prompt_tokens_cached_total"])
        ),
        "completion_tokens": int(float(metrics["tokens_predicted_total"])),
    }


@pytest.fixture(scope="module")
def swept(walk_servers, rule_exception_inputs, tmp_path_factory):
    paths = rule_exception_inputs
    fixtures, corpus = load_fixtures(paths["fixtures"], load_corpus(paths["corpus"]))
    arm = arm_from_dict(
        {
            "name": "served",
            "capacity": 16,
            "phases": [0, 5],
            "budget_tokens": 60,
            "top_k": 2,
            "embedding": {
                "kind": "endpoint",
                "base_url": walk_servers["models"] + "/v1",
                "model": "minilm",
                "batch_size": 5,
            },
            "rerank": {"kind": "endpoint", "base_url": walk_servers["models"], "model": "tiny-ce"},
            "generator": {
                "kind": "endpoint",
                "base_url": walk_servers["llm"] + "/v1",
                "model": "smollm2",
                "max_tokens": 12,
            },
        }
    )
    before = _served(walk_servers)
    out = tmp_path_factory.mktemp("served") / "ledger"
    result = sweep(fixtures, corpus, [arm], out)
    after = _served(walk_servers)
    return {"ledger": out, "result": result, "served": {k: after[k] - before[k] for k in after}}


def test_the_run_record_equals_what_the_servers_served(swept):
    served = swept["served"]
    (run,) = read_runs(swept["ledger"])
    by_role = {c["role"]: c for c in run["components"]}
    emb, rer, gen = by_role["embedding"], by_role["rerank"], by_role["generator"]
    assert emb["requests"] == served["embedding_requests"] > 0
    assert emb["tokens"] == served["embedding_tokens"] > 0 and emb["token_source"] == "usage"
    assert rer["requests"] == served["rerank_requests"] > 0 and rer["pairs"] == served["rerank_pairs"]
    assert gen["requests"] == served["chat_requests"] > 0
    assert gen["prompt"] == served["prompt_tokens"] and gen["completion"] == served["completion_tokens"] > 0


def test_partitions_oracle_and_probes_add_up_to_the_run(swept):
    ledger, served = swept["ledger"], swept["served"]
    parts = read_partitions(ledger)["served"]
    oracle = read_oracle(ledger, "served")
    assert set(parts) == {"0", "5"} and oracle is not None
    emb_requests = sum(p["embedding"]["requests"] for p in parts.values()) + oracle["embedding"]["requests"]
    assert emb_requests + 1 == served["embedding_requests"]  # + the probe when the runtime was built
    assert all(p["embedding"]["token_source"] == "usage" for p in parts.values() if p["embedding"]["encoded"])
    assert sum(p["rerank"]["requests"] for p in parts.values()) + 1 == served["rerank_requests"]
    gens = [p["generator"] for p in parts.values()] + [oracle["generator"]]
    assert sum(g["requests"] for g in gens) == served["chat_requests"]
    assert sum(g["prompt_tokens"] for g in gens) == served["prompt_tokens"]
    assert sum(g["completion_tokens"] for g in gens) == served["completion_tokens"]
    assert all(g["token_source"] == "usage" for g in gens)
    summary = arm_resources(ledger, "served")
    assert summary["usage"]["generator"]["requests"] == served["chat_requests"]
    assert summary["latency_ms"]["rerank"]["p95"] > 0 and summary["latency_ms"]["generate"]["p95"] > 0
