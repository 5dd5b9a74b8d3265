"""The embedding cache's three figures for ``bench_sweep.py --cache-figures`` (issue 16, Speed).

Each sweep is its own ``ledgerscope sweep`` process (imports and model load included, as a user's
re-run pays them) over the bench corpus, all sharing one fresh cache directory:

1. the first sweep, cold cache, 2 arms, against the embedding floor (a fresh model, one encode call
   over exactly its unique texts, load included): target at most 1.15 x;
2. the same arms with only ``rerank_depth`` and ``budget_tokens`` changed, against the first sweep:
   target at most 0.15 x and zero texts encoded;
3. an added arm with a different overlap, swept into its own ledger (``open --baseline-ledger`` and
   ``compare`` read two ledgers), against encoding only the texts the cache did not hold (load
   included): target at most 1.2 x.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

_COUNTS = re.compile(r"texts: (\d+) from the embedding cache, (\d+) encoded")


def arm_toml(name: str, capacity: int, overlap: int, phases: int, **knobs: int) -> str:
    lines = [f'name = "{name}"', f"capacity = {capacity}", f"overlap = {overlap}",
             f'phases = "auto:{phases}"', *(f"{k} = {v}" for k, v in knobs.items())]
    return "\n".join(lines) + "\n"


def run_sweep(work: Path, out: str, arms: list[Path], corpus: Path, cache: Path) -> dict:
    """One CLI sweep: wall seconds and the cache counts it printed."""
    env = {**os.environ, "LEDGERSCOPE_EMBEDDING_CACHE": str(cache)}
    argv = [sys.executable, "-m", "ledgerscope.cli", "sweep", "--quiet",
            "--fixtures", str(work / "fixtures.jsonl"), "--corpus", str(corpus),
            *[x for a in arms for x in ("--arm", str(a))], "--out", str(work / out)]
    t0 = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if done.returncode:
        raise SystemExit(f"sweep {out} failed ({done.returncode}): {done.stderr[-2000:]}")
    found = _COUNTS.search(done.stdout + done.stderr)
    cached, encoded = (int(found.group(1)), int(found.group(2))) if found else (-1, -1)
    return {"seconds": seconds, "cached": cached, "encoded": encoded}


def unit_texts(ledger: Path) -> set[str]:
    from ledgerscope.ledger.read import connect

    return {r[0] for r in connect(ledger).execute("SELECT DISTINCT text FROM units").fetchall()}


def encode_floor(texts: list[str]) -> tuple[float, float]:
    """(load, encode) seconds of a fresh bundled MiniLM over ``texts`` (faster of two encodes)."""
    from bench_sweep import minilm_floor

    load_s, runs = minilm_floor(texts)
    return load_s, min(runs)


def import_seconds() -> float:
    """Wall seconds of a fresh process importing sentence-transformers (and torch, transformers),
    faster of two: what any process that encodes pays before loading a model, and what the sweep's
    process pays too (the in-process floor above starts after it)."""
    runs = []
    for _ in range(2):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import sentence_transformers"], check=True)
        runs.append(time.perf_counter() - t0)
    return min(runs)


def cache_figures(work: Path, corpus: Path, questions: list[str], capacity: int, phases: int) -> dict:
    """The three figures; prints them and returns them as a dict."""
    cache = work / "cache"
    base = {"capacity": capacity, "phases": phases}
    files = {
        "first": [("candidate", 0, {}), ("baseline", capacity // 4, {})],
        "knobs": [("candidate", 0, {"rerank_depth": 20, "budget_tokens": 256}),
                  ("baseline", capacity // 4, {"rerank_depth": 20, "budget_tokens": 256})],
        "added": [("added", capacity // 8, {})],
    }
    arms: dict[str, list[Path]] = {}
    for step, specs in files.items():
        arms[step] = []
        for name, overlap, knobs in specs:
            path = work / f"{step}-{name}.toml"
            path.write_text(arm_toml(name, overlap=overlap, **base, **knobs))
            arms[step].append(path)
    first = run_sweep(work, "first", arms["first"], corpus, cache)
    seen = unit_texts(work / "first")
    texts = sorted(seen | set(questions))
    load_s, encode_s = encode_floor(texts)
    knobs = run_sweep(work, "knobs", arms["knobs"], corpus, cache)
    added = run_sweep(work, "added", arms["added"], corpus, cache)
    new_texts = sorted(unit_texts(work / "added") - seen)
    new_load, new_encode = encode_floor(new_texts)
    imp = import_seconds()
    floor, new_floor = load_s + encode_s, new_load + new_encode
    out = {
        "import_s": imp,
        "first": {**first, "floor_s": floor, "unique_texts": len(texts),
                  "ratio": first["seconds"] / floor, "ratio_with_import": first["seconds"] / (floor + imp)},
        "knobs": {**knobs, "ratio": knobs["seconds"] / first["seconds"]},
        "added": {**added, "new_texts": len(new_texts), "floor_s": new_floor,
                  "ratio": added["seconds"] / new_floor,
                  "ratio_with_import": added["seconds"] / (new_floor + imp)},
    }
    f, k, a = out["first"], out["knobs"], out["added"]
    print(f"import of sentence-transformers in a fresh process: {imp:.1f} s")
    print(f"1. first sweep {f['seconds']:.1f} s ({f['encoded']} encoded); floor: load {load_s:.1f} s + "
          f"encode {encode_s:.1f} s of {len(texts):,} texts -> {f['ratio']:.2f} x (target <= 1.15); "
          f"{f['ratio_with_import']:.2f} x with the import in the floor")
    print(f"2. knobs-only sweep {k['seconds']:.1f} s ({k['cached']} from the cache, {k['encoded']} "
          f"encoded) -> {k['ratio']:.3f} x the first (target <= 0.15, 0 encoded)")
    print(f"3. added arm {a['seconds']:.1f} s ({a['cached']} from the cache, {a['encoded']} encoded); "
          f"floor: load {new_load:.1f} s + encode {new_encode:.1f} s of its {len(new_texts):,} new "
          f"texts -> {a['ratio']:.2f} x (target <= 1.2); {a['ratio_with_import']:.2f} x with the import")
    (work / "cache_figures.json").write_text(json.dumps(out, indent=2))
    return out
