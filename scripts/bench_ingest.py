#!/usr/bin/env python
"""How fast ``ledgerscope ingest`` is against one DuckDB read of the same traces, and its peak memory.

    .venv/bin/python scripts/bench_ingest.py [--traces 100000] [--retrieved 50] [--keep DIR]

Builds a synthetic but schema-valid set in a temporary directory: a corpus, fixtures
with gold spans (one per question), a chunk store with verified offsets, and
seed-002 traces (two configs x eight phases x the questions, each with
``--retrieved`` ranked ids and scores, five context chunks with their texts, an
answer from a small set per question, a citation). Then, in the same run, times:

* the reference: DuckDB reading the trace file once
  (``CREATE TABLE t AS SELECT * FROM read_json(...)``, in a child process);
* the ingest: ``ledgerscope ingest`` on the same files (a child process), and
  its peak resident memory (the child's ``ru_maxrss``).

Prints both times, their ratio (the target is at most 3) and the peak memory
(the target is under 1 GB), and writes them as JSON with ``--json``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WORDS = ("audit", "log", "retention", "plan", "enterprise", "team", "starter", "days", "history",
         "deleted", "nightly", "window", "export", "request", "limit", "file", "upload", "workspace",
         "member", "guest", "token", "minute", "hour", "month", "year", "invoice", "refund", "backup",
         "region", "residency", "incident", "severity", "support", "tier", "response", "contract")


def build(root: Path, n_traces: int, n_retrieved: int, seed: int = 0) -> dict[str, Path]:
    """The corpus, fixtures, chunk store and traces (written as JSON lines)."""
    rnd = random.Random(seed)
    configs, phases = ("baseline", "candidate"), [str(p) for p in range(8)]
    n_questions = max(1, n_traces // (len(configs) * len(phases)))
    n_docs, per_doc = 400, 12
    corpus = root / "corpus.jsonl"
    docs = {}
    with corpus.open("w", encoding="utf-8") as fh:
        for d in range(n_docs):
            paras = [" ".join(rnd.choices(WORDS, k=rnd.randint(30, 60))) + "." for _ in range(per_doc)]
            text = "\n\n".join(paras)
            docs[f"doc{d:04d}.md"] = (text, paras)
            fh.write(json.dumps({"doc_id": f"doc{d:04d}.md", "text": text}) + "\n")
    chunks = root / "chunks.jsonl"
    ids = []
    texts = {}
    with chunks.open("w", encoding="utf-8") as fh:
        for doc_id, (text, paras) in docs.items():
            pos = 0
            for i, p in enumerate(paras):
                cid = f"{doc_id}#{i}"
                start = text.index(p, pos)
                pos = start + len(p)
                ids.append(cid)
                texts[cid] = (doc_id, p, start)
                fh.write(json.dumps({"chunk_id": cid, "doc_id": doc_id, "text": p, "start": start,
                                     "end": start + len(p),
                                     "coordinate_system": "codepoint-half-open"}) + "\n")
    fixtures = root / "fixtures.jsonl"
    gold = {}
    with fixtures.open("w", encoding="utf-8") as fh:
        for q in range(n_questions):
            cid = rnd.choice(ids)
            doc_id, p, start = texts[cid]
            words = p.split()
            a = rnd.randrange(0, max(1, len(words) - 8))
            quote = " ".join(words[a:a + 6])
            s = start + p.index(quote)
            gold[q] = cid
            fh.write(json.dumps({
                "format": "ledgerscope-fixture/1", "qid": f"q{q:05d}", "question": f"What about {quote}?",
                "segment": "number-scope", "answerable": True, "support_only": False,
                "answer": {"expected": f"{q % 90 + 1} days"}, "coordinate_system": "codepoint-half-open",
                "spans": [{"id": "s", "doc_id": doc_id, "start": s, "end": s + len(quote), "quote": quote,
                           "dependency": "primary"}],
                "sufficient_sets": [["s"]]}) + "\n")
    traces = root / "traces.jsonl"
    with traces.open("w", encoding="utf-8") as fh:
        for config in configs:
            for phase in phases:
                for q in range(n_questions):
                    ret = rnd.sample(ids, n_retrieved)
                    if rnd.random() < 0.7 and gold[q] not in ret:  # found in most traces
                        ret[rnd.randrange(n_retrieved)] = gold[q]
                    ctx = ret[:5]
                    answer = rnd.choice((f"{q % 90 + 1} days [1]", f"{q % 30 + 2} days [2]",
                                         "I cannot answer from the provided sources."))
                    fh.write(json.dumps({
                        "qid": f"q{q:05d}", "config": config, "phase": phase, "retrieved_ids": ret,
                        "scores": [round(1 - i / n_retrieved, 4) for i in range(n_retrieved)],
                        "context_ids": ctx, "context_text": [texts[c][1] for c in ctx], "answer": answer,
                        "citations": [answer[-2]] if answer.endswith("]") else []}) + "\n")
    return {"corpus": corpus, "fixtures": fixtures, "chunks": chunks, "traces": traces}


def _child(code: list[str], env: dict, log: Path) -> tuple[float, float, str]:
    """(wall seconds, peak RSS in MB, output) of a child process (its own rusage, from wait4)."""
    t0 = time.perf_counter()
    with log.open("w") as fh:
        proc = subprocess.Popen(code, stdout=fh, stderr=subprocess.STDOUT, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    out = log.read_text()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(code[:4])} failed ({proc.returncode}): {out[-3000:]}")
    return wall, usage.ru_maxrss / 1024, out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--traces", type=int, default=100_000)
    ap.add_argument("--retrieved", type=int, default=50)
    ap.add_argument("--keep", type=Path, help="build the inputs here (and keep them)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="ledgerscope-bench-ingest-") as tmp:
        root = args.keep or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        files = build(root, args.traces, args.retrieved)
        size = files["traces"].stat().st_size
        print(f"built {args.traces:,} traces x {args.retrieved} retrieved ({size / 2**20:.0f} MiB) "
              f"in {time.perf_counter() - t0:.0f} s", flush=True)
        env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "HF_HUB_OFFLINE": "1",
               "TOKENIZERS_PARALLELISM": "false"}
        read = ("import duckdb, sys; con = duckdb.connect(); con.execute(\"CREATE TABLE t AS SELECT * FROM "
                "read_json(?, format='newline_delimited')\", [sys.argv[1]]); "
                "print(con.execute('SELECT count(*) FROM t').fetchall()[0][0])")
        ref, ref_mb, _ = _child([sys.executable, "-c", read, str(files["traces"])], env, root / "read.log")
        out = root / "ledger"
        ing, ing_mb, log = _child([sys.executable, "-m", "ledgerscope.cli", "ingest", str(files["traces"]),
                                   "--chunks", str(files["chunks"]), "--fixtures", str(files["fixtures"]),
                                   "--corpus", str(files["corpus"]), "--out", str(out)], env,
                                  root / "ingest.log")
        ratio = ing / ref
        print(log.strip().splitlines()[0])
        print(f"DuckDB read of the traces: {ref:.1f} s ({ref_mb:.0f} MB peak)")
        print(f"ledgerscope ingest:        {ing:.1f} s ({ing_mb:.0f} MB peak)")
        print(f"ratio {ratio:.2f} (target <= 3); peak memory {ing_mb:.0f} MB (target < 1024)")
        if args.json:
            args.json.write_text(json.dumps({"traces": args.traces, "retrieved": args.retrieved,
                                             "trace_bytes": size, "duckdb_read_s": round(ref, 2),
                                             "ingest_s": round(ing, 2), "ratio": round(ratio, 2),
                                             "ingest_peak_mb": round(ing_mb), "read_peak_mb": round(ref_mb)}))
    return 0 if ratio <= 3 and ing_mb < 1024 else 1


if __name__ == "__main__":
    sys.exit(main())
