"""Release rule: loading and validating the TOML, the digest, and accept / reject / collect decisions."""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path

import pytest

from ledgerscope.analysis.stats.compare import compare_arms
from ledgerscope.analysis.stats.release import OUTCOMES, Rule, decide, load_rule, rule_digest
from ledgerscope.common.errors import InputError

from .test_stats import records_con, synthetic_rows

EXAMPLE = Path(__file__).resolve().parents[1] / "docs" / "release_rule.example.toml"


def write(tmp_path: Path, text: str, name: str = "rule.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# ---------------------------------------------------------------------------
# loading


def test_example_rule_loads_and_digest_is_of_the_bytes():
    rule = load_rule(EXAMPLE)
    assert rule.digest == rule_digest(EXAMPLE) == "sha256:" + hashlib.sha256(EXAMPLE.read_bytes()).hexdigest()
    assert rule.interval_handling == "conservative" and rule.min_questions == 30
    assert {(d.metric, d.statistic) for d in rule.differences} >= {
        ("support", "mean"),
        ("support", "worst_aggregate"),
    }
    kinds = {c.segment: c.kind for c in rule.critical_per_segment}
    assert kinds["rule-exception"] == "count" and kinds["number-scope"] == "rate"
    assert rule.tokens is not None and rule.tokens.max == 2048


def test_bare_forms_and_defaults(tmp_path):
    rule = load_rule(write(tmp_path, "max_support_loss = -0.02\nmax_evidence_tokens = 1500\n"))
    assert [(d.statistic, d.limit) for d in rule.differences] == [("mean", -0.02), ("worst_aggregate", -0.02)]
    assert rule.tokens.field == "prompt_tokens" and rule.tokens.max == 1500 and rule.tokens.mean is None
    assert (rule.confidence, rule.n_resamples, rule.seed, rule.min_questions) == (0.95, 10_000, 0, 1)
    assert rule.stress_sets is None


def test_digest_changes_with_any_byte(tmp_path):
    a = write(tmp_path, "max_support_loss = -0.02\n", "a.toml")
    b = write(tmp_path, "max_support_loss = -0.02 \n", "b.toml")
    assert rule_digest(a) != rule_digest(b)
    assert load_rule(a).digest == rule_digest(a)


def test_unknown_keys_are_errors_with_file_line_and_field(tmp_path):
    path = write(
        tmp_path,
        "confidence = 0.95\nmax_suport_loss = -0.02\n\n[max_support_loss]\nmean = -0.01\n"
        "worst = -0.02\n\n[max_evidence_tokens]\nmax = 900\nceiling = 3\n",
    )
    with pytest.raises(InputError) as err:
        load_rule(path)
    msgs = [str(p) for p in err.value.problems]
    assert f"{path}:2: max_suport_loss: unknown key" in msgs[0]
    assert any(m.startswith(f"{path}:6: max_support_loss.worst: unknown statistic") for m in msgs)
    assert any(m.startswith(f"{path}:10: max_evidence_tokens.ceiling: unknown key") for m in msgs)


CRIT = "[max_critical_errors_per_segment]"


@pytest.mark.parametrize(
    "text, field",
    [
        ("confidence = 1.5\nmax_support_loss = -0.02\n", "confidence"),
        ("confidence = true\nmax_support_loss = -0.02\n", "confidence"),
        ("n_resamples = 10\nmax_support_loss = -0.02\n", "n_resamples"),
        ("seed = -1\nmax_support_loss = -0.02\n", "seed"),
        ('interval_handling = "optimistic"\nmax_support_loss = -0.02\n', "interval_handling"),
        ("min_questions = 0\nmax_support_loss = -0.02\n", "min_questions"),
        ('stress_sets = ["everything"]\nmax_support_loss = -0.02\n', "stress_sets"),
        ("max_support_loss = -2\n", "max_support_loss"),
        ('max_support_loss = "small"\n', "max_support_loss"),
        (f"{CRIT}\nrule-exceptions = 0\n", "max_critical_errors_per_segment.rule-exceptions"),
        (f"{CRIT}\nrule-exception = -1\n", "max_critical_errors_per_segment.rule-exception"),
        (f"{CRIT}\nrule-exception = 1.5\n", "max_critical_errors_per_segment.rule-exception"),
        ('[max_evidence_tokens]\nfield = "tokens"\nmax = 10\n', "max_evidence_tokens.field"),
        ("[max_evidence_tokens]\nmean = 0\n", "max_evidence_tokens.mean"),
        ('format = "other/1"\nmax_support_loss = -0.02\n', "format"),
        ('description = "no tolerance at all"\n', "rule"),
    ],
)
def test_invalid_values_name_the_field(tmp_path, text, field):
    path = write(tmp_path, text)
    with pytest.raises(InputError) as err:
        load_rule(path)
    assert any(p.field == field and p.file == str(path) for p in err.value.problems), err.value


def test_toml_syntax_error_has_a_line(tmp_path):
    path = write(tmp_path, "max_support_loss = -0.02\nseed = = 3\n")
    with pytest.raises(InputError) as err:
        load_rule(path)
    assert err.value.problems[0].line == 2 and err.value.problems[0].field == "toml"


def test_missing_file(tmp_path):
    with pytest.raises(InputError, match="cannot read"):
        load_rule(tmp_path / "absent.toml")


# ---------------------------------------------------------------------------
# hand-built comparisons


def _diff(est, low, high, n=100):
    stats = ("mean", "worst_aggregate", "worst_per_question")
    return {"n_questions": n, "statistics": {s: {"estimate": est, "low": low, "high": high} for s in stats}}


def _crit_table(k, n):
    return {"n_questions": n, "questions_with_any": k}


def _tok_table(mean, mx, n=100):
    return {"n_questions": n, "phase_average": {"pooled": mean, "n_records": n * 4}, "max_value": mx}


def comparison(
    *, support=(0.01, -0.005, 0.02), n=100, crit=None, tokens=(800.0, 1000.0), sets=("representative",)
):
    crit = crit or {"rule-exception": (0, 40), "number-scope": (1, 60)}
    block = {
        "n_questions": n,
        "metrics": {
            "support": {"difference": _diff(*support, n=n)},
            "citation_supported": {"difference": _diff(0.0, -0.01, 0.01, n=n)},
            "prompt_tokens": {"candidate": _tok_table(*tokens, n=n)},
        },
        "segments": {
            seg: {"n_questions": kn[1], "metrics": {"critical": {"candidate": _crit_table(*kn)}}}
            for seg, kn in crit.items()
        },
    }
    return {
        "format": "ledgerscope-comparison/1",
        "candidate": {"arm": "cand"},
        "baseline": {"arm": "base"},
        "settings": {"confidence": 0.95, "n_resamples": 10_000, "seed": 0},
        "stress_sets": {s: copy.deepcopy(block) for s in sets},
    }


def rule(**kw) -> Rule:
    base = dict(path="rule.toml", digest="sha256:abc")
    base.update(kw)
    return Rule(**base)


def _support(limit=-0.02, stats=("mean",)):
    from ledgerscope.analysis.stats.release import DifferenceTolerance

    return tuple(DifferenceTolerance("max_support_loss", "support", s, limit) for s in stats)


def _crit(**limits):
    from ledgerscope.analysis.stats.release import SegmentLimit

    return tuple(
        SegmentLimit(seg.replace("_", "-"), "count" if isinstance(v, int) else "rate", float(v))
        for seg, v in limits.items()
    )


def _tokens(mean=None, mx=None, fld="prompt_tokens"):
    from ledgerscope.analysis.stats.release import TokenCeiling

    return TokenCeiling(fld, mean, mx)


def test_accept_when_every_interval_is_within_tolerance():
    d = decide(
        rule(
            differences=_support(-0.02),
            critical_per_segment=_crit(rule_exception=0),
            tokens=_tokens(900, 1200),
        ),
        comparison(),
    )
    assert d.outcome == "accept" and d.rule_digest == "sha256:abc"
    assert all(c.status == "pass" for c in d.checks) and len(d.reasons) == 4
    r = d.reasons[0]
    assert "support difference" in r and "[-0.0050, +0.0200]" in r and ">= -0.0200" in r
    json.dumps(d.to_dict())
    assert d.outcome in OUTCOMES


def test_reject_when_the_whole_interval_violates_support_loss():
    d = decide(rule(differences=_support(-0.02)), comparison(support=(-0.05, -0.08, -0.03)))
    assert d.outcome == "reject"
    assert "VIOLATES" in d.reasons[0] and "[-0.0800, -0.0300]" in d.reasons[0]


def test_collect_more_evidence_when_the_interval_straddles_the_tolerance():
    d = decide(rule(differences=_support(-0.02)), comparison(support=(-0.01, -0.04, 0.02)))
    assert d.outcome == "collect-more-evidence"
    assert "inconclusive" in d.reasons[0]


@pytest.mark.parametrize("stat", ["mean", "worst_aggregate", "worst_per_question"])
def test_each_support_statistic_is_checked(stat):
    comp = comparison()
    comp["stress_sets"]["representative"]["metrics"]["support"]["difference"]["statistics"][stat] = {
        "estimate": -0.1,
        "low": -0.15,
        "high": -0.05,
    }
    assert decide(rule(differences=_support(-0.02, (stat,))), comp).outcome == "reject"
    others = tuple(s for s in ("mean", "worst_aggregate", "worst_per_question") if s != stat)
    assert decide(rule(differences=_support(-0.02, others)), comp).outcome == "accept"


def test_boundary_of_the_interval_counts_as_within():
    d = decide(rule(differences=_support(-0.02)), comparison(support=(0.0, -0.02, 0.01)))
    assert d.outcome == "accept"


def test_critical_count_per_segment():
    r = rule(critical_per_segment=_crit(rule_exception=0, number_scope=1))
    ok = {"rule-exception": (0, 40), "number-scope": (1, 60)}
    assert decide(r, comparison(crit=ok)).outcome == "accept"
    d = decide(r, comparison(crit={**ok, "rule-exception": (2, 40)}))
    assert d.outcome == "reject"
    assert all(part in d.reasons[0] for part in ("rule-exception", "2 of 40", "<= 0 question(s)"))


def test_critical_rate_per_segment_uses_an_exact_interval():
    r = rule(critical_per_segment=_crit(number_scope=0.10))
    # 0 of 60: Clopper-Pearson upper bound about 0.06 -> within 0.10
    assert decide(r, comparison(crit={"number-scope": (0, 60)})).outcome == "accept"
    # 30 of 60: the whole interval is above 0.10
    d = decide(r, comparison(crit={"number-scope": (30, 60)}))
    assert d.outcome == "reject" and "Clopper-Pearson" in d.reasons[0]
    # 4 of 60 (6.7%): interval straddles 0.10
    assert decide(r, comparison(crit={"number-scope": (4, 60)})).outcome == "collect-more-evidence"
    # 0 of 10: upper bound about 0.31 -> a small clean sample is not evidence of safety
    assert decide(r, comparison(crit={"number-scope": (0, 10)})).outcome == "collect-more-evidence"


def test_segment_named_but_absent_is_no_evidence():
    r = rule(critical_per_segment=_crit(cross_reference=0))
    d = decide(r, comparison())
    assert d.outcome == "collect-more-evidence" and "no answer-judged questions" in d.reasons[0]


def test_token_ceiling_mean_and_max():
    assert decide(rule(tokens=_tokens(mean=900)), comparison(tokens=(850.0, 2000.0))).outcome == "accept"
    d = decide(rule(tokens=_tokens(mean=900)), comparison(tokens=(950.0, 1000.0)))
    assert d.outcome == "reject" and "prompt_tokens" in d.reasons[0] and "950.0" in d.reasons[0]
    assert decide(rule(tokens=_tokens(mx=1500)), comparison(tokens=(850.0, 2000.0))).outcome == "reject"
    d = decide(rule(tokens=_tokens(fld="evidence_tokens", mx=1500)), comparison())
    assert d.outcome == "collect-more-evidence"  # the comparison lacks that metric


def test_min_questions_blocks_acceptance_but_not_rejection():
    r = rule(differences=_support(-0.02), min_questions=200)
    d = decide(r, comparison())
    assert d.outcome == "collect-more-evidence" and "fewer than min_questions 200" in d.reasons[0]
    assert decide(r, comparison(support=(-0.05, -0.08, -0.03))).outcome == "reject"
    rc = rule(critical_per_segment=_crit(rule_exception=0), min_questions=50)
    assert decide(rc, comparison()).outcome == "collect-more-evidence"  # 0 of 40 but fewer than 50
    assert decide(rc, comparison(crit={"rule-exception": (1, 40)})).outcome == "reject"


def test_stress_sets_are_judged_apart():
    comp = comparison(sets=("representative", "enriched"))
    comp["stress_sets"]["enriched"]["metrics"]["support"]["difference"] = _diff(-0.1, -0.2, -0.05)
    d = decide(rule(differences=_support(-0.02)), comp)
    assert d.outcome == "reject" and d.reasons[0].startswith("enriched:")
    only_rep = rule(differences=_support(-0.02), stress_sets=("representative",))
    assert decide(only_rep, comp).outcome == "accept"
    # a stress set the rule evaluates but the comparison lacks
    d = decide(rule(differences=_support(-0.02), stress_sets=("representative", "enriched")), comparison())
    assert d.outcome == "collect-more-evidence" and "enriched" in d.reasons[0]


def test_empty_comparison_is_no_evidence():
    comp = comparison()
    comp["stress_sets"] = {}
    d = decide(rule(differences=_support()), comp)
    assert d.outcome == "collect-more-evidence" and "no matched questions" in d.reasons[0]


def test_reject_wins_over_collect_and_reasons_are_ordered():
    comp = comparison(support=(-0.01, -0.04, 0.02), tokens=(2000.0, 3000.0))
    d = decide(rule(differences=_support(-0.02), tokens=_tokens(mean=900)), comp)
    assert d.outcome == "reject"
    assert [c.status for c in d.checks] == ["violates", "inconclusive"]


def test_settings_and_arms_must_match_the_rule():
    with pytest.raises(InputError, match=r"settings\.seed"):
        decide(rule(differences=_support(), seed=7), comparison())
    with pytest.raises(InputError, match=r"settings\.confidence"):
        decide(rule(differences=_support(), confidence=0.9), comparison())
    with pytest.raises(InputError, match="declared for 'other'"):
        decide(rule(differences=_support(), candidate="other"), comparison())


# ---------------------------------------------------------------------------
# end to end: compare_arms -> decide


def test_decide_on_a_real_comparison(tmp_path):
    path = write(
        tmp_path,
        'n_resamples = 1000\nseed = 5\nmin_questions = 20\ncandidate = "cand"\n'
        "max_support_loss = -0.02\n[max_critical_errors_per_segment]\nrule-exception = 0\n"
        "[max_evidence_tokens]\nmax = 4096\n",
    )
    r = load_rule(path)
    phases = ["0", "1", "2", "3"]
    worse = synthetic_rows("cand", 60, phases, 0.3, 1) + synthetic_rows("base", 60, phases, 0.9, 2)
    comp = compare_arms(
        records_con(worse), "cand", "base", n_resamples=r.n_resamples, seed=r.seed, confidence=r.confidence
    )
    d = decide(r, comp)
    assert d.outcome == "reject" and d.rule_digest == rule_digest(path)
    assert any("support difference" in x and "VIOLATES" in x for x in d.reasons)
    json.dumps(d.to_dict())
