"""What one run of ``sweep`` sent, all of it: ``runs/<time>-<pid>.json`` in the ledger.

The partitions' resource records attribute usage to (arm, phase) and the oracle's to the arm; a
run also sends what belongs to neither (each endpoint's one-text probe when the runtime is built).
This record counts every request and token each endpoint component sent during the run, from its
own counters, so it equals what the servers served; a capped run that stopped writes it too.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from ledgerscope.common.atomic import atomic_write_text
from ledgerscope.pipeline.run.costs.estimate import component_counts, cost_of, endpoint_components, measured
from ledgerscope.pipeline.run.resources import model_name

FORMAT = "ledgerscope-run/1"


def start_counters(runtimes: dict[str, Any]) -> dict[int, dict[str, float]]:
    """Each component's counters at the start of the run: zero for endpoint components (built for
    this run, their probes included), the current values for shared local models."""
    out = {}
    for comp, role in endpoint_components(runtimes):
        remote = getattr(comp, "kind", "") in ("endpoint", "openai-compatible-endpoint")
        counts = component_counts(comp, role)
        out[id(comp)] = {k: 0.0 for k in counts} if remote else counts
    return out


def write_run_record(
    out: Path, runtimes: dict[str, Any], start: dict[int, dict[str, float]], result: Any, prices: Any = None
) -> Path:
    """The run's record (see the module docstring); returns its path."""
    components = []
    for comp, role in endpoint_components(runtimes):
        now, before = component_counts(comp, role), start.get(id(comp), {})
        model = model_name(comp, "name" if role == "embedding" else "model")
        kind = getattr(comp, "kind", None) or ("sentence-transformers" if role == "embedding" else None)
        entry = {
            "role": role,
            "kind": kind,
            "model": model,
            **{k: int(v - before.get(k, 0.0)) for k, v in now.items()},
        }
        if role == "embedding" and hasattr(comp, "usage_tokens"):
            entry["token_source"] = "usage" if not getattr(comp, "counted_tokens", 0) else "tokenizer"
        if role == "rerank":
            entry["pairs"] = int(getattr(comp, "pairs", 0))
        if role == "generator":
            entry["tokenize_requests"] = int((getattr(comp, "usage", {}) or {}).get("tokenize_requests", 0))
        components.append(entry)
    cost = None
    if prices is not None:
        priced = [cost_of(u, m, prices)[0] for u, m in measured(runtimes, start)]
        cost = None if any(c is None for c in priced) else sum(priced)
    record = {
        "format": FORMAT,
        "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "seconds": round(result.seconds, 3),
        "written": [list(p) for p in result.written],
        "stopped": result.stopped,
        "components": components,
        "cost": cost,
        "currency": getattr(prices, "currency", None),
    }
    path = out / "runs" / f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{os.getpid()}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(record, indent=2, sort_keys=True))
    return path


def read_runs(ledger: str | Path) -> list[dict]:
    out = []
    for path in sorted(Path(ledger).glob("runs/*.json")):
        try:
            data = json.loads(path.read_bytes())
        except (OSError, ValueError):
            continue
        if isinstance(data, dict):
            out.append(data)
    return out
