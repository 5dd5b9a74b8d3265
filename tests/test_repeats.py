"""``--repeats K``: every answer of K generations per record, flip rates, noisy questions, and the
bootstrap over repeats (issue 27, item 4).

The embedded reader is deterministic: K repeats of it give K identical answers and the very records
of K = 1. A generator whose answers differ between repeats (a ``kind = "python"`` generator that
abstains on every other call for one question; the real sampling server is in the slow test) makes
that question noisy, which compare, the report, the JUnit file and the Markdown summary count apart.
"""

from __future__ import annotations

import json
import tomllib
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from ledgerscope.analysis.stats.bootstrap import paired_bootstrap_many
from ledgerscope.analysis.stats.metrics import STATISTICS
from ledgerscope.analysis.stats.repeat_bootstrap import paired_bootstrap_repeats, repeat_draw
from ledgerscope.analysis.stats.repeat_noise import arm_noise, flip_rate, majority, noise_lines
from ledgerscope.cli.main import app
from ledgerscope.common.errors import InputError
from ledgerscope.inputs.fixtures import load_fixtures
from ledgerscope.inputs.sources import load_corpus
from ledgerscope.ledger.digest import table_digests
from ledgerscope.ledger.read import connect
from ledgerscope.pipeline.arm.config import arm_from_dict, load_arm
from ledgerscope.pipeline.run.repeats import repeat_seed
from ledgerscope.pipeline.run.sweep import sweep

runner = CliRunner()
_CALLS: Counter = Counter()


def flaky_weekly(request):
    """A ``kind = "python"`` generator: the first block, cited, except that the weekly-snapshot
    question is abstained on every other call (its verdict flips between repeats)."""
    from ledgerscope.pipeline.contracts.prompt import ABSTAIN_TEXT
    from tests.endpoint_servers import first_block

    if "weekly" in request.question:
        _CALLS[request.question] += 1
        if _CALLS[request.question] % 2:
            return ABSTAIN_TEXT
    return first_block(request)


def _inputs(paths: dict):
    return load_fixtures(paths["fixtures"], load_corpus(paths["corpus"]))


# --- the options -------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["sweep", "gate"])
def test_repeats_must_be_at_least_one(command, tmp_path):
    args = {
        "sweep": ["sweep", "--fixtures", "f.jsonl", "--arm", "a.toml", "--out", str(tmp_path / "l")],
        "gate": ["gate", "--rule", "r.toml", "--ledger", str(tmp_path / "l"), "--out", str(tmp_path / "o")],
    }[command]
    res = runner.invoke(app, [*args, "--repeats", "0"])
    assert res.exit_code == 2 and "--repeats" in res.output and ">= 1" in res.output, res.output
    assert "Traceback" not in res.output and not (tmp_path / "l").exists()
    assert "--repeats" in runner.invoke(app, [command, "--help"]).output


def test_repeat_seeds_are_the_configured_one_for_the_record_and_distinct_after():
    assert repeat_seed(0, "a", "0", "q", 0) == 0 and repeat_seed(None, "a", "0", "q", 2) is None
    seeds = {repeat_seed(0, "a", p, q, r) for p in "01" for q in ("q1", "q2") for r in (1, 2, 3)}
    assert len(seeds) == 12 and all(0 <= s < 2**31 for s in seeds)
    assert repeat_seed(0, "a", "0", "q1", 1) == repeat_seed(0, "a", "0", "q1", 1)  # reproducible


# --- the embedded reader: K identical answers, the K = 1 records --------------------------------


@pytest.fixture(scope="module")
def k3_ledger(rule_exception_inputs, tmp_path_factory) -> Path:
    """The rule-exception inputs swept by both arms with --repeats 3 (the shared K = 1 ledger's twin)."""
    fixtures, corpus = _inputs(rule_exception_inputs)
    arms = [load_arm(rule_exception_inputs["candidate"]), load_arm(rule_exception_inputs["baseline"])]
    out = tmp_path_factory.mktemp("repeats-k3") / "ledger"
    sweep(fixtures, corpus, arms, out, repeats=3)
    return out


