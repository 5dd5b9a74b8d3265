"""A small OpenAI-compatible embeddings and rerank server for sentence-transformers models.

    python -m ledgerscope.pipeline.servers.model_server [--embedding MODEL] [--rerank MODEL]
        [--host 127.0.0.1] [--port 0] [--api-key-env NAME] [--name NAME]

For a team without an embedding or rerank service (or a test that needs a real one): it serves
``POST /v1/embeddings`` (and ``/embeddings``) in the OpenAI shape and ``POST /v1/rerank`` (and
``/rerank``) in the Cohere/TEI/infinity shape, plus ``GET /health``, ``GET /v1/models`` and
``GET /v1/usage`` (requests, texts, tokens and pairs served so far, counted by the server), over
real HTTP on a real socket, from any sentence-transformers model name or path
(``bundled:all-MiniLM-L6-v2`` is the bundled one) and any cross-encoder. The vectors are the ones
the in-process encoder computes (:class:`ledgerscope.pipeline.embedding.encoder.Encoder`), so a sweep through
this server ranks
as an in-process sweep does.

Prints one JSON line ``{"base_url": ...}`` once it listens, then serves until its standard input
closes (the parent exits, or :meth:`ledgerscope.pipeline.generation.endpoint.LocalServer.close`) or it
receives SIGTERM/SIGINT.
Requests are handled on threads, the models one request at a time. With ``--api-key-env`` every
request must carry ``Authorization: Bearer <the variable's value>``; the key is read from the
environment, never from the command line.
"""

from __future__ import annotations

import argparse
import contextlib
import hmac
import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

#: at most this many texts per request, and this many bytes per request body
MAX_INPUTS = 4096
MAX_BODY = 64 * 1024 * 1024


class Models:
    """The loaded models, used under one lock (one forward pass at a time)."""

    def __init__(self, embedding: str | None, rerank: str | None, batch_size: int = 64):
        self.lock = threading.Lock()
        self.embedding_name, self.rerank_name = embedding, rerank
        self.encoder = self.reranker = None
        #: what this server served, counted here (``GET /v1/usage``): requests per API, texts, tokens
        self.served = {
            "embedding_requests": 0,
            "embedding_texts": 0,
            "embedding_tokens": 0,
            "rerank_requests": 0,
            "rerank_pairs": 0,
        }
        if embedding:
            from ledgerscope.pipeline.embedding.encoder import Encoder

            self.encoder = Encoder(embedding, batch_size)
        if rerank:
            from ledgerscope.pipeline.ranking.rerank import CrossEncoderReranker

            self.reranker = CrossEncoderReranker(rerank)

    def embed(self, texts: list[str]) -> tuple[list[list[float]], int]:
        with self.lock:
            vectors = self.encoder.vectors(texts)
            tokens = sum(len(self.encoder.get(t).offsets) for t in texts)
            self.encoder.forget()  # a server holds nothing between requests
            self.served["embedding_requests"] += 1
            self.served["embedding_texts"] += len(texts)
            self.served["embedding_tokens"] += tokens
        return vectors.tolist(), tokens

    def rerank(self, query: str, documents: list[str]) -> list[float]:
        with self.lock:
            self.served["rerank_requests"] += 1
            self.served["rerank_pairs"] += len(documents)
            return self.reranker.score(query, documents).tolist()


class RequestError(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def _texts(value: Any, field: str) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value:
        raise RequestError(400, f"'{field}' must be a string or a non-empty list of strings")
    if len(value) > MAX_INPUTS:
        raise RequestError(413, f"at most {MAX_INPUTS} items per request")
    out = []
    for item in value:
        if isinstance(item, dict) and isinstance(item.get("text"), str):
            item = item["text"]
        if not isinstance(item, str):
            raise RequestError(400, f"every item of '{field}' must be a string")
        out.append(item)
    return out


def embeddings_response(models: Models, body: dict, name: str) -> dict:
    if models.encoder is None:
        raise RequestError(404, "this server has no embedding model (--embedding)")
    if body.get("encoding_format", "float") != "float":
        raise RequestError(400, "only encoding_format = float is served")
    texts = _texts(body.get("input"), "input")
    vectors, tokens = models.embed(texts)
    return {
        "object": "list",
        "model": name,
        "data": [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)],
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }


def rerank_response(models: Models, body: dict, name: str) -> dict:
    if models.reranker is None:
        raise RequestError(404, "this server has no rerank model (--rerank)")
    query = body.get("query")
    if not isinstance(query, str):
        raise RequestError(400, "'query' must be a string")
    documents = _texts(body.get("documents"), "documents")
    scores = models.rerank(query, documents)
    order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
    top_n = body.get("top_n")
    if isinstance(top_n, int) and not isinstance(top_n, bool) and top_n > 0:
        order = order[:top_n]
    results = [{"index": i, "relevance_score": scores[i]} for i in order]
    if body.get("return_documents"):
        for r in results:
            r["document"] = {"text": documents[r["index"]]}
    return {"model": name, "results": results}


def _json_object(raw: bytes) -> dict[str, Any]:
    """A request body as a JSON object, or the 400 that says why it is not one."""
    try:
        body = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RequestError(400, f"body is not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise RequestError(400, "body must be a JSON object")
    return body


def make_handler(models: Models, name: str, api_key: str | None) -> type[BaseHTTPRequestHandler]:
    routes = {
        "/v1/embeddings": embeddings_response,
        "/embeddings": embeddings_response,
        "/v1/rerank": rerank_response,
        "/rerank": rerank_response,
    }

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet: a sweep sends thousands
            pass

        def _send(self, status: int, payload: dict) -> None:
            body = json.dumps(payload).encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _authorised(self) -> bool:
            if api_key is None:
                return True
            given = self.headers.get("Authorization", "")
            return hmac.compare_digest(given.encode(), f"Bearer {api_key}".encode())

        def do_GET(self) -> None:
            if self.path in ("/health", "/v1/health"):
                self._send(200, {"status": "ok"})
            elif self.path == "/v1/usage":
                with models.lock:
                    self._send(200, dict(models.served))
            elif self.path == "/v1/models":
                served = [m for m in (models.embedding_name, models.rerank_name) if m]
                self._send(
                    200, {"object": "list", "data": [{"id": name, "object": "model", "served": served}]}
                )
            else:
                self._send(404, {"error": {"message": f"no route {self.path}"}})

        def do_POST(self) -> None:
            route = routes.get(self.path.split("?", 1)[0])
            try:
                length = int(self.headers.get("Content-Length") or 0)
                if length > MAX_BODY:
                    raise RequestError(413, "request body too large")
                raw = self.rfile.read(length)
                if not self._authorised():
                    raise RequestError(401, "missing or wrong API key")
                if route is None:
                    raise RequestError(404, f"no route {self.path}")
                self._send(200, route(models, _json_object(raw), name))
            except RequestError as exc:
                self._send(exc.status, {"error": {"message": str(exc), "code": exc.status}})

    return Handler


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--embedding", default=None, help="sentence-transformers model name or path")
    ap.add_argument("--rerank", default=None, help="cross-encoder model name or path")
    ap.add_argument("--name", default=None, help="the model name the server reports")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--api-key-env", default=None)
    args = ap.parse_args(argv)
    if not (args.embedding or args.rerank):
        ap.error("serve at least one model: --embedding and/or --rerank")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    api_key = os.environ[args.api_key_env] if args.api_key_env else None
    models = Models(args.embedding, args.rerank, args.batch_size)
    name = args.name or args.embedding or args.rerank
    server = ThreadingHTTPServer((args.host, args.port), make_handler(models, name, api_key))
    server.daemon_threads = True
    host, port = server.server_address[:2]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    sys.stdout.write(json.dumps({"base_url": f"http://{host}:{port}"}) + "\n")
    sys.stdout.flush()
    with contextlib.suppress(KeyboardInterrupt):
        sys.stdin.read()  # until the parent closes our stdin
    server.shutdown()
    return 0


def start_model_server(
    embedding: str | None = None,
    rerank: str | None = None,
    port: int = 0,
    api_key_env: str | None = None,
    name: str | None = None,
    timeout: float = 180.0,
    stderr: Any = None,
) -> tuple[Any, str]:
    """This server in a child process on 127.0.0.1; returns (server, base_url). Stop it with
    ``server.close()`` (or ``with server:``)."""
    from ledgerscope.pipeline.generation.endpoint import spawn_server

    cmd = [sys.executable, "-m", "ledgerscope.pipeline.servers.model_server", "--port", str(port)]
    for flag, value in (
        ("--embedding", embedding),
        ("--rerank", rerank),
        ("--api-key-env", api_key_env),
        ("--name", name),
    ):
        if value:
            cmd += [flag, value]
    return spawn_server(
        cmd,
        embedding or rerank or "",
        "the model server",
        timeout,
        stderr=stderr if stderr is not None else subprocess.DEVNULL,
    )


if __name__ == "__main__":
    sys.exit(main())
