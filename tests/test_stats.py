"""Statistics: per-record metrics, phase tables, segments, the paired bootstrap, compare_arms."""

from __future__ import annotations

import json
import math

import numpy as np
import pyarrow as pa
import pytest
from scipy import stats as sps

from ledgerscope.analysis.stats.bootstrap import paired_bootstrap, paired_bootstrap_many
from ledgerscope.analysis.stats.compare import compare_arms
from ledgerscope.analysis.stats.metrics import (
    METRICS,
    WORST_PHASE_NOTE,
    phase_table,
    record_metrics,
    segment_breakdown,
)
from ledgerscope.common.errors import InputError
from ledgerscope.ledger import schema

nan = np.nan

# ---------------------------------------------------------------------------
# helpers: tiny ledgers built in the test


def make_record(arm: str, phase: str, qid: str, **kw) -> dict:
    """A RECORDS row with the columns the statistics read; the rest stay null."""
    row = {name: None for name in schema.RECORDS.names}
    row.update(
        arm=arm,
        phase=phase,
        qid=qid,
        segment="rule-exception",
        answerable=True,
        support_only=False,
        stress_set="representative",
        doc_ids=["doc-a"],
        support_packed=True,
        answer_verdict="correct",
        citation_verdict="supported",
        prompt_tokens=500,
        evidence_tokens=300,
    )
    row.update(kw)
    return row


def records_con(rows: list[dict]):
    """A DuckDB connection with a ``records`` view over the rows (as ledger.read.connect gives)."""
    import duckdb

    con = duckdb.connect()
    con.register("_rows", pa.Table.from_pylist(rows, schema=schema.RECORDS))
    con.execute("CREATE VIEW records AS SELECT * FROM _rows")
    return con


def synthetic_rows(
    arm: str,
    n_q: int,
    phases: list[str],
    p_support: float,
    seed: int,
    stress_set=lambda i: "representative",
    segment=lambda i: "rule-exception",
    docs_per: int = 4,
) -> list[dict]:
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n_q):
        for p in phases:
            sup = bool(rng.random() < p_support)
            wrong = ["critical-condition-error", "abstained", "wrong"]
            verdict = "correct" if sup else str(rng.choice(wrong))
            rows.append(
                make_record(
                    arm,
                    p,
                    f"q{i:03d}",
                    support_packed=sup,
                    answer_verdict=verdict,
                    citation_verdict="supported" if verdict == "correct" else "unsupported",
                    doc_ids=[f"doc{i // docs_per}", "shared"],
                    stress_set=stress_set(i),
                    segment=segment(i),
                    prompt_tokens=int(400 + rng.integers(0, 200)),
                )
            )
    return rows


# ---------------------------------------------------------------------------
# per-record metrics and their denominators


