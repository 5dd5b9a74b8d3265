"""Embeddings and rerank through real HTTP servers: the same ledger as in-process, and the failure rules.

Equivalence: ledgerscope's model server (a real process on 127.0.0.1, real sockets, the OpenAI
embeddings API and the rerank API) serves the bundled MiniLM and the tiny cross-encoder the tests
build; a sweep with ``kind = "endpoint"`` gives the same units, the same dense rankings (scores
within float tolerance) and the same reranked lists as the in-process models. The server demands
an API key, which never reaches the ledger.

Failures: a real model-free server (tests/endpoint_servers.py) answering in the wrong shape, or
failing, at a chosen request.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from ledgerscope.common.errors import InputError
from ledgerscope.inputs.fixtures import load_fixtures
from ledgerscope.inputs.sources import load_corpus
from ledgerscope.ledger.read import connect
from ledgerscope.ledger.verify import load_manifest
from ledgerscope.pipeline.arm.config import arm_from_dict, load_arm
from ledgerscope.pipeline.run.sweep import sweep

from .endpoint_servers import FaultyServer

SECRET = "sk-endpoint-stage-secret-0451"
KEY_ENV = "LEDGERSCOPE_TEST_STAGE_KEY"
BASE = {
    "capacity": 16,
    "phases": [0, 5],
    "budget_tokens": 40,
    "top_k": 1,
    "generator": {"abstain_threshold": 0.3},
}


def _inputs(paths):
    return load_fixtures(paths["fixtures"], load_corpus(paths["corpus"]))


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rows(con, sql: str) -> list[tuple]:
    return con.execute(sql).fetchall()


def _ranked(con, arm: str, stage: str) -> dict[tuple, list[tuple[str, float]]]:
    out: dict[tuple, list] = {}
    sql = (
        f"SELECT phase, qid, unit_id, score FROM candidates WHERE arm = '{arm}' AND stage = '{stage}' "
        "ORDER BY phase, qid, rank"
    )
    for phase, qid, unit, score in _rows(con, sql):
        out.setdefault((phase, qid), []).append((unit, score))
    return out


def _same_ranking(a: dict, b: dict, tol: float = 1e-5) -> None:
    assert a.keys() == b.keys() and a
    for key in a:
        assert [u for u, _ in a[key]] == [u for u, _ in b[key]], key
        for (_, x), (_, y) in zip(a[key], b[key], strict=True):
            assert (x is None and y is None) or abs(x - y) <= tol, (key, x, y)


# --- the real model server -------------------------------------------------------------------


@pytest.fixture(scope="module")
def model_server(tiny_cross_encoder):
    from ledgerscope.pipeline.servers.model_server import start_model_server

    os.environ[KEY_ENV] = SECRET
    server, url = start_model_server(
        embedding="bundled:all-MiniLM-L6-v2",
        rerank=str(tiny_cross_encoder),
        api_key_env=KEY_ENV,
        name="minilm",
    )
    yield url
    server.close()
    os.environ.pop(KEY_ENV, None)


@pytest.fixture(scope="module")
def endpoint_ledger(model_server, tiny_cross_encoder, rule_exception_inputs, tmp_path_factory):
    """One sweep, three arms: in-process MiniLM + cross-encoder; the same two through the server;
    endpoint embeddings naming no reranker."""
    remote = {
        "kind": "endpoint",
        "base_url": model_server,
        "model": "minilm",
        "api_key_env": KEY_ENV,
        "batch_size": 7,
    }
    arms = [
        arm_from_dict(
            {**BASE, "name": "local", "rerank": {"kind": "cross-encoder", "model": str(tiny_cross_encoder)}}
        ),
        arm_from_dict(
            {
                **BASE,
                "name": "remote",
                "embedding": remote,
                "rerank": {
                    "kind": "endpoint",
                    "base_url": model_server + "/v1",
                    "model": "tiny-ce",
                    "api_key_env": KEY_ENV,
                },
            }
        ),
        arm_from_dict({**BASE, "name": "remote-default", "embedding": remote}),
    ]
    out = tmp_path_factory.mktemp("endpoint-ledger") / "ledger"
    fixtures, corpus = _inputs(rule_exception_inputs)
    sweep(fixtures, corpus, arms, out)
    return out


@pytest.mark.slow
def test_endpoint_embeddings_give_the_in_process_units_and_dense_rankings(endpoint_ledger):
    con = connect(endpoint_ledger)
    units = {
        arm: _rows(
            con,
            f"SELECT phase, unit_id, text, token_start, token_end FROM units "
            f"WHERE arm = '{arm}' ORDER BY ALL",
        )
        for arm in ("local", "remote")
    }
    assert units["local"] == units["remote"] and units["local"]
    for stage in ("dense_exact", "dense_ann", "bm25", "fused"):
        _same_ranking(_ranked(con, "local", stage), _ranked(con, "remote", stage))
    answers = {
        arm: _rows(
            con,
            f"SELECT phase, qid, answer, answer_verdict, evidence_tokens FROM records "
            f"WHERE arm = '{arm}' ORDER BY phase, qid",
        )
        for arm in ("local", "remote")
    }
    assert answers["local"] == answers["remote"]
    assert not _rows(con, "SELECT * FROM records WHERE answer_verdict = 'infrastructure-failure'")


@pytest.mark.slow
def test_endpoint_rerank_gives_the_cross_encoder_s_lists(endpoint_ledger):
    con = connect(endpoint_ledger)
    local, remote = _ranked(con, "local", "reranked"), _ranked(con, "remote", "reranked")
    _same_ranking(local, remote)
    fused = _ranked(con, "local", "fused")
    assert any([u for u, _ in local[k]] != [u for u, _ in fused[k]][: len(local[k])] for k in local)


@pytest.mark.slow
def test_the_manifest_records_the_endpoints_the_tokenizer_and_the_declared_reranker(endpoint_ledger):
    manifest = load_manifest(endpoint_ledger)
    remote = manifest["arms"]["remote"]["components"]
    assert remote["embedding"]["kind"] == "endpoint" and remote["embedding"]["dim"] == 384
    assert remote["embedding"]["api_key_env"] == KEY_ENV and remote["embedding"]["model"] == "minilm"
    assert remote["chunk_tokenizer"] == {
        "kind": "huggingface-tokenizers",
        "model": "bundled:all-MiniLM-L6-v2",
    }
    assert remote["reranker"]["kind"] == "endpoint" and remote["reranker"]["path"] == "/v1/rerank"
    assert remote["generator"]["reader_model"] == "bundled:all-MiniLM-L6-v2"
    default = manifest["arms"]["remote-default"]
    assert default["config"]["rerank"]["kind"] == "none"  # MaxSim needs token vectors: declared, recorded
    assert default["components"]["reranker"] == {"kind": "none"}
    # the key itself is nowhere in the ledger
    for path in Path(endpoint_ledger).rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path


@pytest.mark.slow
def test_rerun_goes_through_the_same_endpoints(endpoint_ledger):
    from ledgerscope.pipeline.run.rerun import rerun_record

    diff = rerun_record(endpoint_ledger, "remote", "temp-retention", "5")
    assert diff.identical, diff.lines()


# --- failures, against a server that misbehaves on cue ----------------------------------------


def _endpoint_arm(url: str, name: str = "remote", **rerank) -> dict:
    arm = {
        **BASE,
        "name": name,
        "embedding": {"kind": "endpoint", "base_url": url, "retries": 1, "backoff": 0.0, "batch_size": 4},
        "generator": {"kind": "python", "callable": "tests.endpoint_servers:first_block"},
    }
    if rerank:
        arm["rerank"] = {"kind": "endpoint", "base_url": url, "retries": 1, "backoff": 0.0, **rerank}
    return arm


def test_arms_on_one_server_share_its_embedder_each_text_sent_once_over_one_connection(
    rule_exception_inputs, tmp_path
):
    """Two arms that cut alike (they differ after retrieval) and two phases: a text the first arm's
    phase embedded is not sent again by the other phase or arm, and one kept-alive connection
    carries every request of the sweep."""
    fixtures, corpus = _inputs(rule_exception_inputs)
    with FaultyServer() as server:
        arms = [
            arm_from_dict(_endpoint_arm(server.base_url, name="wide")),
            arm_from_dict({**_endpoint_arm(server.base_url + "/v1/", name="narrow"), "top_k": 2}),
        ]
        result = sweep(fixtures, corpus, arms, tmp_path / "ledger")
    con = connect(tmp_path / "ledger")
    units = {t for (t,) in _rows(con, "SELECT DISTINCT text FROM units")}
    assert _rows(con, "SELECT count(DISTINCT arm) FROM units") == [(2,)]
    assert units <= set(server.embedded)
    repeats = {t: n for t, n in server.embedded.items() if n > 1}
    assert not repeats
    assert result.encoded_texts == sum(server.embedded.values()) - 1  # all but the probe text
    assert len(server.connections) == 1, server.connections
    components = load_manifest(tmp_path / "ledger")["arms"]
    assert components["wide"]["components"]["embedding"] == components["narrow"]["components"]["embedding"]


@pytest.mark.parametrize(
    ("fault", "message"),
    [
        ("wrong-count", r"2 vector\(s\) for 1 input\(s\)"),
        ("http-500", "http-500: Internal Server Error"),
    ],
)
def test_a_server_that_answers_the_probe_wrongly_stops_the_sweep_before_any_partition(
    rule_exception_inputs, tmp_path, fault, message
):
    import re

    fixtures, corpus = _inputs(rule_exception_inputs)
    arm_file = tmp_path / "remote.toml"
    with FaultyServer(healthy=0, fault=fault) as server:
        arm_file.write_text(
            f'name = "remote"\nphases = [0]\n[embedding]\nkind = "endpoint"\n'
            f'base_url = "{server.base_url}"\nretries = 0\n',
            encoding="utf-8",
        )
        with pytest.raises(InputError) as err:
            sweep(fixtures, corpus, [load_arm(arm_file)], tmp_path / "ledger")
    text = str(err.value)
    assert text.startswith(
        f"{arm_file}: embedding.base_url: arm 'remote': embedding endpoint "
        f"{server.base_url}/v1/embeddings did not embed a probe text"
    )
    assert re.search(message, text)
    assert not list((tmp_path / "ledger").glob("records/*/*/*.parquet"))


def test_an_unreachable_server_is_named_before_any_model_loads(rule_exception_inputs, tmp_path):
    fixtures, corpus = _inputs(rule_exception_inputs)
    url = f"http://127.0.0.1:{_closed_port()}"
    arm_file = tmp_path / "arm.toml"
    arm_file.write_text(
        f'name = "remote"\n[rerank]\nkind = "endpoint"\nbase_url = "{url}"\n', encoding="utf-8"
    )
    with pytest.raises(InputError) as err:
        sweep(
            fixtures,
            corpus,
            [load_arm(arm_file)],
            tmp_path / "ledger",
            encoder_factory=lambda *a: pytest.fail("a model loaded"),
        )
    assert str(err.value).startswith(
        f"{arm_file}: rerank.base_url: arm 'remote': the rerank endpoint {url} "
        "is unreachable: ConnectionRefusedError"
    )


@pytest.mark.parametrize("fault", ["wrong-dim", "wrong-count", "http-500"])
def test_a_batch_that_fails_mid_sweep_is_an_infrastructure_failure_of_each_record(
    rule_exception_inputs, tmp_path, fault
):
    fixtures, corpus = _inputs(rule_exception_inputs)
    with FaultyServer(healthy=1, fault=fault) as server:  # the probe passes, every batch after it fails
        sweep(
            fixtures,
            corpus,
            [arm_from_dict({**_endpoint_arm(server.base_url), "phases": [0]})],
            tmp_path / "ledger",
        )
    con = connect(tmp_path / "ledger")
    records = _rows(
        con,
        "SELECT qid, answer_verdict, generator_error, citation_reason, "
        "generator_detail_json FROM records ORDER BY qid",
    )
    assert len(records) == len(fixtures)
    for qid, verdict, error, reason, detail in records:
        assert verdict == "infrastructure-failure", qid
        assert error.startswith("embedding failed: ") and f"{server.base_url}/v1/embeddings" in error
        assert reason == "embedding failed"
        assert json.loads(detail)["infrastructure"]["stage"] == "embedding"
    # no vector was made up: the dense lists are empty, BM25 still ran
    assert not _rows(con, "SELECT * FROM candidates WHERE stage IN ('dense_exact', 'dense_ann')")
    assert _rows(con, "SELECT * FROM candidates WHERE stage = 'bm25'")
    from ledgerscope.analysis.diagnosis.feed import diagnose_ledger

    for row in diagnose_ledger(con, tmp_path / "ledger"):
        assert "infrastructure-failure" in row["flags"], row["qid"]


def test_a_rerank_answer_missing_a_document_is_an_infrastructure_failure_of_that_record(
    rule_exception_inputs, tmp_path
):
    fixtures, corpus = _inputs(rule_exception_inputs)
    with FaultyServer(healthy=0, fault="missing-index", fault_on="rerank") as server:
        arm = arm_from_dict({**_endpoint_arm(server.base_url, path="/rerank"), "phases": [0]})
        # the probe (one document) answered with an index out of range: a clear error, nothing written
        with pytest.raises(InputError, match=r"rerank.base_url: .*index 5 is not a new position in 0..0"):
            sweep(fixtures, corpus, [arm], tmp_path / "refused")
        server.seen.clear()
        server.healthy = 2  # the probe and the first question pass; later questions get a short answer
        sweep(fixtures, corpus, [arm], tmp_path / "ledger")
    con = connect(tmp_path / "ledger")
    verdicts = dict(_rows(con, "SELECT qid, answer_verdict FROM records"))
    errors = dict(_rows(con, "SELECT qid, generator_error FROM records"))
    first = fixtures[0].qid
    assert verdicts[first] != "infrastructure-failure"
    for qid in verdicts.keys() - {first}:
        assert verdicts[qid] == "infrastructure-failure", qid
        assert (
            errors[qid].startswith(f"rerank failed: {server.base_url}/rerank: response: result 0:")
            or "no score for document" in errors[qid]
        )
    # the reranked list is recorded in the fused order, without scores (never made up)
    for qid in verdicts.keys() - {first}:
        fused = _ranked(con, "remote", "fused")[("0", qid)]
        reranked = _ranked(con, "remote", "reranked")[("0", qid)]
        assert [u for u, _ in reranked] == [u for u, _ in fused][: len(reranked)]
        assert all(s is None for _, s in reranked)


def test_rerun_says_plainly_when_an_endpoint_is_gone(rule_exception_inputs, tmp_path):
    from ledgerscope.pipeline.run.rerun import rerun_record

    fixtures, corpus = _inputs(rule_exception_inputs)
    with FaultyServer() as server:
        url = server.base_url
        sweep(
            fixtures,
            corpus,
            [arm_from_dict({**_endpoint_arm(url, path="/v1/rerank"), "phases": [0]})],
            tmp_path / "ledger",
        )
        assert rerun_record(tmp_path / "ledger", "remote", "temp-retention", "0").identical
    with pytest.raises(InputError) as err:
        rerun_record(tmp_path / "ledger", "remote", "temp-retention", "0")
    lines = str(err.value).splitlines()
    manifest = tmp_path / "ledger" / "manifest.json"
    assert lines == [
        f"{manifest}: embedding.base_url: arm 'remote': the embedding endpoint {url} is unreachable: "
        "ConnectionRefusedError: Connection refused",
        f"{manifest}: rerank.base_url: arm 'remote': the rerank endpoint {url} is unreachable: "
        "ConnectionRefusedError: Connection refused",
    ]
