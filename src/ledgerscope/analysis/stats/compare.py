"""Candidate minus baseline from a ledger: load both arms' records, match them, bootstrap.

The statistics themselves are the pure functions of :mod:`ledgerscope.analysis.stats.metrics`.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from ledgerscope.analysis.stats import DEFAULT_N_RESAMPLES, DEFAULT_SEED
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
    record_metrics,
)
from ledgerscope.analysis.stats.power import annotate as annotate_power
from ledgerscope.common.blas import single_threaded_blas
from ledgerscope.common.errors import InputError, Problem


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


#: the columns read per record: name, SQL, stand-in for NULL (fetched without NULLs, so never as a
#: masked array, each with its NULL flag); the token counts as floats, NULL as NaN
_ARM_COLUMNS = [
    ("qid", "qid", "''"),
    ("phase", "phase", "''"),
    ("segment", "segment", "''"),
    ("stress_set", "stress_set", "''"),
    ("answerable", "answerable", "false"),
    ("support_only", "support_only", "false"),
    ("first_doc", "doc_ids[1]", "''"),
    ("support_packed", "support_packed", "false"),
    ("answer_verdict", "answer_verdict", "''"),
    ("citation_verdict", "citation_verdict", "''"),
]
_ARMS_SQL = (
    "SELECT arm, "
    + ", ".join(
        f"coalesce({sql}, {null}) AS c{i}, {sql} IS NULL AS n{i}"
        for i, (_name, sql, null) in enumerate(_ARM_COLUMNS)
    )
    + "".join(
        f", coalesce(CAST({c} AS DOUBLE), 'NaN'::DOUBLE) AS {c}" for c in ("prompt_tokens", "evidence_tokens")
    )
    + " FROM records WHERE arm IN ({}) ORDER BY records.arm, records.qid, records.phase"
)


def _columns(fetched: dict) -> dict[str, np.ndarray]:
    """The fetched columns by name, NULLs back as None (tokens: NaN)."""
    cols = {
        "arm": fetched["arm"],
        "prompt_tokens": fetched["prompt_tokens"],
        "evidence_tokens": fetched["evidence_tokens"],
    }
    for i, (name, _sql, _null) in enumerate(_ARM_COLUMNS):
        values, null = fetched[f"c{i}"], fetched[f"n{i}"]
        if null.any():
            values = values.astype(object)
            values[null] = None
        cols[name] = values
    return cols


def load_arm(con, arm: str, *, source: str = "records") -> ArmRecords:
    """Pull one arm's records from a connection's ``records`` view and score every metric."""
    return load_arms(con, [arm], source=source)[0]


def load_arms(con, arms: Sequence[str], *, source: str = "records") -> list[ArmRecords]:
    """:func:`load_arm` for each arm, in order, from one query."""
    cols = _columns(con.execute(_ARMS_SQL.format(", ".join("?" * len(arms))), list(arms)).fetchnumpy())
    masks = [cols["arm"] == arm for arm in arms]
    return [
        _arm_records(con, arm, {k: v[mask] for k, v in cols.items()}, source)
        for arm, mask in zip(arms, masks, strict=True)
    ]


def _arm_records(con, arm: str, cols: dict, source: str) -> ArmRecords:
    n = len(cols["qid"])
    if not n:
        arms = [r[0] for r in con.execute("SELECT DISTINCT arm FROM records ORDER BY arm").fetchall()]
        raise InputError(
            Problem(
                source,
                None,
                "arm",
                f"no records for arm {arm!r}; arms present: {', '.join(arms) or 'none'}",
            )
        )
    qid = np.asarray(cols["qid"], dtype=object)
    phase = np.array([str(p) for p in cols["phase"].tolist()], dtype=object)
    keys = list(zip(qid.tolist(), phase.tolist(), strict=True))
    if len(set(keys)) != len(keys):
        dup = next(k for k in keys if keys.count(k) > 1)
        raise InputError(
            Problem(
                source,
                None,
                "records",
                f"arm {arm!r} has more than one record for question {dup[0]!r}, phase {dup[1]!r}",
            )
        )
    cluster = np.array(
        [
            d if d is not None else f"qid:{q}"
            for q, d in zip(qid.tolist(), cols["first_doc"].tolist(), strict=True)
        ],
        dtype=object,
    )
    values = record_metrics(
        **{
            k: cols[k]
            for k in (
                "answerable",
                "support_only",
                "support_packed",
                "answer_verdict",
                "citation_verdict",
                "prompt_tokens",
                "evidence_tokens",
            )
        }
    )
    verdicts = cols["answer_verdict"].tolist()
    counts = {
        "records": n,
        "questions": len(set(qid.tolist())),
        "phases": len(set(phase.tolist())),
        "infrastructure_failure": verdicts.count("infrastructure-failure"),
        "not_judged": verdicts.count("not-judged"),
    }
    return ArmRecords(
        arm,
        qid,
        phase,
        np.asarray(cols["segment"], dtype=object),
        np.asarray(cols["stress_set"], dtype=object),
        cluster,
        values,
        counts,
    )


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


def _first_per_question(recs: ArmRecords) -> dict[str, tuple]:
    """Each question's (segment, stress set, cluster) as its first record has them."""
    first: dict[str, tuple] = {}
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


