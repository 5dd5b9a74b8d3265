"""What each arm costs, from the resource records a sweep wrote (:mod:`ledgerscope.pipeline.run.resources`).

Per arm: the index of one phase (units, source tokens, the overlap factor, stored bytes, the
ledger's own bytes; the mean over phases), what the sweep sent (embedding texts, tokens, requests
and cache hits; rerank pairs and requests; generator requests and tokens, with where the token
counts came from), the latency per stage pooled over every phase's questions (p50/p95/p99), and,
with a price table, money: **indexing** (embedding one phase's units, once), **per 1,000
queries** (a query's own embedding, rerank and generation) and **the sweep** (what it actually
sent, after its caches, the oracle runs included). ``compare`` takes candidate minus baseline.
A ledger written before the record existed (or ingested) says ``recorded: false``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from ledgerscope.ledger.interchange import read_resources
from ledgerscope.ledger.layout import is_interchange, ledger_layout
from ledgerscope.ledger.verify import finished_partitions
from ledgerscope.pipeline.run.costs.prices import Prices
from ledgerscope.pipeline.run.resources import PRODUCTION, STAGES, summarize

ORACLE_FILE = "resources.json"


def read_partitions(ledger: str | Path) -> dict[str, dict[str, dict[str, Any]]]:
    """{arm: {phase: resource record}} from every finished partition's ``_SUCCESS.json`` (with the
    partition's ledger bytes added); partitions without a record are left out. An interchange
    directory carries them in one file (:func:`ledgerscope.ledger.interchange.read_resources`)."""
    if is_interchange(Path(ledger)):
        out_jsonl: dict[str, dict[str, dict[str, Any]]] = {}
        for r in read_resources(ledger).get("partitions", []):
            out_jsonl.setdefault(r["arm"], {})[r["phase"]] = {
                **r["resources"],
                "ledger_bytes": r["ledger_bytes"],
            }
        return out_jsonl
    layout = ledger_layout(ledger)
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for part in finished_partitions(ledger, layout):
        try:
            meta = json.loads((part / "_SUCCESS.json").read_bytes())
        except (OSError, ValueError):
            continue
        res = meta.get("resources") if isinstance(meta, dict) else None
        if not isinstance(res, dict):
            continue
        arm, phase = layout.partition_key(part)
        files = meta.get("files") or {}
        res = {
            **res,
            "ledger_bytes": sum(int(f.get("bytes", 0)) for f in files.values() if isinstance(f, dict)),
        }
        out.setdefault(arm, {})[phase] = res
    return out


def read_oracle(ledger: str | Path, arm: str) -> dict[str, Any] | None:
    if is_interchange(Path(ledger)):
        return read_resources(ledger).get("oracle", {}).get(arm)
    path = ledger_layout(ledger).oracle_path(ledger, arm).with_name(ORACLE_FILE)
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _mean(values: list[float | None]) -> float | None:
    vals = [float(v) for v in values if v is not None]
    return float(np.mean(vals)) if vals else None


def _sum(parts: list[dict[str, Any]], section: str, key: str) -> int:
    return int(sum((p.get(section) or {}).get(key) or 0 for p in parts))


def latency(parts: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per stage (and the whole production query): quantiles of every question's milliseconds,
    pooled over the arm's phases."""
    out = {}
    totals: list[np.ndarray] = []
    for stage in STAGES:
        ms = [np.asarray((p.get("latency_per_query_ms") or {}).get(stage) or [], dtype=float) for p in parts]
        pooled = np.concatenate(ms) if ms else np.zeros(0)
        out[stage] = summarize(pooled)
    for p in parts:
        per = p.get("latency_per_query_ms") or {}
        if all(per.get(s) is not None for s in PRODUCTION) and per.get("generate"):
            totals.append(np.sum([np.asarray(per[s], dtype=float) for s in PRODUCTION], axis=0))
    out["query"] = summarize(np.concatenate(totals) if totals else np.zeros(0))
    return out


