#!/usr/bin/env python
"""How fast ``ledgerscope ingest`` is against one DuckDB read of the same traces (and against a read
that also writes the ledger's rows), and its peak memory.

    .venv/bin/python scripts/bench_ingest.py [--traces 100000] [--retrieved 50] [--shape seed002|framework]
        [--keep DIR] [--json F] [--unplaceable 0.01] [--src DIR]

Builds a synthetic but schema-valid set in a temporary directory: a corpus, fixtures
with gold spans (one per question), a chunk store with verified offsets, and
seed-002 traces (two configs x eight phases x the questions, each with
``--retrieved`` ranked ids and scores, five context chunks with their texts, an
answer from a small set per question, a citation). ``--shape framework`` writes them as the
LangChain handler does instead: chunk ids derived from source, start and content, each chunk on
one store line per config (two configs sharing a store), no scores or citations, the question and
the literal prompt (its tokens counted), one request in a hundred failed (``error``, no answer).
Then, in the same run, times:

* the reference: DuckDB reading the trace file once
  (``CREATE TABLE t AS SELECT * FROM read_json(...)``, in a child process);
* the read+write floor: DuckDB reading the same traces and the chunk store and
  writing what every ingest must write however it derives the rest: one
  candidate row per ranked id (config, phase, qid, stage, rank, chunk id, score
  and the chunk's interval from the store) and one record per trace (its
  answer, literal context, context ids and citations), zstd Parquet split by
  (config, phase), with DuckDB's own writer and no sort (a child process);
* the ingest: ``ledgerscope ingest`` on the same files (a child process), and
  its peak resident memory (the child's ``ru_maxrss``).

Prints the three times, the ingest's ratio to the read (the issue's target: at
most 3) and to the floor, the bytes each wrote and the ingest's peak memory (the
target: under 1 GB), and writes them as JSON with ``--json``. The exit status
is 0 when the memory target is met and the ingest is within 3 x the read.

``--unplaceable F`` replaces the text of that share of the store's chunks (spread evenly, offsets
kept) by text no document holds, so the ingest places them nowhere and carries them as units without
an interval (issue 28's target: within 10% of the time with none). ``--src DIR`` runs the ingest from
another checkout's ``src`` (to time two versions on the same inputs).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WORDS = (
    "audit",
    "log",
    "retention",
    "plan",
    "enterprise",
    "team",
    "starter",
    "days",
    "history",
    "deleted",
    "nightly",
    "window",
    "export",
    "request",
    "limit",
    "file",
    "upload",
    "workspace",
    "member",
    "guest",
    "token",
    "minute",
    "hour",
    "month",
    "year",
    "invoice",
    "refund",
    "backup",
    "region",
    "residency",
    "incident",
    "severity",
    "support",
    "tier",
    "response",
    "contract",
)


def _derived_id(doc_id: str, start: int, text: str) -> str:
    """The LangChain handler's id for a chunk without one (``ledgerscope.trace.spec.derived_chunk_id``)."""
    sys.path.insert(0, str(REPO / "src"))
    from ledgerscope.trace.spec import derived_chunk_id

    return derived_chunk_id(doc_id, start, text)


