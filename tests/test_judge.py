"""Answer and citation verdicts, on the seed 000 example and small hand-made fixtures."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from ledgerscope.inputs.fixtures import AnswerContract, Fixture, GoldSpan, load_fixtures
from ledgerscope.pipeline.contracts.prompt import ABSTAIN_TEXT
from ledgerscope.rules.judge import (
    ANSWER_VERDICTS,
    CITATION_VERDICTS,
    extract_quantities,
    is_abstention,
    judge_answer,
    judge_citations,
    token_f1,
)

DATA = Path(__file__).parent / "data"
SEED_TEXT = "Requests may be retained for 30 days. This limit is 7 days for requests marked temporary."


@pytest.fixture(scope="module")
def seed() -> tuple[Fixture, dict[str, str]]:
    fixtures, corpus = load_fixtures(DATA / "seed000_fixture.json")
    (fx,) = fixtures
    # the seed gives the default only in prose; the contract names it explicitly
    fx = replace(fx, answer=replace(fx.answer, default="30 days"))
    return fx, {doc: corpus.get(doc).text for doc in fx.doc_ids}


# ---------------------------------------------------------------------------
# quantities


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("At most 7 days.", {(7.0, "day")}),
        ("seven days", {(7.0, "day")}),
        ("a 7-day window", {(7.0, "day")}),
        ("a seven-day window", {(7.0, "day")}),
        ("1 week", {(7.0, "day")}),
        ("two weeks", {(14.0, "day")}),
        ("twenty-one days", {(21.0, "day")}),
        ("one hundred and twenty days", {(120.0, "day")}),
        ("36 hours", {(36.0, "hour")}),
        ("15 min", {(15.0, "minute")}),
        ("6 months", {(6.0, "month")}),
        ("3 years", {(3.0, "year")}),
        ("3 business days", {(3.0, "business-day")}),
        ("50%", {(50.0, "%")}),
        ("fifty per cent", {(50.0, "%")}),
        ("12 percent", {(12.0, "%")}),
        ("$1,200.50", {(1200.5, "USD")}),
        ("1200.5 dollars", {(1200.5, "USD")}),
        ("EUR 5", {(5.0, "EUR")}),
        ("5 euros", {(5.0, "EUR")}),
        ("1.5 GB", {(1.5e9, "byte")}),
        ("1500 MB", {(1.5e9, "byte")}),
        ("512 MiB", {(512 * 2**20, "byte")}),
        ("100 requests per minute", {(100.0, "request/minute")}),
        ("100 req/min", {(100.0, "request/minute")}),
        ("100 rpm", {(100.0, "request/minute")}),
        ("2 million dollars", {(2e6, "USD")}),
        ("between 7 and 30 days", {(7.0, "day"), (30.0, "day")}),
        ("7-10 days", {(7.0, "day"), (10.0, "day")}),
        ("Level 3", {(3.0, "")}),
        ("the one marked temporary", set()),
        ("once a day", set()),
        ("none of them", set()),
        ("See [1] and [2].", set()),
        ("", set()),
    ],
)
def test_extract_quantities(text, expected):
    assert extract_quantities(text) == expected


# ---------------------------------------------------------------------------
# abstention


@pytest.mark.parametrize(
    "text",
    [
        None,
        "",
        "   ",
        "[1]",
        ABSTAIN_TEXT,
        ABSTAIN_TEXT.upper(),
        "I cannot answer that from the sources.",
        "Unknown.",
        "I don't know.",
        "I don\u2019t know",
        "The sources do not specify the limit for temporary requests.",
        "The provided context does not contain this information.",
        "There is not enough information to answer.",
        "This is not mentioned in the provided sources.",
    ],
)
def test_is_abstention_true(text):
    assert is_abstention(text)


@pytest.mark.parametrize(
    "text",
    [
        "7 days",
        "The limit is unknown to most users but is 7 days.",
        "The sources do not say, but probably 30 days.",
        "The manager approves it.",
    ],
)
def test_is_abstention_false(text):
    assert not is_abstention(text)


# ---------------------------------------------------------------------------
# answers on the seed example


@pytest.mark.parametrize(
    ("answer", "verdict"),
    [
        ("This limit is 7 days for requests marked temporary.", "correct"),
        ("This limit is 7 days for requests marked temporary [1].", "correct"),
        ("Requests may be retained for 30 days.", "critical-condition-error"),
        ("Requests may be retained for thirty days [1].", "critical-condition-error"),
        ("seven days", "correct"),
        ("1 week", "correct"),
        ("A seven-day limit applies.", "correct"),
        ("The limit is 7 [2].", "wrong"),  # a bare number is not "7 days" unless the fixture allows it
        ("14 days", "wrong"),
        ("7 hours", "wrong"),
        ("Temporary requests are deleted immediately.", "wrong"),
        (ABSTAIN_TEXT, "abstained"),
        ("", "abstained"),
    ],
)
def test_seed_answers(seed, answer, verdict):
    fx, _ = seed
    judgement = judge_answer(answer, False, fx)
    assert judgement.verdict == verdict, judgement.reason
    assert judgement.verdict in ANSWER_VERDICTS


def test_correct_reports_what_matched(seed):
    fx, _ = seed
    j = judge_answer("seven days", False, fx)
    assert j.matched == "At most 7 days."
    j = judge_answer("30 days", False, fx)
    assert (j.verdict, j.matched) == ("critical-condition-error", "30 days")


def test_both_values_mentioned_is_correct(seed):
    # documented choice: the qualified value present wins over the default also present
    fx, _ = seed
    j = judge_answer("Requests are generally kept 30 days; temporary ones at most 7 days.", False, fx)
    assert j.verdict == "correct"
    assert "default" in j.reason


def test_generator_abstention_flag_wins(seed):
    fx, _ = seed
    assert judge_answer("7 days", True, fx).verdict == "abstained"


def test_bare_number_matches_only_when_the_fixture_allows_it(seed):
    fx, _ = seed
    assert judge_answer("The limit is 7 [2].", False, fx).verdict == "wrong"
    allowed = replace(fx, answer=replace(fx.answer, match={"bare_number": True}))
    assert judge_answer("The limit is 7 [2].", False, allowed).verdict == "correct"


def test_no_default_and_no_qualifier_means_wrong_not_condition_error(seed):
    fx, _ = seed
    # without a declared default and without a qualifier span, nothing can be inferred
    fx = replace(
        fx,
        answer=replace(fx.answer, default=None),
        spans=tuple(replace(s, dependency="primary") for s in fx.spans),
    )
    assert judge_answer("30 days", False, fx).verdict == "wrong"


# ---------------------------------------------------------------------------
# controls, support-only, aliases, text answers


def _fx(**kw) -> Fixture:
    base = dict(
        qid="q",
        question="Who approves exceptions?",
        segment="definition-referent",
        spans=(GoldSpan("a", "doc", 0, 10),),
        sufficient_sets=(("a",),),
        answer=AnswerContract(expected="The data protection officer"),
    )
    base.update(kw)
    return Fixture(**base)


def test_unanswerable_control():
    fx = _fx(segment="unanswerable", answerable=False, sufficient_sets=(), answer=AnswerContract())
    assert judge_answer("Seven days.", False, fx).verdict == "false-assertion"
    assert judge_answer(ABSTAIN_TEXT, False, fx).verdict == "abstained"
    assert judge_answer("Anything", True, fx).verdict == "abstained"
    assert judge_answer("The sources do not say, maybe 30 days", False, fx).verdict == ("false-assertion")


def test_support_only_is_not_judged():
    fx = _fx(support_only=True, answer=AnswerContract())
    assert judge_answer("whatever", False, fx).verdict == "not-judged"
    assert judge_answer(None, True, fx).verdict == "not-judged"


def test_alias_match():
    fx = _fx(answer=AnswerContract(expected="The data protection officer", aliases=("DPO",)))
    j = judge_answer("Exceptions are approved by the DPO [1].", False, fx)
    assert (j.verdict, j.matched) == ("correct", "DPO")


def test_text_answers():
    fx = _fx(answer=AnswerContract(expected="The data protection officer", default="the department head"))
    assert judge_answer("The Data-Protection Officer.", False, fx).verdict == "correct"
    assert (
        judge_answer("Exceptions need sign-off from the data protection officer [2].", False, fx).verdict
        == "correct"
    )
    # paraphrase above the F1 threshold
    assert judge_answer("data officer for protection", False, fx).verdict == "correct"
    assert judge_answer("The department head approves them.", False, fx).verdict == (
        "critical-condition-error"
    )
    assert judge_answer("The CEO approves them.", False, fx).verdict == "wrong"
    # a long answer that only mentions one word of the expected answer is not a match
    assert (
        judge_answer(
            "The officer in charge of the building handles all exceptions on request.", False, fx
        ).verdict
        == "wrong"
    )


def test_token_f1():
    assert token_f1("the data protection officer", "Data protection officer") == 1.0
    assert token_f1("", "x") == 0.0
    assert 0.0 < token_f1("data officer", "data protection officer") < 1.0


def test_answerable_without_expected_is_not_judged():
    fx = _fx(answer=AnswerContract())
    assert judge_answer("x", False, fx).verdict == "not-judged"


# ---------------------------------------------------------------------------
# citations


def test_citations_cover_joint_evidence_across_two_units(seed):
    fx, texts = seed
    doc = fx.spans[0].doc_id
    cited = [("1", doc, 0, 37), ("2", doc, 38, 89)]
    j = judge_citations(cited, fx, texts, "correct")
    assert j.verdict == "supported"
    assert j.covered_set == ("rule", "qualifier")
    assert j.verdict in CITATION_VERDICTS


def test_citations_overlapping_units_and_whitespace_gap(seed):
    fx, texts = seed
    doc = fx.spans[0].doc_id
    assert texts[doc] == SEED_TEXT
    # the two units leave only the space at offset 37 uncovered: whitespace is not evidence
    assert judge_citations([("1", doc, 0, 37), ("2", doc, 38, 89)], fx, texts, "wrong").verdict == "supported"
    assert (
        judge_citations([("1", doc, 0, 60), ("2", doc, 30, 89)], fx, texts, "correct").verdict == "supported"
    )


def test_citations_missing_one_span(seed):
    fx, texts = seed
    doc = fx.spans[0].doc_id
    j = judge_citations([("1", doc, 0, 37)], fx, texts, "critical-condition-error")
    assert j.verdict == "unsupported"
    assert "qualifier" in j.reason
    assert j.covered_set is None
    # a unit that stops short of the qualifier's last word does not cover it; one that leaves out
    # only its final full stop does (a punctuation remainder is excused, like whitespace)
    assert judge_citations([("1", doc, 0, 87)], fx, texts, "correct").verdict == "unsupported"
    assert judge_citations([("1", doc, 0, 88)], fx, texts, "correct").verdict == "supported"


def test_citations_unknown_label(seed):
    fx, texts = seed
    doc = fx.spans[0].doc_id
    j = judge_citations([("1", doc, 0, 89), ("7", None, None, None)], fx, texts, "correct")
    assert j.verdict == "unresolvable"
    assert "7" in j.reason


def test_citations_none_and_abstained(seed):
    fx, texts = seed
    doc = fx.spans[0].doc_id
    assert judge_citations([], fx, texts, "correct").verdict == "no-citation"
    assert judge_citations([("1", doc, 0, 89)], fx, texts, "abstained").verdict == ("not-applicable")


def test_citations_on_false_assertion():
    fx = _fx(segment="unanswerable", answerable=False, sufficient_sets=(), answer=AnswerContract())
    j = judge_citations([("1", "doc", 0, 10)], fx, {"doc": "x" * 20}, "false-assertion")
    assert j.verdict == "unsupported"


def test_citations_across_documents_and_alternative_sets():
    texts = {"A": "Alpha rule text here.", "B": "Beta exception text.", "C": "Gamma restated."}
    fx = _fx(
        spans=(GoldSpan("a", "A", 0, 21), GoldSpan("b", "B", 0, 20), GoldSpan("c", "C", 0, 15)),
        sufficient_sets=(("a", "b"), ("c",)),
    )
    assert judge_citations([("1", "A", 0, 21), ("2", "B", 0, 20)], fx, texts, "correct").covered_set == (
        "a",
        "b",
    )
    j = judge_citations([("1", "A", 0, 21)], fx, texts, "correct")
    assert j.verdict == "unsupported" and "b" in j.reason
    # same offsets in the wrong document do not count
    assert (
        judge_citations([("1", "A", 0, 21), ("2", "A", 0, 20)], fx, texts, "correct").verdict == "unsupported"
    )
    j = judge_citations([("3", "C", 0, 15)], fx, texts, "correct")
    assert (j.verdict, j.covered_set) == ("supported", ("c",))
