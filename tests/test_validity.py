"""The answer side's validity meter and its consequences (issue 26).

A sweep whose generator abstains on everything (a ``kind = "python"`` generator) fails with full
support on every answerable question: the meter says so, every answer-side step of the diagnosis is
flagged unverified (SQL and Python alike, the walk, the exports), and no answer-side check of a
release decision passes.
"""

from __future__ import annotations

import json

import pytest

from ledgerscope.analysis.validity import (
    UNVERIFIED,
    YES_NO_REASON,
    arm_statuses,
    gate_checks,
    ledger_meter,
    meter,
    oracle_outcome,
    validity_lines,
)

MUTE = {
    "capacity": 12,
    "overlap": 0,
    "phases": [0, 3],
    "budget_tokens": 200,
    "top_k": 2,
    "generator": {"kind": "python", "callable": "tests.test_validity:abstain_always"},
}
RULE = """format = "ledgerscope-release-rule/1"
n_resamples = 200
seed = 0
max_support_loss = -1.0
max_answer_loss = -1.0
[max_critical_errors_per_segment]
rule-exception = 1
number-scope = 1
"""


def abstain_always(request):
    """A generator that cannot answer anything, even from full support."""
    from ledgerscope.pipeline.contracts.prompt import ABSTAIN_TEXT, GenerationResult

    return GenerationResult(ABSTAIN_TEXT, [], True)


@pytest.fixture(scope="module")
def mute_ledger(rule_exception_inputs, tmp_path_factory):
    from ledgerscope.inputs.fixtures import load_fixtures
    from ledgerscope.inputs.sources import load_corpus
    from ledgerscope.pipeline.arm.config import arm_from_dict
    from ledgerscope.pipeline.run.sweep import sweep

    out = tmp_path_factory.mktemp("mute") / "ledger"
    fixtures, corpus = load_fixtures(
        rule_exception_inputs["fixtures"], load_corpus(rule_exception_inputs["corpus"])
    )
    arms = [
        arm_from_dict({**MUTE, "name": "mute-a"}),
        arm_from_dict({**MUTE, "name": "mute-b", "capacity": 16}),
    ]
    sweep(fixtures, corpus, arms, out)
    return out


# ---------------------------------------------------------------------------
# the meter, pure


def test_outcomes_count_yes_no_apart_and_infeasible_whatever_the_verdict():
    assert oracle_outcome("correct", True, None) == "correct"
    assert oracle_outcome("correct", False, None) == "infeasible"
    assert oracle_outcome("abstained", True, f"abstained; reason: {YES_NO_REASON}") == "yes_no"
    assert oracle_outcome("abstained", True, "abstained") == "abstained"
    assert oracle_outcome("critical-condition-error", True, None) == "wrong"
    assert oracle_outcome("not-judged", True, None) is None
    assert oracle_outcome("not-applicable", None, None) is None


def test_meter_per_arm_stress_set_and_segment_with_the_threshold():
    rows = [
        {
            "arm": "a",
            "qid": f"q{i}",
            "answerable": True,
            "verdict": v,
            "feasible": True,
            "reason": None,
            "segment": "s1" if i < 5 else "s2",
            "stress_set": "representative",
        }
        for i, v in enumerate(["correct"] * 8 + ["wrong", "abstained"])
    ]
    rows.append(
        {
            "arm": "a",
            "qid": "c",
            "answerable": False,
            "verdict": "not-applicable",
            "feasible": None,
            "reason": None,
            "segment": "unanswerable",
            "stress_set": "representative",
        }
    )
    m = meter(rows, 0.8)["arms"]["a"]
    got = (m["answerable"], m["correct"], m["wrong"], m["abstained"], m["status"])
    assert got == (10, 8, 1, 1, "verified")
    assert m["stress_sets"]["representative"]["segments"]["s2"]["correct"] == 3
    assert meter(rows, 0.9)["arms"]["a"]["status"] == "unverified"
    assert meter([], 0.8)["arms"] == {}


