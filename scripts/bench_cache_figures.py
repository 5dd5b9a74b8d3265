"""The embedding cache's three figures for ``bench_sweep.py --cache-figures`` (issue 16, Speed).

Each sweep is its own ``ledgerscope sweep`` process (imports and model load included, as a user's
re-run pays them) over the bench corpus, all sharing one fresh cache directory. Each floor is a
fresh process too, doing nothing but what the sweep cannot avoid: import sentence-transformers,
load the bundled model, and one ``encode`` call over exactly the texts the sweep encoded (unit
texts, questions and the gold quotes the oracle reads); it runs twice and the faster counts.

1. the first sweep, cold cache, 2 arms, against its floor: target at most 1.15 x;
2. the same arms with only ``rerank_depth`` and ``budget_tokens`` changed, against the first sweep:
   target at most 0.15 x and zero texts encoded;
3. an added arm with a different overlap, swept into its own ledger (``open --baseline-ledger`` and
   ``compare`` read two ledgers), against the floor of only the texts the cache did not hold:
   target at most 1.2 x.

These machines are noisy (one 384-text encode measured 4.96 s to 6.57 s within a minute), so
each sweep's own model seconds (its summary's "N s in the model") give a second, in-run ratio:
the sweep against the floor's start-up plus the encoding this very run did. It does not move with
the machine between the sweep and its floor.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

_COUNTS = re.compile(
    r"texts: (\d+) from the embedding cache, (\d+) encoded"
    r"(?: \(([\d.]+) s in the model\))?"
)
_FLOOR = """
import json, sys, time
t0 = time.perf_counter()
from sentence_transformers import SentenceTransformer
from ledgerscope.pipeline.embedding.devices import resolve_device
from ledgerscope.pipeline.embedding.encoder import resolve_model_path
texts = json.load(open(sys.argv[1]))
model = SentenceTransformer(resolve_model_path("bundled:all-MiniLM-L6-v2"),
                            device=resolve_device(sys.argv[2]))
t1 = time.perf_counter()
model.encode(texts, batch_size=64, show_progress_bar=False)
print(json.dumps({"startup_s": t1 - t0, "encode_s": time.perf_counter() - t1}))
"""


def arm_toml(name: str, capacity: int, overlap: int, phases: int, device: str = "cpu", **knobs: int) -> str:
    lines = [
        f'name = "{name}"',
        f"capacity = {capacity}",
        f"overlap = {overlap}",
        f'phases = "auto:{phases}"',
        *(f"{k} = {v}" for k, v in knobs.items()),
        "",
        "[embedding]",
        f'device = "{device}"',
    ]
    return "\n".join(lines) + "\n"


def run_sweep(work: Path, out: str, arms: list[Path], corpus: Path, cache: Path) -> dict:
    """One CLI sweep: wall seconds, the cache counts and the model seconds it printed."""
    env = {**os.environ, "LEDGERSCOPE_EMBEDDING_CACHE": str(cache)}
    argv = [
        sys.executable,
        "-m",
        "ledgerscope.cli",
        "sweep",
        "--quiet",
        "--fixtures",
        str(work / "fixtures.jsonl"),
        "--corpus",
        str(corpus),
        *[x for a in arms for x in ("--arm", str(a))],
        "--out",
        str(work / out),
    ]
    t0 = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if done.returncode:
        raise SystemExit(f"sweep {out} failed ({done.returncode}): {done.stderr[-2000:]}")
    found = _COUNTS.search(" ".join((done.stdout + done.stderr).split()))
    if not found:
        raise SystemExit(f"sweep {out} printed no cache counts: {done.stdout[-2000:]}")
    return {
        "seconds": seconds,
        "cached": int(found.group(1)),
        "encoded": int(found.group(2)),
        "model_s": float(found.group(3) or 0.0),
    }


def unit_texts(ledger: Path) -> set[str]:
    from ledgerscope.ledger.read import connect

    return {r[0] for r in connect(ledger).execute("SELECT DISTINCT text FROM units").fetchall()}


def encode_floor(work: Path, texts: list[str], device: str = "cpu") -> dict:
    """The faster of two fresh processes that import, load the bundled MiniLM and encode ``texts``:
    wall seconds (interpreter start included, as the sweep's), and its start-up and encode parts."""
    listing = work / "floor_texts.json"
    listing.write_text(json.dumps(texts))
    runs = []
    for _ in range(2):
        t0 = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-c", _FLOOR, str(listing), device], check=True, capture_output=True, text=True
        )
        parts = json.loads(done.stdout.strip().splitlines()[-1])
        runs.append({"wall_s": time.perf_counter() - t0, **parts})
    return min(runs, key=lambda r: r["wall_s"])