def test_record_metrics_denominators():
    recs = [
        # answerable, judged, correct
        dict(
            answerable=True,
            support_only=False,
            support_packed=True,
            answer_verdict="correct",
            citation_verdict="supported",
        ),
        # answerable, judged, critical, support lost
        dict(
            answerable=True,
            support_only=False,
            support_packed=False,
            answer_verdict="critical-condition-error",
            citation_verdict="unsupported",
        ),
        # answerable abstention: in answer denominators, not a citation record
        dict(
            answerable=True,
            support_only=False,
            support_packed=False,
            answer_verdict="abstained",
            citation_verdict="not-applicable",
        ),
        # support-only: support counts, answers do not
        dict(
            answerable=True,
            support_only=True,
            support_packed=True,
            answer_verdict="not-judged",
            citation_verdict=None,
        ),
        # infrastructure failure: out of every answer denominator
        dict(
            answerable=True,
            support_only=False,
            support_packed=True,
            answer_verdict="infrastructure-failure",
            citation_verdict="not-applicable",
        ),
        # unanswerable controls
        dict(
            answerable=False,
            support_only=False,
            support_packed=None,
            answer_verdict="false-assertion",
            citation_verdict="unsupported",
        ),
        dict(
            answerable=False,
            support_only=False,
            support_packed=None,
            answer_verdict="abstained",
            citation_verdict="not-applicable",
        ),
    ]
    cols = {k: [r[k] for r in recs] for k in recs[0]}
    m = record_metrics(**cols, prompt_tokens=[10, None, 30, 40, 50, 60, 70])

    def same(a, b):
        np.testing.assert_array_equal(np.asarray(a, dtype=float), np.asarray(b, dtype=float))

    same(m["support"], [1, 0, 0, 1, 1, nan, nan])
    same(m["answer_correct"], [1, 0, 0, nan, nan, nan, nan])
    same(m["critical"], [0, 1, 0, nan, nan, nan, nan])
    same(m["abstained"], [0, 0, 1, nan, nan, nan, nan])
    same(m["false_assertion"], [nan, nan, nan, nan, nan, 1, 0])
    same(m["citation_supported"], [1, 0, nan, nan, nan, nan, nan])
    same(m["prompt_tokens"], [10, nan, 30, 40, 50, 60, 70])
    same(m["evidence_tokens"], [nan] * 7)
    # every metric documents its denominator and direction
    assert all(METRICS[k].denominator and METRICS[k].definition for k in METRICS)
    assert METRICS["critical"].higher_is_better is False and METRICS["support"].higher_is_better
    # float arrays with NaN outside the denominator (not None in an object array)
    assert all(v.dtype == np.float64 for v in m.values())


def test_metric_descriptions_name_definition_denominator_direction_and_kind():
    assert METRICS["critical"].describe() == {
        "definition": "answer_verdict is critical-condition-error",
        "denominator": METRICS["critical"].denominator,
        "direction": "lower-is-better",
        "binary": True,
    }
    assert METRICS["support"].describe()["direction"] == "higher-is-better"
    assert METRICS["prompt_tokens"].describe()["binary"] is False


def test_record_metrics_support_needs_an_answerable_record_with_a_flag():
    m = record_metrics(
        answerable=[True, True, False],
        support_only=[False] * 3,
        support_packed=[None, True, True],
        answer_verdict=["correct"] * 3,
        citation_verdict=["supported"] * 3,
    )
    np.testing.assert_array_equal(m["support"], [nan, 1.0, nan])


def test_record_metrics_citations_not_recorded_give_no_figure():
    """An answer whose trace recorded no citations is not a citation record: no figure, never 0."""
    m = record_metrics(
        answerable=[True, True, True],
        support_only=[False] * 3,
        support_packed=[True] * 3,
        answer_verdict=["correct", "wrong", "correct"],
        citation_verdict=["not-recorded", "not-recorded", "supported"],
    )
    np.testing.assert_array_equal(m["citation_supported"], [nan, nan, 1.0])


def test_record_metrics_accept_unhashable_values():
    """A column value that cannot be hashed is tested one by one, with the same outcome."""
    odd = {"verdict": "supported"}  # unhashable, equal to no verdict
    m = record_metrics(
        answerable=[True] * 3,
        support_only=[False] * 3,
        support_packed=[True, False, True],
        answer_verdict=["correct", "wrong", "correct"],
        citation_verdict=["supported", odd, odd],
    )
    np.testing.assert_array_equal(m["citation_supported"], [1.0, 0.0, 0.0])
    np.testing.assert_array_equal(m["answer_correct"], [1.0, 0.0, 1.0])


# ---------------------------------------------------------------------------
# phase tables


