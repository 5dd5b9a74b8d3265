"""Candidate minus baseline from a ledger: load both arms' records, match them, bootstrap.

The statistics themselves are the pure functions of :mod:`ledgerscope.stats`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .errors import InputError, Problem
from .stats import (
    DEFAULT_METRICS,
    DEFAULT_STATISTICS,
    FORMAT,
    METRICS,
    WORST_PHASE_NOTE,
    paired_bootstrap_many,
    phase_table,
    record_metrics,
)


@dataclass
class ArmRecords:
    """One arm's records as arrays (one entry per record)."""

    arm: str
    qid: np.ndarray
    phase: np.ndarray
    segment: np.ndarray
    stress_set: np.ndarray
    cluster: np.ndarray
    values: dict[str, np.ndarray]
    counts: dict[str, int]


_ARM_SQL = """
SELECT qid, phase, segment, stress_set, answerable, support_only, doc_ids[1] AS first_doc,
       support_packed, answer_verdict, citation_verdict, prompt_tokens, evidence_tokens
FROM records WHERE arm = ? ORDER BY qid, phase
"""


def load_arm(con, arm: str, *, source: str = "records") -> ArmRecords:
    """Pull one arm's records from a connection's ``records`` view and score every metric."""
    rows = con.execute(_ARM_SQL, [arm]).fetchall()
    if not rows:
        arms = [r[0] for r in con.execute("SELECT DISTINCT arm FROM records ORDER BY arm").fetchall()]
        raise InputError(Problem(source, None, "arm",
                                 f"no records for arm {arm!r}; arms present: {', '.join(arms) or 'none'}"))
    cols = list(zip(*rows, strict=True))
    qid, phase = np.array(cols[0], dtype=object), np.array([str(p) for p in cols[1]], dtype=object)
    keys = list(zip(qid.tolist(), phase.tolist(), strict=True))
    if len(set(keys)) != len(keys):
        dup = next(k for k in keys if keys.count(k) > 1)
        raise InputError(Problem(source, None, "records",
                                 f"arm {arm!r} has more than one record for question {dup[0]!r}, "
                                 f"phase {dup[1]!r}"))
    cluster = np.array([d if d is not None else f"qid:{q}" for q, d in zip(qid, cols[6], strict=True)],
                       dtype=object)
    values = record_metrics(answerable=cols[4], support_only=cols[5], support_packed=cols[7],
                            answer_verdict=cols[8], citation_verdict=cols[9], prompt_tokens=cols[10],
                            evidence_tokens=cols[11])
    verdicts = list(cols[8])
    counts = {
        "records": len(rows),
        "questions": len(set(qid.tolist())),
        "phases": len(set(phase.tolist())),
        "infrastructure_failure": verdicts.count("infrastructure-failure"),
        "not_judged": verdicts.count("not-judged"),
    }
    return ArmRecords(arm, qid, phase, np.array(cols[2], dtype=object),
                      np.array(cols[3], dtype=object), cluster, values, counts)


def _phase_key(label: str):
    try:
        return (0, int(label), label)
    except ValueError:
        return (1, 0, label)


@dataclass
class Matched:
    """Both arms on the shared (question, phase label) cells."""

    qids: list[str]
    phases: list[str]
    segment: np.ndarray
    stress_set: np.ndarray
    cluster: np.ndarray
    candidate: dict[str, np.ndarray]
    baseline: dict[str, np.ndarray]
    report: dict


def match_arms(cand: ArmRecords, base: ArmRecords, metrics: Sequence[str]) -> Matched:
    """Questions x shared phase labels for both arms; cells present in one arm only are dropped."""
    phases = sorted(set(cand.phase.tolist()) & set(base.phase.tolist()), key=_phase_key)
    c_cells = {(q, p): i for i, (q, p) in enumerate(zip(cand.qid.tolist(), cand.phase.tolist(), strict=True))}
    b_cells = {(q, p): i for i, (q, p) in enumerate(zip(base.qid.tolist(), base.phase.tolist(), strict=True))}
    shared = c_cells.keys() & b_cells.keys()
    qids = sorted({q for q, _ in shared})
    q_index = {q: i for i, q in enumerate(qids)}
    p_index = {p: j for j, p in enumerate(phases)}
    cells = sorted(shared)
    rows = np.array([q_index[q] for q, _ in cells], dtype=np.int64)
    cols = np.array([p_index[p] for _, p in cells], dtype=np.int64)
    mats: dict[str, dict[str, np.ndarray]] = {}
    for arm, recs, lookup in (("candidate", cand, c_cells), ("baseline", base, b_cells)):
        src = np.array([lookup[c] for c in cells], dtype=np.int64)
        mats[arm] = {}
        for m in metrics:
            mat = np.full((len(qids), len(phases)), np.nan)
            mat[rows, cols] = recs.values[m][src]
            mats[arm][m] = mat
    first = {}
    for q, s, ss, cl in zip(cand.qid.tolist(), cand.segment.tolist(), cand.stress_set.tolist(),
                            cand.cluster.tolist(), strict=True):
        first.setdefault(q, (s, ss, cl))
    base_first = {}
    for q, s, ss, cl in zip(base.qid.tolist(), base.segment.tolist(), base.stress_set.tolist(),
                            base.cluster.tolist(), strict=True):
        base_first.setdefault(q, (s, ss, cl))
    mismatch = sorted(q for q in qids if first[q] != base_first[q])
    c_q, b_q = set(cand.qid.tolist()), set(base.qid.tolist())
    report = {
        "matched_records": len(shared),
        "matched_questions": len(qids),
        "shared_phases": phases,
        "candidate_only_phases": sorted(set(cand.phase.tolist()) - set(phases), key=_phase_key),
        "baseline_only_phases": sorted(set(base.phase.tolist()) - set(phases), key=_phase_key),
        "candidate_unmatched_records": len(c_cells) - len(shared),
        "baseline_unmatched_records": len(b_cells) - len(shared),
        "candidate_only_questions": len(c_q - b_q),
        "baseline_only_questions": len(b_q - c_q),
        "attribute_mismatch_questions": len(mismatch),
        "attribute_mismatch_examples": mismatch[:10],
    }
    return Matched(
        qids, phases,
        np.array([first[q][0] for q in qids], dtype=object),
        np.array([first[q][1] for q in qids], dtype=object),
        np.array([first[q][2] for q in qids], dtype=object),
        mats["candidate"], mats["baseline"], report,
    )