def build(
    root: Path, n_traces: int, n_retrieved: int, seed: int = 0, shape: str = "seed002"
) -> dict[str, Path]:
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
                start = text.index(p, pos)
                cid = f"{doc_id}#{i}" if shape == "seed002" else _derived_id(doc_id, start, p)
                pos = start + len(p)
                ids.append(cid)
                texts[cid] = (doc_id, p, start)
                line = {
                    "chunk_id": cid,
                    "doc_id": doc_id,
                    "text": p,
                    "start": start,
                    "end": start + len(p),
                    "coordinate_system": "codepoint-half-open",
                }
                for config in configs if shape == "framework" else (None,):
                    fh.write(json.dumps(line if config is None else {**line, "config": config}) + "\n")
    fixtures = root / "fixtures.jsonl"
    gold, questions = {}, {}
    with fixtures.open("w", encoding="utf-8") as fh:
        for q in range(n_questions):
            cid = rnd.choice(ids)
            doc_id, p, start = texts[cid]
            words = p.split()
            a = rnd.randrange(0, max(1, len(words) - 8))
            quote = " ".join(words[a : a + 6])
            s = start + p.index(quote)
            gold[q] = cid
            questions[q] = f"What about {quote}?"
            fh.write(
                json.dumps(
                    {
                        "format": "ledgerscope-fixture/1",
                        "qid": f"q{q:05d}",
                        "question": f"What about {quote}?",
                        "segment": "number-scope",
                        "answerable": True,
                        "support_only": False,
                        "answer": {"expected": f"{q % 90 + 1} days"},
                        "coordinate_system": "codepoint-half-open",
                        "spans": [
                            {
                                "id": "s",
                                "doc_id": doc_id,
                                "start": s,
                                "end": s + len(quote),
                                "quote": quote,
                                "dependency": "primary",
                            }
                        ],
                        "sufficient_sets": [["s"]],
                    }
                )
                + "\n"
            )
    traces = root / "traces.jsonl"
    with traces.open("w", encoding="utf-8") as fh:
        for config in configs:
            for phase in phases:
                for q in range(n_questions):
                    trace = _trace(rnd, q, config, phase, ids, gold[q], texts, n_retrieved)
                    if shape == "framework":
                        trace = _framework(rnd, trace, questions[q])
                    fh.write(json.dumps(trace) + "\n")
    return {"corpus": corpus, "fixtures": fixtures, "chunks": chunks, "traces": traces}


def _trace(
    rnd: random.Random,
    q: int,
    config: str,
    phase: str,
    ids: list[str],
    gold: str,
    texts: dict[str, tuple[str, str, int]],
    n_retrieved: int,
) -> dict:
    """One seed-002 trace: ``n_retrieved`` ranked ids (the gold chunk among them in most), five of
    them as the context with their texts, an answer from a small set, its citation."""
    ret = rnd.sample(ids, n_retrieved)
    if rnd.random() < 0.7 and gold not in ret:  # found in most traces
        ret[rnd.randrange(n_retrieved)] = gold
    ctx = ret[:5]
    answer = rnd.choice(
        (f"{q % 90 + 1} days [1]", f"{q % 30 + 2} days [2]", "I cannot answer from the provided sources.")
    )
    return {
        "qid": f"q{q:05d}",
        "config": config,
        "phase": phase,
        "retrieved_ids": ret,
        "scores": [round(1 - i / n_retrieved, 4) for i in range(n_retrieved)],
        "context_ids": ctx,
        "context_text": [texts[c][1] for c in ctx],
        "answer": answer,
        "citations": [answer[-2]] if answer.endswith("]") else [],
    }


def _framework(rnd: random.Random, trace: dict, question: str) -> dict:
    """A seed-002 trace as the LangChain handler writes it (rules in the module docstring)."""
    failed = rnd.random() < 0.01
    out = {
        "format": "ledgerscope-trace/1",
        "qid": trace["qid"],
        "config": trace["config"],
        "phase": trace["phase"],
        "question": question,
        "retrieved_ids": trace["retrieved_ids"],
        "context_ids": trace["context_ids"],
        "context_text": trace["context_text"],
        "answer": None if failed else trace["answer"].removesuffix(" [1]").removesuffix(" [2]"),
        "prompt": "Sources:\n" + "\n\n".join(trace["context_text"]) + f"\n\nQuestion: {question}",
    }
    if failed:
        out["error"] = "TimeoutError: the model did not answer within 30 s"
    return out


def _child(code: list[str], env: dict, log: Path) -> tuple[float, float, str, float]:
    """(wall seconds, peak RSS in MB, output, CPU seconds: user + system) of a child process (its own
    rusage, from wait4; the CPU seconds vary less than the wall time on a shared machine)."""
    t0 = time.perf_counter()
    with log.open("w") as fh:
        proc = subprocess.Popen(code, stdout=fh, stderr=subprocess.STDOUT, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    out = log.read_text()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(code[:4])} failed ({proc.returncode}): {out[-3000:]}")
    return wall, usage.ru_maxrss / 1024, out, usage.ru_utime + usage.ru_stime