def test_phase_table_per_phase_average_and_worst_both_ways():
    # 4 questions x 3 phases
    m = np.array(
        [
            [1, 1, 0],
            [1, 0, 1],
            [1, 1, 1],
            [0, 1, nan],  # phase "2" not applicable for q3
        ],
        dtype=float,
    )
    t = phase_table(m, ["0", "1", "2"])
    assert [p["mean"] for p in t["per_phase"]] == [0.75, 0.75, pytest.approx(2 / 3)]
    assert [p["n"] for p in t["per_phase"]] == [4, 4, 3]
    assert [p["sum"] for p in t["per_phase"]] == [3, 3, 2]
    assert t["phase_average"]["mean_of_phases"] == pytest.approx((0.75 + 0.75 + 2 / 3) / 3)
    assert t["phase_average"]["pooled"] == pytest.approx(8 / 11)
    assert t["phase_average"]["n_records"] == 11
    # (a) worst aggregate: phase 2; (b) per question worst first: only q2 survives every phase
    assert t["worst_phase"]["aggregate"] == {"value": pytest.approx(2 / 3), "phase": "2"}
    assert t["worst_phase"]["per_question"] == {"value": 0.25, "n_questions": 4}
    assert t["worst_phase"]["per_question"]["value"] <= t["worst_phase"]["aggregate"]["value"]
    assert t["best_phase"]["aggregate"]["value"] == 0.75 and t["best_phase"]["aggregate"]["phase"] == "0"
    assert t["best_phase"]["per_question"]["value"] == 1.0
    assert t["reversals"] == 3 and t["questions_with_any"] == 4 and t["questions_with_all"] == 1
    assert t["note"] == WORST_PHASE_NOTE and "not estimated production frequencies" in t["note"]
    assert "production frequency" in phase_table.__doc__
    json.dumps(t, allow_nan=False)


def test_phase_table_lower_is_better_worst_is_max():
    crit = np.array([[0, 1], [0, 0], [1, 0], [0, 0]], dtype=float)
    t = phase_table(crit, ["a", "b"], higher_is_better=False)
    assert t["direction"] == "lower-is-better"
    assert t["worst_phase"]["aggregate"] == {"value": 0.25, "phase": "a"}  # tie: first phase
    assert t["worst_phase"]["per_question"]["value"] == 0.5  # two questions err in some phase
    assert t["best_phase"]["per_question"]["value"] == 0.0
    assert t["questions_with_any"] == 2


def test_phase_table_whole_for_a_small_matrix():
    t = phase_table(np.array([[0.0, 1.0, 1.0], [0.0, 0.0, 1.0]]), ["a", "b", "c"])
    assert t == {
        "direction": "higher-is-better",
        "n_questions": 2,
        "n_phases": 3,
        "per_phase": [
            {"phase": "a", "mean": 0.0, "sum": 0.0, "n": 2},
            {"phase": "b", "mean": 0.5, "sum": 1.0, "n": 2},
            {"phase": "c", "mean": 1.0, "sum": 2.0, "n": 2},
        ],
        "phase_average": {"mean_of_phases": 0.5, "pooled": 0.5, "n_records": 6},
        "worst_phase": {
            "aggregate": {"value": 0.0, "phase": "a"},
            "per_question": {"value": 0.0, "n_questions": 2},
        },
        "best_phase": {
            "aggregate": {"value": 1.0, "phase": "c"},
            "per_question": {"value": 1.0, "n_questions": 2},
        },
        "reversals": 2,
        "min_value": 0.0,
        "max_value": 1.0,
        "note": WORST_PHASE_NOTE,
        "questions_with_any": 2,
        "questions_with_all": 0,
    }


def test_phase_table_of_one_phase_names_it_worst_and_best():
    t = phase_table(np.array([[1.0], [0.0]]), ["only"])
    assert t["worst_phase"]["aggregate"] == t["best_phase"]["aggregate"] == {"value": 0.5, "phase": "only"}
    with pytest.raises(ValueError, match=r"matrix shape \(2, 1\) does not match 2 phase labels"):
        phase_table(np.array([[1.0], [0.0]]), ["a", "b"])


def test_phase_table_empty_and_continuous():
    t = phase_table(np.full((3, 2), nan), ["0", "1"])
    assert t["n_questions"] == 0 and t["per_phase"][0]["mean"] is None
    assert t["worst_phase"]["aggregate"] == {"value": None, "phase": None}
    json.dumps(t, allow_nan=False)
    tok = phase_table(np.array([[100.0, 300.0], [200.0, 200.0]]), ["0", "1"], higher_is_better=False)
    assert tok["max_value"] == 300 and tok["phase_average"]["pooled"] == 200
    assert "questions_with_any" not in tok
    with pytest.raises(ValueError):
        phase_table(np.zeros((2, 3)), ["0", "1"])


