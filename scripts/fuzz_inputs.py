#!/usr/bin/env python
"""The long malformed-input run: every input kind, every mutation, many seeds, every command.

    .venv/bin/python scripts/fuzz_inputs.py --cases 600 --seed 1

Input kinds: fixtures (seed 000 JSON, seed 002 gold, canonical JSONL), corpora
(directory, JSONL), arm TOML, ledgers (Parquet directory, JSONL interchange), trace files and
chunk stores (through ``ledgerscope ingest``). Then ``--parser-cases`` (default 100,000) in-process
cases of the trace and chunk-store parsers (tests/fuzz_ingest.py), some also through DuckDB's bulk
trace reader.
Cases cycle through every (kind, mutation) pair, interleaved by kind, each with
its own seed drawn from ``--seed``; 140 cases cover every pair once. Every CLI
command that reads the input runs on it (validate
and sweep; diagnose, diagnose --json, compare, rerun, convert, export in four
formats), each in a child forked from a clean fork server, with a timeout.

Prints, per input kind, how many cases and command runs there were and how
many ended in a clean error, a success (the mutation left the input valid) or,
for a sweep on valid input, at the model load (the children refuse to import
``torch``: a sweep must reject malformed input before that). Any run that ended
in a traceback, the internal-error catch-all, a hang, a partial output, a
changed input, an accepted malformed input or a sweep that got to the model
with malformed input is listed and the script exits 1.

The definitions live in ``tests/fuzz_harness.py`` (shared with ``tests/test_fuzz.py``).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests import fuzz_harness as fh  # noqa: E402 - the repository root goes on the path first


def _parser() -> argparse.ArgumentParser:
    """The command line, apart so ``main`` reads as plan, run, report."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--cases",
        type=int,
        default=300,
        help="cases to build (each runs every command that reads its input); default 300",
    )
    ap.add_argument("--seed", type=int, default=0, help="seed for the cases' own seeds (default 0)")
    ap.add_argument("--jobs", type=int, default=2, help="cases run at once (default 2)")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds before a command counts as hung")
    ap.add_argument("--kinds", nargs="*", default=list(fh.KINDS), choices=fh.KINDS)
    ap.add_argument(
        "--synthetic-ledger",
        action="store_true",
        help="mutate a synthetic ledger instead of a real sweep's (no model load; rerun then "
        "always stops at the synthetic configuration digest)",
    )
    ap.add_argument("--json", type=Path, help="also write the summary and failures here")
    ap.add_argument(
        "--parser-cases",
        type=int,
        default=100_000,
        help="in-process cases of the trace and chunk-store parsers, after the CLI cases "
        "(default 100000; 0 skips them)",
    )
    ap.add_argument(
        "--differential-cases",
        type=int,
        default=2_000,
        help="of those, cases where DuckDB's bulk trace reader runs beside the line reader (default 2000)",
    )
    return ap


def case_plan(kinds: list[str], cases: int, seed: int) -> list[tuple[str, object, int]]:
    """``cases`` (kind, mutation, seed) triples, interleaved by kind (kind 1's first mutation, kind
    2's first, ..., then everyone's second, ...) so a short run still touches every kind."""
    per_kind = {k: fh.mutations(k) for k in kinds}
    depth = max(len(v) for v in per_kind.values())
    pairs = [(k, per_kind[k][i]) for i in range(depth) for k in kinds if i < len(per_kind[k])]
    rng = random.Random(seed)
    return [(*pairs[i % len(pairs)], rng.randrange(2**31)) for i in range(cases)]


def _base_ledger(root: Path, kinds: list[str], plan: list, synthetic: bool) -> Path | None:
    """The ledger the ledger kinds mutate, built once per run (a real sweep loads the model, so
    only when a ledger kind is planned)."""
    if not ({"ledger", "ledger-jsonl"} & set(kinds) and plan):
        return None
    print(
        "building the base ledger" + (" (synthetic)" if synthetic else " (a real sweep: loads the model)"),
        flush=True,
    )
    base = fh.make_base_ledger(root / "base", real=not synthetic)
    fh.interchange_of(base)
    return base


def run_cases(plan: list, args: argparse.Namespace, t0: float) -> list:
    """Every planned case through every command that reads it, ``--jobs`` at once, with a progress
    line every 25 cases; each case's files go as soon as it is judged, so disk use stays flat."""
    with tempfile.TemporaryDirectory(prefix="ledgerscope-fuzz-") as tmp:
        root = Path(tmp)
        base = _base_ledger(root, args.kinds, plan, args.synthetic_ledger)

        def one(i: int) -> list:
            kind, mutation, seed = plan[i]
            case = fh.build_case(kind, mutation, seed, root / f"case{i:05d}", base)
            try:
                return fh.check_case(case, timeout=args.timeout)
            finally:
                shutil.rmtree(case.root, ignore_errors=True)

        results = []
        done = 0
        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            for res in pool.map(one, range(len(plan))):
                results.extend(res)
                done += 1
                if done % 25 == 0 or done == len(plan):
                    bad = sum(r.verdict.outcome == "FAIL" for r in results)
                    print(
                        f"  {done}/{len(plan)} cases, {len(results)} command runs, {bad} failing, "
                        f"{time.monotonic() - t0:.0f} s",
                        flush=True,
                    )
    return results