def test_the_embedded_reader_gives_identical_repeats_and_the_k1_records(k3_ledger, rule_exception_ledger):
    con = connect(k3_ledger)
    rows = con.execute(
        "SELECT arm, phase, qid, repeat, answer, abstained, citations_json, cited_unit_ids, "
        "answer_verdict, answer_reason, citation_verdict, citation_reason, generator_error FROM repeats "
        "ORDER BY arm, phase, qid, repeat"
    ).fetchall()
    n_records = con.execute("SELECT count(*) FROM records").fetchall()[0][0]
    assert len(rows) == 3 * n_records == 90
    by_record: dict[tuple, list[tuple]] = {}
    for r in rows:
        by_record.setdefault(r[:3], []).append(r)
    for key, reps in by_record.items():
        assert [r[3] for r in reps] == [0, 1, 2]
        assert all(r[4:] == reps[0][4:] for r in reps), f"{key}: the embedded reader answered differently"
    records = {
        r[:3]: r[3:]
        for r in con.execute(
            "SELECT arm, phase, qid, answer, answer_verdict, citation_verdict FROM records"
        ).fetchall()
    }
    for key, reps in by_record.items():  # repeat 0 is the record's own answer
        assert (reps[0][4], reps[0][8], reps[0][10]) == records[key]
    k1, k3 = table_digests(rule_exception_ledger), table_digests(k3_ledger)
    assert k3 == k1  # every table the K = 1 ledger has, byte for byte in content
    manifest = json.loads((k3_ledger / "manifest.json").read_text())
    assert manifest["repeats"] == 3
    assert "repeats" not in json.loads((rule_exception_ledger / "manifest.json").read_text())


def test_a_ledger_is_resumed_only_with_its_own_repeats(k3_ledger, rule_exception_inputs):
    fixtures, corpus = _inputs(rule_exception_inputs)
    arms = [load_arm(rule_exception_inputs["candidate"]), load_arm(rule_exception_inputs["baseline"])]
    with pytest.raises(InputError, match="identity"):
        sweep(fixtures, corpus, arms, k3_ledger, repeats=1)
    assert sweep(fixtures, corpus, arms, k3_ledger, repeats=3).written == []  # its own K: all done


def test_the_gate_reuses_a_ledger_only_with_its_own_repeats(k3_ledger, rule_exception_inputs, tmp_path):
    from ledgerscope.cli.release.gate_sweep import plan_sweeps

    fixtures, corpus = _inputs(rule_exception_inputs)
    cand, base = load_arm(rule_exception_inputs["candidate"]), load_arm(rule_exception_inputs["baseline"])
    assert plan_sweeps(k3_ledger, cand, base, None, fixtures, corpus, repeats=3).runs == []
    assert plan_sweeps(k3_ledger, cand, base, None, fixtures, corpus, repeats=1).runs  # not this sweep
    with pytest.raises(InputError, match="--repeats 3, not 2"):
        plan_sweeps(tmp_path / "new", cand, base, k3_ledger, fixtures, corpus, repeats=2)
    plan = plan_sweeps(tmp_path / "new", cand, base, k3_ledger, fixtures, corpus, repeats=3)
    assert plan.runs == [(tmp_path / "new", [cand])] and plan.repeats == 3


def test_rerun_reproduces_every_repeat(k3_ledger):
    from ledgerscope.pipeline.run.rerun import rerun_record

    diff = rerun_record(k3_ledger, "candidate", "temp-retention", "5")
    assert diff.differences == []