#: the floor's two tables: a candidate row per ranked id with its chunk's interval, a record per trace
FLOOR_CANDIDATES = """
    SELECT x.*, c.doc_id, c."start", c."end" FROM (
        SELECT config AS arm, phase, qid, 'fused' AS stage, unnest(range(1, len(retrieved_ids) + 1)) AS rnk,
               unnest(retrieved_ids) AS unit_id, unnest(scores) AS score FROM t
        UNION ALL
        SELECT config, phase, qid, 'packed', unnest(range(1, len(context_ids) + 1)), unnest(context_ids),
               NULL FROM t) x
    JOIN c ON c.chunk_id = x.unit_id"""
FLOOR_RECORDS = """
    SELECT config AS arm, phase, qid, answer, context_ids AS packed_unit_ids, citations,
           array_to_string(context_text, chr(10) || chr(10)) AS packed_context FROM t"""
#: the framework shape records no scores and no citations
FRAMEWORK_FLOOR = {"unnest(scores)": "NULL", "citations": "NULL AS citations"}
#: the floor's child: read both JSONL files, write both tables (DuckDB's Parquet writer, zstd)
FLOOR = """
import duckdb, sys
traces, chunks, out = sys.argv[1:4]
con = duckdb.connect()
con.execute("CREATE TABLE t AS SELECT * FROM read_json(?, format='newline_delimited')", [traces])
con.execute("CREATE TABLE c AS SELECT * FROM read_json(?, format='newline_delimited')", [chunks])
for name, sql in (("candidates", CANDIDATES), ("records", RECORDS)):
    con.execute(f"COPY ({sql}) TO '{out}/{name}' "
                "(FORMAT parquet, COMPRESSION zstd, PARTITION_BY (arm, phase))")
"""