def _compare_block(rows: np.ndarray, matched: Matched, metrics: Sequence[str], **boot) -> dict:
    """Phase tables per arm and the paired bootstrap per metric, on a subset of matched questions."""
    clusters = matched.cluster[rows]
    pairs, out = {}, {}
    for m in metrics:
        hib = METRICS[m].higher_is_better
        c, b = matched.candidate[m][rows], matched.baseline[m][rows]
        out[m] = {
            "candidate": phase_table(c, matched.phases, higher_is_better=hib),
            "baseline": phase_table(b, matched.phases, higher_is_better=hib),
            "difference": None,
        }
        defined = ~np.isnan(c).all(axis=1) | ~np.isnan(b).all(axis=1)
        if defined.any():
            pairs[m] = (c[defined], b[defined], hib, clusters[defined], defined)
    # metrics applicable to the same questions share one draw (same as one call per metric)
    groups: dict[bytes, list[str]] = {}
    for m, (_c, _b, _h, _cl, defined) in pairs.items():
        groups.setdefault(defined.tobytes(), []).append(m)
    for names in groups.values():
        res = paired_bootstrap_many({m: pairs[m][:3] for m in names}, pairs[names[0]][3],
                                    phase_labels=matched.phases, **boot)
        for m in names:
            out[m]["difference"] = res[m]
    return {
        "n_questions": int(rows.sum()),
        "n_clusters": len(set(clusters.tolist())),
        "metrics": out,
    }


def compare_arms(
    con,
    candidate: str,
    baseline: str,
    baseline_con=None,
    metrics: Sequence[str] = DEFAULT_METRICS,
    seed: int = 0,
    n_resamples: int = 10_000,
    *,
    confidence: float = 0.95,
    statistics: Sequence[str] = DEFAULT_STATISTICS,
    segments: bool = True,
) -> dict:
    """Candidate minus baseline from one ledger (or the baseline from a second connection).

    Matched (qid, phase label) records over the phase labels both arms share;
    unmatched records, phases and questions are counted under ``matching``.
    Clusters for the bootstrap are each question's first document
    (``doc_ids[1]``; a question with no document is its own cluster). Results
    are split by stress set, never pooled: ``stress_sets[s]`` holds, per
    metric, both arms' :func:`phase_table` and the paired bootstrap
    (``difference``), and the same per segment. The dict is JSON-serialisable.

    Each metric's bootstrap resamples only the questions where that metric
    applies in at least one arm (its denominator); metrics that apply to the
    same questions share one draw, and each result equals a
    :func:`paired_bootstrap` call with the same seed. Per-arm phase tables are
    computed on the matched cells, so they agree with the point estimates.
    """
    unknown = [m for m in metrics if m not in METRICS]
    if unknown:
        raise ValueError(f"unknown metric(s) {', '.join(unknown)}; known: {', '.join(METRICS)}")
    cand = load_arm(con, candidate)
    base = load_arm(baseline_con if baseline_con is not None else con, baseline)
    matched = match_arms(cand, base, metrics)
    boot = {"n_resamples": n_resamples, "seed": seed, "confidence": confidence,
            "statistics": tuple(statistics)}
    by_set: dict[str, dict] = {}
    for s in sorted({str(x) for x in matched.stress_set.tolist()}):
        rows = matched.stress_set == s
        block = _compare_block(rows, matched, metrics, **boot)
        if segments:
            block["segments"] = {
                g: _compare_block(rows & (matched.segment == g), matched, metrics, **boot)
                for g in sorted({str(x) for x in matched.segment[rows].tolist()})
            }
        by_set[s] = block
    return {
        "format": FORMAT,
        "candidate": {"arm": candidate, "counts": cand.counts},
        "baseline": {"arm": baseline, "counts": base.counts},
        "settings": {"n_resamples": int(n_resamples), "seed": int(seed), "confidence": float(confidence),
                     "statistics": list(statistics), "method": "percentile",
                     "resampling_unit": "document (first doc id; a question without one is its own)"},
        "matching": matched.report,
        "metrics": {m: METRICS[m].describe() for m in metrics},
        "stress_sets": by_set,
        "note": WORST_PHASE_NOTE + " Stress sets are reported apart and never pooled.",
    }
