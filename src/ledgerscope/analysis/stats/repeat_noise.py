"""Run-to-run noise from a ledger swept with ``--repeats K``: flip rates, noisy questions, and the
per-repeat metric matrices the bootstrap resamples (:mod:`.repeat_bootstrap`).

Definitions (docs/repeats.md):

* a record's **flip rate** is the share of its K repeats whose answer verdict differs from the
  record's majority verdict (ties: the verdict of the earliest repeat among the tied): 0 when every
  repeat agrees, at most (K - 1) / K;
* a question's flip rate (per arm) is the mean of its records' flip rates over the phases;
* a question is **noisy** (per arm) when the answer verdict of at least one of its records differs
  between repeats (some record's flip rate above 0); in a comparison a question is noisy when it is
  noisy in either arm.

A ledger without repeats (K = 1) has no noise figures: every function here returns None or
nothing for it, and a comparison of such ledgers is exactly what it was.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

import numpy as np

from ledgerscope.analysis.stats.metrics import record_metrics

if TYPE_CHECKING:
    from duckdb import DuckDBPyConnection

_VERDICTS_SQL = (
    "SELECT qid, CAST(phase AS VARCHAR), repeat, answer_verdict FROM repeats WHERE arm = ? "
    "ORDER BY qid, phase, repeat"
)
_VALUES_SQL = (
    "SELECT p.repeat, r.qid, CAST(r.phase AS VARCHAR), r.answerable, r.support_only, r.support_packed, "
    "p.answer_verdict, p.citation_verdict, "
    "CAST(r.prompt_tokens AS DOUBLE), CAST(r.evidence_tokens AS DOUBLE) "
    "FROM records r JOIN repeats p ON p.arm = r.arm AND p.phase = r.phase AND p.qid = r.qid "
    "WHERE r.arm = ? ORDER BY p.repeat, r.qid, r.phase"
)


def _rows(con: DuckDBPyConnection, sql: str, arm: str) -> list[tuple[Any, ...]]:
    """The query's rows; none from a connection without a ``repeats`` view (views built by hand)."""
    import duckdb

    try:
        return con.execute(sql, [arm]).fetchall()
    except duckdb.CatalogException:
        return []


def flip_rate(verdicts: Sequence[str | None]) -> float:
    """The share of repeats whose verdict differs from the majority verdict (0.0 for one repeat)."""
    if not verdicts:
        return 0.0
    top = max(Counter(verdicts).values())
    return 1.0 - top / len(verdicts)


def majority(verdicts: Sequence[str | None]) -> str | None:
    """The most frequent verdict; among tied ones, the earliest repeat's."""
    tally = Counter(verdicts)
    top = max(tally.values())
    return next(v for v in verdicts if tally[v] == top)


def record_verdicts(con: DuckDBPyConnection, arm: str) -> dict[tuple[str, str], list[str | None]]:
    """Each record's answer verdicts in repeat order (empty: the arm has no repeats)."""
    out: dict[tuple[str, str], list[str | None]] = {}
    for qid, phase, _repeat, verdict in _rows(con, _VERDICTS_SQL, arm):
        out.setdefault((qid, phase), []).append(verdict)
    return out


def question_noise(verdicts: dict[tuple[str, str], list[str | None]]) -> list[dict[str, Any]]:
    """Per question: its flip rate (mean over its records), the phases whose verdict flipped, and
    whether it is noisy; the noisiest first."""
    by_q: dict[str, list[tuple[str, float]]] = {}
    for (qid, phase), vs in verdicts.items():
        by_q.setdefault(qid, []).append((phase, flip_rate(vs)))
    out = []
    for qid, rates in by_q.items():
        flipped = sorted(p for p, r in rates if r > 0)
        out.append(
            {
                "qid": qid,
                "flip_rate": float(np.mean([r for _, r in rates])),
                "phases_flipped": flipped,
                "noisy": bool(flipped),
            }
        )
    return sorted(out, key=lambda q: (-q["flip_rate"], q["qid"]))