def test_without_differing_answers_compare_is_the_k1_comparison(k3_ledger, rule_exception_ledger):
    from ledgerscope.analysis.stats.compare import compare_arms

    k1 = compare_arms(connect(rule_exception_ledger), "candidate", "baseline", n_resamples=300)
    k3 = compare_arms(connect(k3_ledger), "candidate", "baseline", n_resamples=300)
    noise = k3.pop("noise")
    assert k3 == k1 and "noise" not in k1
    assert noise["noisy_questions"] == [] and noise["candidate"]["repeats"] == 3
    assert noise["candidate"]["flip_rate"] == 0.0 and noise["baseline"]["records_flipped"] == 0


# --- the bootstrap over repeats (synthetic) -----------------------------------------------------


def _synthetic(seed: int = 1, n_q: int = 40, n_p: int = 5):
    rng = np.random.default_rng(seed)
    c = (rng.random((n_q, n_p)) < 0.6).astype(float)
    b = (rng.random((n_q, n_p)) < 0.5).astype(float)
    c[3, 2], b[5] = np.nan, np.nan
    tokens = rng.integers(50, 400, (n_q, n_p)).astype(float)
    clusters = np.array([f"doc-{i % 9}" for i in range(n_q)])
    return rng, c, b, tokens, clusters


def test_one_repeat_is_the_bootstrap_bit_for_bit():
    _rng, c, b, tokens, clusters = _synthetic()
    kw = {"n_resamples": 2000, "seed": 3, "statistics": STATISTICS, "chunk_elements": 5000}
    plain = paired_bootstrap_many({"m": (c, b, True), "t": (tokens, tokens[::-1], False)}, clusters, **kw)
    over = paired_bootstrap_repeats(
        {"m": (c[None], b[None], True), "t": (tokens[None], tokens[::-1][None], False)}, clusters, **kw
    )
    for name, entry in over.items():
        assert entry.pop("repeats") == {"candidate": 1, "baseline": 1}
        assert entry == plain[name]
    # K identical repeats draw among equal answers: the same numbers again
    same = paired_bootstrap_repeats({"m": (np.stack([c] * 3), b[None], True)}, clusters, **kw)["m"]
    same.pop("repeats")
    assert same == plain["m"]


def test_answers_that_differ_between_repeats_widen_the_interval():
    rng, c, b, _tokens, clusters = _synthetic()
    redraw = [np.where(np.isnan(c), np.nan, (rng.random(c.shape) < 0.6).astype(float)) for _ in range(4)]
    noisy = np.stack([c, *redraw])
    kw = {"n_resamples": 4000, "seed": 0, "statistics": ("mean",)}
    plain = paired_bootstrap_many({"m": (c, b, True)}, clusters, **kw)["m"]["statistics"]["mean"]
    over = paired_bootstrap_repeats({"m": (noisy, b[None], True)}, clusters, **kw)["m"]["statistics"]["mean"]
    assert over["estimate"] == plain["estimate"]  # the point estimate stays the records' (repeat 0)
    assert over["high"] - over["low"] > 1.05 * (plain["high"] - plain["low"])
    assert over["standard_error"] > plain["standard_error"]


def test_the_repeat_draw_is_uniform_within_each_question():
    picks = repeat_draw(np.array([1, 2, 5]), 3, 20_000, np.random.default_rng(0))
    assert (picks[:, 0] == 0).all()
    for q, k in ((1, 2), (2, 5)):
        share = np.bincount(picks[:, q], minlength=k) / len(picks)
        assert np.allclose(share, 1 / k, atol=0.015)


def test_flip_rate_and_majority():
    assert flip_rate(["correct"] * 3) == 0.0 and flip_rate(["correct"]) == 0.0
    assert flip_rate(["correct", "wrong", "correct"]) == pytest.approx(1 / 3)
    assert flip_rate(["correct", "wrong", "abstained", "wrong"]) == pytest.approx(0.5)
    assert majority(["wrong", "correct", "correct", "wrong"]) == "wrong"  # a tie: the earliest repeat's


# --- noisy questions in compare, the report, JUnit and Markdown ----------------------------------


