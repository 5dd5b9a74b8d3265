"""Everything the HTML report shows, gathered from the analysis layer (nothing computed here).

The figures are the ones ``compare`` and ``diagnose`` print: :func:`compare_arms` and
:func:`decide` for the comparison and the decision, :mod:`ledgerscope.analysis.stats.replicates` for the
bootstrap distributions and per-phase intervals (same draw, same intervals), :func:`survival`
for the funnel, :func:`ledger_heads` for the steps, :func:`find_reversals` for the
reversals. What is read directly is what is shown as it is: verdicts per cell, packed contexts,
chunk cuts and gold spans for the boundary of each reversal. Restricted source text goes
through an :class:`ledgerscope.export.redaction.Redactor`.
"""

from __future__ import annotations

import itertools
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ledgerscope.analysis.stats import DEFAULT_N_RESAMPLES, DEFAULT_SEED
from ledgerscope.analysis.stats.power import detectable
from ledgerscope.analysis.survival import SURVIVAL_STAGES, gold_in_context
from ledgerscope.common.paths import shown_path
from ledgerscope.export.redaction import Redactor

if TYPE_CHECKING:
    from duckdb import DuckDBPyConnection

    from ledgerscope.analysis.stats.compare import Matched
    from ledgerscope.inputs.fixtures import Fixture

CURVE_METRICS = ("support", "answer_correct")
#: characters of source shown either side of the gold spans at a reversal's boundary
EXCERPT_MARGIN = 80


@dataclass
class Settings:
    n_resamples: int = DEFAULT_N_RESAMPLES
    seed: int = DEFAULT_SEED
    confidence: float = 0.95


@dataclass
class ReportData:
    ledger: str
    manifest: dict[str, Any]
    candidate: str
    baseline: str
    settings: Settings
    comparison: dict[str, Any]
    decision: dict[str, Any] | None
    rule: dict[str, Any] | None
    curves: dict[str, dict[str, list[dict[str, Any]]]] = field(default_factory=dict)
    distributions: list[dict[str, Any]] = field(default_factory=list)
    funnel: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    steps: dict[str, list[tuple[int, str, int]]] = field(default_factory=dict)
    strip: dict[str, Any] = field(default_factory=dict)
    reversals: list[dict[str, Any]] = field(default_factory=list)
    redaction: dict[str, Any] | None = None


def gather(
    ledger: str | Path,
    candidate: str,
    baseline: str,
    *,
    baseline_ledger: str | Path | None = None,
    rule_path: str | Path | None = None,
    settings: Settings | None = None,
    include_restricted: bool = False,
    prices_path: str | Path | None = None,
) -> ReportData:
    """Read one ledger (and optionally the baseline's own) into the report's figures."""
    from ledgerscope.analysis.stats.compare import compare_arms
    from ledgerscope.analysis.stats.release import decide, load_rule
    from ledgerscope.ledger.read import connect
    from ledgerscope.ledger.verify import load_manifest

    settings = settings or Settings()
    con = connect(ledger)
    base_con = connect(baseline_ledger) if baseline_ledger else None
    cons = {candidate: con, baseline: base_con or con}
    loaded_rule = load_rule(rule_path) if rule_path is not None else None
    comparison = compare_arms(
        con,
        candidate,
        baseline,
        base_con,
        seed=settings.seed,
        n_resamples=settings.n_resamples,
        confidence=settings.confidence,
        min_oracle_correct=loaded_rule.min_oracle_correct if loaded_rule else None,
    )
    decision = rule = None
    from ledgerscope.analysis.resources import attach, price_table

    attach(comparison, ledger, candidate, baseline_ledger, baseline, price_table(prices_path, loaded_rule))
    if loaded_rule is not None:
        decision = decide(loaded_rule, comparison).to_dict()
        rule = _rule_summary(rule_path, loaded_rule)
    data = ReportData(
        shown_path(ledger), load_manifest(ledger), candidate, baseline, settings, comparison, decision, rule
    )
    from ledgerscope.analysis.stats.replicates import matched_with_repeats

    matched, stacks = matched_with_repeats(con, candidate, baseline, base_con, CURVE_METRICS)
    _curves_and_distributions(data, matched, stacks)
    loaded = {arm: _fixtures(c, ledger if c is con else baseline_ledger) for arm, c in cons.items()}
    by_con = {id(c): Redactor.from_connection(c, include_restricted) for c in cons.values()}
    redactors = {arm: by_con[id(c)] for arm, c in cons.items()}
    for arm, c in cons.items():
        _arm_summaries(data, arm, c, ledger if c is con else baseline_ledger, loaded[arm])
    _strip(data, cons)
    data.reversals = _reversal_cards(data, cons, loaded, redactors)
    counts = [r.summary() for r in by_con.values() if r.any()]
    if counts:
        data.redaction = _redaction_totals(counts)
    return data