def test_segment_breakdown_keeps_stress_sets_apart():
    m = np.array([[1, 1], [0, 1], [1, 0], [0, 0], [1, 1]], dtype=float)
    seg = ["rule-exception", "rule-exception", "number-scope", "rule-exception", "number-scope"]
    sset = ["representative", "representative", "representative", "enriched", "enriched"]
    out = segment_breakdown(m, ["0", "1"], seg, sset)
    assert set(out) == {"representative", "enriched"}  # no pooled entry
    rep = out["representative"]
    assert rep["all"]["n_questions"] == 3
    assert rep["segments"]["rule-exception"]["n_questions"] == 2
    first = rep["segments"]["rule-exception"]["per_phase"][0]
    assert first == {"phase": "0", "mean": 0.5, "sum": 1.0, "n": 2}
    assert out["enriched"]["segments"]["rule-exception"]["phase_average"]["pooled"] == 0.0
    assert out["enriched"]["segments"]["number-scope"]["worst_phase"]["aggregate"]["value"] == 1.0


@pytest.mark.parametrize("higher_is_better", [True, False])
def test_segment_breakdown_tables_are_phase_tables_of_their_rows(higher_is_better):
    m = np.array([[1, 0], [0, 1], [1, 1], [0, 0], [1, 1]], dtype=float)
    seg = ["rule-exception", "number-scope", "rule-exception", "rule-exception", "number-scope"]
    sset = ["representative", "representative", "representative", "enriched", "enriched"]
    out = segment_breakdown(m, ["0", "1"], seg, sset, higher_is_better=higher_is_better)
    for s in ("representative", "enriched"):
        rows = np.array(sset) == s
        assert out[s]["all"] == phase_table(m[rows], ["0", "1"], higher_is_better=higher_is_better)
        for g in set(np.array(seg)[rows]):
            sub = rows & (np.array(seg) == g)
            assert out[s]["segments"][g] == phase_table(m[sub], ["0", "1"], higher_is_better=higher_is_better)
    assert (
        out["representative"]["all"]["direction"]
        != segment_breakdown(m, ["0", "1"], seg, sset, higher_is_better=not higher_is_better)[
            "representative"
        ]["all"]["direction"]
    )
    if higher_is_better:  # the default
        assert segment_breakdown(m, ["0", "1"], seg, sset) == out


# ---------------------------------------------------------------------------
# paired bootstrap


def _binary(rng, q, p, rate):
    return (rng.random((q, p)) < rate).astype(float)


def _scipy_ci(cand, base, n_resamples, seed):
    res = sps.bootstrap(
        (cand.mean(axis=1), base.mean(axis=1)),
        statistic=lambda a, b, axis: a.mean(axis) - b.mean(axis),
        paired=True,
        vectorized=True,
        method="percentile",
        n_resamples=n_resamples,
        rng=np.random.Generator(np.random.PCG64(seed)),
    )
    return res.confidence_interval.low, res.confidence_interval.high


def test_unclustered_mean_agrees_with_scipy_paired_bootstrap():
    rng = np.random.default_rng(11)
    cand, base = _binary(rng, 400, 4, 0.72), _binary(rng, 400, 4, 0.55)
    ours = paired_bootstrap(cand, base, None, n_resamples=20_000, seed=3)["statistics"]["mean"]
    low, high = _scipy_ci(cand, base, 20_000, 97)  # a different random stream
    assert ours["low"] > 0.05  # a clear effect
    assert abs(ours["low"] - low) < 0.01 and abs(ours["high"] - high) < 0.01
    assert ours["estimate"] == pytest.approx(cand.mean() - base.mean())


