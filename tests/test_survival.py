"""Stage survival, recall@k, reranker regret, ANN recall and duplicate ratio on tiny tables."""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pytest

from ledgerscope.analysis.survival import (
    ann_recall,
    duplicate_ratio,
    list_depths,
    recall_at_k,
    span_rank,
    support_rank,
    support_ranks,
    survival,
    survival_counts,
)
from ledgerscope.inputs.fixtures import Fixture, GoldSpan
from ledgerscope.ledger import schema

TEXT = "alpha beta gamma delta epsilon zeta eta theta"  # spans on word boundaries
TEXTS = {"d": TEXT}
A = GoldSpan("a", "d", 0, 10)  # "alpha beta"
B = GoldSpan("b", "d", 17, 30)  # "delta epsilon"
C = GoldSpan("c", "d", 36, 45)  # "eta theta"
FX = Fixture("q1", "?", "joint-evidence", (A, B, C), (("a", "b"), ("c",)))


def cand(arm, phase, qid, stage, rank, unit_id, start=0, end=1, doc="d", score=None):
    return {
        "arm": arm,
        "phase": phase,
        "qid": qid,
        "stage": stage,
        "rank": rank,
        "unit_id": unit_id,
        "score": score,
        "doc_id": doc,
        "start": start,
        "end": end,
        "lineage": [],
    }


def rec(arm, phase, qid, answerable=True, offset=0, **kw):
    out = {"arm": arm, "phase": phase, "phase_offset": offset, "qid": qid, "answerable": answerable}
    if answerable:
        out.update({c: True for c in schema.SUPPORT_COLUMNS})
    out.update(kw)
    return out


def connect(records=(), candidates=()):
    con = duckdb.connect()
    tables = (("records", records, schema.RECORDS), ("candidates", candidates, schema.CANDIDATES))
    for name, rows, sch in tables:
        con.register(f"_{name}", pa.Table.from_pylist(list(rows), schema=sch))
        con.execute(f"CREATE TABLE {name} AS SELECT * FROM _{name}")
    return con


def test_survival_counts_and_regret():
    con = connect(
        [
            rec("a", "0", "q1", prompt_tokens=100, evidence_tokens=30, repeated_source_tokens=2),
            rec(
                "a",
                "0",
                "q2",
                support_reranked=False,
                support_selected=False,
                support_packed=False,
                support_cited=False,
                prompt_tokens=80,
                evidence_tokens=20,
                repeated_source_tokens=0,
            ),
            rec("a", "0", "q3", answerable=False, prompt_tokens=None),
            rec("a", "1", "q1", offset=1, support_fused=False, support_reranked=False, support_packed=False),
        ]
    )
    rows = survival_counts(con)
    assert [(r["arm"], r["phase"]) for r in rows] == [("a", "0"), ("a", "1")]
    r0 = rows[0]
    assert (r0["n_records"], r0["n_answerable"]) == (3, 2)
    assert (r0["fused"], r0["reranked"], r0["packed"], r0["cited"]) == (2, 1, 1, 1)
    assert r0["reranker_regret"] == 1
    assert r0["mean_prompt_tokens"] == 90 and r0["mean_evidence_tokens"] == 25
    assert rows[1]["reranker_regret"] == 0  # lost before the reranker: not its regret
    full = survival(con)
    assert full[0]["survival_rate"]["reranked"] == 0.5
    assert full[0]["reranker_regret_rate"] == 0.5
    assert full[1]["reranker_regret_rate"] is None
    assert survival_counts(con, arm="b") == []


def test_ann_recall_against_exact():
    rows = []
    for i, u in enumerate(["u1", "u2", "u3", "u4"]):
        rows.append(cand("a", "0", "q1", "dense_exact", i + 1, u))
    for i, u in enumerate(["u1", "u3", "u9"]):  # k = 3: exact top-3 {u1,u2,u3} ∩ ANN {u1,u3,u9} = 2
        rows.append(cand("a", "0", "q1", "dense_ann", i + 1, u))
    for i, u in enumerate(["x", "y"]):  # q2: k = 2, no overlap
        rows.append(cand("a", "0", "q2", "dense_exact", i + 1, u))
        rows.append(cand("a", "0", "q2", "dense_ann", i + 1, u + "'"))
    con = connect(candidates=rows)
    assert ann_recall(con)[("a", "0")] == pytest.approx((2 / 3 + 0) / 2)


def test_duplicate_ratio():
    rows = [cand("a", "0", "q1", "bm25", i + 1, u) for i, u in enumerate(["u1", "u2"])]
    rows += [cand("a", "0", "q1", "dense_ann", i + 1, u) for i, u in enumerate(["u1", "u3"])]
    rows += [cand("a", "0", "q1", "union", i + 1, u) for i, u in enumerate(["u1", "u2", "u3"])]
    rows += [cand("a", "0", "q2", "bm25", 1, "v"), cand("a", "0", "q2", "union", 1, "v")]
    con = connect(candidates=rows)
    assert duplicate_ratio(con)[("a", "0")] == pytest.approx(((1 - 3 / 4) + 0) / 2)
    assert list_depths(con)[("a", "0", "union")] == 3