def _block_pairs(rows: np.ndarray, matched: Matched, metrics: Sequence[str]):
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


def _phase_tables(rows: np.ndarray, matched: Matched, metrics: Sequence[str]) -> dict:
    out = {}
    for m in metrics:
        hib = METRICS[m].higher_is_better
        out[m] = {
            "candidate": phase_table(matched.candidate[m][rows], matched.phases, higher_is_better=hib),
            "baseline": phase_table(matched.baseline[m][rows], matched.phases, higher_is_better=hib),
            "difference": None,
        }
    return out


def _component_labels(con, candidate: str, baseline: str, baseline_con, matched: Matched) -> np.ndarray:
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
    blocks = []
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
    blocks,
    matched: Matched,
    metrics: Sequence[str],
    boot: dict,
    by_rule: dict[str, np.ndarray],
    segments: bool,
    stacks: dict | None = None,
) -> dict[str, dict]:
    """Per stress set (and segment) both arms' phase tables and the paired bootstrap of each metric.

    The bootstraps run on two threads (numpy releases the GIL) while this one builds the tables;
    metrics that apply to the same questions share one draw. ``stacks`` (``--repeats``: per metric
    the arms' repeats, :func:`.repeat_noise.repeat_stacks`): a call whose answers differ between
    repeats resamples them too (:mod:`.repeat_bootstrap`)."""
    by_set: dict[str, dict] = {}
    with single_threaded_blas(), ThreadPoolExecutor(max_workers=2) as pool:
        jobs, calls, questions = [], [], []
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
def _no_gc_pauses():
    """No cyclic garbage collection during a comparison (its many small objects live on anyway);
    the caller's setting comes back."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _answer_validity(con, baseline_con, candidate: str, baseline: str, threshold: float | None) -> dict:
    """Both arms' oracle meter, each from the ledger that holds it."""
    from ledgerscope.analysis.validity import DEFAULT_MIN_ORACLE_CORRECT, meter, oracle_rows

    rows = oracle_rows(con, [candidate] if baseline_con is not None else [candidate, baseline])
    if baseline_con is not None:
        rows += oracle_rows(baseline_con, [baseline])
    return meter(rows, DEFAULT_MIN_ORACLE_CORRECT if threshold is None else threshold)