def test_same_seed_reproduces_scipy_interval():
    """The draw is scipy's own stream (Generator(PCG64(seed)).integers), so the interval matches."""
    rng = np.random.default_rng(12)
    cand, base = _binary(rng, 150, 3, 0.6), _binary(rng, 150, 3, 0.5)
    ours = paired_bootstrap(cand, base, None, n_resamples=5_000, seed=42, chunk_elements=10_000)
    low, high = _scipy_ci(cand, base, 5_000, 42)
    assert ours["statistics"]["mean"]["low"] == pytest.approx(low, abs=1e-12)
    assert ours["statistics"]["mean"]["high"] == pytest.approx(high, abs=1e-12)


def _direct(x: np.ndarray, rows_per_rep: list[np.ndarray], higher_is_better=True) -> dict:
    """The statistics computed directly on resampled rows, no matrix-product shortcut."""
    out = {"mean": [], "pooled_mean": [], "worst_aggregate": [], "worst_per_question": []}
    for rows in rows_per_rep:
        r = x[rows]
        valid = ~np.isnan(r)
        sums = np.where(valid, r, 0.0).sum(axis=0)
        counts = valid.sum(axis=0).astype(float)
        with np.errstate(invalid="ignore", divide="ignore"):
            per_phase = sums / counts
        out["mean"].append(np.nanmean(per_phase))
        out["pooled_mean"].append(sums.sum() / counts.sum())
        out["worst_aggregate"].append(np.nanmin(per_phase) if higher_is_better else np.nanmax(per_phase))
        defined = valid.any(axis=1)
        per_q = (np.nanmin if higher_is_better else np.nanmax)(r[defined], axis=1)
        out["worst_per_question"].append(per_q.sum() / defined.sum())
    return {k: np.array(v) for k, v in out.items()}


STATS4 = ("mean", "pooled_mean", "worst_aggregate", "worst_per_question")


def _with_nans(rng, x, share=0.1):
    x = x.copy()
    x[rng.random(x.shape) < share] = nan
    return x


def test_injected_indices_match_direct_computation_exactly_unclustered():
    rng = np.random.default_rng(5)
    cand = _with_nans(rng, _binary(rng, 60, 5, 0.7))
    base = _with_nans(rng, _binary(rng, 60, 5, 0.6))
    idx = rng.integers(0, 60, size=(300, 60))
    res = paired_bootstrap(
        cand, base, None, statistics=STATS4, indices=idx, return_replicates=True, chunk_elements=60 * 7
    )  # several chunks
    dc, db = _direct(cand, list(idx)), _direct(base, list(idx))
    for s in STATS4:
        rep = res["replicates"][s]
        np.testing.assert_array_equal(rep["candidate"], dc[s])  # identical, not merely close
        np.testing.assert_array_equal(rep["baseline"], db[s])
        np.testing.assert_array_equal(rep["difference"], dc[s] - db[s])
        alpha = (1 - 0.95) / 2  # as scipy computes it
        low, high = np.quantile(dc[s] - db[s], [alpha, 1 - alpha])
        assert res["statistics"][s]["low"] == low and res["statistics"][s]["high"] == high
    assert res["n_resamples"] == 300 and res["injected_indices"] is True


