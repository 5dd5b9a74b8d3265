"""A real HTTP server on 127.0.0.1 that answers the embeddings and rerank APIs from a model-free
function, and breaks on request: the wrong number of vectors, the wrong dimension, HTTP 500, a
rerank answer missing a document. For the failure rules, which need a server that misbehaves
at a chosen moment; the equivalence tests use ledgerscope's model server with real models.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np

DIM = 32


def bag_of_words(text: str, dim: int = DIM) -> list[float]:
    v = np.zeros(dim)
    for w in re.findall(r"\w+", text.casefold()):
        v[int(hashlib.sha256(w.encode()).hexdigest(), 16) % dim] += 1.0
    v[0] += 0.01  # never all-zero
    return (v / np.linalg.norm(v)).tolist()


class FaultyServer:
    """``fault`` (None, "wrong-count", "wrong-dim", "http-500", "missing-index") applies to every
    request to a path containing ``fault_on`` after the first ``healthy`` such requests; ``seen``
    counts requests per path, ``embedded`` every text it was sent to embed, and ``connections``
    the client (host, port) pairs requests came from (one per TCP connection)."""

    def __init__(self, healthy: int = 1 << 30, fault: str | None = None, fault_on: str = "embeddings"):
        self.healthy, self.fault, self.fault_on = healthy, fault, fault_on
        self.seen: dict[str, int] = {}
        self.embedded: Counter[str] = Counter()
        self.connections: set[tuple] = set()
        self.last_chat: dict | None = None
        self.lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> FaultyServer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def answer(self, path: str, body: dict) -> tuple[int, dict]:
        with self.lock:
            n = sum(v for k, v in self.seen.items() if self.fault_on in k)
            self.seen[path] = self.seen.get(path, 0) + 1
        fault = self.fault if self.fault_on in path and n >= self.healthy else None
        if fault == "http-500":
            return 500, {"error": {"message": "the server is overloaded"}}
        if path.endswith("/chat/completions"):
            self.last_chat = body
            return 200, {
                "choices": [{"message": {"content": "7 days [1]"}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 11, "completion_tokens": 3},
            }
        if path.endswith("/embeddings"):
            texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
            with self.lock:
                self.embedded.update(texts)
            vectors = [bag_of_words(t) for t in texts]
            if fault == "wrong-count":
                vectors = vectors[:-1] if len(vectors) > 1 else vectors * 2
            if fault == "wrong-dim":
                vectors = [[*v, 0.5] for v in vectors]
            return 200, {
                "data": [{"index": i, "embedding": v} for i, v in enumerate(vectors)],
                "model": "bag-of-words",
            }
        docs = body["documents"]
        q = set(re.findall(r"\w+", body["query"].casefold()))
        results = [
            {"index": i, "relevance_score": float(len(q & set(re.findall(r"\w+", d.casefold()))))}
            for i, d in enumerate(docs)
        ]
        if fault == "missing-index":
            results = results[1:] if len(results) > 1 else [{"index": 5, "relevance_score": 1.0}]
        return 200, {"results": results}

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:
                with server.lock:
                    server.connections.add(self.client_address)
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                status, payload = server.answer(self.path, body)
                raw = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        return Handler


def first_block(request):
    """A model-free generator for ``kind = "python"``: the first block's text, cited (abstains without)."""
    from ledgerscope.pipeline.contracts.prompt import ABSTAIN_TEXT, GenerationResult

    if not request.blocks:
        return ABSTAIN_TEXT
    block = request.blocks[0]
    return GenerationResult(f"{block.text} [{block.label}]", [block.label])
