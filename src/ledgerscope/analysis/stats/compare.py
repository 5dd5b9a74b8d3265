"""Candidate minus baseline from a ledger: load both arms' records, match them, bootstrap.

The statistics themselves are the pure functions of :mod:`ledgerscope.analysis.stats.metrics`.
Each metric's bootstrap resamples only the questions where that metric applies in at least one
arm (its denominator); metrics that apply to the same questions share one draw, and each result
equals a :func:`.bootstrap.paired_bootstrap` call with the same seed. Per-arm phase tables are
computed on the matched cells, so they agree with the point estimates. The bootstraps run on two
threads (:func:`.bootstrap.paired_bootstrap_batch`); no number depends on their schedule.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ledgerscope.analysis.stats import DEFAULT_N_RESAMPLES, DEFAULT_SEED

# re-exported: callers read one arm's records from here too
from ledgerscope.analysis.stats.arm_records import ArmRecords as ArmRecords
from ledgerscope.analysis.stats.arm_records import load_arm as load_arm
from ledgerscope.analysis.stats.arm_records import load_arms as load_arms
from ledgerscope.analysis.stats.bootstrap import paired_bootstrap_batch
from ledgerscope.analysis.stats.clusters import (
    CLUSTER_RULES,
    RESAMPLING_UNITS,
    cluster_report,
    component_clusters,
    question_documents,
)
from ledgerscope.analysis.stats.metrics import (
    DEFAULT_METRICS,
    DEFAULT_STATISTICS,
    FORMAT,
    METRICS,
    WORST_PHASE_NOTE,
    phase_table,
)
from ledgerscope.analysis.stats.power import annotate as annotate_power
from ledgerscope.common.blas import single_threaded_blas

if TYPE_CHECKING:
    from duckdb import DuckDBPyConnection


def _phase_key(label: str) -> tuple[int, int, str]:
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
    report: dict[str, Any]


def _first_per_question(recs: ArmRecords) -> dict[str, tuple[Any, ...]]:
    """Each question's (segment, stress set, cluster) as its first record has them."""
    first: dict[str, tuple[Any, ...]] = {}
    columns = (recs.qid, recs.segment, recs.stress_set, recs.cluster)
    for q, segment, stress, cluster in zip(*(c.tolist() for c in columns), strict=True):
        first.setdefault(q, (segment, stress, cluster))
    return first


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
    first, base_first = _first_per_question(cand), _first_per_question(base)
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
        qids,
        phases,
        np.array([first[q][0] for q in qids], dtype=object),
        np.array([first[q][1] for q in qids], dtype=object),
        np.array([first[q][2] for q in qids], dtype=object),
        mats["candidate"],
        mats["baseline"],
        report,
    )


def _block_pairs(
    rows: np.ndarray, matched: Matched, metrics: Sequence[str]
) -> tuple[np.ndarray, dict[str, tuple[Any, ...]], list[list[str]]]:
    """A subset of matched questions: its clusters, and per metric the questions where it applies
    in at least one arm (its denominator), grouped: metrics on the same questions share one draw."""
    clusters = matched.cluster[rows]
    pairs = {}
    for m in metrics:
        c, b = matched.candidate[m][rows], matched.baseline[m][rows]
        defined = ~np.isnan(c).all(axis=1) | ~np.isnan(b).all(axis=1)
        if defined.any():
            pairs[m] = (
                c[defined],
                b[defined],
                METRICS[m].higher_is_better,
                clusters[defined],
                defined,
            )
    groups: dict[bytes, list[str]] = {}
    for m, (_c, _b, _h, _cl, defined) in pairs.items():
        groups.setdefault(defined.tobytes(), []).append(m)
    return clusters, pairs, list(groups.values())


def _phase_tables(rows: np.ndarray, matched: Matched, metrics: Sequence[str]) -> dict[str, Any]:
    out = {}
    for m in metrics:
        hib = METRICS[m].higher_is_better
        out[m] = {
            "candidate": phase_table(matched.candidate[m][rows], matched.phases, higher_is_better=hib),
            "baseline": phase_table(matched.baseline[m][rows], matched.phases, higher_is_better=hib),
            "difference": None,
        }
    return out


def _component_labels(
    con: DuckDBPyConnection,
    candidate: str,
    baseline: str,
    baseline_con: DuckDBPyConnection | None,
    matched: Matched,
) -> np.ndarray:
    """Each matched question's connected component of the question-document graph, over the
    documents of both arms (from both ledgers when the baseline is in a second one)."""
    documents = question_documents(con, [candidate] if baseline_con is not None else [candidate, baseline])
    if baseline_con is not None:
        for q, docs in question_documents(baseline_con, [baseline]).items():
            documents.setdefault(q, set()).update(docs)
    by_component = component_clusters(matched.qids, documents)
    return np.array([by_component[q] for q in matched.qids], dtype=object)