def arm_noise(con: DuckDBPyConnection, arm: str) -> dict[str, Any] | None:
    """One arm's noise summary, or None when it was swept without repeats."""
    verdicts = record_verdicts(con, arm)
    if not verdicts:
        return None
    questions = question_noise(verdicts)
    rates = [flip_rate(v) for v in verdicts.values()]
    noisy = [q for q in questions if q["noisy"]]
    return {
        "arm": arm,
        "repeats": max(len(v) for v in verdicts.values()),
        "records": len(verdicts),
        "records_flipped": sum(r > 0 for r in rates),
        "flip_rate": float(np.mean(rates)),
        "questions": len(questions),
        "noisy_questions": len(noisy),
        "noisy": noisy,
    }


def noise_section(cand: dict[str, Any] | None, base: dict[str, Any] | None) -> dict[str, Any] | None:
    """The comparison's ``noise`` entry: both arms' summaries and the questions noisy in either."""
    if cand is None and base is None:
        return None
    qids = sorted({q["qid"] for s in (cand, base) if s for q in s["noisy"]})
    return {
        "definition": "flip rate: share of a record's repeats whose answer verdict differs from its "
        "majority verdict; a question is noisy when any of its records' verdicts differ between repeats",
        "candidate": cand,
        "baseline": base,
        "noisy_questions": qids,
        "bootstrap": "each replicate draws one repeat per question and arm (docs/repeats.md)",
    }


def _repeat_records(con: DuckDBPyConnection, recs: Any) -> list[Any]:
    """The arm's records once per repeat, each with that repeat's answer-side metrics (a record
    without that repeat keeps its own values); [] when the arm has no repeats."""
    rows = _rows(con, _VALUES_SQL, recs.arm)
    if not rows:
        return []
    at = {(q, p): i for i, (q, p) in enumerate(zip(recs.qid.tolist(), recs.phase.tolist(), strict=True))}
    by_repeat: dict[int, list[tuple[Any, ...]]] = {}
    for row in rows:
        by_repeat.setdefault(row[0], []).append(row[1:])
    out = []
    for _r, part in sorted(by_repeat.items()):
        cols = list(zip(*part, strict=True))
        values = record_metrics(
            answerable=cols[2],
            support_only=cols[3],
            support_packed=cols[4],
            answer_verdict=cols[5],
            citation_verdict=cols[6],
            prompt_tokens=np.array(cols[7], dtype=float),
            evidence_tokens=np.array(cols[8], dtype=float),
        )
        idx = np.array([at[(q, p)] for q, p in zip(cols[0], cols[1], strict=True)], dtype=np.int64)
        merged = {m: v.copy() for m, v in recs.values.items()}
        for m, v in values.items():
            merged[m][idx] = v
        out.append(dataclasses.replace(recs, values=merged))
    return out


def repeat_stacks(
    con: DuckDBPyConnection,
    base_con: DuckDBPyConnection | None,
    cand: Any,
    base: Any,
    matched: Any,
    metrics: Sequence[str],
    match_arms: Callable[..., Any],
) -> dict[str, tuple[np.ndarray, np.ndarray]] | None:
    """Per metric, (candidate, baseline) stacks of (repeats x matched questions x phases), in the
    matched order; None when neither arm has repeats. ``cand``, ``base``: each arm's
    :class:`.compare.ArmRecords`; ``matched`` and ``match_arms``: :mod:`.compare`'s (passed in, so
    this module stays below it)."""
    cand_reps = _repeat_records(con, cand)
    base_reps = _repeat_records(base_con if base_con is not None else con, base)
    if not cand_reps and not base_reps:
        return None
    c_mats = [match_arms(r, base, metrics).candidate for r in cand_reps] or [matched.candidate]
    b_mats = [match_arms(cand, r, metrics).baseline for r in base_reps] or [matched.baseline]
    return {m: (np.stack([x[m] for x in c_mats]), np.stack([x[m] for x in b_mats])) for m in metrics}


def varies(stack: np.ndarray) -> bool:
    """Whether any repeat differs from repeat 0 (NaN equal to NaN)."""
    return any(not np.array_equal(stack[r], stack[0], equal_nan=True) for r in range(1, len(stack)))