def test_injected_indices_match_direct_computation_clustered():
    rng = np.random.default_rng(6)
    n_q = 50
    clusters = np.array([f"doc{int(i)}" for i in rng.integers(0, 12, n_q)], dtype=object)
    keys = sorted(set(clusters.tolist()))
    members = [np.flatnonzero(clusters == k) for k in keys]
    cand = _with_nans(rng, _binary(rng, n_q, 4, 0.7))
    base = _with_nans(rng, _binary(rng, n_q, 4, 0.6))
    idx = rng.integers(0, len(keys), size=(200, len(keys)))
    res = paired_bootstrap(
        cand, base, clusters, statistics=STATS4, indices=idx, return_replicates=True, higher_is_better=False
    )
    rows = [np.concatenate([members[u] for u in draw]) for draw in idx]
    dc, db = _direct(cand, rows, False), _direct(base, rows, False)
    for s in STATS4:
        np.testing.assert_array_equal(res["replicates"][s]["candidate"], dc[s])
        np.testing.assert_array_equal(res["replicates"][s]["baseline"], db[s])
    assert res["resampling_unit"] == "cluster" and res["n_units"] == len(keys)

    # continuous values: equal up to summation order
    cont_c, cont_b = rng.normal(500, 50, (n_q, 4)), rng.normal(480, 50, (n_q, 4))
    res = paired_bootstrap(cont_c, cont_b, clusters, statistics=STATS4, indices=idx, return_replicates=True)
    dc = _direct(cont_c, rows)
    for s in STATS4:
        np.testing.assert_allclose(res["replicates"][s]["candidate"], dc[s], rtol=1e-12)


def test_seeded_reproducible_and_chunking_invariant():
    rng = np.random.default_rng(7)
    cand, base = _binary(rng, 80, 6, 0.6), _binary(rng, 80, 6, 0.5)
    cl = rng.integers(0, 20, 80)
    a = paired_bootstrap(cand, base, cl, n_resamples=2_000, seed=9)
    b = paired_bootstrap(cand, base, cl, n_resamples=2_000, seed=9, chunk_elements=20 * 3)
    c = paired_bootstrap(cand, base, cl, n_resamples=2_000, seed=10)
    assert a == b
    assert a["statistics"] != c["statistics"]
    json.dumps(a, allow_nan=False)


def test_clustering_widens_the_interval_when_questions_in_a_document_correlate():
    rng = np.random.default_rng(8)
    n_docs, per_doc, n_p = 40, 10, 4
    # a document-level effect shared by all its questions: the candidate helps on some documents only
    doc_effect = rng.choice([0.0, 0.6], size=n_docs)
    clusters = np.repeat(np.arange(n_docs), per_doc)
    p_cand = 0.3 + doc_effect[clusters]
    cand = (rng.random((n_docs * per_doc, n_p)) < p_cand[:, None]).astype(float)
    base = (rng.random((n_docs * per_doc, n_p)) < 0.3).astype(float)
    flat = paired_bootstrap(cand, base, None, n_resamples=4_000, seed=1)["statistics"]["mean"]
    clus = paired_bootstrap(cand, base, clusters, n_resamples=4_000, seed=1)["statistics"]["mean"]
    assert flat["estimate"] == clus["estimate"]
    width = lambda r: r["high"] - r["low"]  # noqa: E731
    assert width(clus) > 1.8 * width(flat)


def test_worst_phase_is_recomputed_in_each_replicate():
    rng = np.random.default_rng(9)
    # two phases with the same expected support: which one is worst changes from replicate to replicate
    cand = _binary(rng, 200, 2, 0.6)
    base = np.ones_like(cand)
    res = paired_bootstrap(
        cand,
        base,
        None,
        n_resamples=3_000,
        seed=2,
        phase_labels=["p0", "p1"],
        statistics=("worst_aggregate", "mean"),
        return_replicates=True,
    )
    w = res["statistics"]["worst_aggregate"]
    freq = w["candidate_phase_frequency"]
    assert set(freq) == {"p0", "p1"} and min(freq.values()) > 0.05
    assert sum(freq.values()) == pytest.approx(1.0)
    assert w["candidate_phase"] in ("p0", "p1")
    # the replicate minimum sits below the replicate value of the phase that was worst on the full data
    fixed = 0 if w["candidate_phase"] == "p0" else 1
    idx = np.random.Generator(np.random.PCG64(2)).integers(0, 200, size=(3_000, 200))
    fixed_phase = cand[idx, fixed].mean(axis=1)
    recomputed = res["replicates"]["worst_aggregate"]["candidate"]
    per_phase = [cand[idx, j].mean(axis=1) for j in (0, 1)]
    np.testing.assert_array_equal(recomputed, np.minimum(*per_phase))
    assert np.all(recomputed <= fixed_phase) and np.any(recomputed < fixed_phase)