def _blocks(matched: Matched, segments: bool) -> list[tuple[str, str | None, np.ndarray]]:
    """(stress set, segment or None for the whole set, rows): every stress set, then its segments."""
    blocks: list[tuple[str, str | None, np.ndarray]] = []
    for s in sorted({str(x) for x in matched.stress_set.tolist()}):
        rows = matched.stress_set == s
        blocks.append((s, None, rows))
        if segments:
            blocks += [
                (s, g, rows & (matched.segment == g))
                for g in sorted({str(x) for x in matched.segment[rows].tolist()})
            ]
    return blocks


def _bootstrap_blocks(
    blocks: list[tuple[str, str | None, np.ndarray]],
    matched: Matched,
    metrics: Sequence[str],
    boot: dict[str, Any],
    by_rule: dict[str, np.ndarray],
    segments: bool,
    stacks: dict[str, Any] | None = None,
) -> dict[str, dict[str, Any]]:
    """Per stress set (and segment) both arms' phase tables and the paired bootstrap of each metric.

    The bootstraps run on two threads (numpy releases the GIL) while this one builds the tables;
    metrics that apply to the same questions share one draw. ``stacks`` (``--repeats``: per metric
    the arms' repeats, :func:`.repeat_noise.repeat_stacks`): a call whose answers differ between
    repeats resamples them too (:mod:`.repeat_bootstrap`)."""
    by_set: dict[str, dict[str, Any]] = {}
    with single_threaded_blas(), ThreadPoolExecutor(max_workers=2) as pool:
        jobs: list[tuple[Any, list[tuple[list[str], int]]]] = []
        calls: list[tuple[dict[str, Any], Any]] = []
        questions: list[np.ndarray] = []
        for _s, _g, rows in blocks:
            labels, pairs, groups = _block_pairs(rows, matched, metrics)
            jobs.append((labels, [(names, len(calls) + k) for k, names in enumerate(groups)]))
            calls += [({m: pairs[m][:3] for m in names}, pairs[names[0]][3]) for names in groups]
            questions += [np.flatnonzero(rows)[pairs[names[0]][4]] for names in groups]
        futures = paired_bootstrap_batch(calls, phase_labels=matched.phases, submit=pool.submit, **boot)
        if stacks is not None:
            from ledgerscope.analysis.stats.repeat_noise import over_repeats

            futures = over_repeats(futures, calls, questions, stacks, matched.phases, boot)
        tables = [_phase_tables(rows, matched, metrics) for _s, _g, rows in blocks]
        for (s, g, rows), (labels, slots), out in zip(blocks, jobs, tables, strict=True):
            for names, call in slots:
                res = futures[call].result()
                for m in names:
                    out[m]["difference"] = res[m]
            block = {
                "n_questions": int(rows.sum()),
                "n_clusters": len(set(labels.tolist())),
                "n_clusters_by_rule": {rule: len(set(lab[rows].tolist())) for rule, lab in by_rule.items()},
                "metrics": out,
            }
            if g is None:
                by_set[s] = block
                if segments:
                    block["segments"] = {}
            else:
                by_set[s]["segments"][g] = block
    return by_set


@contextlib.contextmanager
def _no_gc_pauses() -> Iterator[None]:
    """No cyclic garbage collection during a comparison (its many small objects live on anyway);
    the caller's setting comes back."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _answer_validity(
    con: DuckDBPyConnection,
    baseline_con: DuckDBPyConnection | None,
    candidate: str,
    baseline: str,
    threshold: float | None,
) -> dict[str, Any]:
    """Both arms' oracle meter, each from the ledger that holds it."""
    from ledgerscope.analysis.validity import DEFAULT_MIN_ORACLE_CORRECT, meter, oracle_rows

    rows = oracle_rows(con, [candidate] if baseline_con is not None else [candidate, baseline])
    if baseline_con is not None:
        rows += oracle_rows(baseline_con, [baseline])
    return meter(rows, DEFAULT_MIN_ORACLE_CORRECT if threshold is None else threshold)


