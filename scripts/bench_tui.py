#!/usr/bin/env python
"""Benchmark ``ledgerscope open`` on a large synthetic ledger, against a bare Textual app.

Builds (once, cached) the ledger of ``scripts/bench_tui_ledger.py`` (2 arms x 8 phases x 2,000
questions x 32 candidate rows = 1,024,000 candidate rows, digests recorded), then starts, in turn,
``--repeat`` times each, two *subprocesses* headless (``App.run_test``, 120 x 40), each timed from
its own start (the parent's ``time.time()`` passed as ``LEDGERSCOPE_T0``, so interpreter start and
imports count):

* a bare Textual app, one ``DataTable`` of 100 rows: its first frame (``bare_first_frame_s``);
* ``ledgerscope open``'s app, as the CLI starts it: the first screen painted with the questions list
  filled (``first_list_s``); the detail panes and the footer, built right after it, painted too
  (``full_screen_s``); the ledger's integrity checks passed (``checks_s``: they run after the first
  paint and do not hold it back).

``first_screen_ratio`` is the median over the runs of first_list_s / bare_first_frame_s, the two
measured one after the other, so the machine's load of the moment counts in both. The first run of
``ledgerscope open`` also times moves (after its checks passed):

* ``question_move_p95_ms`` / ``phase_move_p95_ms``: key press (``j`` / ``]``) to panes updated,
  measured inside the app (``app.main.timings``);
* ``peak_rss_mb``: ``resource.getrusage(RUSAGE_SELF).ru_maxrss`` of the subprocess.

Targets (issue 25): first screen at most 2 x the bare app's first frame (and at most 1.0 s), p95
question move at most 30 ms and phase move at most 50 ms, peak memory under 600 MB. The package's
bytecode is compiled first (an installed wheel has it; a source tree run with
PYTHONDONTWRITEBYTECODE would compile on every start). The machine's load counts in every figure:
compare two checkouts by running this, alternating, with ``PYTHONPATH`` pointing at each.

    .venv/bin/python scripts/bench_tui.py                 # build (cached) and measure
    .venv/bin/python scripts/bench_tui.py --questions 500 --out /tmp/small --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

PANE_KEYS = {"grid": "2", "source": "3", "context": "4", "answer": "5", "diagnosis": "6"}
SIZE = (120, 40)
TARGETS = {
    "first_screen_ratio": 2.0,
    "first_list_s": 1.0,
    "question_move_p95_ms": 30,
    "phase_move_p95_ms": 50,
    "peak_rss_mb": 600,
}


# ---------------------------------------------------------------------------
# the measured subprocesses


def _started() -> float:
    """perf_counter() at the process's start, from LEDGERSCOPE_T0 (as the app reads it)."""
    return time.perf_counter() - (time.time() - float(os.environ["LEDGERSCOPE_T0"]))


def bare_child() -> None:
    """A minimal Textual app: one DataTable filled on mount; prints seconds to its first frame."""
    t0 = _started()
    import asyncio

    from textual.app import App, ComposeResult
    from textual.widgets import DataTable

    class Bare(App):
        first_frame: float | None = None

        def compose(self) -> ComposeResult:
            yield DataTable()

        def on_mount(self) -> None:
            table = self.query_one(DataTable)
            table.add_columns("qid", "segment", "phases", "step")
            table.add_rows((f"q{i:05d}", "rule-exception", "✓✓✗✓✓✓✗✓", "8") for i in range(100))
            self.call_after_refresh(self._painted)

        def _painted(self) -> None:
            self.first_frame = time.perf_counter() - t0

    async def run() -> float:
        app = Bare()
        async with app.run_test(size=SIZE):
            while app.first_frame is None:
                await asyncio.sleep(0.002)
            return app.first_frame

    print(json.dumps({"first_frame": asyncio.run(run())}))


def child(ledger: str, moves: int, pane: str = "grid") -> None:
    if os.environ.get("BENCH_NOGC"):
        import gc

        gc.disable()
    import asyncio
    import resource

    from ledgerscope.tui.data import LedgerSession

    if "://" in ledger:  # a bucket, opened as `ledgerscope open URL` opens it (scripts/bench_tui_s3.py)
        from ledgerscope.ledger import storage

        ledger = str(storage.reader_dir(storage.parse(ledger), os.environ.get("BENCH_REMOTE_READ")))
    session = LedgerSession(ledger)
    session.start_open()  # as `ledgerscope open` does: DuckDB opens the ledger while Textual is imported
    from ledgerscope.tui.app import LedgerscopeApp

    async def run() -> dict:
        app = LedgerscopeApp(session)
        async with app.run_test(size=SIZE) as pilot:
            while app.main.timings["first_list"] is None:
                await asyncio.sleep(0.002)
            # an app whose checks ran before its first screen has no "checks" timing: checked already
            timings = app.main.timings
            while None in (timings.get("checks", 0), timings.get("panes", 0), app.main.detail):
                await asyncio.sleep(0.002)
            if getattr(app.main, "trust", "verified") != "verified":
                raise SystemExit(f"the ledger failed its checks: {app.main.trust}")
            await pilot.press(PANE_KEYS[pane])
            await pilot.pause()
            for kind, key in (("question", "j"), ("phase", "right_square_bracket")):
                for i in range(moves):
                    await pilot.press(key)
                    deadline = time.perf_counter() + 10
                    while len(app.main.timings[kind]) < i + 1 and time.perf_counter() < deadline:
                        await asyncio.sleep(0.001)
            return dict(app.main.timings)

    timings = asyncio.run(run())
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    heavy = sorted(m for m in ("torch", "sentence_transformers", "transformers") if m in sys.modules)
    print(json.dumps({"timings": timings, "peak_rss_mb": rss, "heavy_modules": heavy}))