def usage(parts: list[dict[str, Any]], oracle: dict[str, Any] | None) -> dict[str, Any]:
    """What the arm's partitions (and its oracle run) sent, summed."""
    sources = {
        section: sorted(
            s for s in {(p.get(section) or {}).get("token_source") for p in parts} if s is not None
        )
        for section in ("embedding", "generator")
    }
    gen_parts = parts + ([{"generator": oracle["generator"]}] if oracle and oracle.get("generator") else [])
    return {
        "embedding": {
            k: _sum(parts, "embedding", k) for k in ("texts", "encoded", "cache_hits", "tokens", "requests")
        }
        | {
            "token_source": sources["embedding"],
            "model": _first(parts, "embedding", "model"),
            "kind": _first(parts, "embedding", "kind"),
        },
        "rerank": {k: _sum(parts, "rerank", k) for k in ("pairs", "requests", "sent_pairs")}
        | {"model": _first(parts, "rerank", "model"), "kind": _first(parts, "rerank", "kind")},
        "generator": {
            k: _sum(gen_parts, "generator", k)
            for k in ("requests", "prompt_tokens", "completion_tokens", "tokenize_requests")
        }
        | {
            "token_source": sources["generator"],
            "model": _first(parts, "generator", "model"),
            "kind": _first(parts, "generator", "kind"),
            "oracle_included": bool(oracle),
        },
    }


def _first(parts: list[dict[str, Any]], section: str, key: str) -> Any:
    for p in parts:
        value = (p.get(section) or {}).get(key)
        if value is not None:
            return value
    return None


