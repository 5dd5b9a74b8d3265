"""JSON over HTTP for every endpoint stage (generator, embeddings, rerank): one client, stdlib only.

Secrets. The API key is read from ``os.environ[api_key_env]`` at the moment of each request and
is never stored: :meth:`JsonClient.describe` names the variable, never its value, and every error
message is scrubbed of the key before anyone records it.

Failures. An HTTP error, a network error, a timeout or an unreadable response fails an *attempt*
(:class:`AttemptError`, ``"<kind>: <message>"``). Retryable kinds are ``network``, ``timeout``,
``http-408``, ``http-429``, ``http-5xx`` and ``response``/``json`` (a truncated or garbled body);
other HTTP errors (400, 401, 404 ...) are not retried, since sending the same request again cannot
change them. :meth:`JsonClient.post` retries with a linear backoff and returns every failed
attempt's message, so a caller records failures and never hides one behind a later success. A
missing API-key variable is a configuration error (:class:`EndpointConfigError`), raised before
anything is sent.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import Any

from ledgerscope.common.errors import LedgerscopeError

RETRYABLE_HTTP = frozenset({408, 429})


class EndpointConfigError(LedgerscopeError, ValueError):
    """The endpoint is configured in a way no request can succeed with."""


class EndpointUnreachable(LedgerscopeError, RuntimeError):
    """A stage's server cannot be reached (or answers unusably) before any work starts."""


class AttemptError(Exception):
    """One failed request: ``kind`` (network, timeout, http-NNN, json, response) and whether to retry."""

    def __init__(self, kind: str, message: str, retryable: bool):
        super().__init__(f"{kind}: {message}")
        self.kind, self.retryable = kind, retryable


def api_root(base_url: str) -> str:
    """``http://h:p``, ``http://h:p/``, ``http://h:p/v1`` and ``.../v1/`` -> ``http://h:p``."""
    root = base_url.strip().rstrip("/")
    if root.endswith("/v1"):
        root = root[: -len("/v1")]
    if not root.startswith(("http://", "https://")):
        raise EndpointConfigError(f"base_url must start with http:// or https://, got {base_url!r}")
    return root


