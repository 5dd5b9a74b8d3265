"""support.py on hand-built spans and units: when a set of units keeps a question's support."""

from __future__ import annotations

from typing import NamedTuple

from ledgerscope.inputs.fixtures import Fixture, GoldSpan
from ledgerscope.rules import support

DOC, OTHER = "policy.md", "faq.md"
TEXT = "Requests may be retained for 30 days.  This limit is 7 days for requests marked temporary."
FAQ = "Temporary requests are kept for 7 days."
TEXTS = {DOC: TEXT, OTHER: FAQ}
RULE_END = TEXT.index(".") + 1  # "Requests ... 30 days." then two blanks
QUAL_START = TEXT.index("This")


class U(NamedTuple):
    doc_id: str
    version: str
    start: int
    end: int


def u(start: int, end: int, doc: str = DOC, version: str = "v1") -> U:
    return U(doc, version, start, end)


RULE = GoldSpan("rule", DOC, 0, RULE_END, version="v1")
QUAL = GoldSpan("qual", DOC, QUAL_START, len(TEXT), version="v1", dependency="exception")
SUMMARY = GoldSpan("summary", OTHER, 0, len(FAQ), version="f1")


def fixture(sets=(("rule", "qual"), ("summary",)), spans=(RULE, QUAL, SUMMARY), **kw) -> Fixture:
    return Fixture("q", "How long?", "rule-exception", tuple(spans), tuple(tuple(s) for s in sets), **kw)


def test_intervals_are_grouped_by_document_version_and_merged():
    got = support.intervals_by_doc([u(5, 9), u(0, 5), u(20, 30), u(0, 4, version="v2"), u(1, 3, doc=OTHER)])
    assert got == {(DOC, "v1"): [(0, 9), (20, 30)], (DOC, "v2"): [(0, 4)], (OTHER, "v1"): [(1, 3)]}


def test_joint_evidence_across_units_keeps_support_and_blank_gaps_do_not_matter():
    fx = fixture(sets=(("rule", "qual"),), spans=(RULE, QUAL))
    assert support.keeps(fx, [u(0, RULE_END), u(QUAL_START, len(TEXT))], TEXTS)  # the blanks between
    assert support.keeps(fx, [u(0, 20), u(18, len(TEXT))], TEXTS)  # overlapping halves
    assert not support.keeps(fx, [u(0, 20), u(21, len(TEXT))], TEXTS)  # one character of the rule lost
    assert not support.keeps(fx, [u(0, RULE_END)], TEXTS)  # the exception lost
    assert not support.keeps(fx, [u(0, len(TEXT), version="v2")], TEXTS)  # another version of the text
    assert not support.keeps(fx, [u(0, len(TEXT), doc=OTHER)], TEXTS)
    assert not support.keeps(fx, [], TEXTS)


def test_kept_set_is_the_first_sufficient_set_kept():
    fx = fixture()
    whole, faq = u(0, len(TEXT)), u(0, len(FAQ), doc=OTHER, version="f1")
    assert support.kept_set(fx, [whole, faq], TEXTS) == 0
    assert support.kept_set(fx, [faq], TEXTS) == 1
    assert support.kept_set(fx, [whole], TEXTS) == 0
    assert support.kept_set(fx, [u(0, RULE_END)], TEXTS) is None
    assert support.kept_set_in(fx, support.intervals_by_doc([faq]), TEXTS) == 1
    assert support.kept_set(fixture(sets=()), [whole, faq], TEXTS) is None  # unanswerable: nothing to keep
    assert not support.keeps(fixture(sets=()), [whole, faq], TEXTS)


def test_single_unit_complete_needs_one_unit_holding_a_whole_set():
    fx = fixture()
    assert support.single_unit_complete(fx, [u(0, len(TEXT))], TEXTS)
    assert not support.single_unit_complete(fx, [u(0, RULE_END), u(QUAL_START, len(TEXT))], TEXTS)
    assert support.single_unit_complete(fx, [u(0, RULE_END), u(0, len(FAQ), doc=OTHER, version="f1")], TEXTS)
    assert not support.single_unit_complete(fx, [u(0, len(FAQ), doc=OTHER, version="f2")], TEXTS)
    assert not support.single_unit_complete(fx, [u(0, len(FAQ), doc=DOC, version="f1")], TEXTS)
    assert support.single_unit_complete(fx, [u(0, len(TEXT) - 2)], TEXTS) is False  # "y." left out
    # the final "." alone left out is an edge remainder of punctuation: excused, as whitespace is
    assert support.single_unit_complete(fx, [u(0, len(TEXT) - 1)], TEXTS) is True
    assert not support.single_unit_complete(fx, [], TEXTS)


def test_missing_spans_name_the_closest_set():
    fx = fixture()
    assert support.missing_spans(fx, [], TEXTS) == ["summary"]  # one missing beats two
    assert support.missing_spans(fx, [u(0, RULE_END)], TEXTS) == ["qual"]  # a tie keeps the first set
    assert support.missing_spans(fx, [u(0, len(TEXT))], TEXTS) == []
    assert support.missing_spans(fixture(sets=(("rule", "qual"),), spans=(RULE, QUAL)), [], TEXTS) == [
        "rule",
        "qual",
    ]
    assert support.missing_spans(fixture(sets=()), [], TEXTS) == []


def test_span_kept_reads_the_span_document_and_version():
    by_doc = support.intervals_by_doc([u(0, len(TEXT))])
    assert support.span_kept(RULE, by_doc, TEXTS)
    assert not support.span_kept(SUMMARY, by_doc, TEXTS)
    assert not support.span_kept(GoldSpan("x", DOC, 0, 5, version="v9"), by_doc, TEXTS)
    blanks = GoldSpan("blank", DOC, RULE_END, QUAL_START, version="v1")
    assert support.span_kept(blanks, {(DOC, "v1"): [(0, 1)]}, TEXTS)  # nothing but blanks to cover
