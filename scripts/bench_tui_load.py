#!/usr/bin/env python
"""Is the TUI responsive under load? Frame gaps while a 10M-row ledger opens and a re-run runs.

A frame cannot be drawn while the event loop is blocked, so the app is run
headless (``App.run_test``, as ``scripts/bench_tui.py`` does) in a
*subprocess* next to a 20 ms ticker on the same event loop: each tick records
the gap since the previous one (gap - 20 ms = how long the loop was blocked).
Reported per window, as max and p99 gap:

* ``load``: app start until the question list is filled and painted (the
  10-million-candidate-row synthetic ledger opens: DuckDB in thread workers);
* ``settle``: from there until the phase summaries and the first record's
  detail have arrived (the summary worker scans the whole ledger);
* ``rerun``: ``r`` pressed until the re-run's result arrives. The synthetic
  ledger has no real config, so this window opens the committed sample
  ledger ``sample_ledgers/quillstack/ledger``: the re-run imports and loads
  the embedding model (the heavy part).

Also: first-screen time (from the subprocess's start, as bench_tui.py) and
peak RSS of each subprocess. Target: max gap <= 250 ms in every window.

    .venv/bin/python scripts/bench_tui_load.py              # build (cached under /tmp) and measure
    .venv/bin/python scripts/bench_tui_load.py --questions 500 --phases 2   # a quick small run
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "sample_ledgers" / "quillstack" / "ledger"
CACHE = Path("/tmp/ledgerscope-bench-tui-load")
TICK = 0.020
TARGET_MS = 250.0


# ---------------------------------------------------------------------------
# the measured subprocess


def child(ledger: str, mode: str) -> None:
    import asyncio
    import resource

    from ledgerscope.tui.data import LedgerSession

    session = LedgerSession(ledger)
    session.start_open()  # as `ledgerscope open` does
    from ledgerscope.tui.app import LedgerscopeApp

    ticks: list[tuple[float, float]] = []  # (time of the tick, gap since the previous one)
    marks: dict[str, float] = {}

    async def ticker() -> None:
        last = time.perf_counter()
        while True:
            await asyncio.sleep(TICK)
            now = time.perf_counter()
            ticks.append((now, now - last))
            last = now

    async def wait_for(cond, timeout: float, what: str) -> None:
        deadline = time.perf_counter() + timeout
        while not cond():
            if time.perf_counter() > deadline:
                raise SystemExit(f"timed out waiting for {what}")
            await asyncio.sleep(0.005)

    async def run() -> dict:
        tick_task = asyncio.create_task(ticker())
        marks["start"] = time.perf_counter()
        app = LedgerscopeApp(session)
        extra: dict = {}
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(lambda: app.main.timings["first_list"] is not None, 600, "the first list")
            marks["first_list"] = time.perf_counter()
            settled = lambda: app.main.detail is not None and bool(app.main.summaries)  # noqa: E731
            await wait_for(settled, 600, "detail and summaries")
            marks["settled"] = time.perf_counter()
            if mode == "rerun":
                await pilot.pause(0.3)
                marks["rerun_start"] = time.perf_counter()
                await pilot.press("r")
                key = app.screen.key  # the RerunScreen: (arm, qid, phase)
                await wait_for(lambda: key in app.main.reruns, 600, "the re-run result")
                marks["rerun_done"] = time.perf_counter()
                m = app.main.reruns[key]
                extra["rerun"] = {
                    "key": list(key),
                    "identical": m.identical,
                    "error": m.error,
                    "seconds": round(marks["rerun_done"] - marks["rerun_start"], 2),
                }
                await pilot.pause(0.1)
            extra["first_list_s"] = app.main.timings["first_list"]
            extra["rows"] = app.main.total
        tick_task.cancel()
        return extra

    extra = asyncio.run(run())
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # the re-run process, if any
    windows = {"load": ("start", "first_list"), "settle": ("first_list", "settled")}
    if mode == "rerun":
        windows["rerun"] = ("rerun_start", "rerun_done")
    out = {}
    for name, (a, b) in windows.items():
        t0, t1 = marks[a], marks[b]
        # a tick belongs to the window if any part of its gap overlaps it
        inside = [(t, g) for t, g in ticks if t - g < t1 and t > t0]
        worst = max(inside, key=lambda tg: tg[1], default=(t0, 0.0))
        out[name] = {
            "seconds": round(t1 - t0, 3),
            "gaps_ms": [round(1000 * g, 2) for _, g in inside],
            "worst_at_s": round(worst[0] - worst[1] - t0, 3),  # when the longest block began
        }
    print(json.dumps({"windows": out, "peak_rss_mb": round(rss, 1), "child_rss_mb": round(kids, 1), **extra}))


# ---------------------------------------------------------------------------
# the parent: build (cached), spawn, report


def build(out: Path, questions: int, phases: int) -> None:
    from ledgerscope.testing.synthetic import make_synthetic_ledger, rows_per_record

    if (out / "manifest.json").is_file() and (out / "_BUILT.json").is_file():
        return
    rows = questions * phases * 2 * rows_per_record()
    print(f"building {out} (~{rows:,} candidate rows; ~1 min for 10M)...", flush=True)
    t = time.perf_counter()
    info = make_synthetic_ledger(out, questions=questions, phases=phases, arms=("candidate", "baseline"))
    (out / "_BUILT.json").write_text(json.dumps(info))
    print(f"built in {time.perf_counter() - t:.1f} s: {info}", flush=True)


def spawn(ledger: Path, mode: str) -> dict:
    env = dict(os.environ)
    env["LEDGERSCOPE_T0"] = repr(time.time())
    proc = subprocess.run(
        [sys.executable, __file__, "--child", str(ledger), "--mode", mode],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout + proc.stderr)
        raise SystemExit(proc.returncode)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q * len(s)) - 1))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--questions", type=int, default=9400)
    ap.add_argument("--phases", type=int, default=8)
    ap.add_argument("--out", type=Path, default=None, help="synthetic ledger directory (cached)")
    ap.add_argument("--rerun-ledger", type=Path, default=SAMPLE)
    ap.add_argument("--skip-load", action="store_true")
    ap.add_argument("--skip-rerun", action="store_true")
    ap.add_argument("--json", action="store_true", help="also print the raw results as JSON")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--mode", default="load", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.mode)
        return
    out = args.out or CACHE / f"ledger-q{args.questions}-p{args.phases}-a2"
    results = {}
    if not args.skip_load:
        build(out, args.questions, args.phases)
        info = json.loads((out / "_BUILT.json").read_text())
        results["load"] = spawn(out, "load")
        rows = f"{info['candidates']:,} candidate rows, {info['records']:,} records"
        results["load"]["ledger"] = f"{out} ({rows})"
    if not args.skip_rerun:
        results["rerun"] = spawn(args.rerun_ledger, "rerun")
        results["rerun"]["ledger"] = str(args.rerun_ledger)
    ok = True
    print()
    print(f"{'run':7} {'window':7} {'seconds':>8} {'ticks':>6} {'max gap ms':>11} {'p99 gap ms':>11}  target")
    for run, res in results.items():
        for name, w in res["windows"].items():
            g = w["gaps_ms"]
            mx = max(g) if g else float("nan")
            good = bool(g) and mx <= TARGET_MS
            ok &= good
            print(
                f"{run:7} {name:7} {w['seconds']:8.2f} {len(g):6d} {mx:11.1f} {pct(g, 0.99):11.1f}"
                f"  {'ok' if good else 'OVER ' + str(TARGET_MS)}"
            )
    print()
    for run, res in results.items():
        print(f"{run}: {res['ledger']}")
        kid = f" (its re-run process: {res['child_rss_mb']:.0f} MB)" if res["child_rss_mb"] else ""
        print(f"  first screen {res['first_list_s']:.3f} s · peak RSS {res['peak_rss_mb']:.0f} MB{kid}")
        if "rerun" in res:
            r = res["rerun"]
            print(
                f"  re-run {' / '.join(r['key'])}: {r['seconds']} s, "
                f"identical={r['identical']}, error={r['error']}"
            )
    if args.json:
        print(json.dumps(results))
    print("\nall windows within target" if ok else "\nSOME WINDOW OVER TARGET")
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