def test_span_and_support_rank_with_joint_evidence():
    rows = [
        cand("a", "0", "q1", "fused", 1, "u-b", 15, 31),  # covers b
        cand("a", "0", "q1", "fused", 2, "u-a1", 0, 6),  # "alpha " (half of a)
        cand("a", "0", "q1", "fused", 3, "u-x", 31, 36),
        cand("a", "0", "q1", "fused", 4, "u-a2", 6, 12),  # the rest of a
        cand("a", "0", "q1", "fused", 6, "u-c", 35, 45),  # c alone (set 1)
    ]
    assert span_rank(B, rows, TEXTS) == 1
    assert span_rank(A, rows, TEXTS) == 4  # only jointly, at rank 4
    assert span_rank(C, rows[:4], TEXTS) is None
    assert support_rank(FX, rows, TEXTS) == 4  # set 0 at 4 beats set 1 at 6
    assert support_rank(FX, rows[:3], TEXTS) is None
    assert support_rank(FX, [rows[4]], TEXTS) == 6
    # without the text, whitespace is not excused but plain coverage still counts
    assert span_rank(A, rows, {}) == 4


def test_recall_at_k():
    assert recall_at_k([1, 4, None, 12], 4) == {"1": 0.25, "5": 0.5, "10": 0.5, "20": 0.75, "50": 0.75}
    assert recall_at_k([1, 2], 2, depth=3) == {"1": 0.5}
    assert recall_at_k([], 0, (1, 5)) == {"1": None, "5": None}


def test_support_ranks_per_stage():
    rows = [
        cand("a", "0", "q1", "reranked", 1, "u-c", 35, 45),
        cand("a", "0", "q1", "reranked", 2, "u-other", 10, 14),
        cand("a", "0", "q1", "bm25", 1, "u-a", 0, 12),
        cand("a", "0", "q1", "bm25", 7, "u-b", 15, 31),
    ]
    con = connect([rec("a", "0", "q1")], rows)
    ranks = support_ranks(con, {"q1": FX}, TEXTS)
    assert ranks[("a", "0", "q1")]["reranked"] == 1
    assert ranks[("a", "0", "q1")]["bm25"] == 7
    assert ranks[("a", "0", "q1")]["fused"] is None


def _ranked(ranks):
    return {
        (key, stage): r for key, by_stage in ranks.items() for stage, r in by_stage.items() if r is not None
    }


def test_support_ranks_in_sql_equal_the_definition_on_a_sweep_and_a_synthetic_ledger(tmp_path):
    """support_ranks_sql (what survival reports) against support_ranks (Python, one span at a time):
    the sample sweep, a synthetic ledger, one arm, and edge spans (blank gaps, empty, unknown text)."""
    from pathlib import Path

    from ledgerscope.analysis.survival import support_ranks_sql
    from ledgerscope.ledger.fixtures import load_ledger_fixtures
    from ledgerscope.ledger.read import connect as open_ledger
    from ledgerscope.testing.synthetic import make_synthetic_ledger

    sample = Path(__file__).resolve().parents[1] / "sample_ledgers" / "quillstack" / "ledger"
    synthetic = tmp_path / "ledger"
    make_synthetic_ledger(synthetic, questions=40, phases=2, seed=3)
    for ledger in (sample, synthetic):
        con = open_ledger(ledger)
        fixtures, texts = load_ledger_fixtures(con, ledger)
        expected = _ranked(support_ranks(con, fixtures, texts))
        assert len(expected) > 100
        assert _ranked(support_ranks_sql(con, fixtures, texts)) == expected
        one = _ranked(support_ranks(con, fixtures, texts, "candidate"))
        assert _ranked(support_ranks_sql(con, fixtures, texts, "candidate")) == one

    text = "alpha  \n beta gamma"  # a blank gap between the rows over "alpha" and "beta"
    fx = Fixture(
        "q1",
        "?",
        "joint-evidence",
        (GoldSpan("a", "d", 0, 19), GoldSpan("e", "d", 5, 5), GoldSpan("x", "nodoc", 0, 9)),
        (("a",), ("e",), ("x",)),
    )
    rows = [
        cand("a", "0", "q1", "bm25", 1, "u1", 0, 5),
        cand("a", "0", "q1", "bm25", 2, "u2", 9, 19),  # covers the rest: the gap is blank
        cand("a", "0", "q1", "dense_exact", 3, "u3", 2, 8),  # strictly contains the empty span
        cand("a", "0", "q1", "dense_ann", 4, "u4", 0, 4, doc="nodoc"),
        cand("a", "0", "q1", "dense_ann", 2, "u5", 4, 9, doc="nodoc"),  # touching: covered, no text
        cand("a", "0", "q1", "union", 1, "u6", 10, 19),  # leaves "alpha" uncovered
    ]
    con = connect([rec("a", "0", "q1")], rows)
    texts = {"d": text}
    expected = support_ranks(con, {"q1": fx}, texts)
    assert expected[("a", "0", "q1")]["bm25"] == 2
    assert expected[("a", "0", "q1")]["dense_exact"] == 3
    assert expected[("a", "0", "q1")]["dense_ann"] == 4
    assert expected[("a", "0", "q1")]["union"] is None
    assert support_ranks_sql(con, {"q1": fx}, texts) == expected
