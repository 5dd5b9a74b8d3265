"""The resource record in a terminal: ``diagnose``'s per-arm table and ``compare``'s difference.

Figures come from :mod:`ledgerscope.analysis.resources`; this module only lays them out (Rich
tables, every arm name escaped), and the same lines feed the report and the TUI stats pane.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rich import box
from rich.table import Table
from rich.text import Text

from ledgerscope.common.safe_text import safe

#: the latency columns diagnose shows (p50/p95 each), production stages then the whole query
SHOWN = ("embed_query", "bm25", "dense_ann", "fuse", "rerank", "pack", "generate", "query")


def fmt_bytes(n: float | None) -> str:
    if n is None:
        return "-"
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1024 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return "-"


def fmt_money(x: float | None, currency: str = "") -> str:
    if x is None:
        return "unpriced"
    return f"{x:.4f} {currency}".strip() if abs(x) < 100 else f"{x:,.2f} {currency}".strip()


def _ms(stat: dict[str, Any] | None, key: str) -> str:
    value = (stat or {}).get(key)
    return "-" if value is None else f"{value:.2f}"


def latency_table(resources: dict[str, dict[str, Any]]) -> Table:
    """Per arm and stage, p50/p95/p99 milliseconds over every phase's questions (batched stages
    are one batch's time shared evenly)."""
    table = Table(title="latency per query, ms, over every phase's questions", box=box.SIMPLE)
    for name, justify in (
        ("arm", "left"),
        ("stage", "left"),
        ("p50", "right"),
        ("p95", "right"),
        ("p99", "right"),
    ):
        table.add_column(name, justify=justify, no_wrap=True)
    for arm, res in resources.items():
        if not res.get("recorded"):
            continue
        lat = res["latency_ms"]
        for i, stage in enumerate(SHOWN):
            label = f"{stage} (batched)" if stage in ("embed_query", "bm25", "dense_ann") else stage
            table.add_row(
                Text(safe(arm)) if i == 0 else "",
                label,
                *[_ms(lat.get(stage), q) for q in ("p50", "p95", "p99")],
            )
    return table


def resource_lines(arm: str, res: dict[str, Any]) -> list[str]:
    """Plain lines (the terminal, the report and the TUI share them)."""
    name = safe(arm)
    if not res.get("recorded"):
        return [f"{name}: no resource record (a ledger written before it, or ingested)"]
    idx, use, cost = res["index"], res["usage"], res["cost"]
    emb, rer, gen = use["embedding"], use["rerank"], use["generator"]
    b = idx["bytes"]
    oracle = ", oracle included" if gen["oracle_included"] else ""
    lines = [
        f"{name}: index per phase {idx['units'] or 0:.0f} units, {idx['unique_source_tokens'] or 0:.0f} "
        f"source tokens, {idx['unit_tokens'] or 0:.0f} unit tokens "
        f"(overlap factor {idx['overlap_factor'] or 0:.3f}); stored: vectors {fmt_bytes(b['vectors'])}, "
        f"HNSW {fmt_bytes(b['hnsw'])}, BM25 {fmt_bytes(b['bm25'])}, ledger {fmt_bytes(b['ledger'])} "
        f"per partition; built in {idx['seconds'] or 0:.2f} s",
        f"{name}: sweep sent: embedding {emb['encoded']} texts encoded, {emb['cache_hits']} from caches, "
        f"{emb['tokens']} tokens ({'/'.join(emb['token_source']) or '-'}), {emb['requests']} requests; "
        f"rerank {rer['pairs']} pairs, {rer['requests']} requests; generator {gen['requests']} requests, "
        f"{gen['prompt_tokens']} prompt + {gen['completion_tokens']} completion tokens "
        f"({'/'.join(gen['token_source']) or '-'}{oracle})",
    ]
    scope = res.get("phase_scope") or {}
    if scope.get("scope") == "evidence":
        lines.append(
            f"{name}: phase scope evidence: {scope['phased']} of {scope['documents']} documents "
            "re-chunked per phase (gold and retrieved at base phase "
            f"{safe(str(scope['base_phase']))}); "
            "the rest cut once at the base phase"
        )
    if cost.get("priced"):
        cur = cost["currency"]
        unpriced = f"; not in the price table: {', '.join(cost['unpriced'])}" if cost["unpriced"] else ""
        lines.append(
            f"{name}: cost: indexing {fmt_money(cost['indexing'], cur)}, per 1,000 queries "
            f"{fmt_money(cost['per_1000_queries'], cur)}, "
            f"this sweep {fmt_money(cost['sweep'], cur)} (prices {safe(cost['prices'])}){unpriced}"
        )
    return lines


def diagnose_resources(resources: dict[str, dict[str, Any]]) -> Iterable[Any]:
    if not any(r.get("recorded") for r in resources.values()):
        return []
    out: list[Any] = [latency_table(resources)]
    for arm, res in resources.items():
        out.extend(Text(line) for line in resource_lines(arm, res))
    return out


def difference_lines(comparison: dict[str, Any] | None) -> list[str]:
    """Candidate minus baseline: latency p95 per stage, index size, cost."""
    if not comparison or comparison.get("difference") is None:
        return [] if not comparison else ["resources: not recorded for both arms"]
    diff, cand = comparison["difference"], comparison["candidate"]
    lat = diff.get("latency_ms") or {}
    parts = [f"{s} {lat[s]['p95']:+.2f}" for s in SHOWN if (lat.get(s) or {}).get("p95") is not None]
    lines = [f"resources, candidate - baseline: latency p95 ms: {', '.join(parts) or '-'}"]
    scopes = {
        role: ((comparison.get(role) or {}).get("phase_scope") or {}).get("scope", "all")
        for role in ("candidate", "baseline")
    }
    if "evidence" in scopes.values():
        lines.append(
            f"phase scope: candidate {scopes['candidate']}, baseline {scopes['baseline']} "
            "(evidence: only gold and retrieved documents move with the phase)"
        )
    idx = diff.get("index") or {}
    if idx.get("units") is not None:
        vectors = fmt_bytes((idx.get("bytes") or {}).get("vectors"))
        lines.append(
            f"resources, candidate - baseline: units per phase {idx['units']:+.0f}, unit tokens "
            f"{idx.get('unit_tokens') or 0:+.0f}, vectors {vectors}"
        )
    cost = diff.get("cost") or {}
    if (cand.get("cost") or {}).get("priced"):
        cur = cand["cost"]["currency"]
        lines.append(
            "resources, candidate - baseline: cost per 1,000 queries "
            f"{fmt_money(cost.get('per_1000_queries'), cur)}, "
            f"indexing {fmt_money(cost.get('indexing'), cur)}, "
            f"sweep {fmt_money(cost.get('sweep'), cur)}"
        )
    return lines