def test_bootstrap_nan_cells_and_input_checks():
    cand = np.array([[1, nan], [0, 1], [nan, nan]], dtype=float)
    base = np.array([[1, 1], [nan, 0], [1, 0]], dtype=float)
    r = paired_bootstrap(cand, base, None, n_resamples=500, seed=0)
    st = r["statistics"]["mean"]
    assert st["candidate"] == pytest.approx((0.5 + 1.0) / 2)
    assert st["baseline"] == pytest.approx((1 + 1 / 3) / 2)
    assert st["n_valid_replicates"] <= 500
    json.dumps(r, allow_nan=False)
    with pytest.raises(ValueError):
        paired_bootstrap(np.zeros((3, 2)), np.zeros((3, 3)))
    with pytest.raises(ValueError):
        paired_bootstrap(np.zeros((3, 2)), np.zeros((3, 2)), statistics=("median",))
    with pytest.raises(ValueError):
        paired_bootstrap(np.zeros((3, 2)), np.zeros((3, 2)), indices=np.array([[0, 1, 5]]))


def test_many_equals_single_calls():
    rng = np.random.default_rng(10)
    a, b = _binary(rng, 50, 3, 0.5), _binary(rng, 50, 3, 0.4)
    c, d = _binary(rng, 50, 3, 0.1), _binary(rng, 50, 3, 0.2)
    many = paired_bootstrap_many({"s": (a, b, True), "k": (c, d, False)}, None, n_resamples=1_000, seed=4)
    assert many["s"] == paired_bootstrap(a, b, None, n_resamples=1_000, seed=4)
    assert many["k"] == paired_bootstrap(c, d, None, n_resamples=1_000, seed=4, higher_is_better=False)


# ---------------------------------------------------------------------------
# compare_arms over DuckDB


def test_compare_arms_matches_records_and_keeps_stress_sets_apart():
    phases = ["0", "1", "2", "3"]
    sset = lambda i: "enriched" if i >= 30 else "representative"  # noqa: E731
    seg = lambda i: "rule-exception" if i % 2 else "number-scope"  # noqa: E731
    cand = synthetic_rows("cand", 40, [*phases, "9"], 0.8, 1, sset, seg)  # phase 9: candidate only
    base = synthetic_rows("base", 42, phases, 0.6, 2, sset, seg)  # q040, q041: baseline only
    base = [r for r in base if not (r["qid"] == "q000" and r["phase"] == "3")]  # one unmatched cell
    con = records_con(cand + base)
    res = compare_arms(con, "cand", "base", n_resamples=1_000, seed=3)
    json.dumps(res, allow_nan=False)
    m = res["matching"]
    assert m["shared_phases"] == phases and m["candidate_only_phases"] == ["9"]
    assert m["matched_questions"] == 40 and m["baseline_only_questions"] == 2
    assert m["matched_records"] == 40 * 4 - 1
    assert m["candidate_unmatched_records"] == 40 + 1 and m["baseline_unmatched_records"] == 2 * 4
    assert set(res["stress_sets"]) == {"representative", "enriched"}
    rep = res["stress_sets"]["representative"]
    assert rep["n_questions"] == 30 and rep["n_clusters"] == 8  # four questions per document
    sup = rep["metrics"]["support"]
    assert sup["candidate"]["n_questions"] == 30
    assert sup["difference"]["resampling_unit"] == "cluster" and sup["difference"]["n_units"] == 8
    avg = {arm: sup[arm]["phase_average"]["mean_of_phases"] for arm in ("candidate", "baseline")}
    est = sup["difference"]["statistics"]["mean"]["estimate"]
    assert est == pytest.approx(avg["candidate"] - avg["baseline"])
    assert set(rep["segments"]) == {"rule-exception", "number-scope"}
    assert rep["segments"]["rule-exception"]["n_questions"] == 15
    crit = rep["segments"]["rule-exception"]["metrics"]["critical"]["candidate"]
    assert "questions_with_any" in crit and crit["direction"] == "lower-is-better"
    assert res["settings"]["seed"] == 3 and res["candidate"]["counts"]["phases"] == 5
    assert "production frequenc" in res["note"]