@pytest.fixture(scope="module")
def noisy_ledger(rule_exception_inputs, tmp_path_factory) -> Path:
    """Two phases, --repeats 3; the candidate's generator abstains on every other call for the
    weekly-snapshot question, the baseline is the embedded reader."""
    fixtures, corpus = _inputs(rule_exception_inputs)
    out = tmp_path_factory.mktemp("repeats-noisy") / "ledger"
    _CALLS.clear()
    sweep(fixtures, corpus, _noisy_arms(rule_exception_inputs), out, repeats=3)
    return out


def _noisy_arms(paths: dict) -> list:
    cand = tomllib.loads(Path(paths["candidate"]).read_text())
    cand.update(phases=[0, 5], generator={"kind": "python", "callable": "tests.test_repeats:flaky_weekly"})
    base = tomllib.loads(Path(paths["baseline"]).read_text())
    base["phases"] = {"0": 0, "5": 5}
    return [arm_from_dict(cand), arm_from_dict(base)]


def _independent_flip_rates(ledger: Path, arm: str) -> dict[str, float]:
    """Per question, the mean over its records of 1 - (count of the commonest verdict) / K, in SQL."""
    rows = (
        connect(ledger)
        .execute(
            "WITH v AS (SELECT phase, qid, answer_verdict, count(*) AS n FROM repeats WHERE arm = ? "
            "GROUP BY ALL), r AS (SELECT phase, qid, 1 - max(n) / sum(n) AS rate FROM v GROUP BY ALL) "
            "SELECT qid, avg(rate) FROM r GROUP BY qid",
            [arm],
        )
        .fetchall()
    )
    return {q: float(rate) for q, rate in rows}


def test_compare_counts_noisy_questions_apart(noisy_ledger, tmp_path):
    args = ["compare", str(noisy_ledger), "--candidate", "candidate", "--baseline", "baseline"]
    res = runner.invoke(app, [*args, "--n-resamples", "300", "--json"])
    assert res.exit_code == 0, res.output
    noise = json.loads(res.output)["comparison"]["noise"]
    cand = noise["candidate"]
    assert noise["noisy_questions"] == ["backup-weekly"] and cand["noisy_questions"] == 1
    assert cand["repeats"] == 3 and cand["records"] == 6 and cand["records_flipped"] == 2
    expected = _independent_flip_rates(noisy_ledger, "candidate")
    assert {q["qid"]: q["flip_rate"] for q in cand["noisy"]} == {"backup-weekly": expected["backup-weekly"]}
    assert expected["backup-weekly"] == pytest.approx(1 / 3)
    assert noise["baseline"]["noisy_questions"] == 0
    text = " ".join(runner.invoke(app, [*args, "--n-resamples", "300"]).output.split())
    assert "1 of 3 questions noisy" in text and "backup-weekly (0.33)" in text


def test_the_bootstrap_of_a_noisy_ledger_resamples_its_repeats(noisy_ledger):
    from ledgerscope.analysis.stats.compare import compare_arms

    res = compare_arms(connect(noisy_ledger), "candidate", "baseline", n_resamples=300, segments=False)
    diffs = [
        block["metrics"][m]["difference"]
        for block in res["stress_sets"].values()
        for m in ("answer_correct", "abstained")
        if block["metrics"][m]["difference"]
    ]
    assert diffs and all(d["repeats"] == {"candidate": 3, "baseline": 3} for d in diffs)


def test_report_junit_and_summary_show_the_noise(noisy_ledger, tmp_path):
    rule = tmp_path / "rule.toml"
    rule.write_text("n_resamples = 300\nmax_support_loss = { mean = -0.5 }\n", encoding="utf-8")
    junit, summary, report = tmp_path / "junit.xml", tmp_path / "summary.md", tmp_path / "report.html"
    arms = ["--candidate", "candidate", "--baseline", "baseline"]
    res = runner.invoke(
        app,
        [
            *("compare", str(noisy_ledger), *arms, "--rule", str(rule)),
            *("--junit", str(junit), "--summary", str(summary), "--fail-on", "never"),
        ],
    )
    assert res.exit_code == 0, res.output
    md = summary.read_text(encoding="utf-8")
    assert "### Run-to-run noise" in md and "1 of 3 questions noisy" in md
    res = runner.invoke(app, ["report", str(noisy_ledger), *arms, "--out", str(report)])
    assert res.exit_code == 0, res.output
    html = report.read_text(encoding="utf-8")
    assert 'id="noise"' in html and "backup-weekly (0.33)" in html