def _rule_summary(rule_path: str | Path | None, loaded_rule: Any) -> dict[str, Any]:
    """What the report shows of the release rule: where it is, its digest and its tolerances."""
    return {
        "path": shown_path(rule_path) if rule_path is not None else None,
        "digest": loaded_rule.digest,
        "description": loaded_rule.description,
        "differences": [(t.metric, t.statistic, t.limit, t.key) for t in loaded_rule.differences],
    }


def _redaction_totals(counts: list[dict[str, Any]]) -> dict[str, Any]:
    """The redactors' counts summed over both ledgers: spans, fields and the documents they touched."""
    out: dict[str, Any] = {k: sum(c[k] for c in counts) for k in ("spans", "fields")}
    out["doc_ids"] = sorted({d for c in counts for d in c["doc_ids"]})
    out["documents"] = len(out["doc_ids"])
    return out


def _fixtures(con: DuckDBPyConnection, ledger: str | Path | None) -> tuple[Any, ...]:
    from ledgerscope.ledger.fixtures import load_ledger_fixtures

    assert ledger is not None  # a second connection exists only with the baseline's own ledger
    return load_ledger_fixtures(con, ledger)


def _curves_and_distributions(
    data: ReportData, matched: Matched, stacks: dict[str, Any] | None = None
) -> None:
    """Per stress set: each curve metric's per-phase rates with intervals, and the paired
    difference's replicates for each tolerance of the rule (the phase average without one)."""
    from ledgerscope.analysis.stats.replicates import difference_replicates, phase_intervals

    s = data.settings
    boot: dict[str, Any] = {"n_resamples": s.n_resamples, "seed": s.seed, "confidence": s.confidence}
    checks = {(c["stress_set"], c["tolerance"]): c for c in (data.decision or {}).get("checks", [])}
    wanted = (
        [(m, st, lim, key) for m, st, lim, key in data.rule["differences"] if m in CURVE_METRICS]
        if data.rule
        else [(m, "mean", None, None) for m in CURVE_METRICS]
    )
    for stress_set in data.comparison["stress_sets"]:
        data.curves[stress_set] = {m: phase_intervals(matched, stress_set, m, **boot) for m in CURVE_METRICS}
        for metric, statistic, limit, key in wanted:
            dist = difference_replicates(matched, stress_set, metric, statistic, stacks=stacks, **boot)
            if dist is None:
                continue
            check = checks.get((stress_set, f"{key}.{statistic}")) if key else None
            diff = data.comparison["stress_sets"][stress_set]["metrics"][metric]["difference"]
            data.distributions.append(
                {
                    **dist,
                    "stress_set": stress_set,
                    "limit": limit,
                    "status": check["status"] if check else None,
                    "mdd": detectable(diff, statistic),
                }
            )


def _arm_summaries(
    data: ReportData, arm: str, con: DuckDBPyConnection, ledger: str | Path | None, loaded: tuple[Any, ...]
) -> None:
    """Records per diagnosis step and the stage survival funnel (phase average and worst phase)."""
    from ledgerscope.analysis.diagnosis import ledger_heads
    from ledgerscope.analysis.survival import survival

    steps = Counter((r["step"], r["step_name"]) for r in ledger_heads(con, arm))
    data.steps[arm] = sorted((step, name, n) for (step, name), n in steps.items())
    phases = survival(con, ledger, arm, fixtures=loaded)
    funnel = []
    for stage in SURVIVAL_STAGES:
        rates = [p["survival_rate"][stage] for p in phases if p["survival_rate"].get(stage) is not None]
        funnel.append(
            {
                "stage": stage,
                "mean": sum(rates) / len(rates) if rates else None,
                "worst": min(rates) if rates else None,
                "n": sum(p["n_answerable"] for p in phases),
            }
        )
    data.funnel[arm] = funnel


_CELLS_SQL = (
    "SELECT arm, qid, CAST(phase AS VARCHAR) AS phase, phase_offset, answer_verdict, "
    "support_packed, question, segment FROM records WHERE arm = ? "
    "ORDER BY qid, phase_offset, phase"
)


