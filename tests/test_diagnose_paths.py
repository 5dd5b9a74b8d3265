"""The diagnosis tree's later rules on hand-built records (module docstring of
``analysis/diagnosis/tree.py``): stages not recorded (collapsed ``lost-in-steps-a-b`` spans),
unplaced chunks (``unverifiable-unlocated-chunk``), the answer side unverified, and the walk's
wording for each. Pure and fast: the mutation pass runs this file."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from ledgerscope.analysis.diagnosis.tree import (
    STEP_NAMES,
    UNVERIFIABLE,
    UNVERIFIABLE_NAME,
    Diagnosis,
    collapsed,
    diagnose,
    diagnosis_step,
    not_recorded,
    recorded_stages,
    resting_on_unlocated,
    support_loss,
    unverifiable_steps,
)
from ledgerscope.analysis.validity import UNVERIFIED

from .test_diagnose import (
    FX,
    PASS_WALK,
    QUAL,
    RULE,
    TEXTS,
    U_HEAD,
    U_QUAL,
    U_RULE,
    _fixture,
    full_stages,
    record,
    rows,
)

ALL_STAGES = ["chunked", "exact", "production", "union", "fused", "reranked", "packed"]
UNRECORDED_NOTE = "(the pipeline did not record it)"
ANSWER_SIDE_NOTE = "; answer side unverified (the generator fails with full support)"


def diag(rec: dict, stages: dict | None = None, fixture=FX, oracle=None) -> Diagnosis:
    """Diagnose, checking what holds for every record: JSON-ready, the cheap step agrees."""
    d = diagnose(rec, full_stages() if stages is None else stages, fixture, TEXTS, oracle)
    json.dumps(d.to_json())
    assert diagnosis_step(rec) == d.step
    assert [w["step"] for w in d.walk] == sorted(w["step"] for w in d.walk)
    return d


def unrecorded(step: int, title: str) -> dict:
    detail = f"not recorded: {title} {UNRECORDED_NOTE}"
    return {"step": step, "name": STEP_NAMES[step], "passed": None, "detail": detail}


# ---------------------------------------------------------------------------
# the walk's helpers, one rule each


def test_support_loss_counts_only_recorded_stages():
    nothing = record(**{f"support_{s}": None for s in ALL_STAGES})
    assert support_loss(nothing) == (None, ())
    # exact and production not recorded; the union loses it: lost at the union, nothing regained
    rec = record("union", support_exact=None, support_production=None)
    assert support_loss(rec) == (5, ())
    # nothing recorded keeps it: lost at the first recorded stage
    rec = record(support_chunked=False, support_exact=None, support_production=False, support_union=None)
    rec.update(support_fused=False, support_reranked=False, support_packed=False)
    assert support_loss(rec) == (2, ())
    # a recorded loss regained at a later recorded stage, with an unrecorded stage between
    rec = record(support_exact=False, support_production=None)
    assert support_loss(rec) == (None, (3,))
    rec = record("reranked", support_exact=False, support_production=None, support_fused=None)
    assert support_loss(rec) == (7, (3,))


def test_not_recorded_names_null_stages_of_answerable_sound_records_only():
    rec = record(support_exact=None, support_fused=None)
    assert not_recorded(rec) == (3, 6)
    assert not_recorded(record()) == ()
    assert not_recorded({**rec, "gold_status": None}) == (3, 6)  # a null gold status is ok
    assert not_recorded({**rec, "answerable": None}) == (3, 6)  # only an explicit False is a control
    assert not_recorded({**rec, "answerable": False}) == ()
    assert not_recorded({**rec, "gold_status": "not in the authorized corpus: policy.md"}) == ()


def test_collapsed_spans_the_unrecorded_steps_just_before_the_loss():
    rec = record("union", support_exact=None, support_production=None)
    assert collapsed(rec, 5) == (3, 5)
    assert collapsed(record("union", support_production=None), 5) == (4, 5)
    # an unrecorded stage that is not right before the loss does not collapse it
    assert collapsed(record("fused", support_exact=None), 6) is None
    assert collapsed(record("union", support_exact=None), 5) is None
    assert collapsed(record("fused"), 6) is None
    # the unrecorded stages reach down to the first step
    rec = record("exact", support_chunked=None)
    assert collapsed(rec, 3) == (2, 3)


def test_unverifiable_steps_read_the_named_stages_and_cited():
    assert unverifiable_steps(record()) == ()
    assert unverifiable_steps(record(unverifiable_stages=None)) == ()
    assert unverifiable_steps(record(unverifiable_stages="")) == ()
    assert unverifiable_steps(record(unverifiable_stages="packed,union")) == (5, 8)
    assert unverifiable_steps(record(unverifiable_stages="cited")) == (10,)
    assert unverifiable_steps(record(unverifiable_stages="exact,cited,nonsense")) == (3, 10)
    every = ",".join([*ALL_STAGES, "cited"])
    assert unverifiable_steps(record(unverifiable_stages=every)) == (2, 3, 4, 5, 6, 7, 8, 10)


def test_resting_on_unlocated_looks_from_the_loss_to_the_packed_context():
    rec = record(unverifiable_stages="chunked,exact,fused,packed,cited")
    assert resting_on_unlocated(rec, 2) == (2, 3, 6, 8)
    assert resting_on_unlocated(rec, 3) == (3, 6, 8)
    assert resting_on_unlocated(rec, 4) == (6, 8)
    assert resting_on_unlocated(rec, 7) == (8,)
    assert resting_on_unlocated(rec, 8) == (8,)
    assert resting_on_unlocated(rec, 10) == (10,)
    for step in (0, 1, 9):
        assert resting_on_unlocated(rec, step) == ()
    assert resting_on_unlocated(record(unverifiable_stages="fused"), 10) == ()
    assert resting_on_unlocated(record(unverifiable_stages="exact"), 7) == ()


def test_recorded_stages_lists_both_sides_and_the_citations():
    assert recorded_stages(record()) is None
    rec = record(support_exact=None, support_packed=None)
    assert recorded_stages(rec) == (
        ["chunked", "production", "union", "fused", "reranked", "citations"],
        ["exact", "packed"],
    )
    assert recorded_stages(record(citation_verdict="not-recorded")) == (ALL_STAGES, ["citations"])
    assert recorded_stages({**rec, "citation_verdict": "not-recorded"}) == (
        ["chunked", "production", "union", "fused", "reranked"],
        ["exact", "packed", "citations"],
    )
    # a control's or an unsound record's NULL flags are not unrecorded stages
    assert recorded_stages({**rec, "answerable": False}) is None


# ---------------------------------------------------------------------------
# stages not recorded


def test_a_loss_after_unrecorded_stages_collapses_into_one_span():
    rec = record("union", support_exact=None, support_production=None)
    st = full_stages(union=rows(U_RULE, U_HEAD))
    d = diag(rec, st)
    assert (d.step, d.label, d.step_name) == (5, "lost-in-steps-3-5", "support lost in steps 3-5")
    assert d.flags == ("answer-correct-without-support", "stages-not-recorded")
    assert d.evidence["stages_recorded"] == ["chunked", "union", "fused", "reranked", "packed", "citations"]
    assert d.evidence["stages_not_recorded"] == ["exact", "production"]
    assert d.walk == [
        *PASS_WALK[:2],
        unrecorded(3, "BM25 + exact dense"),
        unrecorded(4, "BM25 + ANN"),
        {
            "step": 5,
            "name": STEP_NAMES[5],
            "passed": False,
            "detail": "support lost: the deduplicated union; steps 3-4 not recorded, so the loss lies "
            "somewhere in steps 3-5 (missing: qualifier)",
        },
    ]
    assert d.evidence["stage"] == "union" and [s["span"] for s in d.evidence["spans"]] == ["qualifier"]
    fates = {f["span"]: f for f in d.evidence["span_fates"]}
    assert set(fates) == {"rule", "qualifier"}


def test_one_unrecorded_step_before_the_loss_is_named_alone():
    rec = record("union", support_production=None)
    d = diag(rec, full_stages(union=rows(U_RULE, U_HEAD)))
    assert (d.step, d.label, d.step_name) == (5, "lost-in-steps-4-5", "support lost in steps 4-5")
    assert d.walk[3] == unrecorded(4, "BM25 + ANN")
    assert d.walk[-1]["detail"] == (
        "support lost: the deduplicated union; step 4 not recorded, so the loss lies somewhere in "
        "steps 4-5 (missing: qualifier)"
    )
    assert d.evidence["stages_not_recorded"] == ["production"]


def test_an_unrecorded_stage_not_next_to_the_loss_keeps_the_step_name():
    rec = record("reranked", support_exact=None)
    st = full_stages(reranked=rows((U_RULE, 0.9), (U_HEAD, 0.8), (U_QUAL, 0.1)))
    d = diag(rec, st)
    assert (d.step, d.label, d.step_name) == (7, "reranker-removes-it", STEP_NAMES[7])
    assert d.flags == ("answer-correct-without-support", "stages-not-recorded")
    assert d.walk[2] == unrecorded(3, "BM25 + exact dense")
    assert d.walk[-1]["detail"] == (
        "support lost: the reranked list cut at selection depth (missing: qualifier)"
    )


def test_unrecorded_stages_of_a_record_that_keeps_support_walk_as_unknown():
    rec = record(support_union=None, support_fused=None)
    d = diag(rec)
    assert (d.step, d.label) == (0, "pass")
    assert d.flags == ("stages-not-recorded",)
    assert d.walk == [
        *PASS_WALK[:4],
        unrecorded(5, "the deduplicated union"),
        unrecorded(6, "the fused list cut at rerank depth"),
        *PASS_WALK[6:],
    ]
    assert d.evidence["stage"] == "pass"
    assert d.evidence["stages_not_recorded"] == ["union", "fused"]


def test_citations_not_recorded_is_step_ten_unknown_not_a_failure():
    for verdict in ("correct", "not-judged"):
        rec = record(citation_verdict="not-recorded", answer_verdict=verdict)
        d = diag(rec)
        assert (d.step, d.label) == (0, "pass")
        assert d.flags == ("citations-not-recorded", "stages-not-recorded")
        assert d.walk[-1] == {
            "step": 10,
            "name": STEP_NAMES[10],
            "passed": None,
            "detail": "not recorded: the pipeline recorded no citations",
        }
        assert d.evidence["stages_recorded"] == ALL_STAGES
        assert d.evidence["stages_not_recorded"] == ["citations"]
        assert d.evidence["stage"] == "pass" and d.evidence["citation_verdict"] == "not-recorded"
        assert [s["span"] for s in d.evidence["spans"]] == ["rule", "qualifier"]
    # a wrong answer still fails step 9 before the citations are looked at
    d = diag(record(citation_verdict="not-recorded", answer_verdict="wrong"))
    assert (d.step, d.label) == (9, "answer-ignores-it") and d.flags == ("stages-not-recorded",)
    assert d.walk[-1]["step"] == 9 and d.walk[-1]["passed"] is False


def test_a_gold_miss_or_a_control_names_no_unrecorded_stage():
    d = diag(record(gold_status="not in the authorized corpus: policy.md", support_exact=None))
    assert d.step == 1 and "stages-not-recorded" not in d.flags
    assert "stages_recorded" not in d.evidence


# ---------------------------------------------------------------------------
# unplaced chunks


def test_a_loss_at_a_stage_holding_an_unplaced_chunk_is_unverifiable():
    rec = record("fused", unverifiable_stages="fused")
    st = full_stages(fused=rows(U_RULE, U_HEAD, U_HEAD | {"unit_id": "x"}, U_QUAL))
    d = diag(rec, st)
    assert (d.step, d.label, d.step_name) == (6, UNVERIFIABLE, UNVERIFIABLE_NAME)
    assert d.flags == ("answer-correct-without-support", UNVERIFIABLE)
    assert d.walk[:-1] == PASS_WALK[:5]
    assert d.walk[-1] == {
        "step": 6,
        "name": STEP_NAMES[6],
        "passed": None,
        "detail": "unverifiable: unlocated chunk: the fused list cut at rerank depth: support not covered "
        "without a chunk of a gold document that could not be placed (missing: qualifier)",
    }
    assert d.evidence["stage"] == "fused"


def test_a_loss_that_a_later_unplaced_chunk_may_regain_is_unverifiable():
    rec = record("union", unverifiable_stages="reranked,packed")
    d = diag(rec, full_stages(union=rows(U_RULE, U_HEAD)))
    assert (d.step, d.label, d.step_name) == (5, UNVERIFIABLE, UNVERIFIABLE_NAME)
    assert d.flags == ("answer-correct-without-support", UNVERIFIABLE)
    assert d.walk[-1] == {
        "step": 5,
        "name": STEP_NAMES[5],
        "passed": False,
        "detail": "support lost: the deduplicated union; unverifiable: unlocated chunk: step(s) 7, 8 hold "
        "a chunk of a gold document that could not be placed, which may regain it (missing: qualifier)",
    }


def test_an_unplaced_chunk_before_the_loss_changes_nothing():
    rec = record("union", unverifiable_stages="chunked,exact")
    d = diag(rec, full_stages(union=rows(U_RULE, U_HEAD)))
    assert (d.step, d.label, d.step_name) == (5, "union-dedup-drops-it", STEP_NAMES[5])
    assert d.flags == ("answer-correct-without-support",)
    assert d.walk[-1]["passed"] is False
    assert d.walk[-1]["detail"] == "support lost: the deduplicated union (missing: qualifier)"


def test_a_kept_stage_never_rests_on_an_unplaced_chunk():
    d = diag(record(unverifiable_stages="union,packed"))
    assert (d.step, d.label, d.flags, d.walk) == (0, "pass", (), PASS_WALK)


def test_a_citation_failure_resting_on_an_unplaced_cited_chunk_is_unverifiable():
    rec = record(citation_verdict="unsupported", unverifiable_stages="cited")
    d = diag(rec)
    assert (d.step, d.label, d.step_name) == (10, UNVERIFIABLE, UNVERIFIABLE_NAME)
    assert d.flags == (UNVERIFIABLE,)
    assert d.walk == [
        *PASS_WALK[:9],
        {
            "step": 10,
            "name": STEP_NAMES[10],
            "passed": None,
            "detail": "unverifiable: unlocated chunk: citation verdict unsupported, and a cited chunk could "
            "not be placed",
        },
    ]
    assert d.evidence["stage"] == "citations" and d.evidence["citation_verdict"] == "unsupported"
    assert {s["span"]: s["cited"] for s in d.evidence["spans"]} == {"rule": False, "qualifier": False}
    # supported citations pass whatever could not be placed; a stage's unplaced chunk is not cited
    assert diag(record(unverifiable_stages="cited")).label == "pass"
    d = diag(record(citation_verdict="unsupported", unverifiable_stages="packed"))
    assert (d.step, d.label, d.walk[-1]["passed"]) == (10, "citation-wrong", False)


def test_a_gold_miss_is_never_unverifiable():
    d = diag(record(gold_status="not in the authorized corpus: policy.md", unverifiable_stages="chunked"))
    assert (d.step, d.label) == (1, "gold-absent-from-corpus") and UNVERIFIABLE not in d.flags


def test_unverifiable_takes_the_place_of_an_oracle_label():
    rec = record("fused", unverifiable_stages="fused")
    st = full_stages(fused=rows(U_RULE, U_HEAD, U_HEAD | {"unit_id": "x"}, U_QUAL))
    d = diag(rec, st, oracle={"answer_verdict": "correct", "feasible": True})
    assert d.label == UNVERIFIABLE and d.flags == ("answer-correct-without-support", UNVERIFIABLE)
    assert d.evidence["oracle"] == {"verdict": "correct", "feasible": True}


# ---------------------------------------------------------------------------
# the answer side unverified (analysis/validity.py)


def test_an_unverified_answer_side_relabels_a_support_loss_and_drops_annotation_check():
    lost = full_stages(reranked=rows((U_RULE, 0.9), (U_HEAD, 0.8), (U_QUAL, 0.1)))
    rec = record("reranked", answer_unverified=True)
    d = diag(rec, lost, oracle={"answer_verdict": "wrong", "feasible": True})
    assert (d.step, d.step_name, d.label) == (7, STEP_NAMES[7], UNVERIFIED)
    assert d.flags == ("answer-correct-without-support", UNVERIFIED)
    assert all("answer_side" not in w for w in d.walk)  # the walk stopped before the answer side
    # the same record in a verified arm: both fail, check the annotation
    d = diag(record("reranked"), lost, oracle={"answer_verdict": "wrong", "feasible": True})
    assert (d.label, d.flags) == ("both-fail", ("answer-correct-without-support", "annotation-check"))


def test_an_unverified_answer_side_marks_the_walks_answer_entries():
    rec = record(answer_verdict="wrong", citation_verdict="unsupported", answer_unverified=True)
    d = diag(rec, oracle={"answer_verdict": "abstained", "feasible": True})
    assert (d.step, d.label, d.flags) == (9, UNVERIFIED, (UNVERIFIED,))
    assert d.walk == [
        *PASS_WALK[:8],
        {
            "step": 9,
            "name": STEP_NAMES[9],
            "passed": False,
            "detail": "answer verdict wrong" + ANSWER_SIDE_NOTE,
            "answer_side": "unverified",
        },
    ]
    # a passing record keeps its step and label; its answer entries say they are not verdicts
    d = diag(record(answer_unverified=True), oracle={"answer_verdict": "wrong", "feasible": True})
    assert (d.step, d.label, d.flags) == (0, "pass", (UNVERIFIED,))
    assert d.walk[:8] == PASS_WALK[:8]
    assert [(w["step"], w["answer_side"], w["detail"]) for w in d.walk[8:]] == [
        (9, "unverified", "answer verdict correct" + ANSWER_SIDE_NOTE),
        (10, "unverified", "citation verdict supported" + ANSWER_SIDE_NOTE),
    ]


def test_the_answer_side_is_unverified_only_where_the_oracle_failed_on_sound_gold():
    oracle_ok = {"answer_verdict": "correct", "feasible": True}
    rec = record(answer_verdict="wrong", citation_verdict="unsupported", answer_unverified=True)
    d = diag(rec, oracle=oracle_ok)
    assert (d.label, d.flags) == ("generator-failure-oracle-success", ())
    # the oracle failed but the arm's answer side is verified
    d = diag(
        record(answer_verdict="wrong", citation_verdict="unsupported", answer_unverified=False),
        oracle={"answer_verdict": "wrong", "feasible": True},
    )
    assert (d.label, d.flags) == ("both-fail", ("annotation-check",))
    # a gold miss is the corpus's fault, not the answer side's
    rec = record(gold_status="not in the authorized corpus: policy.md", answer_unverified=True)
    d = diag(rec, oracle={"answer_verdict": "wrong", "feasible": True})
    assert (d.step, d.label) == (1, "gold-absent-from-corpus")
    assert d.flags == ("answer-correct-without-support", "annotation-check")
    # an infeasible oracle that failed: the answer side is unverified, the budget flagged
    d = diag(record(answer_unverified=True), oracle={"answer_verdict": "abstained", "feasible": False})
    assert d.flags == ("budget-infeasible", UNVERIFIED)


def _control(verdict: str, **kw) -> dict:
    return record(
        answerable=False,
        answer_verdict=verdict,
        covered_set=None,
        oracle_verdict="not-applicable",
        **{f"support_{s}": None for s in ALL_STAGES},
        **kw,
    )


def test_a_control_that_abstained_in_an_unverified_arm_proves_nothing():
    d = diag(_control("abstained", answer_unverified=True), {}, None)
    assert (d.step, d.label, d.step_name) == (0, "control-abstained", STEP_NAMES[0])
    assert d.flags == (UNVERIFIED,)
    assert d.walk == [
        {
            "step": 9,
            "name": "unanswerable control",
            "passed": True,
            "detail": "abstained" + ANSWER_SIDE_NOTE,
            "answer_side": "unverified",
        }
    ]
    # a false assertion stays one
    d = diag(_control("false-assertion", answer_unverified=True), {}, None)
    assert (d.step, d.label, d.flags) == (9, "control-false-assertion", ())
    assert d.step_name == "control answered (false assertion)"
    assert "answer_side" not in d.walk[0]
    d = diag(_control("abstained", answer_unverified=False), {}, None)
    assert d.flags == () and "answer_side" not in d.walk[0]


@pytest.mark.parametrize("verdict", ["critical-condition-error", "abstained", "wrong", "false-assertion"])
def test_every_oracle_failure_makes_the_answer_side_unverified(verdict):
    rec = record(answer_verdict="wrong", citation_verdict="unsupported", answer_unverified=True)
    d = diag(rec, oracle={"answer_verdict": verdict, "feasible": True})
    assert (d.label, d.flags) == (UNVERIFIED, (UNVERIFIED,))


def test_spans_of_a_collapsed_loss_name_their_documents():
    rec = record("chunked", support_chunked=None, support_exact=False)
    d = diag(rec, full_stages(units=rows(U_HEAD), bm25=rows((U_HEAD, 1.0)), dense_exact=rows((U_HEAD, 0.5))))
    assert (d.step, d.label) == (3, "lost-in-steps-2-3")
    assert d.walk[1] == unrecorded(2, "the chunked units")
    assert "step 2 not recorded, so the loss lies somewhere in steps 2-3" in d.walk[-1]["detail"]
    assert {f["span"] for f in d.evidence["span_fates"]} == {RULE.span_id, QUAL.span_id}


def test_collapsed_spans_at_the_ends_of_the_support_walk():
    # the reranked list not recorded: a loss at the packed context lies in steps 7-8
    rec = record("packed", support_reranked=None, answer_verdict="wrong", citation_verdict="unsupported")
    d = diag(rec, full_stages(packed=rows(U_RULE)))
    assert (d.step, d.label, d.step_name) == (8, "lost-in-steps-7-8", "support lost in steps 7-8")
    assert d.walk[6] == unrecorded(7, "the reranked list cut at selection depth")
    # the packed context not recorded: the answer's step is still its own
    rec = record(support_packed=None, answer_verdict="wrong", citation_verdict="unsupported")
    d = diag(rec)
    assert (d.step, d.label, d.step_name) == (9, "answer-ignores-it", STEP_NAMES[9])
    assert d.walk[7] == unrecorded(8, "the packed context")
    assert d.walk[8]["passed"] is False and d.flags == ("stages-not-recorded",)


def test_an_unverified_answer_side_relabels_a_loss_at_the_first_support_step():
    rec = record("chunked", answer_verdict="wrong", citation_verdict="unsupported", answer_unverified=True)
    d = diag(rec, full_stages(units=rows(U_HEAD)), oracle={"answer_verdict": "wrong", "feasible": True})
    assert (d.step, d.step_name, d.label, d.flags) == (2, STEP_NAMES[2], UNVERIFIED, (UNVERIFIED,))


BARE = _fixture(spans=(replace(RULE, quote=None), replace(QUAL, quote=None)))


@pytest.mark.parametrize(
    "kw",
    [
        {"citation_verdict": "not-recorded"},
        {"citation_verdict": "unsupported", "unverifiable_stages": "cited"},
        {"citation_verdict": "unsupported"},
        {"answer_verdict": "not-judged", "citation_verdict": "no-citation"},
    ],
)
def test_answer_side_evidence_quotes_the_kept_set_from_the_texts(kw):
    # spans without a stored quote, and no covered set on the record: the evidence finds the set the
    # packed context keeps and quotes its spans from the source texts
    d = diag(record(covered_set=None, **kw), fixture=BARE)
    assert d.evidence["sufficient_set"] == 0
    assert [(s["span"], s["quote"]) for s in d.evidence["spans"]] == [
        ("rule", RULE.quote),
        ("qualifier", QUAL.quote),
    ]
    assert [s["packed_units"] for s in d.evidence["spans"]] == [
        [{"unit_id": U_RULE["unit_id"], "rank": 2}],
        [{"unit_id": U_QUAL["unit_id"], "rank": 1}],
    ]
