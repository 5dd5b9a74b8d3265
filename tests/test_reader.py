"""The extractive reader: answers from the sentence that stands out, abstains on a merely topical context."""

from __future__ import annotations

import pytest

from ledgerscope.pipeline.contracts.prompt import ABSTAIN_TEXT, ContextBlock
from ledgerscope.pipeline.generation.reader import (
    DEFAULT_ABSTAIN_MARGIN,
    DEFAULT_ABSTAIN_THRESHOLD,
    ExtractiveReader,
    asks_for_quantity,
)


def _scored(*pairs):
    return [{"sentence": text, "score": score, "label": "1", "block": 0, "start": 0} for text, score in pairs]


def test_runner_up_skips_repeats_and_fragments_of_the_best_sentence():
    scored = _scored(
        ("Requests may be retained for 30 days.", 0.7),
        ("retained for 30 days.", 0.69),
        ("Requests  may be retained for 30 days.", 0.68),
        ("Backups are kept for 14 days.", 0.4),
    )
    assert ExtractiveReader.runner_up(scored)["sentence"] == "Backups are kept for 14 days."
    assert ExtractiveReader.margin(scored) == pytest.approx(0.3)
    assert ExtractiveReader.margin(_scored(("Only one.", 0.42))) == pytest.approx(0.42)
    assert ExtractiveReader.margin([]) == 0.0


def test_abstain_reason():
    rule = ExtractiveReader.abstain_reason
    assert rule([], 0.0, 0.3, 0.06) == "below-threshold"
    assert rule(_scored(("a", 0.2)), 0.2, 0.3, 0.06) == "below-threshold"
    assert rule(_scored(("a", 0.6), ("b", 0.58)), 0.02, 0.3, 0.06) == "topical"
    assert rule(_scored(("a", 0.6), ("b", 0.4)), 0.2, 0.3, 0.06) is None


@pytest.mark.parametrize(
    ("question", "wanted"),
    [
        ("What retention limit applies to requests marked temporary?", True),
        ("How long may requests be retained?", True),
        ("How many nucleotides does bovine coronavirus contain?", True),
        ("When was the study conducted?", True),
        ("What is the molecular structure of bovine coronavirus?", False),
        ("Who approves exceptions?", False),
        ("Receiving Party shall notify Disclosing Party of compelled disclosure.", False),
    ],
)
def test_asks_for_quantity(question, wanted):
    assert asks_for_quantity(question) is wanted


def test_settings_come_from_the_generator_table():
    reader = ExtractiveReader.from_config(None, len, {"abstain_threshold": 0.2, "abstain_margin": 0.1})
    assert (reader.abstain_threshold, reader.abstain_margin) == (0.2, 0.1)
    default = ExtractiveReader.from_config(None, len, {})
    assert (default.abstain_threshold, default.abstain_margin) == (
        DEFAULT_ABSTAIN_THRESHOLD,
        DEFAULT_ABSTAIN_MARGIN,
    )
    assert "margin" in default.describe()["scoring"]


@pytest.fixture(scope="module")
def reader():
    from ledgerscope.pipeline.embedding.encoder import TokenCounter, shared_encoder

    encoder = shared_encoder()
    return ExtractiveReader(encoder.get, TokenCounter(encoder.name).count)


@pytest.mark.slow
def test_answers_from_support_and_abstains_on_a_topical_context(reader):
    question = "What retention limit applies to requests marked temporary?"
    support = [
        ContextBlock(
            "1",
            "u1",
            "doc",
            "Requests may be retained for 30 days. This limit is 7 days for requests marked temporary.",
        )
    ]
    answered = reader.generate(question, support)
    assert not answered.abstained and "7 days" in answered.answer and answered.citations == ["1"]
    # only the rule: it stands out, so the reader quotes the default (the failure the sweep studies)
    rule = "Requests may be retained for 30 days. Attachments follow the same schedule."
    rule_only = reader.generate(question, [ContextBlock("1", "u1", "doc", rule)])
    assert not rule_only.abstained and "30 days" in rule_only.answer
    # several sentences about retention, none answering better than the rest: topical
    topical = [
        ContextBlock(
            "1",
            "u1",
            "doc",
            "Retention applies to requests marked for review. "
            "Retention applies to requests marked for export. "
            "Retention applies to requests marked for audit.",
        )
    ]
    result = reader.generate(question, topical)
    assert result.abstained and result.answer == ABSTAIN_TEXT
    assert result.detail["abstained_because"] == "topical"
    assert result.detail["top"][0]["score"] >= reader.abstain_threshold  # on topic, above the threshold


