"""Fixtures: seed 000 verbatim, seed 002 gold records, and the canonical JSONL form."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from ledgerscope.common.errors import InputError, Problem
from ledgerscope.inputs import coords
from ledgerscope.inputs.fixtures import (
    FORMAT,
    Fixture,
    load_fixtures,
    read_fixtures,
    resolve,
    write_fixtures,
)
from ledgerscope.inputs.sources import Corpus, load_corpus, make_source

DATA = Path(__file__).parent / "data"
SEED000 = DATA / "seed000_fixture.json"
SEED000_VERSION = "sha256:ad0875163c10c4b7fd2d6efed6efae515cef0f8ea236b45216cb8ef12c8a5563"
RULE = "Requests may be retained for 30 days."
QUALIFIER = "This limit is 7 days for requests marked temporary."
NONASCII = DATA / "nonascii_fixture.json"
SEED002 = DATA / "seed002_gold.json"
SEED002_CORPUS = DATA / "seed002_corpus"


def sha(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def problems_of(path: Path, corpus: Corpus | None = None) -> list[Problem]:
    with pytest.raises(InputError) as info:
        load_fixtures(path, corpus)
    return info.value.problems


def comparable(fx: Fixture) -> dict:
    """Everything about a fixture except where it was read from."""
    return {
        "qid": fx.qid,
        "question": fx.question,
        "segment": fx.segment,
        "spans": fx.spans,
        "sufficient_sets": fx.sufficient_sets,
        "answer": fx.answer,
        "answerable": fx.answerable,
        "support_only": fx.support_only,
        "adjudication": fx.adjudication,
        "stress_set": fx.stress_set,
        "origin": fx.origin,
        "annotations": fx.annotations,
    }


# ---------------------------------------------------------------------------
# seed 000, verbatim


def test_seed000_fixture_is_the_verbatim_copy():
    raw = SEED000.read_text(encoding="utf-8")
    assert raw.startswith('{\n  "fixture_id": "temporary-retention-v1",')
    assert '"rule": [0, 37],' in raw
    assert sha(json.loads(raw)["source_text"]) == SEED000_VERSION


def test_seed000_loads_without_a_corpus():
    fixtures, corpus = load_fixtures(SEED000)
    [fx] = fixtures
    assert fx.qid == "temporary-retention-v1"
    assert fx.question == "What retention limit applies to requests marked temporary?"
    assert fx.segment == "rule-exception"
    assert fx.sufficient_sets == (("rule", "qualifier"),)
    assert fx.answerable and not fx.support_only
    assert fx.answer.expected == "At most 7 days."
    assert fx.answer.if_qualifier_missing == "Abstain on the temporary-request limit."
    assert fx.answer.missing_condition == "abstain"

    src = corpus.get("temporary-retention-v1")
    assert src is not None  # the inline source_text became a source
    assert src.version == SEED000_VERSION

    rule, qualifier = fx.span("rule"), fx.span("qualifier")
    assert (rule.start, rule.end) == (0, 37)
    assert (qualifier.start, qualifier.end) == (38, 89)
    for span in (rule, qualifier):
        assert span.system == coords.CODEPOINT
        assert span.version == SEED000_VERSION
        assert span.doc_id == "temporary-retention-v1"
    assert src.text[rule.start : rule.end] == rule.quote == RULE
    assert src.text[qualifier.start : qualifier.end] == qualifier.quote == QUALIFIER
    assert rule.dependency == "primary" and not rule.is_qualifier
    assert qualifier.dependency == "exception" and qualifier.is_qualifier
    assert fx.doc_ids == ("temporary-retention-v1",)


def test_seed000_one_changed_byte_is_a_digest_mismatch(tmp_path):
    raw = SEED000.read_bytes()
    changed = raw.replace(b"for 30 days. This", b"for 31 days. This", 1)
    assert sum(a != b for a, b in zip(raw, changed, strict=True)) == 1
    path = tmp_path / "changed.json"
    path.write_bytes(changed)
    actual = sha(RULE.replace("30", "31") + " " + QUALIFIER)

    [problem] = problems_of(path)
    assert problem.field == "source_version"
    assert SEED000_VERSION in problem.reason
    assert actual in problem.reason
    assert problem.line is None  # a .json object: no line to name
    assert str(problem) == f"{path}: source_version: {problem.reason}"


# ---------------------------------------------------------------------------
# non-ASCII text and UTF-8 byte offsets


def test_nonascii_fixture_byte_offsets_resolve_to_codepoints():
    obj = json.loads(NONASCII.read_text(encoding="utf-8"))
    text = obj["source_text"]
    assert not text.isascii()
    assert len(text.encode("utf-8")) > len(text)
    fixtures, corpus = load_fixtures(NONASCII)
    [fx] = fixtures
    rule, qualifier = fx.span("rule"), fx.span("qualifier")
    assert (rule.start, rule.end) == (0, 42)
    assert (qualifier.start, qualifier.end) == (43, 119)
    assert rule.quote == "Anfragen dürfen 30 Tage aufbewahrt werden."
    assert qualifier.quote == (
        "Diese Frist beträgt 7 Tage für Anfragen, die als „temporär“ markiert sind \U0001f552."
    )
    # the byte offsets in the file slice to the same text
    for name, span in (("rule", rule), ("qualifier", qualifier)):
        b0, b1 = obj["spans"][name]
        assert text.encode("utf-8")[b0:b1].decode("utf-8") == span.quote
    assert corpus.get(fx.qid).text[rule.start : rule.end] == rule.quote


@pytest.mark.parametrize(
    ("name", "offsets", "char"),
    [
        ("rule", [0, 11], "U+00FC"),  # ends between the two bytes of ü
        ("rule", [11, 43], "U+00FC"),  # starts inside ü
        ("qualifier", [44, 127], "U+1F552"),  # ends inside the 4-byte clock emoji
    ],
)
def test_nonascii_span_cutting_a_character_names_the_span(tmp_path, name, offsets, char):
    obj = json.loads(NONASCII.read_text(encoding="utf-8"))
    obj["spans"][name] = offsets
    path = tmp_path / "cut.json"
    path.write_text(json.dumps(obj, ensure_ascii=False), encoding="utf-8")
    [problem] = problems_of(path)
    assert problem.field == f"spans.{name}"
    assert f"[{offsets[0]},{offsets[1]})" in problem.reason
    assert char in problem.reason
    assert coords.UTF8 in problem.reason
    assert str(problem).startswith(f"{path}: spans.{name}: ")


@pytest.mark.parametrize("system", [coords.CODEPOINT, coords.UTF16])
def test_nonascii_fixture_in_other_systems(tmp_path, system):
    obj = json.loads(NONASCII.read_text(encoding="utf-8"))
    text = obj["source_text"]
    obj["coordinate_system"] = system
    obj["spans"] = {
        "rule": list(coords.from_codepoint_span(text, 0, 42, system)),
        "qualifier": list(coords.from_codepoint_span(text, 43, 119, system)),
    }
    if system == coords.UTF16:
        assert obj["spans"]["qualifier"] == [43, 120]  # the emoji is two UTF-16 units
    path = tmp_path / "other.json"
    path.write_text(json.dumps(obj, ensure_ascii=False), encoding="utf-8")
    [fx], _ = load_fixtures(path)
    assert [(s.start, s.end) for s in fx.spans] == [(0, 42), (43, 119)]


def test_seed000_with_unknown_coordinate_system(tmp_path):
    obj = json.loads(SEED000.read_text(encoding="utf-8"))
    obj["coordinate_system"] = "utf32-half-open"
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(obj), encoding="utf-8")
    [problem] = problems_of(path)
    assert problem.field == "coordinate_system"


# ---------------------------------------------------------------------------
# seed 002 gold record


def test_seed002_record_keeps_the_seed_shape():
    obj = json.loads(SEED002.read_text(encoding="utf-8"))
    assert obj == {
        "qid": "q-0143",
        "text": "How long are audit logs kept on the Team plan?",
        "gold": [
            {"doc": "docs/security/audit-logs.md", "start": 4120, "end": 4610},
            {"doc": "docs/plans/team.md", "start": 880, "end": 1090},
        ],
        "source": "mined-ticket-88214",
    }


def test_seed002_resolves_to_one_joint_sufficient_set():
    corpus = load_corpus(SEED002_CORPUS)
    fixtures, merged = load_fixtures(SEED002, corpus)
    [fx] = fixtures
    assert fx.qid == "q-0143"
    assert fx.question == "How long are audit logs kept on the Team plan?"
    assert fx.segment == "joint-evidence"
    assert fx.origin == "mined-ticket-88214"
    assert fx.support_only and fx.answerable  # no answer in the record: support only
    assert len(fx.spans) == 2
    assert len(fx.sufficient_sets) == 1
    assert set(fx.sufficient_sets[0]) == {s.span_id for s in fx.spans}
    audit, team = fx.spans
    assert (audit.doc_id, audit.start, audit.end) == ("docs/security/audit-logs.md", 4120, 4610)
    assert (team.doc_id, team.start, team.end) == ("docs/plans/team.md", 880, 1090)
    for span in fx.spans:
        src = merged.get(span.doc_id)
        assert span.version == src.version
        assert span.quote == src.text[span.start : span.end]
    assert audit.quote.startswith("Audit log retention depends on the plan.")
    assert team.quote.startswith("Team plan limits:")


def test_seed002_as_jsonl_and_without_its_corpus(tmp_path):
    obj = json.loads(SEED002.read_text(encoding="utf-8"))
    path = tmp_path / "gold.jsonl"
    path.write_text("\n" + json.dumps(obj) + "\n", encoding="utf-8")
    [fx], _ = load_fixtures(path, load_corpus(SEED002_CORPUS))
    assert fx.location == (str(path), 2)
    problems = problems_of(path)  # no corpus: both documents are missing
    assert [p.field for p in problems] == ["spans.g0.doc_id", "spans.g1.doc_id"]
    assert all(str(p).startswith(f"{path}:2: spans.g") for p in problems)
    assert "docs/security/audit-logs.md" in problems[0].reason


def test_seed002_offsets_past_the_end_of_the_document(tmp_path):
    obj = json.loads(SEED002.read_text(encoding="utf-8"))
    obj["gold"][1]["end"] = 100_000
    path = tmp_path / "gold.json"
    path.write_text(json.dumps(obj), encoding="utf-8")
    [problem] = problems_of(path, load_corpus(SEED002_CORPUS))
    assert problem.field == "spans.g1"
    assert "out of range" in problem.reason


# ---------------------------------------------------------------------------
# canonical form and round trips


DOC_TEXT = (
    "Section A. Requests may be retained for 30 days.\n"
    "Section B. Requests may be retained for 30 days. Temporary requests: 7 days.\n"
    "Glossary: temporary means marked temporary by the sender \U0001f4e8.\n"
)


def canonical(**overrides) -> dict:
    second = DOC_TEXT.index("Requests may", 20)
    exc_start = DOC_TEXT.index("Temporary requests")
    gl_start = DOC_TEXT.index("Glossary")
    obj = {
        "format": FORMAT,
        "qid": "canon-1",
        "question": "How long are temporary requests kept?",
        "segment": "rule-exception",
        "answerable": True,
        "support_only": False,
        "answer": {
            "expected": "At most 7 days.",
            "aliases": ["7 days", "seven days"],
            "default": "30 days",
            "missing_condition": "narrower",
            "if_qualifier_missing": "Say 30 days applies to ordinary requests only.",
        },
        "coordinate_system": coords.CODEPOINT,
        "spans": [
            {
                "id": "rule",
                "doc_id": "policy.md",
                "start": second,
                "end": second + len("Requests may be retained for 30 days."),
                "quote": "Requests may be retained for 30 days.",
                "prefix": "Section B. ",
                "dependency": "primary",
                "label": "default rule",
            },
            {
                "id": "exc",
                "doc_id": "policy.md",
                "start": exc_start,
                "end": exc_start + len("Temporary requests: 7 days."),
                "dependency": "exception",
            },
            {
                "id": "def",
                "doc_id": "policy.md",
                "start": gl_start,
                "end": len(DOC_TEXT) - 1,
                "dependency": "definition",
            },
        ],
        "sufficient_sets": [["rule", "exc"], ["exc", "def"]],
        "adjudication": {"state": "disputed", "notes": ["A: def needed", "B: not needed"]},
        "stress_set": "enriched",
        "origin": "hand-written",
        "annotations": {"annotator": "t1"},
    }
    obj.update(overrides)
    return obj


def policy_corpus() -> Corpus:
    corpus = Corpus()
    corpus.add(make_source("policy.md", DOC_TEXT, observed="2024-05-01", access=["internal"]))
    return corpus


def write_lines(path: Path, objs: list) -> Path:
    path.write_text(
        "".join((o if isinstance(o, str) else json.dumps(o, ensure_ascii=False)) + "\n" for o in objs),
        encoding="utf-8",
    )
    return path


def test_canonical_fixture_resolves(tmp_path):
    path = write_lines(tmp_path / "fx.jsonl", [canonical()])
    [fx], _ = load_fixtures(path, policy_corpus())
    rule = fx.span("rule")
    assert DOC_TEXT[rule.start : rule.end] == rule.quote
    assert rule.start > DOC_TEXT.index(rule.quote)  # the second occurrence, by position
    assert rule.prefix == "Section B. "
    assert fx.span("def").quote.endswith("\U0001f4e8.")
    assert fx.answer.default == "30 days"
    assert fx.answer.missing_condition == "narrower"
    assert fx.answer.aliases == ("7 days", "seven days")
    assert fx.adjudication["state"] == "disputed"
    assert fx.stress_set == "enriched"
    assert fx.location == (str(path), 1)


def test_canonical_round_trip(tmp_path):
    src = write_lines(
        tmp_path / "in.jsonl",
        [
            canonical(),
            canonical(qid="canon-2", segment="definition-referent", sufficient_sets=[["exc", "def"]]),
        ],
    )
    corpus = policy_corpus()
    first, _ = load_fixtures(src, corpus)

    out = tmp_path / "out.jsonl"
    write_fixtures(first, out)
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [r["qid"] for r in rows] == ["canon-1", "canon-2"]
    assert all(r["format"] == FORMAT and r["coordinate_system"] == coords.CODEPOINT for r in rows)
    second, _ = load_fixtures(out, corpus)
    assert [comparable(f) for f in second] == [comparable(f) for f in first]

    # writing again gives the same bytes: the canonical form is a fixed point
    out2 = tmp_path / "out2.jsonl"
    write_fixtures(second, out2)
    assert out2.read_bytes() == out.read_bytes()


def test_round_trip_with_inline_sources_needs_no_corpus(tmp_path):
    seed_fx, seed_corpus = load_fixtures(SEED000)
    gold_fx, gold_corpus = load_fixtures(SEED002, load_corpus(SEED002_CORPUS))
    merged = Corpus({**seed_corpus.sources, **gold_corpus.sources})
    out = tmp_path / "all.jsonl"
    write_fixtures(seed_fx + gold_fx, out, merged, inline_sources=True)
    again, corpus = load_fixtures(out)
    assert [comparable(f) for f in again] == [comparable(f) for f in seed_fx + gold_fx]
    assert corpus.get("docs/plans/team.md").version == merged.get("docs/plans/team.md").version
    assert corpus.get("temporary-retention-v1").version == SEED000_VERSION


def test_written_fixtures_without_sources_need_the_corpus(tmp_path):
    seed_fx, _ = load_fixtures(SEED000)
    out = tmp_path / "seed.jsonl"
    write_fixtures(seed_fx, out)
    problems = problems_of(out)
    assert {p.field for p in problems} == {"spans.rule.doc_id", "spans.qualifier.doc_id"}
    assert all(p.line == 1 for p in problems)


def test_unanswerable_control(tmp_path):
    obj = canonical(
        qid="u-1",
        segment="unanswerable",
        answerable=False,
        spans=[],
        sufficient_sets=[],
        answer={"expected": None},
    )
    path = write_lines(tmp_path / "u.jsonl", [obj])
    [fx], _ = load_fixtures(path, policy_corpus())
    assert not fx.answerable and fx.spans == () and fx.sufficient_sets == ()


# ---------------------------------------------------------------------------
# problems, located as file:line: field: reason


def test_problems_in_jsonl_name_file_line_and_field(tmp_path):
    good = canonical()
    rows = [
        good,  # 1 ok
        canonical(qid="seg", segment="rules-exception"),  # 2
        canonical(qid="undef", sufficient_sets=[["rule", "nope"]]),  # 3
        canonical(
            qid="quote", spans=[dict(good["spans"][0], quote="Requests may be kept."), *good["spans"][1:]]
        ),  # 4
        canonical(qid="fmt", format="ledgerscope-fixture/99"),  # 5
        canonical(),  # 6 duplicate qid
        canonical(qid="nosets", sufficient_sets=[]),  # 7
        "",  # 8 blank: skipped
        "{oops",  # 9
        canonical(qid="ok-2"),  # 10 ok
    ]
    path = write_lines(tmp_path / "mixed.jsonl", rows)
    problems = problems_of(path, policy_corpus())
    by_line = {p.line: p for p in problems}
    assert sorted(by_line) == [2, 3, 4, 5, 6, 7, 9]
    assert len(problems) == 7

    expected = {
        2: "segment",
        3: "sufficient_sets[0]",
        4: "spans.rule.quote",
        5: "format",
        6: "qid",
        7: "sufficient_sets",
        9: "line",
    }
    for line, field in expected.items():
        p = by_line[line]
        assert p.field == field, (line, p)
        assert p.file == str(path)
        assert str(p) == f"{path}:{line}: {field}: {p.reason}"
    assert "rules-exception" in by_line[2].reason
    assert "'nope'" in by_line[3].reason and "not defined" in by_line[3].reason
    assert "Requests may be kept." in by_line[4].reason
    assert "Requests may be retained for 30 days." in by_line[4].reason
    assert "ledgerscope-fixture/99" in by_line[5].reason
    assert "canon-1" in by_line[6].reason and "line 1" in by_line[6].reason
    assert "at least one sufficient support set" in by_line[7].reason

    # read + resolve without raising: the two good fixtures survive
    fset, parse_problems = read_fixtures(path)
    resolved, _, more = resolve(fset, policy_corpus())
    assert [f.qid for f in resolved] == ["canon-1", "ok-2"]
    assert sorted(p.line for p in parse_problems + more) == [2, 3, 4, 5, 6, 7, 9]


@pytest.mark.parametrize(
    ("override", "field", "needle"),
    [
        ({"answer": {"expected": "x", "missing_condition": "guess"}}, "answer.missing_condition", "abstain"),
        ({"adjudication": {"state": "maybe"}}, "adjudication.state", "maybe"),
        ({"stress_set": "pooled"}, "stress_set", "representative"),
        ({"answer": {}}, "answer.expected", "expected answer"),
        ({"segment": "unanswerable"}, "answerable", "answerable: false"),
        ({"answerable": False}, "sufficient_sets", "unanswerable"),
        ({"sufficient_sets": [[]]}, "sufficient_sets[0]", "empty"),
        ({"coordinate_system": "bytes"}, "coordinate_system", "bytes"),
    ],
)
def test_other_contract_problems(tmp_path, override, field, needle):
    path = write_lines(tmp_path / "fx.jsonl", ["", canonical(**override)])
    problems = problems_of(path, policy_corpus())
    assert field in [p.field for p in problems]
    p = next(p for p in problems if p.field == field)
    assert needle in p.reason
    assert str(p).startswith(f"{path}:2: {field}: ")


def test_span_problems(tmp_path):
    good = canonical()
    spans = [dict(s) for s in good["spans"]]
    wrong_version = sha("another text")
    spans[0]["version"] = wrong_version
    spans[1]["dependency"] = "vibes"
    spans[2]["suffix"] = "not what follows"
    rows = [
        canonical(spans=spans),
        canonical(qid="empty", spans=[dict(good["spans"][0], end=good["spans"][0]["start"])]),
        canonical(qid="dup", spans=[good["spans"][0], good["spans"][0], *good["spans"][1:]]),
        canonical(qid="badoff", spans=[dict(good["spans"][0], start="0")]),
    ]
    path = write_lines(tmp_path / "spans.jsonl", rows)
    problems = problems_of(path, policy_corpus())
    got = {(p.line, p.field) for p in problems}
    assert (1, "spans.rule.version") in got
    assert (1, "spans.exc.dependency") in got
    assert (1, "spans.def.suffix") in got
    assert (2, "spans.rule") in got
    assert (3, "spans.rule") in got
    assert (4, "spans[0].start/end") in got
    version = next(p for p in problems if p.field == "spans.rule.version")
    assert wrong_version in version.reason and sha(DOC_TEXT) in version.reason


def test_inline_source_with_wrong_version_in_canonical(tmp_path):
    obj = canonical(sources=[{"doc_id": "policy.md", "text": DOC_TEXT, "version": sha("something else")}])
    path = write_lines(tmp_path / "fx.jsonl", [obj])
    problems = problems_of(path)
    assert (1, "sources.version") in {(p.line, p.field) for p in problems}
    p = next(p for p in problems if p.field == "sources.version")
    assert sha("something else") in p.reason and sha(DOC_TEXT) in p.reason


def test_unencodable_inline_text_is_a_located_problem(tmp_path):
    # a JSON \ud800 escape decodes to a lone surrogate, which has no UTF-8 bytes
    obj = canonical(sources=[{"doc_id": "policy.md", "text": "x"}])
    line = json.dumps(obj).replace('"text": "x"', '"text": "bad \\ud800"')
    path = write_lines(tmp_path / "fx.jsonl", [line])
    _, problems = read_fixtures(path)
    assert [(p.line, p.field) for p in problems] == [(1, "sources.text")]
    assert "U+D800" in problems[0].reason


def test_two_inline_texts_for_one_doc_id_are_located(tmp_path):
    obj = json.loads(SEED000.read_text(encoding="utf-8"))
    a = dict(obj, doc_id="shared")
    b = dict(obj, doc_id="shared", fixture_id="other", source_text=obj["source_text"].replace("30", "31"))
    del a["source_version"], b["source_version"]
    path = tmp_path / "two.json"
    path.write_text(json.dumps([a, b]), encoding="utf-8")
    fset, problems = read_fixtures(path)  # collected, not raised
    [problem] = problems
    assert problem.file == str(path)
    assert "given twice with different versions" in problem.reason
    assert [f.qid for f in fset.fixtures] == ["temporary-retention-v1"]


def test_unrecognised_objects_and_bad_files(tmp_path):
    path = write_lines(tmp_path / "x.jsonl", [{"hello": "world"}])
    [p] = problems_of(path)
    assert (p.line, p.field) == (1, "format")
    bad_json = tmp_path / "x.json"
    bad_json.write_text('{\n  "qid": \n', encoding="utf-8")
    [p] = problems_of(bad_json)
    assert p.field == "file" and p.line is not None
    [p] = problems_of(tmp_path / "missing.jsonl")
    assert "no such file" in p.reason


def test_sufficient_sets_must_name_spans_by_string(tmp_path):
    path = write_lines(tmp_path / "fx.jsonl", [canonical(sufficient_sets=[[["rule"]]])])
    [p] = problems_of(path, policy_corpus())
    assert (p.line, p.field) == (1, "sufficient_sets")
