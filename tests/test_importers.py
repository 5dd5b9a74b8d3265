"""Importers on the real COVID-QA and ContractNLI data plus a hand-written SQuAD file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ledgerscope.common.errors import InputError
from ledgerscope.common.sentences import split_sentences
from ledgerscope.inputs.fixtures import load_fixtures
from ledgerscope.inputs.importers.contractnli import import_contractnli
from ledgerscope.inputs.importers.squad import REPAIR_RULE, SUPPORT_RULES, import_squad, support_interval
from ledgerscope.inputs.sources import load_corpus

DATA = Path("/work/shared/data")
COVIDQA = DATA / "covidqa" / "200423_covidQA.json"
CONTRACTNLI = DATA / "contractnli" / "dev.json"

needs_covidqa = pytest.mark.skipif(not COVIDQA.is_file(), reason="COVID-QA data not present")
needs_contractnli = pytest.mark.skipif(not CONTRACTNLI.is_file(), reason="ContractNLI not present")


def _whole_sentences(text: str, start: int, end: int) -> bool:
    """Every sentence that overlaps ``[start, end)`` lies inside it (and there is one)."""
    touching = [(s, e) for s, e in split_sentences(text) if s < end and e > start]
    return bool(touching) and all(start <= s and e <= end for s, e in touching)


def _load(out: Path):
    return load_fixtures(out / "fixtures.jsonl", load_corpus(out / "corpus.jsonl"))


def _upstream_answers(file: Path) -> dict[str, list[tuple[int, str]]]:
    """qid -> [(declared start, text)] straight from the SQuAD file."""
    data = json.loads(file.read_text(encoding="utf-8"))
    return {
        f"covidqa:{qa['id']}": [(a["answer_start"], a["text"]) for a in qa["answers"]]
        for art in data["data"]
        for para in art["paragraphs"]
        for qa in para["qas"]
    }


# ---------------------------------------------------------------------------
# COVID-QA


@pytest.fixture(scope="module")
def covid_plain(tmp_path_factory):
    out = tmp_path_factory.mktemp("covid_plain")
    return out, import_squad(COVIDQA, out)


@pytest.fixture(scope="module")
def covid_repaired(tmp_path_factory):
    out = tmp_path_factory.mktemp("covid_repaired")
    return out, import_squad(COVIDQA, out, repair=True)


@pytest.fixture(scope="module")
def covid_upstream():
    return _upstream_answers(COVIDQA)


@needs_covidqa
def test_covidqa_reports_offset_mismatches_at_plausible_rate(covid_plain, covid_upstream):
    _out, report = covid_plain
    total_answers = sum(len(a) for a in covid_upstream.values())
    assert report.answers == total_answers == 1380
    rate = len(report.offset_mismatches) / total_answers
    assert 0.10 <= rate <= 0.25, rate
    assert report.documents == 98
    # every line names the question, the declared start and where the text really is
    line = report.offset_mismatches[0]
    assert line.startswith("covidqa:") and "declared start" in line and "slices" in line
    assert all("shift" in m or "not found" in m for m in report.offset_mismatches)


@needs_covidqa
def test_covidqa_without_repair_never_writes_a_wrong_span(covid_plain, covid_upstream):
    out, report = covid_plain
    assert report.repaired == 0
    assert report.repairs_path == ""
    assert not (out / "repairs.jsonl").exists()
    fixtures, corpus = _load(out)
    assert len(fixtures) == report.questions
    assert report.questions + len(report.skipped) == len(covid_upstream) == 1380
    assert len(report.skipped) == len(report.offset_mismatches)  # one answer per question here
    assert report.spans == sum(len(f.spans) for f in fixtures)
    for fx in fixtures:
        upstream = covid_upstream[fx.qid]
        text = corpus.get(fx.spans[0].doc_id).text
        # every recorded answer is exactly an upstream answer at its declared (unrepaired) start
        answers = fx.annotations["answer_spans"]
        for start, end in answers:
            assert (start, text[start:end]) in upstream
        assert fx.annotations["support_rule"] == SUPPORT_RULES["sentence"]
        for span in fx.spans:
            assert text[span.start : span.end] == span.quote
            # the support span holds an answer and is made of whole sentences
            assert any(span.start <= s and e <= span.end for s, e in answers)
            assert _whole_sentences(text, span.start, span.end)
        assert fx.adjudication["state"] == "draft"
        assert fx.annotations["segment_inferred"] is True
        assert fx.segment in ("number-scope", "definition-referent")
        assert fx.sufficient_sets == tuple((s.span_id,) for s in fx.spans)
    skipped_qids = {line.split(":", 2)[0] + ":" + line.split(":", 2)[1] for line in report.skipped}
    assert skipped_qids.isdisjoint(f.qid for f in fixtures)


@needs_covidqa
def test_covidqa_repair_is_explicit_and_listed(covid_repaired, covid_plain, covid_upstream):
    out, report = covid_repaired
    _plain_out, plain = covid_plain
    assert report.repaired > 0
    assert report.repaired == len(report.offset_mismatches) - len(report.skipped)
    assert report.repairs_path == str(out / "repairs.jsonl")
    repairs = [json.loads(line) for line in (out / "repairs.jsonl").read_text().splitlines()]
    assert len(repairs) == report.repaired
    assert report.questions == plain.questions + report.repaired
    fixtures, corpus = _load(out)
    by_qid = {f.qid: f for f in fixtures}
    for r in repairs:
        assert r["rule"] == REPAIR_RULE
        assert 1 <= abs(r["shift"]) <= 3 and r["new_start"] - r["old_start"] == r["shift"]
        assert (r["old_start"], r["text"]) in covid_upstream[r["qid"]]
        text = corpus.get(r["doc_id"]).text
        assert text[r["new_start"] : r["new_start"] + len(r["text"])] == r["text"]
        assert text[r["old_start"] : r["old_start"] + len(r["text"])] != r["text"]
        answer = by_qid[r["qid"]].annotations["answer_spans"][0]
        assert tuple(answer) == (r["new_start"], r["new_start"] + len(r["text"]))
    for fx in fixtures:
        for span in fx.spans:
            assert corpus.get(span.doc_id).text[span.start : span.end] == span.quote


@needs_covidqa
def test_covidqa_licence_lines_are_reported(covid_plain):
    _out, report = covid_plain
    values = list(report.licenses.values())
    assert len(values) == 98
    assert values.count("not stated") == 6
    assert values.count("cc-by") == 92


# ---------------------------------------------------------------------------
# hand-written SQuAD

CONTEXT = "Intro. The incubation period is 5 days on average. xabab. Nothing else."


def _tiny_squad(path: Path) -> Path:
    good = CONTEXT.index("Intro")
    five = CONTEXT.index("5 days")
    ab = CONTEXT.index("abab")  # "ab" occurs at ab and ab + 2
    data = {
        "version": "tiny",
        "data": [
            {
                "title": "Tiny doc",
                "paragraphs": [
                    {
                        "context": CONTEXT,
                        "qas": [
                            {
                                "id": "ok",
                                "question": "What comes first?",
                                "answers": [
                                    {"text": "Intro", "answer_start": good},
                                    {"text": "Intro", "answer_start": good},
                                ],
                            },
                            {
                                "id": "off2",
                                "question": "How long is the incubation period?",
                                "answers": [{"text": "5 days", "answer_start": five - 2}],
                            },
                            {
                                "id": "tie",
                                "question": "Which pair?",
                                "answers": [{"text": "ab", "answer_start": ab + 1}],
                            },
                            {
                                "id": "far",
                                "question": "Where is it?",
                                "answers": [{"text": "Nothing", "answer_start": 0}],
                            },
                            {"id": "none", "question": "Who wrote it?", "answers": [], "is_impossible": True},
                        ],
                    }
                ],
            }
        ],
    }
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_tiny_squad_without_repair(tmp_path):
    src = _tiny_squad(tmp_path / "tiny.json")
    before = src.read_bytes()
    report = import_squad(src, tmp_path / "out")
    assert src.read_bytes() == before
    assert report.dataset == "squad" and report.documents == 1
    assert len(report.offset_mismatches) == 3
    off2 = next(m for m in report.offset_mismatches if m.startswith("squad:off2:"))
    assert "declared start 30" in off2 and "found at 32 (shift +2)" in off2
    assert any("squad:far:" in m and "not found within ±3" in m for m in report.offset_mismatches)
    assert sorted(s.split(":")[1] for s in report.skipped) == ["far", "off2", "tie"]
    fixtures, _corpus = _load(tmp_path / "out")
    by_qid = {f.qid: f for f in fixtures}
    assert set(by_qid) == {"squad:ok", "squad:none"}
    assert len(by_qid["squad:ok"].spans) == 1  # duplicate answers collapse to one span
    assert by_qid["squad:ok"].spans[0].doc_id == "squad/Tiny_doc/0"
    none = by_qid["squad:none"]
    assert not none.answerable and none.segment == "unanswerable" and not none.spans


def test_tiny_squad_repair_off_by_two_exactly(tmp_path):
    src = _tiny_squad(tmp_path / "tiny.json")
    out = tmp_path / "out"
    out.mkdir()
    report = import_squad(src, out, repair=True)
    assert report.repaired == 2
    assert len(report.skipped) == 1 and "squad:far:" in report.skipped[0]
    lines = (out / "repairs.jsonl").read_text().splitlines()
    repairs = {r["qid"]: r for r in map(json.loads, lines)}
    five = CONTEXT.index("5 days")
    assert repairs["squad:off2"] == {
        "qid": "squad:off2",
        "doc_id": "squad/Tiny_doc/0",
        "answer": 0,
        "old_start": five - 2,
        "new_start": five,
        "shift": 2,
        "text": "5 days",
        "rule": REPAIR_RULE,
    }
    ab = CONTEXT.index("abab")
    assert repairs["squad:tie"]["shift"] == -1 and repairs["squad:tie"]["new_start"] == ab
    fixtures, _corpus = _load(out)
    fx = {f.qid: f for f in fixtures}["squad:off2"]
    assert fx.annotations["answer_spans"] == [[five, five + 6]]
    span = fx.spans[0]
    assert span.start <= five and five + 6 <= span.end and _whole_sentences(CONTEXT, span.start, span.end)
    assert fx.segment == "number-scope" and fx.answer.expected == "5 days"
    # a later run without repair removes the stale repairs file
    import_squad(src, out)
    assert not (out / "repairs.jsonl").exists()


# ---------------------------------------------------------------------------
# ContractNLI


@pytest.fixture(scope="module")
def contractnli(tmp_path_factory):
    out = tmp_path_factory.mktemp("contractnli")
    return out, import_contractnli(CONTRACTNLI, out)


@needs_contractnli
def test_contractnli_counts_and_validation(contractnli):
    out, report = contractnli
    assert report.documents == 61
    fixtures, corpus = _load(out)
    assert len(corpus) == 61
    assert len(fixtures) == report.questions == 61 * 17
    assert report.spans == sum(len(f.spans) for f in fixtures)
    for fx in fixtures:
        assert fx.origin == fx.qid and fx.qid.startswith("contractnli:")
        assert fx.adjudication["state"] == "draft" and fx.stress_set == "representative"
        for span in fx.spans:
            assert corpus.get(span.doc_id).text[span.start : span.end] == span.quote
            assert span.quote.strip()


@needs_contractnli
def test_contractnli_not_mentioned_is_unanswerable(contractnli):
    out, _report = contractnli
    fixtures, _corpus = _load(out)
    upstream = json.loads(CONTRACTNLI.read_text(encoding="utf-8"))
    choice = {
        f"contractnli:{d['id']}:{k}": a["choice"]
        for d in upstream["documents"]
        for k, a in d["annotation_sets"][0]["annotations"].items()
    }
    not_mentioned = [f for f in fixtures if choice[f.qid] == "NotMentioned"]
    assert len(not_mentioned) == sum(c == "NotMentioned" for c in choice.values()) > 0
    for fx in not_mentioned:
        assert not fx.answerable and fx.segment == "unanswerable"
        assert fx.spans == () and fx.sufficient_sets == ()
    for fx in fixtures:
        if choice[fx.qid] != "NotMentioned":
            assert fx.answerable and fx.support_only
            assert fx.answer.expected == choice[fx.qid]
            assert len(fx.sufficient_sets) == 1 and set(fx.sufficient_sets[0]) == {
                s.span_id for s in fx.spans
            }


@needs_contractnli
def test_contractnli_qualifier_cues(contractnli):
    out, _report = contractnli
    fixtures, _corpus = _load(out)
    with_cues = [f for f in fixtures if f.annotations.get("qualifier_cues")]
    assert len(with_cues) > 50
    for fx in with_cues:
        assert fx.segment == "rule-exception"
        cue_spans = {c["span_id"] for c in fx.annotations["qualifier_cues"]}
        for span in fx.spans:
            assert (span.dependency == "exception") == (span.span_id in cue_spans)
    for fx in fixtures:
        if fx.answerable and not fx.annotations.get("qualifier_cues"):
            assert fx.segment == ("joint-evidence" if len(fx.spans) > 1 else "definition-referent")
            assert [s.dependency for s in fx.spans][:1] == ["primary"]


@needs_contractnli
def test_contractnli_known_span_slices_exactly(contractnli):
    out, _report = contractnli
    fixtures, corpus = _load(out)
    upstream = json.loads(CONTRACTNLI.read_text(encoding="utf-8"))
    doc = next(d for d in upstream["documents"] if d["id"] == 3)
    assert doc["spans"][13] == [1278, 1358]
    expected = "(the “Permitted Purpose”) subject to the terms and conditions of this Agreement."
    assert doc["text"][1278:1358] == expected
    fx = {f.qid: f for f in fixtures}["contractnli:3:nda-4"]
    span = fx.span("s13")
    assert (span.doc_id, span.start, span.end) == ("contractnli/3", 1278, 1358)
    assert span.quote == expected
    assert span.dependency == "exception"
    assert {"span_id": "s13", "cue": "subject to"} in fx.annotations["qualifier_cues"]
    assert corpus.get("contractnli/3").text == doc["text"]
    assert fx.segment == "rule-exception"


@needs_contractnli
def test_contractnli_whitespace_only_span_is_skipped_with_reason(contractnli):
    _out, report = contractnli
    assert any("whitespace only" in s for s in report.skipped)


def test_tiny_squad_support_rules(tmp_path):
    src = _tiny_squad(tmp_path / "tiny.json")
    sentence = import_squad(src, tmp_path / "sentence", repair=True)
    answer = import_squad(src, tmp_path / "answer", repair=True, support="answer")
    assert sentence.questions == answer.questions
    by_s = {f.qid: f for f in _load(tmp_path / "sentence")[0]}
    by_a = {f.qid: f for f in _load(tmp_path / "answer")[0]}
    off2_a, off2_s = by_a["squad:off2"], by_s["squad:off2"]
    assert off2_a.spans[0].quote == "5 days" and off2_a.annotations["support_rule"] == SUPPORT_RULES["answer"]
    assert "answer_spans" not in off2_a.annotations
    # the sentence rule: the expected answer stays the span's text, the support is its sentence
    assert off2_s.answer.expected == off2_a.answer.expected == "5 days"
    assert "5 days" in off2_s.spans[0].quote and off2_s.spans[0].quote.endswith(".")
    assert off2_s.spans[0].span_id == "s0" and off2_s.sufficient_sets == (("s0",),)
    with pytest.raises(InputError, match="support"):
        import_squad(src, tmp_path / "bad", support="paragraph")


def test_support_interval_spans_every_sentence_the_answer_touches():
    text = "One rule. It ends here and. Next one."
    sentences = split_sentences(text)
    start = text.index("ends")
    end = text.index("Next") + 4  # an answer that crosses a sentence boundary
    assert support_interval(sentences, start, end) == (text.index("It"), len(text))


def test_cli_import_squad_support_option(tmp_path):
    from typer.testing import CliRunner

    from ledgerscope.cli.main import app

    src = _tiny_squad(tmp_path / "tiny.json")
    runner = CliRunner()
    ok = runner.invoke(
        app, ["import", "squad", str(src), "--out", str(tmp_path / "a"), "--support", "answer"]
    )
    assert ok.exit_code == 0, ok.output
    (fx,) = [f for f in _load(tmp_path / "a")[0] if f.qid == "squad:ok"]
    assert fx.spans[0].quote == "Intro" and fx.annotations["support_rule"] == SUPPORT_RULES["answer"]
    bad = runner.invoke(app, ["import", "squad", str(src), "--out", str(tmp_path / "b"), "--support", "page"])
    assert bad.exit_code == 2 and "support" in bad.output