# ---------------------------------------------------------------------------
# what the reader answers with (pipeline/generation/reading.py, pure)


def _item(sentence: str, score: float, label: str) -> dict:
    return {"sentence": sentence, "score": score, "label": label, "block": int(label) - 1, "start": 0}


@pytest.mark.parametrize(
    "question, kind",
    [
        ("Is hepcidin toxic?", "yes-no question"),
        ("Did the film win an award?", "yes-no question"),
        ("Which film came out first, Blind Shaft or The Mask Of Fu Manchu?", "yes-no question: comparison"),
        ("Who was born earlier, Ada Lovelace or Mary Shelley?", "yes-no question: comparison"),
        ("What is the retention limit?", None),
        ("Was was the sample size?", None),  # a typo for "What was", not a yes/no question
        ("Receiving Party shall notify Disclosing Party of any compelled disclosure.", None),
    ],
)
def test_question_kind(question, kind):
    from ledgerscope.pipeline.generation.reading import question_kind

    assert question_kind(question) == kind


def test_the_cover_adds_a_linked_sentence_naming_a_new_question_word_and_stops_when_none_does():
    from ledgerscope.pipeline.generation.reading import answer_plan, answer_text

    question = "Who signed the contract for the warehouse roof repair?"
    scored = [
        _item("The warehouse roof repair is covered by the Halden contract.", 0.6, "1"),
        _item("Ines Duarte signed the Halden contract.", 0.5, "2"),
        _item("Roof repairs on the warehouse are scheduled for May.", 0.45, "1"),  # no new question word
        _item("Parking is free on weekends.", 0.2, "3"),
    ]
    chosen, reason = answer_plan(question, scored, 0.1, 0.1)
    assert reason is None and [c["label"] for c in chosen] == ["1", "2"]  # both units cited
    assert answer_text(question, chosen).startswith("Ines Duarte: The warehouse roof repair")
    # the third sentence names only words already covered: it stays a competitor (lead 0.15 >= 0.1)
    assert answer_plan(question, scored, 0.1, 0.16) == ([], "topical")
    # on retrieved context a sentence naming a new question word but linked to nothing is not added:
    # it stays a competitor
    unlinked = [scored[0], _item("Ines Duarte signed it.", 0.5, "2"), *scored[2:]]
    assert [c["label"] for c in answer_plan(question, unlinked, 0.1, 0.05)[0]] == ["1"]
    assert answer_plan(question, unlinked, 0.1, 0.12) == ([], "topical")


def test_a_lone_sentence_takes_a_bridge_from_another_unit_phrased_in_other_words():
    from ledgerscope.pipeline.generation.reading import answer_plan, answer_text

    question = "Who is in charge of booking business travel?"
    scored = [
        _item("Business travel is booked through the travel desk.", 0.6, "1"),
        _item("The travel desk is run by Mara Lindqvist.", 0.5, "2"),  # "run by": no new question word
        _item("Trains are the default for short journeys.", 0.2, "1"),
    ]
    chosen, reason = answer_plan(question, scored, 0.3, 0.06)
    assert reason is None and [c["label"] for c in chosen] == ["1", "2"]
    assert answer_text(question, chosen).startswith("Mara Lindqvist: Business travel")
    # without the bridge the two would be "topical" (they lead the rest by 0.4, each other by 0.1)
    assert answer_plan(question, scored[:1] + scored[2:], 0.3, 0.06)[0] == scored[:1]


