"""``ledgerscope report``: the figures it draws are the comparison's, hostile text stays text,
restricted text stays home unless asked, and the file asks nothing of any other host."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ledgerscope.cli.main import app

from .hostile_ledger import BIDI, HOSTILE_QID, MARKER, ONERROR, RESTRICTED, SCRIPT

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "sample_ledgers" / "quillstack" / "ledger"
RULE = ROOT / "sample_ledgers" / "release_rule.toml"


def _invoke(*args: str):
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})


@pytest.fixture(scope="module")
def sample_report(tmp_path_factory) -> str:
    out = tmp_path_factory.mktemp("report") / "report.html"
    res = _invoke(
        "report",
        str(SAMPLE),
        "--candidate",
        "candidate",
        "--baseline",
        "baseline",
        "--rule",
        str(RULE),
        "--out",
        str(out),
    )
    assert res.exit_code == 0, res.output
    assert "decision REJECT" in res.output and str(out) in res.output
    return out.read_text(encoding="utf-8")


def _text(page: str) -> str:
    """The page's text as a reader sees it (tags dropped, entities decoded)."""
    return html.unescape(re.sub(r"<[^>]+>", "", page))


def test_the_sample_report_shows_the_decision_its_reasons_and_the_rule_digest(sample_report):
    from ledgerscope.analysis.stats.release import rule_digest

    text = _text(sample_report)
    assert "release decision: REJECT" in text
    assert rule_digest(RULE) in text
    assert "support difference (candidate - baseline), phase average" in text and "VIOLATES tolerance" in text
    assert "Worst-phase figures are stress-test statistics" in text
    for section in ("decision", "curves", "differences", "funnel", "steps", "segments", "strip", "reversals"):
        assert f'id="{section}"' in sample_report, section
    for metric in ("support", "answer_correct"):
        assert f'id="phase-curve-representative-{metric}"' in sample_report
    assert 'id="difference-representative-support-mean"' in sample_report


def test_the_sample_report_shows_the_re_free_upload_boundary(sample_report):
    """The answer reversal at phases 4 and 5: a cut inside a gold span on each side, and the
    phase-5 context that lost "The limit is 20"."""
    cards = re.findall(r'<article class="card" id="rev-\d+">.*?</article>', sample_report, flags=re.S)
    card = next(c for c in cards if "re-free-upload · candidate · answer reversal" in c)
    text = _text(card)
    assert "phase 4: ✓ correct" in text and "phase 5: ✗ wrong" in text
    assert "chunk cut inside a gold span at char 1943 (inside rule)" in text
    assert "chunk cut inside a gold span at char 1963 (inside exc)" in text
    assert text.count("┃") >= 2 and "⟪exc" in text
    assert "answer: MB per file for workspaces on the Free plan. [1]" in text
    assert '<mark class="gold">The limit is 20 MB per file for workspaces on the Free plan.</mark>' in card


def test_the_report_is_self_contained(sample_report):
    assert "<script" not in sample_report.lower()
    assert "default-src 'none'" in sample_report  # no fetch, no script, even if something slipped in
    refs = re.findall(r'(?:src|href|url)\s*[=(]\s*["\']?([^"\' )>]+)', sample_report)
    assert all(r.startswith("#") for r in refs), [r for r in refs if not r.startswith("#")][:5]
    assert "@media print" in sample_report or 'media="print"' in sample_report


def test_the_figures_are_the_comparisons(tmp_path):
    """Every interval the report draws equals what compare prints for the same statistic."""
    from ledgerscope.analysis.stats.compare import compare_arms
    from ledgerscope.ledger.read import connect
    from ledgerscope.report.figures import Settings, gather

    data = gather(SAMPLE, "candidate", "baseline", settings=Settings(n_resamples=400, seed=3))
    comp = compare_arms(connect(SAMPLE), "candidate", "baseline", seed=3, n_resamples=400)
    assert data.distributions
    for d in data.distributions:
        metric = comp["stress_sets"][d["stress_set"]]["metrics"][d["metric"]]
        expect = metric["difference"]["statistics"]["mean"]
        assert (d["low"], d["high"], d["estimate"]) == (expect["low"], expect["high"], expect["estimate"])
        assert len(d["replicates"]) == 400
    for stress_set, by_metric in data.curves.items():
        for metric, entries in by_metric.items():
            for arm in ("candidate", "baseline"):
                table = comp["stress_sets"][stress_set]["metrics"][metric][arm]["per_phase"]
                assert [e[arm]["mean"] for e in entries] == [p["mean"] for p in table]
                assert [e[arm]["n"] for e in entries] == [p["n"] for p in table]
                assert all(e[arm]["low"] <= e[arm]["mean"] <= e[arm]["high"] for e in entries)
    steps = {arm: sum(n for _s, _name, n in rows) for arm, rows in data.steps.items()}
    assert steps == {"candidate": 448, "baseline": 448}


@pytest.fixture(scope="module")
def hostile(hostile_ledger) -> Path:
    return hostile_ledger


def _report(ledger: Path, out: Path, *extra: str) -> str:
    res = _invoke(
        "report",
        str(ledger),
        "--candidate",
        "candidate",
        "--baseline",
        "baseline",
        "--n-resamples",
        "200",
        "--out",
        str(out),
        *extra,
    )
    assert res.exit_code == 0, res.output
    return out.read_text(encoding="utf-8")


@pytest.mark.slow
def test_hostile_text_shows_literally(hostile, tmp_path):
    page = _report(hostile, tmp_path / "r.html", "--include-restricted")
    assert "<script" not in page.lower() and "<img" not in page.lower()
    assert "\u202e" not in page  # the bidi override is shown as an escape, never applied
    text = _text(page)
    for literal in (SCRIPT, ONERROR, "[bold red]x[/]", BIDI.replace("\u202e", "\\u202e")):
        assert literal in text, literal
    assert HOSTILE_QID.replace("\u202e", "\\u202e") in text
    assert "Style note: &lt;script&gt;window.__pwned" in page  # a document's text, not only the question


@pytest.mark.slow
def test_restricted_text_stays_out_of_the_report_unless_asked(hostile, tmp_path):
    default = _report(hostile, tmp_path / "default.html")
    assert MARKER not in default and not _shares_words(default, RESTRICTED)
    assert "Restricted source text withheld." in default
    assert re.search(r"1 document\(s\), \d+ span\(s\) and \d+ other text field\(s\)", default)
    assert "restricted/board-minutes.md" in default  # its id stays
    included = _report(hostile, tmp_path / "included.html", "--include-restricted")
    assert MARKER in included and "Restricted source text withheld." not in included


def _shares_words(blob: str, text: str, n: int = 6) -> bool:
    """Whether ``blob`` holds any run of ``n`` words of ``text`` (in its own decoded form)."""
    words = re.findall(r"\w+", text)
    plain = " ".join(re.findall(r"\w+", _text(blob)))
    return any(" ".join(words[i : i + n]) in plain for i in range(len(words) - n + 1))