def _ratios(sweep: dict, floor: dict) -> dict:
    """Against the floor's wall; in-run: against the floor's start-up plus this sweep's model time."""
    return {
        "floor": floor,
        "ratio": sweep["seconds"] / floor["wall_s"],
        "in_run_ratio": sweep["seconds"] / (floor["wall_s"] - floor["encode_s"] + sweep["model_s"]),
    }


def cache_figures(
    work: Path, corpus: Path, fixture_texts: list[str], capacity: int, phases: int, device: str = "cpu"
) -> dict:
    """The three figures; prints them and returns them as a dict. ``fixture_texts`` are the
    questions and gold quotes, which the sweep encodes besides the unit texts."""
    cache = work / "cache"
    base = {"capacity": capacity, "phases": phases, "device": device}
    files = {
        "first": [("candidate", 0, {}), ("baseline", capacity // 4, {})],
        "knobs": [
            ("candidate", 0, {"rerank_depth": 20, "budget_tokens": 256}),
            ("baseline", capacity // 4, {"rerank_depth": 20, "budget_tokens": 256}),
        ],
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
    texts = sorted(seen | set(fixture_texts))
    floor = encode_floor(work, texts, device)
    knobs = run_sweep(work, "knobs", arms["knobs"], corpus, cache)
    added = run_sweep(work, "added", arms["added"], corpus, cache)
    new_texts = sorted(unit_texts(work / "added") - seen)
    new_floor = encode_floor(work, new_texts, device)
    out = {
        "device": device,
        "first": {**first, "texts": len(texts), **_ratios(first, floor)},
        "knobs": {**knobs, "ratio": knobs["seconds"] / first["seconds"]},
        "added": {**added, "new_texts": len(new_texts), **_ratios(added, new_floor)},
    }
    f, k, a = out["first"], out["knobs"], out["added"]
    print(
        f"1. first sweep {f['seconds']:.1f} s ({f['encoded']} encoded, {f['model_s']:.1f} s in the "
        f"model); floor {floor['wall_s']:.1f} s (start-up {floor['wall_s'] - floor['encode_s']:.1f} s "
        f"+ encode {floor['encode_s']:.1f} s of {len(texts):,} texts) -> {f['ratio']:.2f} x "
        f"(target <= 1.15); in-run {f['in_run_ratio']:.2f} x"
    )
    print(
        f"2. knobs-only sweep {k['seconds']:.1f} s ({k['cached']} from the cache, {k['encoded']} "
        f"encoded) -> {k['ratio']:.3f} x the first (target <= 0.15, 0 encoded)"
    )
    print(
        f"3. added arm {a['seconds']:.1f} s ({a['cached']} from the cache, {a['encoded']} encoded, "
        f"{a['model_s']:.1f} s in the model); floor {new_floor['wall_s']:.1f} s (start-up "
        f"{new_floor['wall_s'] - new_floor['encode_s']:.1f} s + encode {new_floor['encode_s']:.1f} s "
        f"of its {len(new_texts):,} new texts) -> {a['ratio']:.2f} x (target <= 1.2); "
        f"in-run {a['in_run_ratio']:.2f} x"
    )
    (work / "cache_figures.json").write_text(json.dumps(out, indent=2))
    return out