def test_the_reports_difference_charts_are_the_comparisons_intervals(noisy_ledger):
    from ledgerscope.report.figures import Settings, gather

    data = gather(noisy_ledger, "candidate", "baseline", settings=Settings(300, 0, 0.95))
    over = 0
    for dist in data.distributions:
        diff = data.comparison["stress_sets"][dist["stress_set"]]["metrics"][dist["metric"]]["difference"]
        stat = diff["statistics"][dist["statistic"]]
        assert (dist["low"], dist["high"]) == (stat["low"], stat["high"])
        over += "repeats" in diff
    assert over  # answer_correct's interval resampled the repeats, in the comparison and the chart


def test_noisy_flips_are_flagged_and_listed_last():
    from ledgerscope.analysis.stats.repeat_noise import mark_noisy
    from ledgerscope.report.junit import flip_message

    flips = [
        {"qid": q, "segment": "s", "stress_set": "r", "question": "?", "phases": []} for q in ("a", "b", "c")
    ]
    noise = {"candidate": {"noisy": [{"qid": "a", "flip_rate": 0.5}]}, "baseline": None}
    marked = mark_noisy(flips, noise)
    assert [f["qid"] for f in marked] == ["b", "c", "a"] and marked[-1]["noisy"]
    head = "[noisy: the verdict differs between repeats; flip rate candidate 0.50]"
    assert flip_message(marked[-1]).startswith(head)
    assert not flip_message(marked[0]).startswith("[noisy")


# --- the TUI's stats pane -------------------------------------------------------------------------


@pytest.fixture()
def anyio_backend():
    return "asyncio"


@pytest.mark.anyio
async def test_the_tui_stats_pane_shows_the_noise(noisy_ledger):
    from ledgerscope.tui.app import LedgerscopeApp
    from ledgerscope.tui.data import LedgerSession
    from ledgerscope.tui.widgets.query_list import QueryList

    from .tui_pilot import settle

    app = LedgerscopeApp(LedgerSession(noisy_ledger), n_resamples=50, tune_gc=False)  # the lines, not the CIs
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(pilot)
        await pilot.press("s")
        await settle(pilot)
        assert app.query_one("TabbedContent").active == "stats"
        stats = " ".join(app.query_one("#stats-view").text.split())
        noise = app.main.stats.comparison["noise"]
        for key in ("slash", "w", "e", "e", "k", "l", "y", "enter", "c"):  # search "weekly", compare
            await pilot.press(key)
        await settle(pilot)
        assert app.query_one(QueryList).current.qid == "backup-weekly" and app.main.compare
        cand, base = (app.query_one(f"#compare-{r}").text for r in ("candidate", "baseline"))
        assert "~ noisy: flip rate 0.33 over 3 repeats (flips at phase 0, 5)" in cand
        assert "run-to-run noise: steady over 3 repeats" in base
    assert noise["noisy_questions"] == ["backup-weekly"]  # analysis/'s figures, rendered as compare's lines
    lines = noise_lines(noise)
    assert len(lines) == 3 and all(" ".join(line.split()) in stats for line in lines)
    assert "candidate candidate: 3 repeats, 1 of 3 questions noisy" in stats
    assert "2 of 6 records, mean flip rate 0.111; noisiest: backup-weekly (0.33)" in stats
    assert "baseline baseline: 3 repeats, 0 of 3 questions noisy" in stats