def test_the_cover_is_not_limited_to_two_sentences():
    from ledgerscope.pipeline.generation.reading import cover

    question = "Which team owns the billing service, and which region hosts its database?"
    scored = [
        _item("The billing service belongs to the Ledger team.", 0.6, "1"),
        _item("The Ledger team owns the billing code.", 0.5, "2"),
        _item("That database region hosts Ledger workloads in Frankfurt.", 0.4, "3"),
        _item("Billing service dashboards are public.", 0.3, "4"),  # nothing new
    ]
    chosen = cover(question, scored, 0.1, linked=True)
    # most new question words first: "region", "hosts", "database", then "owns"
    assert [c["label"] for c in chosen] == ["1", "3", "2"]


def test_a_sufficient_context_follows_a_name_to_the_next_hop_and_cites_every_unit():
    from ledgerscope.pipeline.generation.reading import answer_plan

    question = "What river flows through the birthplace of the author of Blue Harbour?"
    scored = [
        _item("Blue Harbour is a novel by Ama Owusu.", 0.5, "1"),
        _item("The Subin River flows through Kumasi.", 0.45, "3"),
        _item("Ama Owusu was born in Kumasi.", 0.2, "2"),  # no question word: reached through "Owusu"
    ]
    chosen, reason = answer_plan(question, scored, 0.1, 0.1, sufficient=True)
    assert reason is None and sorted(c["label"] for c in chosen) == ["1", "2", "3"]
    # the same sentences retrieved: the hop through a name is not followed, and the two close scores
    # with no link between them are topical
    assert answer_plan(question, scored, 0.1, 0.1) == ([], "topical")


def test_a_sufficient_context_abstains_only_when_nothing_relates():
    from ledgerscope.pipeline.generation.reading import answer_plan

    question = "How long are temporary requests retained?"
    close = [
        _item("Temporary requests are retained for 7 days.", 0.5, "1"),
        _item("Requests are retained for a month.", 0.48, "2"),  # no word linking it to the first
        _item("2.1", 0.01, "3"),  # a heading: relates to nothing, so it is not cited
    ]
    chosen, reason = answer_plan(question, close, 0.1, 0.1, sufficient=True)
    assert reason is None and [c["label"] for c in chosen] == ["1", "2"]
    assert answer_plan(question, close, 0.1, 0.1) == ([], "topical")  # retrieved: too close to call
    unrelated = [_item("The cafeteria opens at noon.", 0.05, "1")]
    assert answer_plan(question, unrelated, 0.1, 0.1, sufficient=True) == ([], "below-threshold")
    assert answer_plan("Are temporary requests retained?", close, 0.1, 0.1, sufficient=True) == (
        [],
        "yes-no question",
    )


def test_oracle_blocks_are_a_sufficient_context():
    from ledgerscope.pipeline.generation.reader import is_oracle, oracle_blocks

    blocks = oracle_blocks([("h1", "doc-a", "One."), ("h2", "doc-b", "Two.")])
    assert is_oracle(blocks) and [b.label for b in blocks] == ["1", "2"]
    assert not is_oracle([*blocks, ContextBlock("3", "u7", "doc-c", "Three.")])
    assert not is_oracle([])


def test_yes_no_abstains_with_its_reason_before_any_scoring():
    from ledgerscope.pipeline.generation.reading import answer_plan

    assert answer_plan("Is the desk open on Sundays?", [], 0.3, 0.06) == ([], "yes-no question")


@pytest.mark.parametrize(
    "question, sentence, span",
    [
        ("When did the director die?", "He died on August 25, 1963 in Los Angeles.", "August 25, 1963"),
        ("Who directed the film?", "The film was directed by Edward L. Cahn in 1932.", "Edward L. Cahn"),
        (
            "How many seats does the arena have?",
            "The arena, opened in 1999, seats 3,677 people.",
            "3,677 people",
        ),
        ("What retention limit applies?", "This limit is 7 days for requests marked temporary.", None),
    ],
)
def test_answer_span(question, sentence, span):
    from ledgerscope.pipeline.generation.reading import extract_span

    assert extract_span(question, [sentence]) == span