def _bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def unplaceable(chunks: Path, share: float) -> int:
    """Replace the text of ``share`` of the store's chunks (every 1/share-th) by text the corpus does not
    hold, offsets kept; return how many."""
    lines = chunks.read_text(encoding="utf-8").splitlines()
    step = max(1, round(1 / share))
    n = 0
    for i in range(step // 2, len(lines), step):
        obj = json.loads(lines[i])
        obj["text"] = "zqxj " + " ".join(reversed(obj["text"].split()))
        lines[i] = json.dumps(obj)
        n += 1
    chunks.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return n


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--traces", type=int, default=100_000)
    ap.add_argument("--retrieved", type=int, default=50)
    ap.add_argument(
        "--shape",
        choices=("seed002", "framework"),
        default="seed002",
        help="seed 002's record, or the LangChain handler's (docstring)",
    )
    ap.add_argument("--keep", type=Path, help="build the inputs here (and keep them)")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--unplaceable", type=float, default=0.0, help="share of chunks made unplaceable")
    ap.add_argument("--src", type=Path, default=REPO / "src", help="the ledgerscope source the ingest runs")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="ledgerscope-bench-ingest-") as tmp:
        root = args.keep or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        files = build(root, args.traces, args.retrieved, shape=args.shape)
        if args.unplaceable:
            print(f"{unplaceable(files['chunks'], args.unplaceable)} chunk(s) made unplaceable", flush=True)
        size = files["traces"].stat().st_size
        print(
            f"built {args.traces:,} traces x {args.retrieved} retrieved ({size / 2**20:.0f} MiB) "
            f"in {time.perf_counter() - t0:.0f} s",
            flush=True,
        )
        env = {
            **os.environ,
            "PYTHONPATH": str(args.src),
            "HF_HUB_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false",
        }
        read = (
            'import duckdb, sys; con = duckdb.connect(); con.execute("CREATE TABLE t AS SELECT * FROM '
            "read_json(?, format='newline_delimited')\", [sys.argv[1]]); "
            "print(con.execute('SELECT count(*) FROM t').fetchall()[0][0])"
        )
        ref, ref_mb, _, ref_cpu = _child(
            [sys.executable, "-c", read, str(files["traces"])], env, root / "read.log"
        )
        floor_out, out = root / "floor", root / "ledger"
        shutil.rmtree(floor_out, ignore_errors=True)
        shutil.rmtree(out, ignore_errors=True)
        floor_out.mkdir()
        candidates, records = FLOOR_CANDIDATES, FLOOR_RECORDS
        if args.shape == "framework":
            for old, new in FRAMEWORK_FLOOR.items():
                candidates, records = candidates.replace(old, new), records.replace(old, new)
        code = f"CANDIDATES = {candidates!r}\nRECORDS = {records!r}\n{FLOOR}"
        floor, floor_mb, _, floor_cpu = _child(
            [sys.executable, "-c", code, str(files["traces"]), str(files["chunks"]), str(floor_out)],
            env,
            root / "floor.log",
        )
        ing, ing_mb, log, ing_cpu = _child(
            [
                sys.executable,
                "-m",
                "ledgerscope.cli",
                "ingest",
                str(files["traces"]),
                "--chunks",
                str(files["chunks"]),
                "--fixtures",
                str(files["fixtures"]),
                "--corpus",
                str(files["corpus"]),
                "--out",
                str(out),
            ],
            env,
            root / "ingest.log",
        )
        ratio, floor_ratio = ing / ref, ing / floor
        floor_bytes, ledger_bytes = _bytes(floor_out), _bytes(out)
        print(log.strip().splitlines()[0])
        print(f"DuckDB read of the traces:       {ref:.1f} s ({ref_mb:.0f} MB peak)")
        print(
            f"DuckDB read + write (the floor): {floor:.1f} s ({floor_mb:.0f} MB peak, "
            f"{floor_bytes / 2**20:.0f} MiB written; {floor / ref:.2f} x the read)"
        )
        print(
            f"ledgerscope ingest:              {ing:.1f} s ({ing_mb:.0f} MB peak, "
            f"{ledger_bytes / 2**20:.0f} MiB written)"
        )
        print(
            f"ratio to the read {ratio:.2f} (target <= 3); to the floor {floor_ratio:.2f}; "
            f"peak memory {ing_mb:.0f} MB (target < 1024)"
        )
        print(
            f"CPU seconds (user + system): read {ref_cpu:.1f}, floor {floor_cpu:.1f}, ingest {ing_cpu:.1f} "
            f"({ing_cpu / floor_cpu:.2f} x the floor's); load average {os.getloadavg()[0]:.1f}"
        )
        if args.json:
            args.json.write_text(
                json.dumps(
                    {
                        "traces": args.traces,
                        "retrieved": args.retrieved,
                        "shape": args.shape,
                        "trace_bytes": size,
                        "duckdb_read_s": round(ref, 2),
                        "floor_s": round(floor, 2),
                        "ingest_s": round(ing, 2),
                        "ratio": round(ratio, 2),
                        "floor_ratio": round(floor_ratio, 2),
                        "floor_over_read": round(floor / ref, 2),
                        "floor_bytes": floor_bytes,
                        "ledger_bytes": ledger_bytes,
                        "ingest_peak_mb": round(ing_mb),
                        "floor_peak_mb": round(floor_mb),
                        "read_peak_mb": round(ref_mb),
                        "duckdb_read_cpu_s": round(ref_cpu, 2),
                        "floor_cpu_s": round(floor_cpu, 2),
                        "ingest_cpu_s": round(ing_cpu, 2),
                        "cpu_floor_ratio": round(ing_cpu / floor_cpu, 2),
                        "load_average": round(os.getloadavg()[0], 1),
                    }
                )
            )
    return 0 if ratio <= 3 and ing_mb < 1024 else 1


if __name__ == "__main__":
    sys.exit(main())
