"""The report's resources section: each arm's index, usage, latency per stage and cost, and
candidate minus baseline (the figures ``diagnose`` and ``compare`` print; escaped, no script)."""

from __future__ import annotations

from typing import Any

from ledgerscope.report.resources_view import SHOWN, difference_lines, resource_lines
from ledgerscope.report.svg import esc


def _latency_rows(arm: str, res: dict[str, Any]) -> str:
    lat = res.get("latency_ms") or {}

    def cell(stage: str, q: str) -> str:
        value = (lat.get(stage) or {}).get(q)
        return "–" if value is None else f"{value:.2f}"

    return "".join(
        f"<tr><td>{esc(arm) if i == 0 else ''}</td><td>{esc(s)}</td>"
        + "".join(f"<td>{cell(s, q)}</td>" for q in ("p50", "p95", "p99"))
        + "</tr>"
        for i, s in enumerate(SHOWN)
    )


def resources_section(comparison: dict[str, Any]) -> str:
    """``<section id="resources">``, or nothing when neither arm carries a resource record."""
    res = comparison.get("resources") or {}
    arms = [res.get(role) or {} for role in ("candidate", "baseline")]
    if not any(a.get("recorded") for a in arms):
        return ""
    lines = [line for a in arms for line in resource_lines(str(a.get("arm", "?")), a)]
    lines += difference_lines(res)
    rows = "".join(_latency_rows(str(a.get("arm", "?")), a) for a in arms if a.get("recorded"))
    items = "".join(f"<li>{esc(line)}</li>" for line in lines)
    return (
        '<section id="resources"><h2>What each arm costs</h2><p class="note">From the resource record '
        "each partition carries: one phase's index (the mean over phases), what the sweep sent, and the "
        "latency per query over every phase's questions (embed_query, bm25 and dense_ann run as one "
        "batch "
        "per phase, shared evenly). Money needs a price table (<code>--prices</code> or the rule's).</p>"
        f"<ul>{items}</ul><table><tr><th>arm</th><th>stage</th><th>p50 ms</th><th>p95 ms</th>"
        f"<th>p99 ms</th></tr>{rows}</table></section>"
    )