def noise_of(
    con: DuckDBPyConnection, base_con: DuckDBPyConnection | None, candidate: str, baseline: str
) -> dict[str, Any]:
    """``{"noise": section}`` for a comparison when either arm has repeats, else ``{}`` (a K = 1
    comparison's dict is unchanged)."""
    base = arm_noise(base_con if base_con is not None else con, baseline)
    section = noise_section(arm_noise(con, candidate), base)
    return {} if section is None else {"noise": section}


def over_repeats(
    futures: list[Future[Any]],
    calls: list[tuple[dict[str, Any], Any]],
    questions: list[np.ndarray],
    stacks: dict[str, Any],
    phases: list[str],
    boot: dict[str, Any],
) -> list[Future[Any]]:
    """The comparison's bootstrap futures, each call whose answers differ between repeats replaced by
    :func:`.repeat_bootstrap.paired_bootstrap_repeats` on the same questions (the others kept: with
    answers that never differ, the two are the same numbers)."""
    from ledgerscope.analysis.stats.repeat_bootstrap import paired_bootstrap_repeats

    out = list(futures)
    for i, ((pairs, clusters), rows) in enumerate(zip(calls, questions, strict=True)):
        if not pairs:
            continue
        chosen = {m: (stacks[m][0][:, rows], stacks[m][1][:, rows], h) for m, (_c, _b, h) in pairs.items()}
        if not any(varies(c) or varies(b) for c, b, _h in chosen.values()):
            continue
        done: Future[Any] = Future()
        done.set_result(paired_bootstrap_repeats(chosen, clusters, phase_labels=phases, **boot))
        out[i] = done
    return out


#: noisy questions named per arm in the text views (all of them are in ``--json``)
SHOWN = 10


def noise_lines(noise: dict[str, Any] | None) -> list[str]:
    """The ``noise`` entry as plain lines (terminal, report, Markdown): per arm its repeats, flip
    rate and noisy questions, the noisiest named; [] without repeats."""
    if not noise:
        return []
    lines = ["run-to-run noise (--repeats): " + noise["bootstrap"]]
    for side in ("candidate", "baseline"):
        s = noise.get(side)
        if s is None:
            lines.append(f"  {side}: one answer per record (no repeats)")
            continue
        named = ", ".join(f"{q['qid']} ({q['flip_rate']:.2f})" for q in s["noisy"][:SHOWN])
        more = f", and {len(s['noisy']) - SHOWN} more" if len(s["noisy"]) > SHOWN else ""
        lines.append(
            f"  {side} {s['arm']}: {s['repeats']} repeats, {s['noisy_questions']} of {s['questions']} "
            f"questions noisy (verdict differs between repeats), {s['records_flipped']} of {s['records']} "
            f"records, mean flip rate {s['flip_rate']:.3f}" + (f"; noisiest: {named}{more}" if named else "")
        )
    return lines


def mark_noisy(flips: list[dict[str, Any]], noise: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The flips with ``noisy`` (the question's verdict also flips between repeats, in either arm) and
    its flip rates; the noisy ones after the others (a gate reads the steady regressions first)."""
    rates: dict[str, dict[str, float]] = {}
    for side in ("candidate", "baseline"):
        for q in ((noise or {}).get(side) or {}).get("noisy", []):
            rates.setdefault(q["qid"], {})[side] = q["flip_rate"]
    out = [{**f, "noisy": f["qid"] in rates, "flip_rates": rates.get(f["qid"], {})} for f in flips]
    return sorted(out, key=lambda f: f["noisy"])  # stable: the order within each kind is kept


def block_repeats(
    stacks: dict[str, Any] | None, matched: Any, stress_set: str, metric: str
) -> tuple[np.ndarray, np.ndarray] | None:
    """A stress set's (candidate, baseline) repeat stacks of ``metric`` over the questions where it
    applies in either arm (the comparison's denominator), or None when its answers never differ."""
    if stacks is None or metric not in stacks:
        return None
    rows = matched.stress_set == stress_set
    c, b = matched.candidate[metric][rows], matched.baseline[metric][rows]
    defined = ~np.isnan(c).all(axis=1) | ~np.isnan(b).all(axis=1)
    idx = np.flatnonzero(rows)[defined]
    cs, bs = stacks[metric][0][:, idx], stacks[metric][1][:, idx]
    return (cs, bs) if varies(cs) or varies(bs) else None