@_no_gc_pauses()
def compare_arms(
    con: DuckDBPyConnection,
    candidate: str,
    baseline: str,
    baseline_con: DuckDBPyConnection | None = None,
    metrics: Sequence[str] = DEFAULT_METRICS,
    seed: int = DEFAULT_SEED,
    n_resamples: int = DEFAULT_N_RESAMPLES,
    *,
    confidence: float = 0.95,
    statistics: Sequence[str] = DEFAULT_STATISTICS,
    segments: bool = True,
    clusters: str = "first-document",
    min_oracle_correct: float | None = None,
) -> dict[str, Any]:
    """Candidate minus baseline from one ledger (or the baseline from a second connection).

    Matched (qid, phase label) records over the phase labels both arms share;
    unmatched records, phases and questions are counted under ``matching``.
    ``clusters`` names the bootstrap's resampling unit (:func:`_cluster_labels`). Results
    are split by stress set, never pooled: ``stress_sets[s]`` holds, per
    metric, both arms' :func:`phase_table` and the paired bootstrap
    (``difference``), and the same per segment. The dict is JSON-serialisable.
    ``answer_validity`` is both arms' oracle meter (:mod:`ledgerscope.analysis.validity`, threshold
    ``min_oracle_correct``, default 0.8): what the answer-side figures are worth. How the
    bootstrap draws: the module docstring.
    """
    cand, base = _load_both(con, candidate, baseline, baseline_con, metrics)
    if clusters not in CLUSTER_RULES:
        raise ValueError(f"unknown cluster rule {clusters!r}; known: {', '.join(CLUSTER_RULES)}")
    matched = match_arms(cand, base, metrics)
    by_rule, cluster_info = _cluster_labels(con, candidate, baseline, baseline_con, matched, clusters)
    boot = {
        "n_resamples": n_resamples,
        "seed": seed,
        "confidence": confidence,
        "statistics": tuple(statistics),
    }
    from ledgerscope.analysis.stats.repeat_noise import noise_of, repeat_stacks

    stacks = repeat_stacks(con, baseline_con, cand, base, matched, metrics, match_arms)  # None: no repeats
    by_set = _bootstrap_blocks(_blocks(matched, segments), matched, metrics, boot, by_rule, segments, stacks)
    return annotate_power(
        {
            "format": FORMAT,
            "candidate": {"arm": candidate, "counts": cand.counts},
            "baseline": {"arm": baseline, "counts": base.counts},
            "settings": _settings(n_resamples, seed, confidence, statistics, clusters),
            "clusters": cluster_info,
            "matching": matched.report,
            "metrics": {m: METRICS[m].describe() for m in metrics},
            "stress_sets": by_set,
            "answer_validity": _answer_validity(con, baseline_con, candidate, baseline, min_oracle_correct),
            "note": WORST_PHASE_NOTE + " Stress sets are reported apart and never pooled.",
            **noise_of(con, baseline_con, candidate, baseline),  # {"noise": ...} with --repeats, else {}
        }
    )


def _load_both(
    con: DuckDBPyConnection,
    candidate: str,
    baseline: str,
    baseline_con: DuckDBPyConnection | None,
    metrics: Sequence[str],
) -> tuple[ArmRecords, ArmRecords]:
    """Both arms' records, the baseline's from ``baseline_con`` when given; the metrics checked first."""
    unknown = [m for m in metrics if m not in METRICS]
    if unknown:
        raise ValueError(f"unknown metric(s) {', '.join(unknown)}; known: {', '.join(METRICS)}")
    if baseline_con is None:
        cand, base = load_arms(con, [candidate, baseline])
        return cand, base
    return load_arm(con, candidate), load_arm(baseline_con, baseline)


def _cluster_labels(
    con: DuckDBPyConnection,
    candidate: str,
    baseline: str,
    baseline_con: DuckDBPyConnection | None,
    matched: Matched,
    clusters: str,
) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Both cluster labellings of the matched questions (by rule name) and their report; the rule
    ``clusters`` names becomes ``matched.cluster``, the bootstrap's resampling unit.

    By default (``clusters="first-document"``) a cluster is each question's first document
    (``doc_ids[1]``; a question with no document is its own cluster): the unit the seed names, and
    stable when a corpus grows. ``clusters="components"`` resamples connected components of the
    question-document graph instead (questions sharing any document stay together: the
    conservative choice when questions span documents). Both counts are reported, with a warning
    when they disagree badly (the smaller at most half the larger)."""
    first_document = matched.cluster
    components = _component_labels(con, candidate, baseline, baseline_con, matched)
    cluster_info = cluster_report(first_document, components, clusters)
    if clusters == "components":
        matched.cluster = components
    return {"first_document": first_document, "components": components}, cluster_info


def _settings(
    n_resamples: int, seed: int, confidence: float, statistics: Sequence[str], clusters: str
) -> dict[str, Any]:
    """The comparison's ``settings``: what the bootstrap was run with."""
    return {
        "n_resamples": int(n_resamples),
        "seed": int(seed),
        "confidence": float(confidence),
        "statistics": list(statistics),
        "method": "percentile",
        "resampling_unit": RESAMPLING_UNITS[clusters],
    }