def index_summary(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """One phase's index, the mean over phases (a deployment builds one)."""
    idx = [p.get("index") or {} for p in parts]
    return {
        "units": _mean([i.get("units") for i in idx]),
        "unique_source_tokens": _mean([i.get("unique_source_tokens") for i in idx]),
        "unit_tokens": _mean([i.get("unit_tokens") for i in idx]),
        "repeated_source_tokens": _mean([i.get("repeated_source_tokens") for i in idx]),
        "overlap_factor": _mean([i.get("overlap_factor") for i in idx]),
        "bytes": {k: _mean([(i.get("bytes") or {}).get(k) for i in idx]) for k in ("vectors", "hnsw", "bm25")}
        | {"ledger": _mean([p.get("ledger_bytes") for p in parts])},
        "seconds": _mean([sum((i.get("seconds") or {}).values()) for i in idx]),
    }


def costs(parts: list[dict[str, Any]], use: dict[str, Any], prices: Prices | None) -> dict[str, Any]:
    """Money by the price table: indexing one phase, 1,000 queries, and the sweep as it ran.
    A stage whose model the table does not price makes the figure None and is named."""
    if prices is None:
        return {"priced": False}
    emb, rer, gen = use["embedding"], use["rerank"], use["generator"]
    unpriced = [
        f"{kind} {model!r}"
        for kind, model in (
            ("embedding", emb["model"]),
            ("rerank", rer["model"]),
            ("generator", gen["model"]),
        )
        if prices.rates(kind, model) is None and _paid(kind, use)
    ]
    pieces = _amounts(parts, use)
    out: dict[str, Any] = {
        "priced": True,
        "currency": prices.currency,
        "prices": prices.path,
        "unpriced": unpriced,
    }
    for name, items in pieces.items():
        total: float | None = 0.0
        for kind, model, amount in items:
            if not _paid(kind, use):
                continue
            c = prices.cost(kind, model, amount)
            total = None if c is None or total is None else total + c
        out[name] = total
    return out


def _amounts(
    parts: list[dict[str, Any]], use: dict[str, Any]
) -> dict[str, list[tuple[str, str, dict[str, float]]]]:
    """What each figure is made of, per stage kind and model: indexing one phase (the units'
    tokens), 1,000 queries (the per-query means over phases) and the sweep as it ran."""
    emb, rer, gen = use["embedding"], use["rerank"], use["generator"]
    per_q = {
        k: _mean([(p.get("per_query") or {}).get(k) for p in parts]) or 0.0
        for k in (
            "embedding_tokens",
            "rerank_pairs",
            "rerank_requests",
            "generator_requests",
            "prompt_tokens",
            "completion_tokens",
        )
    }
    per_text = (emb["requests"] / emb["encoded"]) if emb["encoded"] else 0.0
    index = index_summary(parts)
    return {
        "indexing": [
            (
                "embedding",
                emb["model"],
                {"tokens": index["unit_tokens"] or 0.0, "requests": (index["units"] or 0.0) * per_text},
            )
        ],
        "per_1000_queries": [
            (
                "embedding",
                emb["model"],
                {
                    "tokens": 1000 * per_q["embedding_tokens"],
                    "requests": 1000.0 if emb["kind"] == "endpoint" else 0.0,
                },
            ),
            ("rerank", rer["model"], {"requests": 1000 * per_q["rerank_requests"], "tokens": 0.0}),
            (
                "generator",
                gen["model"],
                {
                    "requests": 1000 * per_q["generator_requests"],
                    "prompt_tokens": 1000 * per_q["prompt_tokens"],
                    "completion_tokens": 1000 * per_q["completion_tokens"],
                },
            ),
        ],
        "sweep": [
            ("embedding", emb["model"], {"tokens": emb["tokens"], "requests": emb["requests"]}),
            ("rerank", rer["model"], {"requests": rer["requests"]}),
            (
                "generator",
                gen["model"],
                {k: gen[k] for k in ("requests", "prompt_tokens", "completion_tokens")},
            ),
        ],
    }


def _paid(kind: str, use: dict[str, Any]) -> bool:
    """Does the arm use this kind at all (a pass-through reranker is not a priced model)?"""
    if kind == "rerank":
        return use["rerank"].get("kind") not in (None, "none", "PassThroughReranker")
    return True


def _scope(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """The arm's phase scope as its partitions recorded it ("all" when none says otherwise); the
    base phase cuts every document, the others only the phased ones (the smallest count)."""
    scoped = [p["phase_scope"] for p in parts if (p.get("phase_scope") or {}).get("scope") == "evidence"]
    if not scoped:
        return {"scope": "all"}
    rec = min(scoped, key=lambda r: r.get("phased") or 0)
    return {
        "scope": "evidence",
        "base_phase": rec.get("base_phase"),
        "phased": rec.get("phased"),
        "documents": rec.get("documents"),
    }


def arm_resources(
    ledger: str | Path,
    arm: str,
    prices: Prices | None = None,
    parts: dict[str, dict[str, dict[str, Any]]] | None = None,
) -> dict[str, Any]:
    """The arm's resource summary (see the module docstring)."""
    parts = read_partitions(ledger) if parts is None else parts
    by_phase = parts.get(arm) or {}
    if not by_phase:
        return {"arm": arm, "recorded": False}
    listed = [by_phase[k] for k in sorted(by_phase)]
    use = usage(listed, read_oracle(ledger, arm))
    return {
        "arm": arm,
        "recorded": True,
        "phases": len(listed),
        "questions": _mean([p.get("questions") for p in listed]),
        "index": index_summary(listed),
        "usage": use,
        "latency_ms": latency(listed),
        "cost": costs(listed, use, prices),
        "phase_scope": _scope(listed),
        "recording_seconds": sum(p.get("recording_seconds") or 0.0 for p in listed),
    }


def ledger_resources(
    ledger: str | Path, arms: list[str] | None = None, prices: Prices | None = None
) -> dict[str, dict[str, Any]]:
    parts = read_partitions(ledger)
    return {arm: arm_resources(ledger, arm, prices, parts) for arm in (arms or sorted(parts))}


def _diff(a: Any, b: Any) -> Any:
    if isinstance(a, dict) and isinstance(b, dict):
        return {k: _diff(a.get(k), b.get(k)) for k in a if not isinstance(a.get(k), str | list | bool)}
    if isinstance(a, int | float) and isinstance(b, int | float) and not isinstance(a, bool):
        return a - b
    return None


def compare_resources(cand: dict[str, Any], base: dict[str, Any]) -> dict[str, Any]:
    """Candidate, baseline and candidate minus baseline (numbers only; None where either lacks it)."""
    if not (cand.get("recorded") and base.get("recorded")):
        return {"candidate": cand, "baseline": base, "difference": None}
    keys = ("index", "latency_ms", "cost")
    return {
        "candidate": cand,
        "baseline": base,
        "difference": {k: _diff(cand.get(k) or {}, base.get(k) or {}) for k in keys},
    }


def price_table(path: str | Path | None, rule: Any = None) -> Prices | None:
    """The price table: an explicit path, else the rule's ``max_cost.prices``, else none."""
    from ledgerscope.pipeline.run.costs.prices import load_prices

    limits = getattr(rule, "resources", None)
    chosen = path or (limits.prices if limits is not None and limits.prices else None)
    return load_prices(chosen) if chosen is not None else None


def attach(
    comparison: dict[str, Any],
    ledger: str | Path,
    candidate: str,
    baseline_ledger: str | Path | None,
    baseline: str,
    prices: Prices | None,
) -> dict[str, Any]:
    """Put the arms' resources and their difference into a comparison (``comparison["resources"]``),
    where the release rule's latency and cost checks read them."""
    cand = arm_resources(ledger, candidate, prices)
    base = arm_resources(baseline_ledger or ledger, baseline, prices)
    comparison["resources"] = compare_resources(cand, base)
    return comparison
