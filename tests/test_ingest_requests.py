"""Spans into requests (ingest/requests.py): the rules a framework's export does not always exercise."""

from __future__ import annotations

from dataclasses import dataclass, field

from ledgerscope.ingest.spans.requests import INDEX_BUILDING, UNIDENTIFIED, group_requests


@dataclass
class S:
    span_id: str
    parent_id: str | None
    kind: str = "CHAIN"
    qid: str | None = None
    trace_id: str = "t1"
    name: str = "span"
    start: str = "0"
    attributes: dict = field(default_factory=dict)

    def __post_init__(self):
        self.where = ("spans.jsonl", int(self.span_id.strip("s") or 0), "")
        if self.qid is not None:
            self.attributes["metadata"] = f'{{"qid": "{self.qid}"}}'


def test_a_harness_parent_gives_one_request_per_question():
    spans = [
        S("s1", None, name="harness"),
        S("s2", "s1", qid="q1"),
        S("s3", "s2", "RETRIEVER", "q1"),
        S("s4", "s2", "LLM", "q1"),
        S("s5", "s1", qid="q2"),
        S("s6", "s5", "RETRIEVER", "q2"),
        S("s7", "s5", "LLM", "q2"),
    ]
    g = group_requests(spans, "qid")
    assert not g.problems and not g.skipped
    assert [(r.qid, [s.span_id for s in r.spans]) for r in g.requests] == [
        ("q1", ["s2", "s3", "s4"]),
        ("q2", ["s5", "s6", "s7"]),
    ]


def test_a_partial_export_is_grouped_and_a_parent_cycle_is_an_error():
    g = group_requests([S("s2", "gone", qid="q1"), S("s3", "s2", "LLM")], "qid")  # parent not exported
    assert not g.problems and [[s.span_id for s in r.spans] for r in g.requests] == [["s2", "s3"]]
    g = group_requests([S("s8", "s9", "LLM", trace_id="t2"), S("s9", "s8", trace_id="t2", qid="q3")], "qid")
    assert any("its parent spans form a cycle" in p.reason for p in g.problems)


def test_index_building_is_skipped_and_an_unidentified_request_is_an_error_or_skipped():
    spans = [
        S("s1", None, "EMBEDDING", trace_id="build"),
        S("s2", "s1", trace_id="build"),
        S("s3", None, trace_id="anon"),
        S("s4", "s3", "LLM", trace_id="anon"),
    ]
    g = group_requests(spans, "qid")
    assert g.skipped == {INDEX_BUILDING: 1}
    assert len(g.problems) == 1 and "a request without a question id" in g.problems[0].reason
    assert str(g.problems[0]).startswith("spans.jsonl:3: qid: trace 'anon' holds LLM span(s)")
    g = group_requests(spans, "qid", skip_unidentified=True)
    assert not g.problems and g.skipped == {INDEX_BUILDING: 1, UNIDENTIFIED: 1}


def test_two_questions_in_one_request_and_a_span_twice_are_errors():
    spans = [S("s1", None, qid="q1"), S("s2", "s1", "LLM", "q2"), S("s2", "s1", "LLM", "q2")]
    g = group_requests(spans, "qid")
    reasons = [p.reason for p in g.problems]
    assert any("appears twice" in r for r in reasons)
    assert any("names question 'q2' inside the request of question 'q1'" in r for r in reasons)
