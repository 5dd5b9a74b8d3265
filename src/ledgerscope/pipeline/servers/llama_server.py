"""llama.cpp's OpenAI-compatible HTTP server (xllamacpp) in a child process of its own.

    python -m ledgerscope.pipeline.servers.llama_server MODEL.gguf [--n-ctx N] [--api-key-env NAME] ...

Prints one JSON line ``{"base_url": ...}`` once the server listens on
127.0.0.1, then serves until its standard input closes (the parent exits or
calls :meth:`LocalServer.close`) or it receives SIGTERM. A separate process can
always be stopped: destroying an in-process ``xllamacpp.Server`` can block on
its worker threads. An API key, when wanted, is read from the environment
variable named by ``--api-key-env``, never passed on the command line.
"""

from __future__ import annotations

import argparse
import json
import os
import sys


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("--n-ctx", type=int, default=2048)
    ap.add_argument("--n-parallel", type=int, default=1)
    ap.add_argument("--n-threads", type=int, default=None)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--verbosity", type=int, default=0)
    ap.add_argument("--api-key-env", default=None)
    ap.add_argument("--metrics", action="store_true", help="serve GET /metrics (Prometheus counters)")
    args = ap.parse_args(argv)
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = args.model
    params.n_ctx = args.n_ctx
    params.n_parallel = args.n_parallel
    params.hostnames = ["127.0.0.1"]
    params.port = args.port
    params.verbosity = args.verbosity
    params.endpoint_metrics = bool(args.metrics)
    if args.n_threads is not None:
        params.cpuparams.n_threads = args.n_threads
        params.cpuparams_batch.n_threads = args.n_threads
    if args.api_key_env:
        params.api_keys = [os.environ[args.api_key_env]]
    server = xllamacpp.Server(params)
    address = server.listening_address
    base_url = (address if address.startswith("http") else f"http://{address}").rstrip("/")
    sys.stdout.write(json.dumps({"base_url": base_url}) + "\n")
    sys.stdout.flush()
    sys.stdin.read()  # until the parent closes our stdin
    os._exit(0)  # skip the server's destructor: the process ending is what stops it


if __name__ == "__main__":
    sys.exit(main())