def redact_userinfo(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    if "@" not in parts.netloc:
        return url
    host = parts.netloc.rsplit("@", 1)[1]
    return urllib.parse.urlunsplit(parts._replace(netloc=f"***@{host}"))


class JsonClient:
    """POST JSON to one server with retries and backoff; see the module docstring."""

    def __init__(
        self,
        base_url: str,
        api_key_env: str | None = None,
        timeout: float = 60.0,
        retries: int = 1,
        backoff: float = 0.5,
    ):
        if retries < 0:
            raise EndpointConfigError("retries must be >= 0")
        self.base_url = base_url
        self.root = api_root(base_url)
        self.api_key_env = api_key_env or None
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self._conn: http.client.HTTPConnection | None = None
        self._prefix = urllib.parse.urlsplit(self.root).path

    def describe(self) -> dict[str, Any]:
        """What a manifest records: the URL without credentials and the key's variable *name*."""
        return {
            "base_url": redact_userinfo(self.root),
            "timeout": self.timeout,
            "retries": self.retries,
            "backoff": self.backoff,
            "api_key_env": self.api_key_env,
        }

    def key(self) -> str | None:
        if not self.api_key_env:
            return None
        key = os.environ.get(self.api_key_env)
        if not key:
            raise EndpointConfigError(
                f"environment variable {self.api_key_env!r} (the API key) is not set or empty"
            )
        return key

    def post_once(self, path: str, payload: dict, key: str | None) -> Any:
        """One request; the parsed JSON body (any JSON value), or :class:`AttemptError`."""
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if key:
            headers["Authorization"] = f"Bearer {key}"
        data = json.dumps(payload).encode("utf-8")
        try:
            status, reason, body = self._exchange(path, data, headers)
        except TimeoutError as exc:
            self.close()
            raise AttemptError("timeout", f"no response within {self.timeout}s ({exc})", True) from None
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, TimeoutError):
                raise AttemptError("timeout", f"no response within {self.timeout}s", True) from None
            raise AttemptError("network", str(exc.reason), True) from None
        except (ConnectionError, OSError, http.client.HTTPException) as exc:
            self.close()
            raise AttemptError("network", f"{type(exc).__name__}: {exc}", True) from None
        if status >= 400:
            detail = body.decode("utf-8", "replace")[:300]
            retryable = status in RETRYABLE_HTTP or status >= 500
            raise AttemptError(f"http-{status}", f"{reason} {detail}".strip(), retryable)
        try:
            return json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise AttemptError("json", f"response is not JSON: {exc}", True) from None

    def _exchange(self, path: str, data: bytes, headers: dict[str, str]) -> tuple[int, str, bytes]:
        """(status, reason, body) over this client's kept-alive connection: a sweep sends thousands of
        requests to one server, and a new TCP (or TLS) connection for each costs more than a small
        batch. A connection the server closed while idle is opened again once, at once (nothing was
        answered on it). Behind a proxy from the environment, urllib sends it instead."""
        if self._proxied():
            return self._via_urllib(path, data, headers)
        for reuse in (self._conn is not None, False):
            conn = self._connection()
            try:
                conn.request("POST", self._prefix + path, body=data, headers=headers)
                response = conn.getresponse()
                body = response.read()
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                self.close()
                if reuse:
                    continue
                raise
            if response.will_close:
                self.close()
            return response.status, response.reason, body
        raise AssertionError("unreachable")  # pragma: no cover

    def _connection(self) -> http.client.HTTPConnection:
        if self._conn is None:
            parts = urllib.parse.urlsplit(self.root)
            cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
            self._conn = cls(parts.hostname or "", parts.port, timeout=self.timeout)
        return self._conn

    def _proxied(self) -> bool:
        parts = urllib.parse.urlsplit(self.root)
        return parts.scheme in urllib.request.getproxies() and not urllib.request.proxy_bypass(
            parts.hostname or ""
        )

    def _via_urllib(self, path: str, data: bytes, headers: dict[str, str]) -> tuple[int, str, bytes]:
        request = urllib.request.Request(self.root + path, data=data, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return response.status, response.reason, response.read()
        except urllib.error.HTTPError as exc:
            body = b""
            with contextlib.suppress(Exception):
                body = exc.read()
            return exc.code, str(exc.reason), body

    def close(self) -> None:
        """Close the kept-alive connection (the next request opens a new one)."""
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
            self._conn = None

    def post(
        self, path: str, payload: dict, read: Callable[[Any], Any] = lambda data: data
    ) -> tuple[Any, list[str]]:
        """POST with retries: (``read`` of the response's data, or None, and the error string of
        every failed attempt). ``read`` may raise :class:`AttemptError` to fail (and perhaps
        retry) an attempt whose response is unusable."""
        key = self.key()
        errors: list[str] = []
        for attempt in range(self.retries + 1):
            if attempt and self.backoff > 0:
                time.sleep(self.backoff * attempt)
            try:
                return read(self.post_once(path, payload, key)), errors
            except AttemptError as exc:
                errors.append(self.scrub(str(exc), key))
                if not exc.retryable:
                    break
        return None, errors

    @staticmethod
    def scrub(message: str, key: str | None) -> str:
        return message.replace(key, "***") if key else message

    def unreachable(self, timeout: float = 5.0) -> str | None:
        """Why nothing listens at the server's address (a TCP connect), or None when something does."""
        parts = urllib.parse.urlsplit(self.root)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        try:
            with socket.create_connection((parts.hostname or "", port), timeout=timeout):
                return None
        except OSError as exc:
            return f"{type(exc).__name__}: {exc.strerror or exc}"
