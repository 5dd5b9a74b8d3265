#!/usr/bin/env python
"""Time the paired bootstrap at the design's scale: 10,000 replicates x 2,000 questions x 16 phases.

Usage: .venv/bin/python scripts/bench_bootstrap.py [--replicates N] [--questions Q] [--phases P]
       [--docs D] [--repeat K] [--compare]

Prints seconds per call (best of --repeat) for the unclustered and the clustered
(D documents) bootstrap with the three default statistics, and with --compare
the whole ``compare_arms`` over an in-memory ledger of the same size.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from ledgerscope.analysis.stats.bootstrap import paired_bootstrap


def best_of(k: int, fn) -> float:
    times = []
    for _ in range(k):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replicates", type=int, default=10_000)
    ap.add_argument("--questions", type=int, default=2_000)
    ap.add_argument("--phases", type=int, default=16)
    ap.add_argument("--docs", type=int, default=400)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--compare", action="store_true", help="also time compare_arms end to end")
    a = ap.parse_args()

    rng = np.random.default_rng(0)
    q, p = a.questions, a.phases
    cand = (rng.random((q, p)) < 0.75).astype(float)
    base = (rng.random((q, p)) < 0.70).astype(float)
    cand[rng.random((q, p)) < 0.02] = np.nan  # some not-applicable cells
    clusters = rng.integers(0, a.docs, q)
    print(f"{a.replicates} replicates x {q} questions x {p} phases; cpus={os.cpu_count()}")
    for label, cl in (("unclustered", None), (f"clustered ({a.docs} documents)", clusters)):
        secs = best_of(a.repeat, lambda cl=cl: paired_bootstrap(cand, base, cl, n_resamples=a.replicates))
        print(f"  {label:36s} {secs:6.2f} s")

    if a.compare:
        import duckdb
        import pyarrow as pa

        from ledgerscope.analysis.stats.compare import compare_arms
        from ledgerscope.ledger import schema

        rows = []
        for arm, rate in (("cand", 0.75), ("base", 0.7)):
            sup = rng.random((q, p)) < rate
            for i in range(q):
                for j in range(p):
                    rows.append(
                        {
                            "arm": arm,
                            "phase": str(j),
                            "qid": f"q{i}",
                            "answerable": True,
                            "support_only": False,
                            "segment": ("rule-exception", "number-scope")[i % 2],
                            "stress_set": "representative" if i % 4 else "enriched",
                            "doc_ids": [f"d{i % a.docs}"],
                            "support_packed": bool(sup[i, j]),
                            "answer_verdict": "correct" if sup[i, j] else "wrong",
                            "citation_verdict": "supported",
                            "prompt_tokens": 900,
                            "evidence_tokens": 600,
                        }
                    )
        con = duckdb.connect()
        con.register("_r", pa.Table.from_pylist(rows, schema=schema.RECORDS))
        con.execute("CREATE VIEW records AS SELECT * FROM _r")
        secs = best_of(1, lambda: compare_arms(con, "cand", "base", n_resamples=a.replicates))
        label = "compare_arms (8 metrics, segments)"
        print(f"  {label:36s} {secs:6.2f} s")


if __name__ == "__main__":
    main()
