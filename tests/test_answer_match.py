"""The free-text judge: a table of judged answers, inferred defaults, currencies with rates."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from ledgerscope.inputs.fixtures import AnswerContract, Fixture, GoldSpan, load_fixtures
from ledgerscope.rules.answer_match import extract_quantities, is_abstention
from ledgerscope.rules.judge import infer_default, judge_answer, with_inferred_default

DATA = Path(__file__).parent / "data"


def _seed() -> Fixture:
    """The seed 000 fixture verbatim: no declared default, only the prose "must not silently apply"."""
    (fx,) = load_fixtures(DATA / "seed000_fixture.json")[0]
    return fx


def _fx(expected, *, default=None, aliases=(), match=None, answerable=True, spans=None) -> Fixture:
    spans = spans if spans is not None else (GoldSpan("a", "doc", 0, 10, quote="x" * 10),)
    return Fixture(
        qid="q",
        question="?",
        segment="definition-referent" if answerable else "unanswerable",
        spans=spans if answerable else (),
        sufficient_sets=((spans[0].span_id,),) if answerable else (),
        answer=AnswerContract(expected=expected, default=default, aliases=tuple(aliases), match=match or {}),
        answerable=answerable,
    )


SEED = _seed()
OFFICER = _fx("The data protection officer", aliases=("DPO",), default="the department head")
PRICE = _fx("€18 per user per month", default="€15 per user per month")
UPLOAD = _fx("20 MB", default="250 MB")
GENOME = _fx("single-stranded, linear, and nonsegmented RNA", match={"token_f1": 0.5})
CONTROL = _fx(None, answerable=False)

#: (fixture, free-text answer as an LLM would write it, verdict, what the row shows)
TABLE = [
    (SEED, "Requests marked temporary can be kept for at most seven days [2].", "correct", "paraphrase"),
    (SEED, "A 7-day limit applies to temporary requests.", "correct", "number words and hyphenated units"),
    (
        SEED,
        "30 days in general; 7 days for temporary requests.",
        "correct",
        "hedged: both values, the qualified one given",
    ),
    (
        SEED,
        "They may be retained for 30 days [1].",
        "critical-condition-error",
        "the inferred default applied",
    ),
    (SEED, "Thirty days.", "critical-condition-error", "the default as words"),
    (SEED, "7", "wrong", "a bare number is not a quantity with a unit"),
    (SEED, "Temporary requests are kept for 7 hours.", "wrong", "the right number in the wrong unit"),
    (SEED, "Requests may be kept for a month.", "wrong", "no stated number"),
    (
        SEED,
        "I'm sorry, the sources don't say how long temporary requests are kept.",
        "abstained",
        "a refusal",
    ),
    (SEED, "I cannot answer from the provided sources.", "abstained", "the prompt's refusal"),
    (OFFICER, "Exceptions are signed off by the DPO [1].", "correct", "an alias"),
    (OFFICER, "The officer for data protection signs off.", "correct", "paraphrase above the F1 rule"),
    (OFFICER, "An officer.", "wrong", "partial: below the F1 rule"),
    (OFFICER, "The department head approves them.", "critical-condition-error", "a text default"),
    (PRICE, "Billing is €18 per user per month.", "correct", "currency with a rate"),
    (PRICE, "It costs 18 euros per user every month.", "correct", "the currency as a word"),
    (PRICE, "It costs $18 per user per month.", "wrong", "the currency is part of the claim"),
    (PRICE, "It is €15 per user per month [3].", "critical-condition-error", "the default price"),
    (PRICE, "€18.", "wrong", "partial: the amount without its rate"),
    (UPLOAD, "Files may be up to 20 megabytes each on the Free plan.", "correct", "a unit spelled out"),
    (UPLOAD, "The limit is 20000 KB.", "correct", "a unit converted"),
    (UPLOAD, "Each uploaded file may be up to 250 MB.", "critical-condition-error", "the general rule"),
    (
        GENOME,
        "Its genome is a single-stranded, linear, and nonsegmented RNA of around 31 kb.",
        "correct",
        "a sentence quoting the answer span",
    ),
    (GENOME, "a linear, nonsegmented, single-stranded RNA genome", "correct", "reordered span (token F1)"),
    (GENOME, "RNA", "wrong", "partial span below the declared F1 rule"),
    (CONTROL, "I could not find this in the sources.", "abstained", "a control refused"),
    (
        CONTROL,
        "The meeting recorder accepts videos of up to 2 hours.",
        "false-assertion",
        "a control answered",
    ),
    (
        CONTROL,
        "The sources do not say, but probably 2 hours.",
        "false-assertion",
        "hedged: a refusal next to a number is a claim",
    ),
]


@pytest.mark.parametrize(
    ("fixture", "answer", "verdict", "shows"), TABLE, ids=[f"{row[2]}:{row[3]}" for row in TABLE]
)
def test_judged_free_text(fixture, answer, verdict, shows):
    judgement = judge_answer(answer, False, fixture)
    assert judgement.verdict == verdict, (shows, judgement.reason)


def test_the_table_covers_every_verdict_class():
    assert {row[2] for row in TABLE} == {
        "correct",
        "critical-condition-error",
        "abstained",
        "wrong",
        "false-assertion",
    }


# ---------------------------------------------------------------------------
# inferred defaults


def test_seed_default_is_inferred_from_the_rule_span():
    assert SEED.answer.default is None
    assert infer_default(SEED) == ("30 days", "rule")
    contract = with_inferred_default(SEED).answer.to_json()
    assert contract["default"] == "30 days" and contract["default_inferred_from"] == "rule"
    reason = judge_answer("Requests may be retained for 30 days.", False, SEED).reason
    assert "inferred from span 'rule'" in reason


def test_a_declared_default_wins():
    declared = replace(SEED, answer=replace(SEED.answer, default="14 days"))
    assert with_inferred_default(declared) is declared
    assert judge_answer("30 days", False, declared).verdict == "wrong"
    assert judge_answer("14 days", False, declared).verdict == "critical-condition-error"


def test_no_inference_without_a_qualifier_or_with_several_values():
    plain = replace(SEED, spans=tuple(replace(s, dependency="primary") for s in SEED.spans))
    assert infer_default(plain) is None
    rule = replace(SEED.spans[0], quote="Requests may be retained for 30 days, or 90 days on Enterprise.")
    several = replace(SEED, spans=(rule, SEED.spans[1]))
    assert infer_default(several) is None
    assert judge_answer("30 days", False, several).verdict == "wrong"


def test_inferred_default_survives_the_canonical_form(tmp_path):
    fx = with_inferred_default(SEED)
    path = tmp_path / "f.jsonl"
    obj = fx.to_json()
    obj["sources"] = [
        {
            "doc_id": fx.spans[0].doc_id,
            "text": json.loads((DATA / "seed000_fixture.json").read_text())["source_text"],
        }
    ]
    path.write_text(json.dumps(obj) + "\n")
    (back,) = load_fixtures(path)[0]
    assert (back.answer.default, back.answer.default_inferred_from) == ("30 days", "rule")


# ---------------------------------------------------------------------------
# quantities and refusals


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("€18 per user per month", {(18.0, "EUR/month")}),
        ("18 euros per user per month", {(18.0, "EUR/month")}),
        ("€18/month", {(18.0, "EUR/month")}),
        ("$5 a month", {(5.0, "USD/month")}),
        ("USD 5 per year", {(5.0, "USD/year")}),
        ("€18", {(18.0, "EUR")}),
        ("20 MB per file", {(20e6, "byte")}),
        ("100 requests per minute", {(100.0, "request/minute")}),
    ],
)
def test_currency_keeps_its_currency_through_a_rate(text, expected):
    assert extract_quantities(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "The sources don't mention it.",
        "The context doesn't specify the limit.",
        "I couldn't find that in the documents.",
        "I'm not sure.",
        "There is no mention of a limit for temporary requests.",
    ],
)
def test_more_refusals(text):
    assert is_abstention(text)
