#!/usr/bin/env python
"""Issue 25's first-screen ratio in instructions: ``ledgerscope open``'s first screen against a bare
Textual app, counted by ``valgrind --tool=callgrind``, so that the machine's load does not count.

``scripts/bench_tui.py`` times the same two first frames in seconds, and on a loaded machine its
ratio moves by a factor of two from run to run. Here each side is one subprocess run under callgrind
that exits (``os._exit``) as its first frame is painted: the bare app (one ``DataTable`` of 100 rows)
when its first refresh is done, ``ledgerscope open``'s app when the questions list is (the point
``bench_tui.py``'s ``first_list_s`` times). Every thread of the process counts (the DuckDB open, the
Textual workers), from interpreter start. Instruction counts repeat to within about 0.2 % whatever
else the machine runs. On an idle machine with two cores the DuckDB open overlaps the start of
Textual, so the wall-clock ratio is below this one; on a busy machine it comes close to it.

    .venv/bin/python scripts/bench_tui_ir.py                      # the bench_tui ledger (built if missing)
    .venv/bin/python scripts/bench_tui_ir.py --out /tmp/small --questions 500

Each run takes about 30-60 s under valgrind.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

SIZE = (120, 40)

BARE = f"""
import asyncio, os
from textual.app import App
from textual.widgets import DataTable

class Bare(App):
    def compose(self):
        yield DataTable()

    def on_mount(self):
        table = self.query_one(DataTable)
        table.add_columns("qid", "segment", "phases", "step")
        table.add_rows((f"q{{i:05d}}", "rule-exception", "✓✓✗✓✓✓✗✓", "8") for i in range(100))
        self.call_after_refresh(os._exit, 0)

async def run():
    async with Bare().run_test(size={SIZE}):
        while True:
            await asyncio.sleep(0.002)

asyncio.run(run())
"""

OPEN = f"""
import asyncio, os, sys
from ledgerscope.tui.data import LedgerSession

session = LedgerSession(sys.argv[1])
session.start_open()  # as `ledgerscope open` does
from ledgerscope.tui.app import LedgerscopeApp
from ledgerscope.tui.screens.main import MainScreen

MainScreen._mark_first_list = lambda self: os._exit(0)  # called once the list's first frame is painted

async def run():
    async with LedgerscopeApp(session).run_test(size={SIZE}):
        while True:
            await asyncio.sleep(0.002)

asyncio.run(run())
"""


def instructions(code: str, *args: str) -> int:
    """Instructions callgrind counts for ``python -c code args`` (all threads)."""
    proc = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=900,
    )
    found = re.search(r"Collected : (\d+)", proc.stderr)
    if proc.returncode != 0 or not found:
        sys.stderr.write(proc.stdout + proc.stderr[-4000:])
        raise SystemExit(proc.returncode or 1)
    return int(found.group(1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("/tmp/ledgerscope-bench-tui/ledger"))
    ap.add_argument("--questions", type=int, default=2000)
    ap.add_argument("--phases", type=int, default=8)
    args = ap.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (Debian: apt-get install valgrind)")
    from bench_tui import _compile_bytecode
    from bench_tui_ledger import build_ledger, ensure_digests

    if not (args.out / "manifest.json").is_file():
        build_ledger(args.out, args.questions, args.phases)
    else:
        ensure_digests(args.out)
    _compile_bytecode()
    bare = instructions(BARE)
    first = instructions(OPEN, str(args.out))
    print(json.dumps({"bare_first_frame_ir": bare, "first_list_ir": first, "ratio": round(first / bare, 2)}))


if __name__ == "__main__":
    main()