def print_summary(summary: dict, cases: int, results: list) -> None:
    """The per-kind outcome table, its total row and the slowest command (the one to watch for a
    creeping hang)."""
    outcomes = ("clean error", "success", "valid (stopped at model load)", "FAIL")
    print(
        f"{'input kind':<20}{'cases':>7}{'runs':>7}  "
        + "  ".join(f"{o:>12}" for o in ("clean error", "success", "model load", "FAIL"))
    )
    for kind, row in summary.items():
        print(
            f"{kind:<20}{row['cases']:>7}{row['runs']:>7}  "
            + "  ".join(f"{row['outcomes'].get(o, 0):>12}" for o in outcomes)
        )
    total = {o: sum(r["outcomes"].get(o, 0) for r in summary.values()) for o in outcomes}
    print(f"{'total':<20}{cases:>7}{len(results):>7}  " + "  ".join(f"{total[o]:>12}" for o in outcomes))
    slowest = max(results, key=lambda r: r.run.seconds) if results else None
    if slowest is not None:
        print(f"\nslowest command: {slowest.run.seconds:.1f} s ({slowest.case.label} [{slowest.command}])")


def verdict(failures: list[str]) -> int:
    """Exit status 1 with every failing run listed, else 0 with what was ruled out."""
    if failures:
        print(
            f"\nFAILED: {len(failures)} command run(s) did not end in a clean error or a clean success:",
            file=sys.stderr,
        )
        for line in failures:
            print("  " + line, file=sys.stderr)
        return 1
    print(
        "\nno traceback, no catch-all, no hang, no partial output, no changed input, "
        "no malformed input past validation"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    parser_failures = parser_run(args.parser_cases, args.differential_cases, args.seed)
    plan = case_plan(args.kinds, args.cases, args.seed)
    t0 = time.monotonic()
    results = run_cases(plan, args, t0)
    seconds = time.monotonic() - t0
    summary = fh.summary(results)
    failures = fh.failures(results)

    print(f"\n{len(plan)} cases, {len(results)} command runs in {seconds:.0f} s (seed {args.seed})\n")
    print_summary(summary, len(plan), results)
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "cases": len(plan),
                    "runs": len(results),
                    "seed": args.seed,
                    "seconds": round(seconds, 1),
                    "summary": summary,
                    "failures": failures,
                },
                indent=2,
            )
        )
    return verdict(failures + parser_failures)


def parser_run(cases: int, differential: int, seed: int) -> list[str]:
    """The trace and chunk-store parsers in process: ``cases`` mutated files (every mutation in turn,
    each with its own seed), judged by tests/fuzz_ingest.py; ``differential`` of the trace cases also
    through DuckDB's bulk reader, which must never accept what the line reader refuses."""
    if cases <= 0:
        return []
    import duckdb
    from tests import fuzz_ingest as fi

    qids = [r["qid"] for r in fh.canonical_rows()]
    chunk_ids = [c["chunk_id"] for c in fi.base_chunks()]
    pairs = [("traces", m) for m in fi.TRACE_MUTATIONS] + [("chunks", m) for m in fi.CHUNK_MUTATIONS]
    heavy = {"huge-line", "deep-nesting"}  # 16 MiB per case: every hundredth pass only
    rng = random.Random(seed)
    failures: list[str] = []
    counts: dict[str, int] = {}
    t0 = time.monotonic()
    done = 0
    i = 0
    while done < cases:
        kind, mutation = pairs[i % len(pairs)]
        i += 1
        if mutation in heavy and (i // len(pairs)) % 100:
            continue
        failures += fi.run_parser_case(kind, mutation, rng.randrange(2**31), qids, chunk_ids)
        counts[kind] = counts.get(kind, 0) + 1
        done += 1
    con = duckdb.connect()
    seed_pairs = sorted(set(fi.TRACE_MUTATIONS) - heavy)
    with tempfile.TemporaryDirectory(prefix="ledgerscope-fuzz-parsers-") as tmp:
        for n in range(min(differential, cases)):
            failures += fi.differential_case(
                con, Path(tmp), seed_pairs[n % len(seed_pairs)], rng.randrange(2**31), qids, chunk_ids
            )
    print(
        f"\nparsers in process: {done:,} cases ({', '.join(f'{k} {v:,}' for k, v in counts.items())}), "
        f"{min(differential, cases):,} of them also through the bulk reader, {len(failures)} failing, "
        f"{time.monotonic() - t0:.0f} s",
        flush=True,
    )
    return failures


if __name__ == "__main__":
    sys.exit(main())