def _strip(data: ReportData, cons: dict[str, Any]) -> None:
    """Every question by phase, per arm: answer verdict and support, and which questions reverse."""
    from ledgerscope.analysis.reversals import find_reversals

    phases: dict[str, list[str]] = {}
    questions: dict[str, dict[str, Any]] = {}
    for arm, con in cons.items():
        order: dict[str, int] = {}
        for r in con.execute(_CELLS_SQL, [arm]).fetchall():
            _arm, qid, phase, offset, verdict, support, question, segment = r
            order.setdefault(phase, offset if offset is not None else 0)
            q = questions.setdefault(
                qid, {"qid": qid, "question": question, "segment": segment, "cells": {}, "reversals": []}
            )
            q["cells"].setdefault(arm, {})[phase] = (verdict, support)
        phases[arm] = sorted(order, key=lambda p: (order[p], p))
        for rev in find_reversals(con, arm):
            if rev["qid"] in questions:
                questions[rev["qid"]]["reversals"].append((arm, rev["kind"]))
    data.strip = {
        "arms": list(cons),
        "phases": phases,
        "questions": sorted(questions.values(), key=lambda q: q["qid"]),
    }


def _flip(rev: dict[str, Any], cells: dict[str, tuple[Any, ...]]) -> tuple[str, str] | None:
    """Two neighbouring phases on either side of the reversal: for support, kept then lost (or the
    reverse); for the answer, the first pair whose verdicts differ with one side correct if any."""
    order = [p for side in rev["phases"].values() for p in side]
    order = sorted(order, key=lambda p: list(cells).index(p) if p in cells else len(cells))
    column = 1 if rev["kind"] == "support" else 0  # support: kept or lost; answer: the verdict
    pairs = [(a, b) for a, b in itertools.pairwise(order) if cells[a][column] != cells[b][column]]
    if rev["kind"] == "answer":
        pairs.sort(key=lambda ab: "correct" not in (cells[ab[0]][0], cells[ab[1]][0]))
    return pairs[0] if pairs else None


def _reversal_cards(
    data: ReportData, cons: dict[str, Any], loaded: dict[str, Any], redactors: dict[str, Redactor]
) -> list[dict[str, Any]]:
    """Per reversal, both sides of its flip: verdicts, the chunk cuts at the gold spans, the
    packed context with the gold it kept; the candidate's first, answer flips to a wrong answer first."""
    from ledgerscope.analysis.reversals import find_reversals

    cards = []
    by_qid = {q["qid"]: q for q in data.strip["questions"]}
    for arm, con in cons.items():
        fixtures, texts = loaded[arm]
        pending = []
        for rev in find_reversals(con, arm):
            q = by_qid.get(rev["qid"])
            if q is None:
                continue
            cells = {p: q["cells"][arm][p] for p in data.strip["phases"][arm] if p in q["cells"].get(arm, {})}
            flip = _flip(rev, cells)
            if flip is not None:
                pending.append((rev, q, flip))
        keys = sorted({(rev["qid"], p) for rev, _q, flip in pending for p in flip})
        rows, packed, cuts = _side_rows(con, arm, keys)
        for rev, q, flip in pending:
            fx = fixtures.get(rev["qid"])
            sides = [
                _side(
                    rows[(rev["qid"], p)], packed.get((rev["qid"], p), []), cuts, p, fx, texts, redactors[arm]
                )
                for p in flip
            ]
            cards.append(
                {
                    "arm": arm,
                    "qid": rev["qid"],
                    "kind": rev["kind"],
                    "segment": rev["segment"],
                    "question": q["question"],
                    "phases": rev["phases"],
                    "sides": sides,
                }
            )
    arms = list(cons)
    cards.sort(
        key=lambda c: (
            arms.index(c["arm"]),
            c["kind"] != "answer",
            not any(s["answer_verdict"] == "correct" for s in c["sides"]),
            c["qid"],
        )
    )
    return cards


_SIDE_COLUMNS = (
    "packed_context",
    "packed_unit_ids",
    "answer",
    "answer_verdict",
    "support_packed",
    "evidence_tokens",
    "budget_tokens",
)


