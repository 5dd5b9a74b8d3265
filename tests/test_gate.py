"""The release gate: decisions as exit codes, the gate command's artefacts (JUnit XML that a JUnit
parser reads, a Markdown summary), and shared artefacts that name no machine's directories."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import junitparser
import pytest
from typer.testing import CliRunner

from ledgerscope.cli.main import app
from ledgerscope.cli.release.decision_exit import EXIT_COLLECT_MORE_EVIDENCE, EXIT_REJECT

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_ledgers"
RULE = SAMPLES / "release_rule.toml"
runner = CliRunner()

#: the candidate and baseline swapped: the "candidate" (the sample's baseline) keeps about ten points
#: more support, so a loose tolerance passes cleanly and a tight one passes below the MDD
SWAPPED = ["--candidate", "baseline", "--baseline", "candidate"]


def _rule(tmp_path: Path, name: str, tolerance: float, extra: str = "") -> Path:
    path = tmp_path / name
    path.write_text(
        f'stress_sets = ["representative"]\nn_resamples = 500\n{extra}'
        f"max_support_loss = {{ mean = {tolerance} }}\n",
        encoding="utf-8",
    )
    return path


def _compare(ledger: Path, arms: list[str], rule: Path, *more: str):
    return runner.invoke(app, ["compare", str(ledger), *arms, "--rule", str(rule), *more])


def test_exit_codes_are_distinct_from_the_error_codes():
    assert len({0, EXIT_REJECT, EXIT_COLLECT_MORE_EVIDENCE, 1, 2, 70, 74}) == 7


def test_compare_rule_exits_with_the_decision(sample_ledger, tmp_path):
    arms = ["--candidate", "candidate", "--baseline", "baseline"]
    strict = _rule(tmp_path, "strict.toml", -0.02)
    res = _compare(sample_ledger, arms, strict)
    assert res.exit_code == EXIT_REJECT, res.output
    assert "release decision: REJECT" in res.output
    assert _compare(sample_ledger, arms, strict, "--fail-on", "never").exit_code == 0
    assert _compare(sample_ledger, arms, strict, "--fail-on", "reject").exit_code == EXIT_REJECT
    loose, tight = _rule(tmp_path, "loose.toml", -0.10), _rule(tmp_path, "tight.toml", -0.03)
    res = _compare(sample_ledger, SWAPPED, loose)
    assert res.exit_code == 0 and "release decision: ACCEPT" in res.output
    res = _compare(sample_ledger, SWAPPED, tight)
    assert res.exit_code == EXIT_COLLECT_MORE_EVIDENCE, res.output
    assert "too small to show the candidate is safe" in res.output
    res = _compare(sample_ledger, SWAPPED, tight, "--fail-on", "reject")
    assert res.exit_code == 0 and "warning: release decision COLLECT-MORE-EVIDENCE passes" in res.output
    bad = runner.invoke(app, ["compare", str(sample_ledger), *arms, "--rule", str(strict), "--fail-on", "x"])
    assert bad.exit_code == 2 and "--fail-on must be one of" in bad.output


def test_a_rule_may_accept_below_the_detectable_difference_with_a_warning(sample_ledger, tmp_path):
    rule = _rule(tmp_path, "lenient.toml", -0.03, "underpowered_is_inconclusive = false\n")
    res = _compare(sample_ledger, SWAPPED, rule, "--json")
    assert res.exit_code == 0
    decision = json.loads(res.output)["decision"]
    assert decision["outcome"] == "accept"
    assert decision["reasons"][0].startswith("the run is too small to show the candidate is safe")


def test_compare_json_carries_the_detectable_difference_beside_each_difference(sample_ledger):
    res = runner.invoke(
        app,
        [
            "compare",
            str(sample_ledger),
            "--candidate",
            "candidate",
            "--baseline",
            "baseline",
            "--json",
            "--n-resamples",
            "500",
        ],
    )
    assert res.exit_code == 0
    diff = json.loads(res.output)["comparison"]["stress_sets"]["representative"]["metrics"]["support"][
        "difference"
    ]
    for stat, entry in diff["statistics"].items():
        found = diff["detectable"][stat]
        assert found["power"] == 0.8 and found["n_questions"] == diff["n_questions"]
        assert found["mdd"] == pytest.approx((1.959964 + 0.841621) * entry["standard_error"], rel=1e-5)


def _gate(tmp_path: Path, rule: Path, *arms: str, fail_on: str | None = None):
    """The gate on the committed sample, run from ``tmp_path`` with every path given absolute."""
    (tmp_path / "ledger").symlink_to(SAMPLES / "quillstack" / "ledger", target_is_directory=True)
    args = [
        "gate",
        "--rule",
        str(rule),
        "--ledger",
        str(tmp_path / "ledger"),
        "--out",
        str(tmp_path / "out"),
        "--fixtures",
        str(SAMPLES / "fixtures.jsonl"),
        "--corpus",
        str(SAMPLES / "corpus"),
        "--quiet",
        *arms,
    ]
    if fail_on:
        args += ["--fail-on", fail_on]
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        return runner.invoke(app, args, env={"GITHUB_STEP_SUMMARY": str(tmp_path / "step-summary.md")})
    finally:
        os.chdir(cwd)


def _arms(candidate: str, baseline: str) -> list[str]:
    return [
        "--candidate-arm",
        str(SAMPLES / "arms" / f"{candidate}.toml"),
        "--baseline-arm",
        str(SAMPLES / "arms" / f"{baseline}.toml"),
    ]


def test_gate_rejects_the_sample_and_writes_its_artefacts(sample_ledger, tmp_path):
    rule = tmp_path / "rule.toml"
    rule.write_bytes(RULE.read_bytes())
    res = _gate(tmp_path, rule, *_arms("candidate", "baseline"))
    assert res.exit_code == EXIT_REJECT, res.output
    assert "complete for candidate, baseline, nothing to sweep" in res.output
    out = tmp_path / "out"
    assert {p.name for p in out.iterdir()} == {"report.html", "junit.xml", "summary.md"}
    decision = json.loads(
        _compare(
            sample_ledger,
            ["--candidate", "candidate", "--baseline", "baseline"],
            RULE,
            "--json",
            "--fail-on",
            "never",
        ).stdout
    )["decision"]
    xml = junitparser.JUnitXml.fromfile(str(out / "junit.xml"))
    suites = {s.name: s for s in xml}
    failing = {case.name for case in suites["release-rule"] if not case.is_passed}
    assert failing == {c["tolerance"] for c in decision["checks"] if c["status"] != "pass"}
    assert suites["release-rule"].tests == len(decision["checks"])
    flips = list(suites["flips"])
    assert len(flips) == _flipped_questions(sample_ledger) > 0
    for case in flips:
        message = case.result[0].message
        assert "flipped from correct to wrong" in message and "diagnosis step" in message
        assert "boundary:" in message and ("cut at char" in message or "no cut" in message)
    summary = (out / "summary.md").read_text(encoding="utf-8")
    assert summary.startswith("## Release gate: ❌ REJECT") and "### Worst flips" in summary
    assert "| MDD |" in summary
    assert (tmp_path / "step-summary.md").read_text(encoding="utf-8").strip() == summary.strip()
    _assert_no_machine_paths(tmp_path, [out / "report.html", out / "junit.xml", out / "summary.md"])


def _flipped_questions(ledger: Path) -> int:
    """Independently: questions correct in the baseline and wrong in the candidate at some phase."""
    import duckdb

    from ledgerscope.testing.ledger_files import table_files

    files = "[" + ", ".join(f"'{p}'" for p in table_files(ledger, "records")) + "]"
    return duckdb.sql(
        f"SELECT count(DISTINCT c.qid) FROM read_parquet({files}) c JOIN read_parquet({files}) b "
        "ON c.qid = b.qid AND c.phase = b.phase WHERE c.arm = 'candidate' AND b.arm = 'baseline' "
        "AND b.answer_verdict = 'correct' "
        "AND c.answer_verdict IN ('wrong', 'false-assertion', 'critical-condition-error')"
    ).fetchall()[0][0]


def _assert_no_machine_paths(tmp_path: Path, files: list[Path]) -> None:
    """Shared artefacts name what the user gave, relative: no home, temporary or working directory."""
    forbidden = {str(Path.home()), tempfile.gettempdir(), str(tmp_path), str(tmp_path.resolve()), str(ROOT)}
    for path in files:
        text = path.read_text(encoding="utf-8")
        for bad in forbidden:
            assert bad not in text, f"{path.name} names {bad}"
    assert "<code>ledger</code>" in files[0].read_text(encoding="utf-8")


def test_gate_accepts_and_collects_more_evidence(tmp_path):
    loose = _rule(tmp_path, "loose.toml", -0.10)
    (tmp_path / "a").mkdir()
    res = _gate(tmp_path / "a", loose, *_arms("baseline", "candidate"))
    assert res.exit_code == 0, res.output
    tight = _rule(tmp_path, "tight.toml", -0.03)
    (tmp_path / "b").mkdir()
    res = _gate(tmp_path / "b", tight, *_arms("baseline", "candidate"))
    assert res.exit_code == EXIT_COLLECT_MORE_EVIDENCE, res.output
    xml = junitparser.JUnitXml.fromfile(str(tmp_path / "b" / "out" / "junit.xml"))
    cases = {c.name: c for s in xml for c in s if s.name == "release-rule"}
    assert not cases["underpowered_is_inconclusive"].is_passed


def test_gate_refuses_a_baseline_ledger_that_does_not_match(tmp_path):
    res = _gate(
        tmp_path,
        RULE,
        "--candidate-arm",
        str(SAMPLES / "arms" / "candidate.toml"),
        "--baseline-arm",
        str(SAMPLES / "arms" / "starved-budget.toml"),
        "--baseline-ledger",
        str(SAMPLES / "quillstack" / "ledger"),
    )
    assert res.exit_code == 2, res.output
    assert "cannot stand for the baseline arm" in res.output


def test_junit_and_markdown_escape_untrusted_text():
    from ledgerscope.report.gate_inputs import GateOutcome
    from ledgerscope.report.junit import junit_xml
    from ledgerscope.report.markdown import markdown_summary

    hostile = "q\x1b[31m <script>![x](http://e/) | `tick` \u202e"
    flip = {
        "qid": hostile,
        "segment": "s",
        "stress_set": "representative",
        "question": hostile,
        "phases": [
            {
                "phase": "0",
                "candidate": "wrong",
                "step": 7,
                "step_name": "reranker removes it",
                "boundary": "no chunk cut in the gold spans' documents",
            }
        ],
    }
    decision = {"outcome": "reject", "rule_digest": "sha256:0", "reasons": [], "checks": []}
    comparison = {"settings": {"confidence": 0.95}, "stress_sets": {}}
    gate = GateOutcome("c", "b", "ledger", None, "rule.toml", comparison, decision, [flip])
    xml = junit_xml(gate)
    assert "\x1b" not in xml and "\\x1b" in xml and "<script>" not in xml and "\\u202e" in xml
    md = markdown_summary(gate)
    assert "<script>" not in md and "![x](" not in md and "\\|" in md and "\x1b" not in md


def test_compare_writes_junit_and_summary_only_with_a_rule(sample_ledger, tmp_path):
    arms = ["--candidate", "candidate", "--baseline", "baseline"]
    strict = _rule(tmp_path, "strict.toml", -0.02)
    res = _compare(
        sample_ledger,
        arms,
        strict,
        "--junit",
        str(tmp_path / "j" / "junit.xml"),
        "--summary",
        str(tmp_path / "s.md"),
    )
    assert res.exit_code == EXIT_REJECT
    xml = junitparser.JUnitXml.fromfile(str(tmp_path / "j" / "junit.xml"))
    assert [c.name for s in xml if s.name == "release-rule" for c in s] == ["max_support_loss.mean"]
    assert "## Release gate: ❌ REJECT" in (tmp_path / "s.md").read_text(encoding="utf-8")
    res = runner.invoke(app, ["compare", str(sample_ledger), *arms, "--junit", str(tmp_path / "x.xml")])
    assert res.exit_code == 2 and "need --rule" in res.output and not (tmp_path / "x.xml").exists()


def test_gate_plans_only_the_missing_sweeps(tmp_path):
    from ledgerscope.cli.release.gate_sweep import plan_sweeps
    from ledgerscope.inputs.fixtures import load_fixtures
    from ledgerscope.inputs.sources import load_corpus
    from ledgerscope.pipeline.arm.config import load_arm

    fixtures, corpus = load_fixtures(SAMPLES / "fixtures.jsonl", load_corpus(SAMPLES / "corpus"))
    cand, base = (load_arm(SAMPLES / "arms" / f"{n}.toml") for n in ("candidate", "baseline"))
    ledger = SAMPLES / "quillstack" / "ledger"
    assert plan_sweeps(ledger, cand, base, None, fixtures, corpus).runs == []  # complete: nothing runs
    plan = plan_sweeps(tmp_path / "new", cand, base, ledger, fixtures, corpus)  # the baseline reused
    assert [(out, [a.name for a in arms]) for out, arms in plan.runs] == [(tmp_path / "new", ["candidate"])]
    assert any("its manifest matches, reused" in n for n in plan.notes)
    plan = plan_sweeps(tmp_path / "new", cand, base, tmp_path / "base", fixtures, corpus)  # no baseline yet
    assert [(out, [a.name for a in arms]) for out, arms in plan.runs] == [
        (tmp_path / "base", ["baseline"]),
        (tmp_path / "new", ["candidate"]),
    ]


def test_gate_over_an_existing_ledger_takes_the_arm_names_from_the_rule(tmp_path):
    """No fixtures, no arm files: the ledger must exist and the rule names the arms (the sample's
    rule: candidate and baseline)."""
    (tmp_path / "ledger").symlink_to(SAMPLES / "quillstack" / "ledger", target_is_directory=True)
    res = runner.invoke(
        app,
        [
            "gate",
            "--rule",
            str(RULE),
            "--ledger",
            str(tmp_path / "ledger"),
            "--out",
            str(tmp_path / "out"),
            "--quiet",
            "--fail-on",
            "never",
        ],
    )
    assert res.exit_code == 0 and "release decision: REJECT" in res.output, res.output
    res = runner.invoke(
        app,
        ["gate", "--rule", str(RULE), "--ledger", str(tmp_path / "none"), "--out", str(tmp_path / "out2")],
    )
    assert res.exit_code == 2 and "no ledger here" in res.output
