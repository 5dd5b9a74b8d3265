"""What one run of ``sweep`` sent, all of it: ``runs/<time>-<pid>.json`` in the ledger.

The partitions' resource records attribute usage to (arm, phase) and the oracle's to the arm; a
run also sends what belongs to neither (each endpoint's one-text probe when the runtime is built).
This record counts every request and token each endpoint component sent during the run, from its
own counters, so it equals what the servers served; a capped run that stopped writes it too.
The embedding cache's share of the run (texts encoded, texts served from the cache) is counted
here as well, into the sweep's result.
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


def encoder_counts(runtimes: dict[str, Any]) -> dict[int, tuple[int, int, int, float]]:
    """Per distinct encoder: texts encoded, cache hits, cache messages and model seconds so far
    (models are shared across sweeps in one process, so a sweep reports its own share)."""
    out = {}
    for rt in runtimes.values():
        for enc in rt.caches():
            report = enc.cache_report() if callable(getattr(enc, "cache_report", None)) else {}
            out[id(enc)] = (
                getattr(enc, "forward_texts", 0),
                report.get("cached", 0),
                len(report.get("messages", [])),
                _model_seconds(enc),
            )
    return out


def _model_seconds(enc: object) -> float:
    """Seconds an encoder has spent in its model (a local forward pass, an endpoint's requests)."""
    return float(getattr(enc, "forward_seconds", getattr(enc, "request_seconds", 0.0)) or 0.0)


def cache_totals(result: Any, runtimes: dict[str, Any], before: dict[int, Any]) -> None:
    """Texts encoded and served by the persistent cache in this sweep, over every distinct model, added
    to ``result`` (the sweep's :class:`.sweep.SweepResult`: not imported, sweep imports this module);
    then the cache is pruned to its size limit (least recently used first)."""
    encoders = {id(e): e for rt in runtimes.values() for e in rt.caches()}
    roots = set()
    for key, enc in encoders.items():
        encoded0, cached0, said0, seconds0 = before.get(key, (0, 0, 0, 0.0))
        result.encoded_texts += getattr(enc, "forward_texts", 0) - encoded0
        result.encode_seconds += _model_seconds(enc) - seconds0
        report = enc.cache_report() if callable(getattr(enc, "cache_report", None)) else {}
        result.cached_texts += report.get("cached", 0) - cached0
        result.cache_messages.extend(report.get("messages", [])[said0:])
        if report.get("cache"):
            roots.add(report["cache"])
    if roots:
        from ledgerscope.pipeline.embedding.cache import max_bytes, prune

        for root in roots:
            prune(Path(root), max_bytes())