@_no_gc_pauses()
def compare_arms(
    con,
    candidate: str,
    baseline: str,
    baseline_con=None,
    metrics: Sequence[str] = DEFAULT_METRICS,
    seed: int = DEFAULT_SEED,
    n_resamples: int = DEFAULT_N_RESAMPLES,
    *,
    confidence: float = 0.95,
    statistics: Sequence[str] = DEFAULT_STATISTICS,
    segments: bool = True,
    clusters: str = "first-document",
    min_oracle_correct: float | None = None,
) -> dict:
    """Candidate minus baseline from one ledger (or the baseline from a second connection).

    Matched (qid, phase label) records over the phase labels both arms share;
    unmatched records, phases and questions are counted under ``matching``.
    Clusters for the bootstrap are, by default (``clusters="first-document"``),
    each question's first document (``doc_ids[1]``; a question with no
    document is its own cluster): the unit the seed names, and stable when a
    corpus grows. ``clusters="components"`` resamples connected components of
    the question-document graph instead (questions sharing any document stay
    together: the conservative choice when questions span documents). Both
    counts are reported under ``clusters``, with a warning when they disagree
    badly (the smaller at most half the larger). Results
    are split by stress set, never pooled: ``stress_sets[s]`` holds, per
    metric, both arms' :func:`phase_table` and the paired bootstrap
    (``difference``), and the same per segment. The dict is JSON-serialisable.
    ``answer_validity`` is both arms' oracle meter (:mod:`ledgerscope.analysis.validity`, threshold
    ``min_oracle_correct``, default 0.8): what the answer-side figures are worth.

    Each metric's bootstrap resamples only the questions where that metric
    applies in at least one arm (its denominator); metrics that apply to the
    same questions share one draw, and each result equals a
    :func:`paired_bootstrap` call with the same seed. Per-arm phase tables are
    computed on the matched cells, so they agree with the point estimates. The
    bootstraps run on two threads (:func:`paired_bootstrap_batch`); no number
    depends on their schedule.
    """
    unknown = [m for m in metrics if m not in METRICS]
    if unknown:
        raise ValueError(f"unknown metric(s) {', '.join(unknown)}; known: {', '.join(METRICS)}")
    if baseline_con is None:
        cand, base = load_arms(con, [candidate, baseline])
    else:
        cand, base = load_arm(con, candidate), load_arm(baseline_con, baseline)
    if clusters not in CLUSTER_RULES:
        raise ValueError(f"unknown cluster rule {clusters!r}; known: {', '.join(CLUSTER_RULES)}")
    matched = match_arms(cand, base, metrics)
    first_document = matched.cluster
    components = _component_labels(con, candidate, baseline, baseline_con, matched)
    cluster_info = cluster_report(first_document, components, clusters)
    if clusters == "components":
        matched.cluster = components
    boot = {
        "n_resamples": n_resamples,
        "seed": seed,
        "confidence": confidence,
        "statistics": tuple(statistics),
    }
    by_rule = {"first_document": first_document, "components": components}
    from ledgerscope.analysis.stats.repeat_noise import noise_of, repeat_stacks

    stacks = repeat_stacks(con, baseline_con, cand, base, matched, metrics, match_arms)  # None: no repeats
    by_set = _bootstrap_blocks(_blocks(matched, segments), matched, metrics, boot, by_rule, segments, stacks)
    return annotate_power(
        {
            "format": FORMAT,
            "candidate": {"arm": candidate, "counts": cand.counts},
            "baseline": {"arm": baseline, "counts": base.counts},
            "settings": {
                "n_resamples": int(n_resamples),
                "seed": int(seed),
                "confidence": float(confidence),
                "statistics": list(statistics),
                "method": "percentile",
                "resampling_unit": RESAMPLING_UNITS[clusters],
            },
            "clusters": cluster_info,
            "matching": matched.report,
            "metrics": {m: METRICS[m].describe() for m in metrics},
            "stress_sets": by_set,
            "answer_validity": _answer_validity(con, baseline_con, candidate, baseline, min_oracle_correct),
            "note": WORST_PHASE_NOTE + " Stress sets are reported apart and never pooled.",
            **noise_of(con, baseline_con, candidate, baseline),  # {"noise": ...} with --repeats, else {}
        }
    )