# ---------------------------------------------------------------------------
# the parent


def p95(values: list[float]) -> float | None:
    if not values:
        return None
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(0.95 * len(s)) - 1))]


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(1000 * seconds, 1)


def _run_child(args: list[str]) -> dict:
    env = dict(os.environ)
    env["LEDGERSCOPE_T0"] = repr(time.time())
    proc = subprocess.run(
        [sys.executable, __file__, *args], env=env, capture_output=True, text=True, timeout=600
    )
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout + proc.stderr)
        raise SystemExit(proc.returncode)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _compile_bytecode() -> None:
    """Compile the package the children import, once (written even under PYTHONDONTWRITEBYTECODE):
    no run pays for it."""
    import compileall

    import ledgerscope

    compileall.compile_dir(str(Path(ledgerscope.__file__).parent), quiet=1)


def measure(ledger: Path, repeat: int, moves: int, pane: str) -> dict:
    """``repeat`` pairs (the bare app, then ``ledgerscope open``); moves timed in the first pair."""
    bare, first, panes, checks, ratios, first_run = [], [], [], [], [], None
    load_before = os.getloadavg()[0]
    for i in range(repeat):
        b = _run_child(["--child-bare"])["first_frame"]
        res = _run_child(["--child", str(ledger), "--moves", str(moves if i == 0 else 0), "--pane", pane])
        first_run = first_run or res
        t = res["timings"]
        bare.append(b)
        first.append(t["first_list"])
        checks.append(t.get("checks") or t["first_list"])
        panes.append(t.get("panes") or t["first_list"])
        ratios.append(t["first_list"] / b)
    t = first_run["timings"]
    return {
        "first_screen_ratio": round(statistics.median(ratios), 2),
        "first_list_s": round(statistics.median(first), 3),
        "bare_first_frame_s": round(statistics.median(bare), 3),
        "full_screen_s": round(statistics.median(panes), 3),
        "checks_s": round(statistics.median(checks), 3),
        "first_list_s_runs": [round(x, 3) for x in first],
        "bare_first_frame_s_runs": [round(x, 3) for x in bare],
        "question_move_p95_ms": _ms(p95(t["question"])),
        "question_move_median_ms": _ms(statistics.median(t["question"]) if t["question"] else None),
        "phase_move_p95_ms": _ms(p95(t["phase"])),
        "phase_move_median_ms": _ms(statistics.median(t["phase"]) if t["phase"] else None),
        "moves_measured": [len(t["question"]), len(t["phase"])],
        "peak_rss_mb": round(first_run["peak_rss_mb"], 1),
        "heavy_modules_loaded": first_run["heavy_modules"],
        "load_average_1min": [round(load_before, 2), round(os.getloadavg()[0], 2)],  # at start, at end
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("/tmp/ledgerscope-bench-tui/ledger"))
    ap.add_argument("--questions", type=int, default=2000)
    ap.add_argument("--phases", type=int, default=8)
    ap.add_argument("--moves", type=int, default=40)
    ap.add_argument("--repeat", type=int, default=5, help="pairs of runs (bare app, ledgerscope open)")
    ap.add_argument("--rebuild", action="store_true", help="rebuild the ledger even if it exists")
    ap.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    ap.add_argument(
        "--pane",
        choices=sorted(PANE_KEYS),
        default="grid",
        help="the detail pane shown while moving (default: grid, the one the app opens on)",
    )
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--child-bare", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child_bare:
        bare_child()
        return
    if args.child:
        child(args.child, args.moves, args.pane)
        return
    from bench_tui_ledger import build_ledger, ensure_digests

    if args.rebuild or not (args.out / "manifest.json").is_file():
        t = time.perf_counter()
        info = build_ledger(args.out, args.questions, args.phases)
        print(f"built {args.out}: {info} in {time.perf_counter() - t:.1f} s", flush=True)
    elif ensure_digests(args.out):
        print(f"{args.out}: recorded the partition files' digests", flush=True)
    _compile_bytecode()
    report = measure(args.out, max(1, args.repeat), args.moves, args.pane)
    if args.json:
        print(json.dumps(report))
        return
    for k, v in report.items():
        mark = ""
        if k in TARGETS:
            mark = "" if v is None else "  ok" if v <= TARGETS[k] else f"  OVER target {TARGETS[k]}"
        print(f"{k:26} {v}{mark}")


if __name__ == "__main__":
    main()