def test_gate_turns_answer_checks_inconclusive_and_leaves_support_checks():
    from ledgerscope.analysis.stats.release import Check

    validity = meter(
        [
            {
                "arm": "c",
                "qid": "q",
                "answerable": True,
                "verdict": "abstained",
                "feasible": True,
                "reason": None,
                "segment": "x",
                "stress_set": "representative",
            }
        ]
    )
    checks = [
        Check("representative", "max_answer_loss.mean", "answer_correct", "pass", "ok"),
        Check("representative", "max_critical_errors_per_segment.x", "critical", "violates", "bad"),
        Check("representative", "max_support_loss.mean", "support", "pass", "ok"),
    ]
    out = gate_checks(checks, validity, ["c"], 0.8)
    assert [c.status for c in out] == ["inconclusive", "inconclusive", "pass"]
    assert "generator fails with full support on 1 of 1 questions" in out[0].reason


@pytest.mark.parametrize("with_oracle", [True, False])
def test_arm_statuses_are_the_meters(with_oracle):
    """The statuses from counts of alike questions (what a ledger's open reads) are the meter's, over
    every outcome, several records per question, records without an oracle row, and no oracle view."""
    import duckdb

    con = duckdb.connect()
    con.execute(
        "CREATE TABLE records (arm VARCHAR, phase VARCHAR, qid VARCHAR, stress_set VARCHAR, "
        "segment VARCHAR, answerable BOOLEAN, oracle_verdict VARCHAR, oracle_feasible BOOLEAN)"
    )
    verdicts = ["correct", "abstained", "wrong", "infrastructure-failure", "not-judged", None]
    rows = []
    for arm, n in (("verified", 10), ("unverified", 7), ("unmeasured", 3)):
        for i in range(n):
            verdict = "correct" if arm == "verified" and i < 9 else verdicts[i % len(verdicts)]
            if arm == "unmeasured":
                verdict = "not-judged"
            answerable, feasible = arm == "verified" or i % 5 != 4, arm == "verified" or i % 4 != 3
            for phase in ("0", "1"):
                rows.append((arm, phase, f"q{i}", f"s{i % 2}", f"g{i % 3}", answerable, verdict, feasible))
    con.executemany("INSERT INTO records VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
    if with_oracle:
        con.execute(
            "CREATE TABLE oracle AS SELECT arm, qid, any_value(oracle_verdict) AS answer_verdict, "
            f"any_value(oracle_feasible) AS feasible, '{YES_NO_REASON}' AS answer_reason FROM records "
            "WHERE qid <> 'q0' GROUP BY arm, qid"
        )
    statuses = {arm: block["status"] for arm, block in ledger_meter(con)["arms"].items()}
    assert arm_statuses(con) == statuses
    assert set(statuses.values()) == {"verified", "unverified", "not-measured"}


# ---------------------------------------------------------------------------
# a generator that abstains on everything


def test_meter_says_the_answer_side_is_unverified(mute_ledger):
    from ledgerscope.ledger.read import connect

    m = ledger_meter(connect(mute_ledger))
    for arm in ("mute-a", "mute-b"):
        block = m["arms"][arm]
        assert block["status"] == "unverified" and block["correct"] == 0 and block["answerable"] == 2
    assert any("ANSWER SIDE UNVERIFIED" in line for line in validity_lines(m))


def test_every_answer_side_step_is_flagged_unverified(mute_ledger, sql_matches_python):
    from ledgerscope.analysis.diagnosis.feed import diagnose_ledger
    from ledgerscope.ledger.read import connect

    con = connect(mute_ledger)
    sql_matches_python(con, mute_ledger)  # the SQL twin agrees record for record
    rows = list(diagnose_ledger(con, mute_ledger))
    answer_side = 0
    for row in rows:
        assert row["label"] not in ("both-fail", "generator-failure-oracle-success", "pass"), row["qid"]
        assert "annotation-check" not in row["flags"]
        for entry in row["walk"]:
            if entry["step"] in (9, 10):
                answer_side += 1
                assert entry.get("answer_side") == "unverified", (row["qid"], entry)
        if row["step"] in (9, 10):
            assert row["label"] == UNVERIFIED and UNVERIFIED in row["flags"]
    assert answer_side and any(r["step"] == 9 for r in rows)


def test_no_answer_side_check_passes_and_the_views_say_so(mute_ledger, tmp_path):
    from typer.testing import CliRunner

    from ledgerscope.cli.main import app

    rule = tmp_path / "rule.toml"
    rule.write_text(RULE, encoding="utf-8")
    runner = CliRunner()
    res = runner.invoke(
        app,
        [
            "compare",
            str(mute_ledger),
            "--candidate",
            "mute-a",
            "--baseline",
            "mute-b",
            "--rule",
            str(rule),
            "--json",
        ],
    )
    assert res.exit_code == 4, res.output  # collect-more-evidence (docs/ci.md)
    out = json.loads(res.output)
    assert out["comparison"]["answer_validity"]["arms"]["mute-a"]["status"] == "unverified"
    answer_side = ("max_answer_loss", "max_critical_errors_per_segment")
    answer_checks = [c for c in out["decision"]["checks"] if c["tolerance"].split(".")[0] in answer_side]
    assert answer_checks and all(c["status"] == "inconclusive" for c in answer_checks)
    assert all("generator fails with full support on 2 of 2 questions" in c["reason"] for c in answer_checks)
    assert out["decision"]["outcome"] != "accept"

    res = runner.invoke(app, ["diagnose", str(mute_ledger)])
    assert res.exit_code == 0 and "ANSWER SIDE UNVERIFIED" in res.output
    page = tmp_path / "r.html"
    res = runner.invoke(
        app,
        [
            "report",
            str(mute_ledger),
            "--candidate",
            "mute-a",
            "--baseline",
            "mute-b",
            "--rule",
            str(rule),
            "--out",
            str(page),
            "--n-resamples",
            "200",
        ],
    )
    assert res.exit_code == 0, res.output
    assert 'id="answer-side"' in page.read_text() and "ANSWER SIDE UNVERIFIED" in page.read_text()

    export = tmp_path / "x.jsonl"
    res = runner.invoke(
        app, ["export", str(mute_ledger), "--where", "true", "--format", "jsonl", "--out", str(export)]
    )
    assert res.exit_code == 0, res.output
    exported = [json.loads(line) for line in export.read_text().splitlines() if line.strip()]
    judged = [r for r in exported if r.get("diagnosis", {}).get("step") in (9, 10)]
    assert judged and all(UNVERIFIED in r["diagnosis"]["flags"] for r in judged)


def test_rule_key_min_oracle_correct(tmp_path):
    from ledgerscope.analysis.stats.release import load_rule
    from ledgerscope.common.errors import InputError

    path = tmp_path / "r.toml"
    path.write_text(RULE + "", encoding="utf-8")
    assert load_rule(path).min_oracle_correct == 0.8
    path.write_text("min_oracle_correct = 0.5\n" + RULE, encoding="utf-8")
    assert load_rule(path).min_oracle_correct == 0.5
    path.write_text("min_oracle_correct = 2\n" + RULE, encoding="utf-8")
    with pytest.raises(InputError):
        load_rule(path)


def test_the_stats_pane_shows_the_meter():
    from rich.console import Console

    from ledgerscope.tui.render import make_palette
    from ledgerscope.tui.render_summary import stats_text

    validity = meter(
        [
            {
                "arm": "cand",
                "qid": "q",
                "answerable": True,
                "verdict": "abstained",
                "feasible": True,
                "reason": None,
                "segment": "x",
                "stress_set": "representative",
            }
        ]
    )
    comparison = {
        "stress_sets": {},
        "note": "",
        "answer_validity": validity,
        "candidate": {"arm": "cand", "counts": {}},
        "baseline": {"arm": "base", "counts": {}},
        "settings": {"n_resamples": 100, "seed": 0, "confidence": 0.95, "resampling_unit": "doc"},
        "matching": {"matched_questions": 1, "matched_records": 1, "shared_phases": ["0"]},
    }
    console = Console(width=200, record=True)
    console.print(
        stats_text({}, {"candidate": "cand", "baseline": "base"}, [], comparison, None, "", make_palette())
    )
    assert "ANSWER SIDE UNVERIFIED" in console.export_text()
