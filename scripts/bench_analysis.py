#!/usr/bin/env python
"""diagnose --json and compare against one DuckDB scan of the candidate table, same ledger, same run.

Generates a schema-valid synthetic ledger (ledgerscope.testing.synthetic) with at least
--min-rows candidate rows, then times, each in a fresh subprocess so imports count:
  * the floor: one DuckDB scan of the candidate table (every column read: SUM over each);
  * `ledgerscope diagnose LEDGER --json` (all records, evidence included, output to /dev/null);
  * `ledgerscope compare LEDGER --candidate candidate --baseline baseline --json`.
Target: each within 3 x the scan.

    .venv/bin/python scripts/bench_analysis.py [--min-rows 1000000]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCAN = """
import sys, duckdb
con = duckdb.connect()
con.execute("SELECT count(*), sum(rank), sum(score), sum(length(unit_id)), sum(length(qid)), "
            "sum(length(stage)), sum(start), sum(\\"end\\"), sum(length(doc_id)), sum(len(lineage)) "
            "FROM read_parquet(?)", [sys.argv[1] + '/candidates/**/*.parquet']).fetchall()
"""


def timed(cmd: list[str], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        best = min(best, time.perf_counter() - t)
    return best


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--min-rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3, help="best of N runs per command")
    args = ap.parse_args()
    from ledgerscope.testing.synthetic import make_synthetic_ledger, rows_per_record

    phases, arms = 8, 2
    questions = -(-args.min_rows // (rows_per_record() * phases * arms))
    ledger = Path(tempfile.mkdtemp(prefix="bench_analysis_")) / "ledger"
    t = time.perf_counter()
    counts = make_synthetic_ledger(ledger, questions=questions, phases=phases)
    print(
        f"synthetic ledger: {counts['records']:,} records, {counts['candidates']:,} candidate rows, "
        f"{counts['units']:,} units ({time.perf_counter() - t:.1f} s to build)"
    )
    py = sys.executable
    ls = [py, "-m", "ledgerscope.cli.main"]
    scan = timed([py, "-c", SCAN, str(ledger)], args.repeat)
    diag = timed([*ls, "diagnose", str(ledger), "--json"], args.repeat)
    comp = timed(
        [*ls, "compare", str(ledger), "--candidate", "candidate", "--baseline", "baseline", "--json"],
        args.repeat,
    )
    print(f"floor, one DuckDB scan of candidates (process incl.): {scan:.2f} s")
    print(f"diagnose --json: {diag:.2f} s  ->  {diag / scan:.2f} x scan (target <= 3)")
    print(f"compare:         {comp:.2f} s  ->  {comp / scan:.2f} x scan (target <= 3)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