def test_compare_arms_equals_bootstrap_on_the_same_matrices():
    phases = ["0", "1", "2"]
    cand = synthetic_rows("A", 24, phases, 0.7, 4)
    base = synthetic_rows("B", 24, phases, 0.5, 5)
    res = compare_arms(
        records_con(cand),
        "A",
        "B",
        baseline_con=records_con(base),
        metrics=("support",),
        n_resamples=800,
        seed=6,
        statistics=("mean", "worst_per_question"),
    )
    got = res["stress_sets"]["representative"]["metrics"]["support"]["difference"]

    def mat(rows):
        out = np.full((24, 3), nan)
        for r in rows:
            out[int(r["qid"][1:]), int(r["phase"])] = float(r["support_packed"])
        return out

    clusters = np.array([f"doc{i // 4}" for i in range(24)], dtype=object)
    want = paired_bootstrap(
        mat(cand),
        mat(base),
        clusters,
        n_resamples=800,
        seed=6,
        statistics=("mean", "worst_per_question"),
        phase_labels=phases,
    )
    assert got["statistics"] == want["statistics"]


def test_compare_arms_reads_a_written_ledger(tmp_path):
    from ledgerscope.ledger.read import connect
    from ledgerscope.ledger.write import write_partition

    phases = [{"label": p, "offset": int(p)} for p in ("0", "1")]
    arms = {arm: {"config": {}, "phases": phases} for arm in ("cand", "base")}
    (tmp_path / "manifest.json").write_text(json.dumps({"format": schema.FORMAT, "arms": arms}))
    rows = synthetic_rows("cand", 12, ["0", "1"], 0.9, 1) + synthetic_rows("base", 12, ["0", "1"], 0.4, 2)
    for arm in ("cand", "base"):
        for p in ("0", "1"):
            part = [r for r in rows if r["arm"] == arm and r["phase"] == p]
            write_partition(tmp_path, arm, p, {"records": part}, {})
    res = compare_arms(connect(tmp_path), "cand", "base", metrics=("support", "critical"), n_resamples=500)
    diff = res["stress_sets"]["representative"]["metrics"]["support"]["difference"]["statistics"]["mean"]
    assert diff["estimate"] > 0 and diff["low"] <= diff["estimate"] <= diff["high"]


def test_compare_arms_errors():
    rows = [make_record("A", "0", "q1"), make_record("A", "0", "q1"), make_record("B", "0", "q1")]
    with pytest.raises(InputError, match="more than one record"):
        compare_arms(records_con(rows), "A", "B", n_resamples=100)
    with pytest.raises(InputError, match="arms present: A, B"):
        compare_arms(records_con(rows[1:]), "A", "Z", n_resamples=100)
    with pytest.raises(ValueError, match="unknown metric"):
        compare_arms(records_con(rows), "A", "B", metrics=("recall",))


def test_question_without_document_is_its_own_cluster():
    rows = [
        make_record(arm, "0", f"q{i}", doc_ids=[], support_packed=bool(i % 2))
        for arm in ("A", "B")
        for i in range(6)
    ]
    res = compare_arms(records_con(rows), "A", "B", metrics=("support",), n_resamples=200)
    assert res["stress_sets"]["representative"]["n_clusters"] == 6
    assert math.isclose(
        res["stress_sets"]["representative"]["metrics"]["support"]["difference"]["statistics"]["mean"][
            "estimate"
        ],
        0.0,
    )


def test_statistics_modules_import_no_ui_or_models():
    import subprocess
    import sys

    code = (
        "import sys, ledgerscope.analysis.stats.metrics, ledgerscope.analysis.stats.release; "
        "print(sorted(m for m in ('textual', 'torch', 'sentence_transformers') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
