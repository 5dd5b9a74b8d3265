"""Bootstrap clusters: first-document rule against connected components of the question-document graph."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from ledgerscope.analysis.stats.clusters import cluster_report, component_clusters
from ledgerscope.analysis.stats.compare import compare_arms
from ledgerscope.cli.main import app
from ledgerscope.ledger.read import connect

from .test_stats import make_record, records_con

SAMPLE = Path(__file__).resolve().parents[1] / "sample_ledgers" / "quillstack" / "ledger"


def test_components_join_questions_that_share_any_document():
    docs = {"q1": {"a"}, "q2": {"a", "b"}, "q3": {"b"}, "q4": {"c"}, "q5": set()}
    comp = component_clusters(["q1", "q2", "q3", "q4", "q5"], docs)
    assert comp["q1"] == comp["q2"] == comp["q3"] == "a"
    assert comp["q4"] == "c" and comp["q5"] == "qid:q5"


def test_cluster_report_warns_only_when_the_rules_disagree_badly():
    first = np.array(["a", "b", "c", "d"], dtype=object)
    assert cluster_report(first, first, "first-document")["warning"] is None
    joined = np.array(["a", "a", "a", "d"], dtype=object)
    report = cluster_report(first, joined, "first-document")
    assert (report["first_document"], report["components"]) == (4, 2)
    assert "--clusters components" in report["warning"]


def _linked_rows():
    # six questions, each with its own first document, all linked through a shared second one
    return [
        make_record(arm, "0", f"q{i}", doc_ids=[f"doc{i}", "shared"], support_packed=bool(i % 2))
        for arm in ("A", "B")
        for i in range(6)
    ]


def test_compare_reports_both_counts_and_resamples_by_the_chosen_rule():
    con = records_con(_linked_rows())
    first = compare_arms(con, "A", "B", metrics=("support",), n_resamples=200)
    assert first["clusters"] == {
        "rule": "first-document",
        "first_document": 6,
        "components": 1,
        "warning": first["clusters"]["warning"],
    }
    assert first["clusters"]["warning"]
    assert first["stress_sets"]["representative"]["n_clusters"] == 6
    comp = compare_arms(con, "A", "B", metrics=("support",), n_resamples=200, clusters="components")
    assert comp["stress_sets"]["representative"]["n_clusters"] == 1
    assert "connected component" in comp["settings"]["resampling_unit"]
    with pytest.raises(ValueError, match="cluster rule"):
        compare_arms(con, "A", "B", metrics=("support",), n_resamples=10, clusters="nope")


@pytest.mark.skipif(not SAMPLE.is_dir(), reason="committed sample ledger absent")
def test_the_sample_shows_the_disagreement_and_the_cli_offers_the_other_rule():
    res = compare_arms(connect(SAMPLE), "candidate", "baseline", n_resamples=50)
    clusters = res["clusters"]
    assert clusters["first_document"] > 2 * clusters["components"]  # 15 against 2 when written
    assert clusters["warning"]
    runner = CliRunner()
    out = runner.invoke(
        app,
        [
            "compare",
            str(SAMPLE),
            "--candidate",
            "candidate",
            "--baseline",
            "baseline",
            "--n-resamples",
            "50",
            "--clusters",
            "components",
        ],
    )
    assert out.exit_code == 0, out.output
    assert "bootstrap clusters:" in out.output and "using components" in out.output
    bad = runner.invoke(
        app,
        [
            "compare",
            str(SAMPLE),
            "--candidate",
            "candidate",
            "--baseline",
            "baseline",
            "--clusters",
            "documents",
        ],
    )
    assert bad.exit_code == 2