def _side_rows(
    con: DuckDBPyConnection, arm: str, keys: list[tuple[str, str]]
) -> tuple[
    dict[tuple[str, str], dict[str, Any]],
    dict[tuple[str, str], list[dict[str, Any]]],
    dict[tuple[str, str], list[Any]],
]:
    """The records, packed units and chunk cuts of one arm's flip sides, three queries in all."""
    from ledgerscope.common.sql_tables import columns_table, drop_tables

    table = "_ls_report_keys"
    columns_table(
        con, table, {"qid": ("VARCHAR", [k[0] for k in keys]), "phase": ("VARCHAR", [k[1] for k in keys])}
    )
    join = f"JOIN {table} k ON t.qid = k.qid AND CAST(t.phase AS VARCHAR) = k.phase WHERE t.arm = ?"
    try:
        cols = ", ".join(f"t.{c}" for c in _SIDE_COLUMNS)
        rows = {
            (q, p): dict(zip(_SIDE_COLUMNS, rest, strict=True))
            for q, p, *rest in con.execute(
                f"SELECT t.qid, k.phase, {cols} FROM records t {join}", [arm]
            ).fetchall()
        }
        packed: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for q, p, *rest in con.execute(
            'SELECT t.qid, k.phase, t.doc_id, t.start, t."end", t."rank", t.unit_id '
            f"FROM candidates t {join} "
            "AND t.stage = 'packed' ORDER BY t.\"rank\"",
            [arm],
        ).fetchall():
            packed.setdefault((q, p), []).append(
                dict(zip(("doc_id", "start", "end", "rank", "unit_id"), rest, strict=True))
            )
        cuts = {
            (p, d): list(c or [])
            for p, d, c in con.execute(
                "SELECT CAST(phase AS VARCHAR), doc_id, cut_chars FROM boundaries WHERE arm = ? AND "
                f"CAST(phase AS VARCHAR) IN (SELECT DISTINCT phase FROM {table})",
                [arm],
            ).fetchall()
        }
    finally:
        drop_tables(con, table)
    return rows, packed, cuts


def _side(
    row: dict[str, Any],
    packed: list[dict[str, Any]],
    cuts: dict[tuple[str, str], list[Any]],
    phase: str,
    fx: Fixture | None,
    texts: dict[str, str],
    redactor: Redactor,
) -> dict[str, Any]:
    """One phase of a flip: the record, the cuts and packed units over the gold spans' documents."""
    spans = list(fx.spans) if fx is not None else []
    excerpts = [
        _excerpt(
            doc,
            texts.get(doc),
            [s for s in spans if s.doc_id == doc],
            cuts.get((phase, doc), []),
            packed,
            redactor,
        )
        for doc in dict.fromkeys(s.doc_id for s in spans)
    ]
    shown = redactor.record_docs(row)
    context = row["packed_context"] or ""
    side = {
        "phase": phase,
        "answer_verdict": row["answer_verdict"],
        "support_packed": row["support_packed"],
        "evidence_tokens": row["evidence_tokens"],
        "budget_tokens": row["budget_tokens"],
        "packed": packed,
        "excerpts": excerpts,
        "withheld_docs": sorted(set(shown)),
    }
    if shown:
        side["context"], side["context_gold"] = redactor.value(context, shown, True), []
        side["answer"] = redactor.value(row["answer"], shown, True)
    else:
        side["context"], side["context_gold"] = context, gold_in_context(context, spans, packed, texts)
        side["answer"] = row["answer"]
    return side


def _excerpt(
    doc: str,
    text: str | None,
    spans: list[Any],
    cuts: list[int],
    packed: list[dict[str, Any]],
    redactor: Redactor,
) -> dict[str, Any]:
    """The source around a document's gold spans: the spans, the chunk cuts and the packed units in it."""
    lo = max(0, min(s.start for s in spans) - EXCERPT_MARGIN)
    hi = max(s.end for s in spans) + EXCERPT_MARGIN
    out: dict[str, Any] = {
        "doc_id": doc,
        "start": lo,
        "spans": [(s.span_id, s.start, s.end) for s in spans],
        "packed": [
            (p["start"], p["end"], p["rank"]) for p in packed if p["doc_id"] == doc and p["start"] is not None
        ],
    }
    if text is None:
        out.update(end=hi, text=None, cuts=[])
        return out
    hi = min(len(text), hi)
    out["end"] = hi
    out["cuts"] = [c for c in cuts if lo <= c <= hi]
    out["cuts_in_gold"] = [c for c in out["cuts"] if any(s.start < c < s.end for s in spans)]
    if redactor.is_restricted(doc):
        out["text"] = redactor.document_text(doc, text)
        out["withheld"] = redactor.restricted[doc]
        for s in spans:
            redactor.span_text(doc, s.start, s.end, text[s.start : s.end])
    else:
        out["text"] = text[lo:hi]
    return out
