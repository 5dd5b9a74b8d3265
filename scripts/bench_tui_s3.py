#!/usr/bin/env python
"""``ledgerscope open`` on the 1M-row ledger of ``scripts/bench_tui.py``: local disk against a bucket on
a loopback S3 server (moto's standalone server, in this process), each of the two ways a reader can
read a bucket (``LEDGERSCOPE_REMOTE_READ``):

* ``direct``: the small files copied, DuckDB reading the partition tables from the bucket through the
  registered fsspec file system (:mod:`ledgerscope.ledger.remote_read`);
* ``copy``: every committed file copied into a local cache first (re-used when its digest matches).

Each measured subprocess is ``scripts/bench_tui.py --child``: the first screen (``first_list_s``) and
the checks passed (``checks_s``), timed from the interpreter's start. Cold runs (empty cache: the copy
downloads everything, the direct read hashes every file once in its checks) come first, then
``--repeat`` rounds of (bare Textual app, local, direct, copy) back to back, so the load of the moment
counts in each.

    PYTHONPATH=src .venv/bin/python scripts/bench_tui_s3.py --ledger /tmp/tui31/ledger --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from bench_tui import _compile_bytecode, _run_child

MODES = ("direct", "copy")


def _serve(ledger: Path) -> tuple[object, str]:
    """A moto server on 127.0.0.1 holding the ledger at ``s3://bench/tui``; made-up credentials."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    os.environ.update(
        AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench-secret",
        AWS_ENDPOINT_URL=f"http://{host}:{port}", AWS_DEFAULT_REGION="us-east-1",
    )  # fmt: skip
    import fsspec

    fs = fsspec.filesystem("s3", skip_instance_cache=True)
    fs.mkdir("bench")
    for path in sorted(p for p in ledger.rglob("*") if p.is_file() and not p.name.startswith(".")):
        fs.put_file(str(path), f"bench/tui/{path.relative_to(ledger).as_posix()}")
    return server, "s3://bench/tui"


def _child(ledger: str, mode: str | None = None) -> dict:
    if mode:
        os.environ["BENCH_REMOTE_READ"] = mode
    t = _run_child(["--child", ledger, "--moves", "0"])["timings"]
    checks = t.get("checks") or t["first_list"]
    return {"first_list_s": round(t["first_list"], 3), "checks_s": round(checks, 3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ledger", type=Path, default=Path("/tmp/ledgerscope-bench-tui/ledger"))
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    _compile_bytecode()
    cache = Path(tempfile.mkdtemp(prefix="ledgerscope-bench-s3-cache-"))
    os.environ["LEDGERSCOPE_REMOTE_CACHE"] = str(cache)
    server, url = _serve(args.ledger)
    load = [os.getloadavg()[0]]
    try:
        cold = {mode: _child(url, mode) for mode in MODES}
        runs: dict[str, list[dict]] = {"bare": [], "local": [], **{m: [] for m in MODES}}
        for _ in range(args.repeat):
            runs["bare"].append({"first_list_s": _run_child(["--child-bare"])["first_frame"]})
            runs["local"].append(_child(str(args.ledger)))
            for mode in MODES:
                runs[mode].append(_child(url, mode))
    finally:
        server.stop()
        shutil.rmtree(cache, ignore_errors=True)
    load.append(os.getloadavg()[0])
    med = {k: {f: round(statistics.median(r[f] for r in v), 3) for f in v[0]} for k, v in runs.items()}
    report = {
        "cold": cold,
        "warm_median": med,
        "first_screen_vs_local": {
            m: round(med[m]["first_list_s"] / med["local"]["first_list_s"], 2) for m in MODES
        },
        "runs": runs,
        "load_average_1min": [round(x, 2) for x in load],
        "cpus": os.cpu_count(),
    }
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
