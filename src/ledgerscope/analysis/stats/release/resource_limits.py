"""The release rule's resource side beyond the token ceiling: a latency allowance and a cost boundary.

    [max_latency]                 # the candidate's p95 per query, milliseconds (absolute)
    query = 250                   # the whole production query; or a stage: embed_query, bm25,
    generate = 200                # dense_ann, fuse, rerank, pack, generate

    [max_latency_vs_baseline]     # the candidate's p95 over the baseline's (1.10: at most 10 % slower)
    query = 1.10
    rerank = 1.5

    [max_cost]                    # money by the price table (pipeline/run/prices.py)
    per_1000_queries = 0.50       # the candidate's query-side cost per 1,000 queries
    indexing = 10.0               # embedding one phase's corpus once
    prices = "prices.toml"        # relative to the rule file (or compare/report --prices)

Measured resources are judged like the token ceiling: on the observed value, without an interval
(pass or violates), a check over fewer than ``min_questions`` questions cannot pass, and no record
or no price table is *inconclusive* (no evidence), with the reason naming what is missing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ledgerscope.pipeline.run.resources import STAGES

LATENCY_TARGETS = (*STAGES, "query")
COST_KEYS = ("per_1000_queries", "indexing")
KEYS = ("max_latency", "max_latency_vs_baseline", "max_cost")


@dataclass(frozen=True)
class ResourceLimits:
    latency: tuple[tuple[str, float], ...] = ()  # (stage, p95 ms)
    latency_ratio: tuple[tuple[str, float], ...] = ()  # (stage, candidate p95 / baseline p95)
    cost: tuple[tuple[str, float], ...] = ()  # (per_1000_queries | indexing, money)
    prices: str | None = None  # the price table, resolved against the rule

    def __bool__(self) -> bool:
        return bool(self.latency or self.latency_ratio or self.cost)


def _positive(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and v > 0


def _stage_table(doc: dict[str, Any], key: str, pr: Any, what: str) -> tuple[tuple[str, float], ...]:
    v = doc.get(key)
    if v is None:
        return ()
    if not isinstance(v, dict) or not v:
        pr.add(key, f"must be a table of stage = {what}")
        return ()
    out = []
    for stage, limit in v.items():
        if stage not in LATENCY_TARGETS:
            pr.add(f"{key}.{stage}", f"unknown stage; known: {', '.join(LATENCY_TARGETS)}")
        elif not _positive(limit):
            pr.add(f"{key}.{stage}", f"must be a positive number ({what}), got {limit!r}")
        else:
            out.append((stage, float(limit)))
    return tuple(out)


def parse_limits(doc: dict[str, Any], pr: Any, rule_path: Path) -> ResourceLimits | None:
    """The three tables, checked; problems go to the rule loader's collector ``pr``."""
    if not any(k in doc for k in KEYS):
        return None
    latency = _stage_table(doc, "max_latency", pr, "p95 milliseconds")
    ratio = _stage_table(doc, "max_latency_vs_baseline", pr, "candidate p95 / baseline p95")
    cost: list[tuple[str, float]] = []
    prices = None
    table = doc.get("max_cost")
    if table is not None:
        if not isinstance(table, dict) or not table:
            pr.add("max_cost", "must be a table with per_1000_queries and/or indexing (and prices)")
            table = {}
        for key, value in table.items():
            if key == "prices":
                if isinstance(value, str) and value:
                    prices = (
                        str((rule_path.parent / value).resolve()) if not Path(value).is_absolute() else value
                    )
                else:
                    pr.add("max_cost.prices", "must be the path of a price table")
            elif key not in COST_KEYS:
                pr.add(f"max_cost.{key}", f"unknown key; known: {', '.join(COST_KEYS)}, prices")
            elif not (isinstance(value, int | float) and not isinstance(value, bool) and value >= 0):
                pr.add(f"max_cost.{key}", f"must be a non-negative amount of money, got {value!r}")
            else:
                cost.append((key, float(value)))
    return ResourceLimits(latency, ratio, tuple(cost), prices)


def resource_checks(
    limits: ResourceLimits | None, comparison: dict[str, Any], min_questions: int, check: Any
) -> list[Any]:
    """The latency and cost checks as the rule's :class:`Check` (passed in: ``check``)."""
    if not limits:
        return []
    res = comparison.get("resources") or {}
    cand, base = res.get("candidate") or {}, res.get("baseline") or {}
    n = int(cand.get("questions") or 0) if cand.get("recorded") else 0

    def judged(
        name: str, metric: str, what: str, observed: float | None, limit: float, missing: str, unit: str
    ) -> Any:
        return _judged(check, n, min_questions, name, metric, what, observed, limit, missing, unit)

    no_record = "the ledger holds no resource record for the candidate"
    out = [
        judged(
            f"max_latency.{stage}",
            "latency",
            f"candidate {stage} latency p95",
            _p95(cand, stage),
            limit,
            no_record,
            " ms",
        )
        for stage, limit in limits.latency
    ]
    for stage, limit in limits.latency_ratio:
        c, b = _p95(cand, stage), _p95(base, stage)
        out.append(
            judged(
                f"max_latency_vs_baseline.{stage}",
                "latency",
                f"candidate / baseline {stage} latency p95 ({_num(c)} / {_num(b)} ms)",
                c / b if c is not None and b else None,
                limit,
                "a resource record missing for either arm",
                "x",
            )
        )
    cost = cand.get("cost") or {}
    for key, limit in limits.cost:
        words = {"per_1000_queries": "cost per 1,000 queries", "indexing": "indexing cost"}[key]
        if not cand.get("recorded"):
            missing = no_record
        elif not cost.get("priced"):
            missing = "no price table (max_cost.prices or --prices)"
        else:
            missing = f"not every model it uses is priced ({', '.join(cost.get('unpriced') or [])})"
        cur = f" {cost.get('currency', '')}".rstrip()
        observed = cost.get(key) if cost.get("priced") else None
        out.append(judged(f"max_cost.{key}", "cost", f"candidate {words}", observed, limit, missing, cur))
    return out


def _p95(arm: dict[str, Any], stage: str) -> float | None:
    """An arm's recorded p95 latency of one stage (None: no resource record, or no such stage)."""
    if not arm.get("recorded"):
        return None
    return ((arm.get("latency_ms") or {}).get(stage) or {}).get("p95")


def _judged(
    check: Any,
    n: int,
    min_questions: int,
    name: str,
    metric: str,
    what: str,
    observed: float | None,
    limit: float,
    missing: str,
    unit: str,
) -> Any:
    """One measured figure against its limit: no figure is inconclusive (``missing`` says why); a
    pass over fewer than ``min_questions`` questions is inconclusive too."""
    if observed is None:
        return check(
            "all",
            name,
            metric,
            "inconclusive",
            f"{what}: {missing}; limit <= {limit:g}{unit}: no evidence",
            limit=limit,
            n=n,
        )
    status = "pass" if observed <= limit else "violates"
    extra = ""
    if status == "pass" and n < min_questions:
        status = "inconclusive"
        extra = f"; only {n} question(s), fewer than min_questions {min_questions}"
    verb = {"pass": "within", "violates": "VIOLATES", "inconclusive": "inconclusive"}[status]
    reason = f"{what} = {observed:.4g}{unit}; limit <= {limit:g}{unit} (measured, no interval): {verb}{extra}"
    return check("all", name, metric, status, reason, observed, None, None, limit, n)


def _num(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.4g}"