def test_the_tui_noise_lines_are_data_not_markup():
    from ledgerscope.tui.render_summary import noise_tail, question_noise_text

    side = {
        "arm": "[bold]arm[/bold]",
        **{"repeats": 3, "records": 2, "records_flipped": 1, "flip_rate": 0.5, "questions": 1},
        **{"noisy_questions": 1, "noisy": [{"qid": "q[red]x\x1b[2J", "flip_rate": 0.5}]},
    }
    text = noise_tail({"bootstrap": "b", "candidate": side, "baseline": None}, {})
    assert "candidate [bold]arm[/bold]: 3 repeats, 1 of 1 questions noisy" in text.plain
    assert "q[red]x\\x1b[2J (0.50)" in text.plain and "\x1b" not in text.plain
    assert "baseline: one answer per record" in text.plain
    assert noise_tail(None, {}).plain == ""  # without repeats the pane is what it was
    noisy = side["noisy"][0] | {"phases_flipped": ["[b]0"]}
    line = question_noise_text({"candidate": side | {"noisy": [noisy]}}, "candidate", noisy["qid"], {})
    assert line.plain == "\n~ noisy: flip rate 0.50 over 3 repeats (flips at phase [b]0)\n"
    assert question_noise_text({"candidate": side}, "baseline", "q", {}).plain == ""


# --- rejudge over the repeats table ----------------------------------------------------------------

_VERDICTS = "answer_verdict, answer_reason, citation_verdict, citation_reason"


def _answers_and_verdicts(ledger: Path, table: str) -> dict[tuple, tuple]:
    key = "arm, phase, qid" + (", repeat" if table == "repeats" else "")
    sql = f"SELECT {key}, answer, abstained, citations_json, {_VERDICTS} FROM {table}"
    rows = connect(ledger).execute(sql)
    n = key.count(",") + 1
    return {tuple(r[:n]): tuple(r[n:]) for r in rows.fetchall()}


def test_rejudge_judges_every_repeat_as_it_judges_the_records(noisy_ledger, rule_exception_inputs, tmp_path):
    from ledgerscope.pipeline.run.rejudge import rejudge

    before = _answers_and_verdicts(noisy_ledger, "repeats")
    fixtures = [json.loads(line) for line in (noisy_ledger / "fixtures.jsonl").read_text().splitlines()]
    for f in fixtures:
        if f["qid"] == "backup-weekly":
            f["answer"]["expected"] = "30 days"  # the answer key changes, the support does not
    v2 = tmp_path / "fixtures.v2.jsonl"
    v2.write_text("".join(json.dumps(f) + "\n" for f in fixtures), encoding="utf-8")
    result = rejudge(noisy_ledger, v2, tmp_path / "v2", no_oracle=True)
    after = _answers_and_verdicts(tmp_path / "v2", "repeats")
    records = _answers_and_verdicts(tmp_path / "v2", "records")
    assert {k[2] for k in after if after[k] != before[k]} == {"backup-weekly"}  # reasons name the key
    changed = {k for k in after if (after[k][3], after[k][5]) != (before[k][3], before[k][5])}
    assert changed and result.changed_repeats == len(changed) and result.repeats == len(before) == 36
    assert {before[k][3] for k in changed} == {"correct"} and {after[k][3] for k in changed} != {"correct"}
    for k, row in after.items():
        assert row[:3] == before[k][:3]  # the answers are kept, only judged again
        if row[:3] == records[k[:3]][:3]:  # the record's own answer: the record's verdicts
            assert row[3:] == records[k[:3]][3:], k
        if k[3] == 0:
            assert row == records[k[:3]]  # repeat 0 is still the record
    _CALLS.clear()  # a fresh sweep with the new fixtures (the noisy arm, phase 0: a few seconds)
    cand = _noisy_arms(rule_exception_inputs)[0]
    cand.phases = cand.phases[:1]
    new_fixtures, corpus = load_fixtures(v2, load_corpus(rule_exception_inputs["corpus"]))
    sweep(new_fixtures, corpus, [cand], tmp_path / "fresh", repeats=3)
    fresh = _answers_and_verdicts(tmp_path / "fresh", "repeats")
    assert len(fresh) == 9 and changed & fresh.keys() and fresh == {k: after[k] for k in fresh}
    noisy = arm_noise(connect(tmp_path / "v2"), "candidate")  # abstained or now wrong: still noisy
    assert [q["qid"] for q in noisy["noisy"]] == ["backup-weekly"] and noisy["records_flipped"] == 2


