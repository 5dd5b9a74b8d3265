"""The ten-step diagnosis on hand-built records, and once on a real sweep."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from ledgerscope.analysis.diagnosis.feed import diagnose_ledger
from ledgerscope.analysis.diagnosis.tree import (
    STEP9_NAMES,
    STEP_NAMES,
    Diagnosis,
    diagnose,
    diagnosis_step,
    support_loss,
)
from ledgerscope.inputs.fixtures import AnswerContract, Fixture, GoldSpan
from ledgerscope.inputs.sources import text_version

DOC = "policy.md"
TEXT = (
    "Support requests are stored in the regional store. "
    "Requests may be retained for 30 days. "
    "This limit is 7 days for requests marked temporary. "
    "After that the body is deleted."
)
DOC2 = "faq.md"
TEXT2 = "Questions and answers. Temporary requests are kept for 7 days. Nothing else."
TEXTS = {DOC: TEXT, DOC2: TEXT2}


def _span(span_id: str, doc: str, quote: str, dependency: str = "primary") -> GoldSpan:
    text = TEXTS[doc]
    start = text.index(quote)
    return GoldSpan(
        span_id,
        doc,
        start,
        start + len(quote),
        version=text_version(text),
        quote=quote,
        dependency=dependency,
    )


RULE = _span("rule", DOC, "Requests may be retained for 30 days.")
QUAL = _span("qualifier", DOC, "This limit is 7 days for requests marked temporary.", "exception")
SUMMARY = _span("summary", DOC2, "Temporary requests are kept for 7 days.")


def _fixture(sets=(("rule", "qualifier"),), spans=(RULE, QUAL), **kw) -> Fixture:
    return Fixture(
        qid="q",
        question="How long are temporary requests kept?",
        segment="rule-exception",
        spans=tuple(spans),
        sufficient_sets=tuple(tuple(s) for s in sets),
        answer=AnswerContract(expected="7 days", default="30 days"),
        **kw,
    )


FX = _fixture()
FX_ALT = _fixture(sets=(("rule", "qualifier"), ("summary",)), spans=(RULE, QUAL, SUMMARY))


def unit(start: int, end: int, doc: str = DOC) -> dict:
    return {"unit_id": f"{doc}@{start}-{end}", "doc_id": doc, "start": start, "end": end}


U_RULE = unit(RULE.start - 2, RULE.end + 1)  # holds the rule only
U_QUAL = unit(QUAL.start, QUAL.end + 1)  # holds the qualifier only
U_QA = unit(QUAL.start - 1, QUAL.start + 20)  # first part of the qualifier
U_QB = unit(QUAL.start + 20, QUAL.end + 5)  # the rest of it
U_BOTH = unit(RULE.start, QUAL.end)  # the whole sufficient set
U_HEAD = unit(0, RULE.start - 2)  # a distractor
U_SUM = unit(SUMMARY.start, SUMMARY.end, DOC2)
U_FAQ = unit(0, SUMMARY.start - 1, DOC2)


def rows(*entries) -> list[dict]:
    """Candidate rows from (unit, score) pairs or units, ranked in order."""
    out = []
    for i, e in enumerate(entries):
        u, score = e if isinstance(e, tuple) else (e, None)
        out.append({**u, "rank": i + 1, "score": score, "lineage": []})
    return out


FLAGS = (
    "support_chunked",
    "support_exact",
    "support_production",
    "support_union",
    "support_fused",
    "support_reranked",
    "support_selected",
    "support_packed",
)


def record(lost_at: str | None = None, **kw) -> dict:
    """A record whose support flags are true up to (not including) ``lost_at``."""
    rec = {
        "arm": "a",
        "phase": "0",
        "phase_offset": 0,
        "qid": "q",
        "segment": "rule-exception",
        "answerable": True,
        "support_only": False,
        "gold_status": "ok",
        "covered_set": 0,
        "single_unit_complete": True,
        "packed_unit_ids": [],
        "evidence_tokens": 30,
        "budget_tokens": 40,
        "rerank_depth": 3,
        "selection_depth": 2,
        "overflow_json": "[]",
        "expansion_dropped_json": "[]",
        "answer": "7 days [1]",
        "abstained": False,
        "citations_json": "[]",
        "answer_verdict": "correct",
        "answer_reason": "matches",
        "citation_verdict": "supported",
        "citation_reason": "",
        "generator_error": None,
        "oracle_verdict": None,
        "oracle_feasible": None,
    }
    keep = True
    for f in FLAGS:
        if lost_at is not None and f == f"support_{lost_at}":
            keep = False
        rec[f] = keep
    rec["support_cited"] = rec["support_packed"]
    if not rec["support_packed"]:
        rec["covered_set"] = None
    rec.update(kw)
    return rec


def full_stages(**kw) -> dict[str, list[dict]]:
    """Stages where everything keeps the rule + qualifier set (overridden per test)."""
    base = {
        "units": rows(U_HEAD, U_RULE, U_QUAL),
        "bm25": rows((U_RULE, 9.0), (U_QUAL, 8.0)),
        "dense_exact": rows((U_QUAL, 0.9), (U_RULE, 0.8)),
        "dense_ann": rows((U_QUAL, 0.9), (U_RULE, 0.8)),
        "union": rows(U_RULE, U_QUAL),
        "fused": rows((U_RULE, 0.033), (U_QUAL, 0.032)),
        "reranked": rows((U_QUAL, 0.7), (U_RULE, 0.6)),
        "selected": rows(U_QUAL, U_RULE),
        "packed": rows(U_QUAL, U_RULE),
    }
    base.update(kw)
    return base


def run(rec: dict, stages: dict | None = None, fixture: Fixture | None = FX, oracle=None) -> Diagnosis:
    d = diagnose(rec, full_stages() if stages is None else stages, fixture, TEXTS, oracle)
    json.dumps(d.to_json())  # evidence is JSON-ready
    assert diagnosis_step(rec) == d.step
    assert d.step_name == (STEP9_NAMES.get(d.label, STEP_NAMES[9]) if d.step == 9 else STEP_NAMES[d.step])
    assert d.walk and (d.walk[-1]["passed"] is False) == (d.step != 0)
    return d


def span_ids(d: Diagnosis) -> list[str]:
    return [s["span"] for s in d.evidence["spans"]]


# ---------------------------------------------------------------------------
# every step


def test_step0_pass():
    d = run(record())
    assert (d.step, d.label, d.flags) == (0, "pass", ())
    assert [w["step"] for w in d.walk] == list(range(1, 11))
    assert all(w["passed"] for w in d.walk)
    spans = {s["span"]: s for s in d.evidence["spans"]}
    assert spans["qualifier"]["packed_units"] == [{"unit_id": U_QUAL["unit_id"], "rank": 1}]


def test_step1_gold_absent():
    rec = record("chunked", gold_status="not in the authorized corpus: policy.md")
    d = run(rec)
    assert (d.step, d.label) == (1, "gold-absent-from-corpus")
    assert len(d.walk) == 1 and d.walk[0]["detail"].startswith("not in the authorized corpus")
    assert {s["span"] for s in d.evidence["spans"]} == {"rule", "qualifier"}


def test_step2_no_unit_contains_it_shows_boundaries():
    # extraction dropped the middle of the qualifier: the units stop 10 characters in and resume later
    a, b = unit(RULE.start, QUAL.start + 10), unit(QUAL.start + 30, len(TEXT))
    d = run(record("chunked"), full_stages(units=rows(U_HEAD, a, b)))
    assert (d.step, d.label) == (2, "no-unit-contains-it")
    assert span_ids(d) == ["qualifier"]
    assert d.evidence["spans"][0]["uncovered"] == [[QUAL.start + 10, QUAL.start + 30]]
    rel = {u["unit_id"]: u["relation"] for u in d.evidence["units"]}
    assert rel == {a["unit_id"]: "overlaps-start", b["unit_id"]: "overlaps-end"}
    assert "missing: qualifier" in d.walk[-1]["detail"]


def test_step2_span_in_a_gap_between_units():
    a, b = unit(0, RULE.start - 1), unit(RULE.end + 1, len(TEXT))
    d = run(record("chunked"), full_stages(units=rows(b, a)))
    assert span_ids(d) == ["rule"] and d.evidence["spans"][0]["uncovered"] == [[RULE.start, RULE.end]]
    assert [(u["unit_id"], u["relation"]) for u in d.evidence["units"]] == [
        (a["unit_id"], "before"),
        (b["unit_id"], "after"),
    ]


def test_step3_exact_retrievers_miss():
    st = full_stages(bm25=rows((U_QUAL, 7.0), (U_HEAD, 2.0)), dense_exact=rows((U_HEAD, 0.5)))
    d = run(record("exact"), st)
    assert (d.step, d.label) == (3, "exact-retrievers-miss")
    assert span_ids(d) == ["rule"]
    (u,) = d.evidence["units"]
    assert u["unit_id"] == U_RULE["unit_id"] and u["output_rank"] is None
    assert u["ranks"] == {"bm25": None, "dense_exact": None}
    assert d.evidence["cutoff"] == {"bm25": 2, "dense_exact": 1}


def test_step4_ann_misses_shows_exact_rank_and_absence():
    st = full_stages(
        bm25=rows((U_QUAL, 7.0)),
        dense_exact=rows((U_HEAD, 0.9), (U_RULE, 0.8)),
        dense_ann=rows((U_HEAD, 0.9), (U_QUAL, 0.5)),
    )
    d = run(record("production", top_n={"dense_exact": 50, "dense_ann": 50}), st)
    assert (d.step, d.label) == (4, "ann-misses")
    (u,) = d.evidence["units"]
    assert (u["unit_id"], u["span"], u["input_rank"], u["input_score"]) == (U_RULE["unit_id"], "rule", 2, 0.8)
    assert u["output_rank"] is None and u["ranks"]["dense_ann"] is None
    assert d.evidence["cutoff"] == {"dense_exact": 50, "dense_ann": 50}


def test_step5_union_drops_it():
    st = full_stages(
        bm25=rows((U_RULE, 9.0)), dense_ann=rows((U_HEAD, 0.9), (U_QUAL, 0.8)), union=rows(U_RULE, U_HEAD)
    )
    d = run(record("union"), st)
    assert (d.step, d.label) == (5, "union-dedup-drops-it")
    (u,) = d.evidence["units"]
    assert (u["unit_id"], u["input_rank"], u["output_rank"]) == (U_QUAL["unit_id"], 2, None)
    assert u["ranks"]["dense_ann"] == {"rank": 2, "score": 0.8}


def test_step6_fusion_ranks_it_low():
    st = full_stages(
        fused=rows(
            (U_RULE, 0.03), (U_HEAD, 0.02), (U_HEAD | {"unit_id": "x"}, 0.02), (U_FAQ, 0.01), (U_QUAL, 0.009)
        )
    )
    d = run(record("fused"), st)
    assert (d.step, d.label) == (6, "fusion-ranks-it-low")
    assert d.evidence["cutoff"] == 3 and d.evidence["input_stage"] == "union"
    (u,) = d.evidence["units"]
    assert (u["unit_id"], u["input_rank"]) == (U_QUAL["unit_id"], 2)
    assert (u["output_rank"], u["output_score"]) == (5, 0.009)


def test_step7_reranker_removes_it_joint_evidence_across_two_units():
    # the fused input keeps the set only jointly (rule in one unit, qualifier in another)
    st = full_stages(
        fused=rows((U_RULE, 0.033), (U_HEAD, 0.032), (U_QUAL, 0.031)),
        reranked=rows((U_RULE, 0.9), (U_HEAD, 0.5), (U_QUAL, 0.41)),
    )
    d = run(record("reranked"), st)
    assert (d.step, d.label) == (7, "reranker-removes-it")
    assert d.evidence["stage"] == "reranked" and d.evidence["cutoff"] == 2
    assert span_ids(d) == ["qualifier"]
    (u,) = d.evidence["units"]
    assert u == {
        **u,
        "unit_id": U_QUAL["unit_id"],
        "span": "qualifier",
        "input_rank": 3,
        "input_score": 0.031,
        "output_rank": 3,
        "output_score": 0.41,
    }


def test_step7_one_span_split_across_two_units():
    # the qualifier itself straddles a boundary: both halves were kept, the reranker cut the second
    st = full_stages(
        fused=rows((U_RULE, 0.03), (U_QA, 0.02), (U_QB, 0.01)),
        reranked=rows((U_QA, 0.9), (U_RULE, 0.8), (U_QB, 0.1)),
    )
    d = run(record("reranked"), st)
    assert d.step == 7
    (span,) = d.evidence["spans"]
    assert span["span"] == "qualifier" and span["uncovered"] == [[U_QB["start"], QUAL.end]]
    by_unit = {u["unit_id"]: u for u in d.evidence["units"]}
    assert by_unit[U_QA["unit_id"]]["output_rank"] == 1
    assert by_unit[U_QB["unit_id"]]["output_rank"] == 3


def test_step8_selector_omits_it_with_overflow():
    overflow = [{"unit_id": U_QUAL["unit_id"], "tokens": 26, "remaining": 14}]
    st = full_stages(
        reranked=rows((U_RULE, 0.9), (U_QUAL, 0.8)), selected=rows(U_RULE, U_QUAL), packed=rows(U_RULE)
    )
    d = run(
        record(
            "packed",
            overflow_json=json.dumps(overflow),
            answer_verdict="critical-condition-error",
            citation_verdict="unsupported",
        ),
        st,
    )
    assert (d.step, d.label) == (8, "selector-omits-it")
    assert d.evidence["cutoff"] == 40 and span_ids(d) == ["qualifier"]
    (u,) = d.evidence["units"]
    assert (u["input_rank"], u["output_rank"], u["overflow"]) == (2, None, overflow)
    assert u["ranks"]["selected"] == {"rank": 2, "score": None}
    assert d.evidence["packed"] == [{"unit_id": U_RULE["unit_id"], "rank": 1, "reranked_rank": 1}]
    assert "answer-correct-without-support" not in d.flags


def test_step9_answer_ignores_it():
    d = run(
        record(
            answer_verdict="critical-condition-error", answer="30 days [1]", citation_verdict="unsupported"
        )
    )
    assert (d.step, d.label) == (9, "answer-ignores-it")
    assert d.evidence["answer_verdict"] == "critical-condition-error"
    assert {s["span"] for s in d.evidence["spans"]} == {"rule", "qualifier"}
    assert d.walk[-1] == {
        "step": 9,
        "name": STEP_NAMES[9],
        "passed": False,
        "detail": "answer verdict critical-condition-error",
    }


def test_step10_citation_wrong():
    cites = [
        {
            "label": "2",
            "unit_id": U_RULE["unit_id"],
            "doc_id": DOC,
            "start": U_RULE["start"],
            "end": U_RULE["end"],
        }
    ]
    d = run(record(citation_verdict="unsupported", citations_json=json.dumps(cites)))
    assert (d.step, d.label) == (10, "citation-wrong")
    cited = {s["span"]: s["cited"] for s in d.evidence["spans"]}
    assert cited == {"rule": True, "qualifier": False}
    assert run(record(citation_verdict="no-citation")).step == 10


# ---------------------------------------------------------------------------
# sets, controls, flags


def test_alternative_sets_keep_support_if_any_set_is_kept():
    # the packed context holds only the FAQ summary: set 1 keeps support on its own
    st = full_stages(packed=rows(U_SUM))
    d = run(record(covered_set=1), st, FX_ALT)
    assert d.step == 0 and d.evidence["sufficient_set"] == 1
    assert [s["span"] for s in d.evidence["spans"]] == ["summary"]


def test_evidence_prefers_the_set_kept_upstream_then_the_closest():
    # fused keeps set 0 (rule + qualifier) but not set 1; the reranker cut loses both rule and
    # qualifier: set 1 misses fewer spans, but set 0 is the one that was kept, so it is reported
    st = full_stages(
        fused=rows((U_RULE, 0.3), (U_QUAL, 0.2), (U_HEAD, 0.1)),
        reranked=rows((U_HEAD, 0.9), (U_FAQ, 0.8), (U_RULE, 0.2), (U_QUAL, 0.1)),
    )
    d = run(record("reranked"), st, FX_ALT)
    assert d.evidence["sufficient_set"] == 0 and span_ids(d) == ["rule", "qualifier"]
    # both sets kept upstream: the one missing fewer spans at the losing stage wins
    st = full_stages(
        fused=rows((U_RULE, 0.3), (U_QUAL, 0.2), (U_SUM, 0.1)),
        reranked=rows((U_HEAD, 0.9), (U_RULE, 0.8), (U_SUM, 0.2), (U_QUAL, 0.1)),
    )
    d = run(record("reranked"), st, FX_ALT)
    assert d.evidence["sufficient_set"] == 0 and span_ids(d) == ["qualifier"]
    st["reranked"] = rows((U_HEAD, 0.9), (U_FAQ, 0.8), (U_SUM, 0.2), (U_RULE, 0.1))
    d = run(record("reranked"), st, FX_ALT)
    assert d.evidence["sufficient_set"] == 1 and span_ids(d) == ["summary"]


@pytest.mark.parametrize(
    ("verdict", "step", "label"),
    [
        ("abstained", 0, "control-abstained"),
        ("false-assertion", 9, "control-false-assertion"),
        ("infrastructure-failure", 9, "infrastructure-failure"),
    ],
)
def test_unanswerable_controls_are_scored_by_abstention(verdict, step, label):
    rec = record(
        answerable=False,
        answer_verdict=verdict,
        covered_set=None,
        oracle_verdict="not-applicable",
        **{f: None for f in FLAGS},
    )
    ctrl = Fixture(
        qid="q", question="?", segment="unanswerable", spans=(), sufficient_sets=(), answerable=False
    )
    d = run(rec, {}, ctrl)
    assert (d.step, d.label) == (step, label)
    assert d.walk == [
        {"step": 9, "name": "unanswerable control", "passed": verdict == "abstained", "detail": verdict}
    ]
    assert d.evidence["stage"] == "control" and d.evidence["answer_verdict"] == verdict


def test_infrastructure_failure_is_its_own_label():
    d = run(
        record(
            answer_verdict="infrastructure-failure",
            citation_verdict="not-applicable",
            oracle_verdict="correct",
            oracle_feasible=True,
        )
    )
    assert (d.step, d.label) == (9, "infrastructure-failure")
    assert "infrastructure-failure" in d.flags
    # a support loss still places the record where support was lost
    d = run(
        record("fused", answer_verdict="infrastructure-failure"),
        full_stages(fused=rows(U_RULE, U_HEAD, U_FAQ, U_QUAL)),
    )
    assert d.step == 6 and "infrastructure-failure" in d.flags


def test_answer_correct_without_support_is_flagged():
    st = full_stages(reranked=rows((U_RULE, 0.9), (U_QUAL, 0.8)), packed=rows(U_RULE))
    d = run(record("packed", answer_verdict="correct", citation_verdict="unsupported"), st)
    assert d.step == 8 and "answer-correct-without-support" in d.flags


def test_oracle_labels():
    lost = full_stages(reranked=rows((U_RULE, 0.9), (U_HEAD, 0.8), (U_QUAL, 0.1)))
    d = run(record("reranked"), lost, oracle={"answer_verdict": "correct", "feasible": True})
    assert (d.step, d.label) == (7, "retrieval-failure-oracle-success")
    assert d.evidence["oracle"] == {"verdict": "correct", "feasible": True}
    # the record's own oracle columns are used when no oracle row is given
    d = run(record(answer_verdict="wrong", oracle_verdict="correct", oracle_feasible=True))
    assert (d.step, d.label) == (9, "generator-failure-oracle-success")
    d = run(record("reranked"), lost, oracle={"answer_verdict": "wrong", "feasible": True})
    assert d.label == "both-fail" and "annotation-check" in d.flags
    d = run(record(answer_verdict="abstained"), oracle={"answer_verdict": "abstained", "feasible": False})
    assert d.label == "both-fail" and "budget-infeasible" in d.flags and "annotation-check" not in d.flags
    # citation and gold steps take no oracle label
    d = run(record(citation_verdict="unsupported"), oracle={"answer_verdict": "correct", "feasible": True})
    assert d.label == "citation-wrong"
    d = run(record(), oracle={"answer_verdict": "infrastructure-failure", "feasible": True})
    assert d.label == "pass" and d.flags == ("oracle-infrastructure-failure",)


def test_support_only_records():
    rec = record(support_only=True, answer_verdict="not-judged", citation_verdict="no-citation")
    d = run(rec)
    assert d.step == 0 and d.flags == ("citations-not-checked",)
    assert d.walk[8] == {
        "step": 9,
        "name": STEP_NAMES[9],
        "passed": None,
        "detail": "not judged (support-only fixture)",
    }
    assert run({**rec, "citation_verdict": "supported"}).flags == ()
    d = run({**rec, "citation_verdict": "unsupported"})
    assert (d.step, d.label) == (10, "citation-wrong")
    d = run({**rec, "citation_verdict": "unresolvable"})
    assert d.step == 10
    # support losses walk as usual
    st = full_stages(reranked=rows((U_RULE, 0.9), (U_QUAL, 0.8)), packed=rows(U_RULE))
    assert run(record("packed", support_only=True, answer_verdict="not-judged"), st).step == 8


def test_support_regained_later_is_not_the_step():
    # exact search missed, ANN found it, then fusion lost it: step 6, with the exact miss noted
    rec = record("fused", support_exact=False)
    assert support_loss(rec) == (6, (3,))
    d = run(rec, full_stages(fused=rows(U_RULE, U_HEAD, U_FAQ, U_QUAL)))
    assert d.step == 6 and "support-recovered" in d.flags
    assert d.walk[2]["passed"] is True and "regains" in d.walk[2]["detail"]
    # neighbour expansion restored what the reranker cut: the packed context keeps support
    rec = record(support_reranked=False)
    assert support_loss(rec) == (None, (7,))
    d = run(rec)
    assert d.step == 0 and d.flags == ("support-recovered",)


def test_single_unit_incomplete_flag_and_missing_fixture():
    d = run(record(single_unit_complete=False))
    assert d.step == 0 and d.flags == ("single-unit-incomplete",)
    d = run(record("reranked"), full_stages(), fixture=None)
    assert d.step == 7 and "note" in d.evidence


def test_walk_stops_at_the_losing_step():
    d = run(record("union"), full_stages(union=rows(U_RULE)))
    assert [w["step"] for w in d.walk] == [1, 2, 3, 4, 5]
    assert [w["passed"] for w in d.walk] == [True, True, True, True, False]
    assert d.walk[-1]["detail"] == "support lost: the deduplicated union (missing: qualifier)"
    assert d.walk[1]["detail"] == "support kept: the chunked units"


# ---------------------------------------------------------------------------
# the walk and the JSON, word for word (what diagnose --json and the TUI show)

PASS_WALK = [
    {"step": 1, "name": "gold absent from corpus", "passed": True, "detail": "ok"},
    {"step": 2, "name": "no unit contains it", "passed": True, "detail": "support kept: the chunked units"},
    {
        "step": 3,
        "name": "exact retrievers miss",
        "passed": True,
        "detail": "support kept: BM25 + exact dense",
    },
    {"step": 4, "name": "ANN misses", "passed": True, "detail": "support kept: BM25 + ANN"},
    {
        "step": 5,
        "name": "union/dedup drops it",
        "passed": True,
        "detail": "support kept: the deduplicated union",
    },
    {
        "step": 6,
        "name": "fusion ranks it low",
        "passed": True,
        "detail": "support kept: the fused list cut at rerank depth",
    },
    {
        "step": 7,
        "name": "reranker removes it",
        "passed": True,
        "detail": "support kept: the reranked list cut at selection depth",
    },
    {"step": 8, "name": "selector omits it", "passed": True, "detail": "support kept: the packed context"},
    {"step": 9, "name": "answer ignores it", "passed": True, "detail": "answer verdict correct"},
    {"step": 10, "name": "citation wrong", "passed": True, "detail": "citation verdict supported"},
]


def test_walk_of_a_passing_record_and_its_json():
    d = run(record())
    assert d.walk == PASS_WALK
    assert d.to_json() == {
        "step": 0,
        "step_name": "pass",
        "label": "pass",
        "evidence": d.evidence,
        "flags": [],
        "walk": PASS_WALK,
    }
    assert d.evidence["stage"] == "pass"
    assert run(record(gold_status=None)).walk == PASS_WALK  # a null gold status reads as ok


def test_walk_names_the_lost_stage_its_missing_spans_and_regained_stages():
    d = run(record("chunked"), full_stages(units=rows(U_HEAD)))
    assert d.walk == [
        PASS_WALK[0],
        {
            "step": 2,
            "name": "no unit contains it",
            "passed": False,
            "detail": "support lost: the chunked units (missing: rule, qualifier)",
        },
    ]
    d = run(record(support_exact=False))
    regained = "support lost: BM25 + exact dense; a later stage regains it"
    assert d.walk == [*PASS_WALK[:2], {**PASS_WALK[2], "detail": regained}, *PASS_WALK[3:]]
    d = run(record(answer_verdict="wrong", citation_verdict="unsupported"))
    assert d.walk == [*PASS_WALK[:8], {**PASS_WALK[8], "passed": False, "detail": "answer verdict wrong"}]
    d = run(record(citation_verdict="unsupported"))
    wrong = {**PASS_WALK[9], "passed": False, "detail": "citation verdict unsupported"}
    assert d.walk == [*PASS_WALK[:9], wrong]


def test_a_null_gold_status_is_ok_and_a_gold_miss_with_a_correct_answer_is_flagged():
    assert (run(record(gold_status=None)).step, diagnosis_step(record(gold_status=None))) == (0, 0)
    d = run(record(gold_status="not in the authorized corpus: policy.md"))
    assert d.step == 1 and d.flags == ("answer-correct-without-support",)


def test_evidence_quotes_come_from_the_texts_when_a_span_has_none():
    bare = _fixture(spans=(replace(RULE, quote=None), replace(QUAL, quote=None)))
    for rec in (record(), record(answer_verdict="wrong", citation_verdict="unsupported")):
        quotes = [sp["quote"] for sp in run(rec, fixture=bare).evidence["spans"]]
        assert quotes == [RULE.quote, QUAL.quote]


@pytest.mark.parametrize(
    ("rec", "stages", "oracle_verdict", "label"),
    [
        ({"lost_at": "chunked"}, {"units": [U_HEAD]}, "correct", "retrieval-failure-oracle-success"),
        ({"lost_at": "packed"}, {"packed": [U_RULE]}, "correct", "retrieval-failure-oracle-success"),
        ({"lost_at": "chunked"}, {"units": [U_HEAD]}, "wrong", "both-fail"),
        ({"answer_verdict": "wrong", "citation_verdict": "unsupported"}, {}, "wrong", "both-fail"),
        ({"citation_verdict": "unsupported"}, {}, "wrong", "citation-wrong"),
        (
            {"gold_status": "not in the authorized corpus: policy.md"},
            {},
            "correct",
            "gold-absent-from-corpus",
        ),
    ],
)
def test_oracle_labels_at_the_step_bounds(rec, stages, oracle_verdict, label):
    st = full_stages(**{k: rows(*v) for k, v in stages.items()})
    rec = dict(rec)  # the parameter is shared between runs: never edit it
    lost_at = rec.pop("lost_at", None)
    d = run(record(lost_at, **rec), st, oracle={"answer_verdict": oracle_verdict, "feasible": True})
    assert d.label == label


def test_the_record_oracle_columns_carry_feasibility():
    d = run(record(answer_verdict="abstained", oracle_verdict="abstained", oracle_feasible=False))
    assert "budget-infeasible" in d.flags and "annotation-check" not in d.flags
    assert d.evidence["oracle"] == {"verdict": "abstained", "feasible": False}


# ---------------------------------------------------------------------------
# a real sweep (the shared rule-exception ledger of conftest.py)


@pytest.mark.slow
def test_diagnose_ledger_on_a_real_sweep(rule_exception_ledger, sql_matches_python):
    from ledgerscope.analysis.reversals import find_reversals
    from ledgerscope.analysis.survival import survival
    from ledgerscope.ledger.read import connect

    swept = rule_exception_ledger
    con = connect(swept)
    n_records = con.execute("SELECT count(*) FROM records").fetchone()[0]
    rows = list(diagnose_ledger(con, swept))
    assert len(rows) == n_records == 30
    assert len({(r["arm"], r["phase"], r["qid"]) for r in rows}) == n_records
    json.dumps(rows)
    critical = [r for r in rows if r["answer_verdict"] == "critical-condition-error"]
    assert critical, [(r["phase"], r["answer_verdict"]) for r in rows]
    assert any(r["qid"] == "temp-retention" for r in critical), critical
    for r in critical:
        assert r["step"] in (8, 9), r
        if r["qid"] == "temp-retention":  # the default rule was applied: its exception was lost
            assert "qualifier" in [s["span"] for s in r["evidence"]["spans"]]
    for r in rows:
        if r["qid"] == "no-such-thing":
            assert r["label"] in ("control-abstained", "control-false-assertion")
    assert len(list(diagnose_ledger(con, swept, arm="candidate"))) == 15
    assert list(diagnose_ledger(con, swept, arm="nope")) == []
    assert sql_matches_python(con, swept)  # the SQL diagnosis agrees record for record

    # the ledger path reads only the rows the evidence needs: same answer as whole candidate lists
    from ledgerscope.ledger.fixtures import load_ledger_fixtures

    fixtures, texts = load_ledger_fixtures(con, swept)
    cands = con.sql('SELECT * FROM candidates ORDER BY "rank"').to_arrow_table().to_pylist()
    units = con.sql('SELECT * FROM units ORDER BY "start"').to_arrow_table().to_pylist()
    by_key = {(r["arm"], r["phase"], r["qid"]): r for r in rows}
    for rec in con.sql("SELECT * FROM records").to_arrow_table().to_pylist():
        stages: dict[str, list[dict]] = {}
        for c in cands:
            if (c["arm"], c["phase"], c["qid"]) == (rec["arm"], rec["phase"], rec["qid"]):
                stages.setdefault(c["stage"], []).append(c)
        stages["units"] = [u for u in units if u["arm"] == rec["arm"] and u["phase"] == rec["phase"]]
        fx = fixtures[rec["qid"]]
        whole = diagnose(
            {**rec, "top_n": {"bm25": 50, "dense_exact": 50, "dense_ann": 50}}, stages, fx, texts
        )
        fast = by_key[(rec["arm"], str(rec["phase"]), rec["qid"])]
        assert (whole.step, whole.label, list(whole.flags), whole.evidence, whole.walk) == (
            fast["step"],
            fast["label"],
            fast["flags"],
            fast["evidence"],
            fast["walk"],
        )

    revs = find_reversals(con)
    answer = [
        r for r in revs if r["kind"] == "answer" and r["qid"] == "temp-retention" and r["arm"] == "candidate"
    ]
    assert len(answer) == 1
    phases = answer[0]["phases"]
    assert phases["critical-condition-error"] and phases["correct"]
    assert sorted(p for ps in phases.values() for p in ps) == sorted(["0", "1", "2", "5", "9"])

    surv = survival(con, swept)
    assert sorted((s["arm"], s["phase"]) for s in surv) == [  # one row per partition
        (arm, p) for arm in ("baseline", "candidate") for p in ("0", "1", "2", "5", "9")
    ]
    for s in surv:
        assert s["n_records"] == 3 and s["n_answerable"] == 2
        assert s["survival"]["chunked"] == 2
        assert 0.0 <= s["ann_recall"] <= 1.0