# --- the estimate -------------------------------------------------------------------------------


def test_the_estimate_multiplies_generator_requests_by_k(rule_exception_inputs, tmp_path):
    from ledgerscope.pipeline.run.costs.estimate import plan_sweep

    fixtures, corpus = _inputs(rule_exception_inputs)
    cand = tomllib.loads(Path(rule_exception_inputs["candidate"]).read_text())
    cand["generator"] = {"kind": "endpoint", "base_url": "http://127.0.0.1:9", "model": "m", "max_tokens": 8}
    arm = arm_from_dict(cand)
    one = plan_sweep(fixtures, corpus, [arm], tmp_path / "x", repeats=1)
    three = plan_sweep(fixtures, corpus, [arm], tmp_path / "x", repeats=3)
    for a, b in zip(one.steps, three.steps, strict=True):
        if a.phase in ("setup", "oracle"):
            assert b.usage.gen_requests == a.usage.gen_requests  # the oracle answers once
        else:
            assert b.usage.gen_requests == 3 * a.usage.gen_requests == 3 * len(fixtures)
            assert b.usage.completion_tokens == 3 * a.usage.completion_tokens


# --- a real sampling generator (llama.cpp) --------------------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_sampling_server_records_every_answer_and_its_flip_rate(
    smollm2_server, rule_exception_inputs, tmp_path
):
    from ledgerscope.analysis.stats.repeat_noise import arm_noise, flip_rate
    from ledgerscope.pipeline.judging.answer_judges import answer_judge

    fixtures, corpus = _inputs(rule_exception_inputs)
    cand = tomllib.loads(Path(rule_exception_inputs["candidate"]).read_text())
    cand.update(
        phases=[0],
        generator={
            "kind": "endpoint",
            "base_url": smollm2_server.base_url + "/v1",
            "model": "smollm2",
            "max_tokens": 12,
            "temperature": 0.9,
        },
    )
    out = tmp_path / "ledger"
    sweep(fixtures, corpus, [arm_from_dict(cand)], out, repeats=3)
    con = connect(out)
    rows = con.execute(
        "SELECT qid, repeat, seed, answer, abstained, answer_verdict, generator_error, latency_s "
        "FROM repeats ORDER BY qid, repeat"
    ).fetchall()
    assert len(rows) == 3 * len(fixtures)
    assert all(r[6] is None and r[7] is not None and r[7] > 0 for r in rows)  # every answer came back
    by_q: dict[str, list] = {}
    for r in rows:
        by_q.setdefault(r[0], []).append(r)
    fx = {f.qid: f for f in fixtures}
    records = dict(con.execute("SELECT qid, answer FROM records").fetchall())
    for qid, reps in by_q.items():
        assert [r[1] for r in reps] == [0, 1, 2] and reps[0][2] == 0 and len({r[2] for r in reps}) == 3
        assert reps[0][3] == records[qid]  # repeat 0 is the record
        for r in reps:  # each verdict is the judge's on that repeat's own answer
            assert answer_judge(None).judge(r[3], r[4], fx[qid]).verdict == r[5]
    summary = arm_noise(con, "candidate")
    rates = {q["qid"]: q["flip_rate"] for q in summary["noisy"]}
    for qid, reps in by_q.items():
        rate = flip_rate([r[5] for r in reps])
        assert rates.get(qid, 0.0) == pytest.approx(rate)
    assert summary["noisy_questions"] == sum(len({r[5] for r in reps}) > 1 for reps in by_q.values())
