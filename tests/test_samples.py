"""The committed sample ledgers: valid, matching their recorded digests, reproducible record by record."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ledgerscope.inputs.validate import validate_fixtures
from ledgerscope.ledger.digest import table_digests
from ledgerscope.ledger.read import connect
from ledgerscope.ledger.verify import load_manifest
from ledgerscope.pipeline.rerun import load_ledger_inputs

SAMPLES = Path(__file__).resolve().parents[1] / "sample_ledgers"
LEDGER = SAMPLES / "quillstack" / "ledger"


def test_sample_fixtures_validate():
    for fixtures, corpus in ((SAMPLES / "fixtures.jsonl", SAMPLES / "corpus"),
                             (SAMPLES / "contractnli" / "fixtures.jsonl",
                              SAMPLES / "contractnli" / "corpus.jsonl"),
                             (SAMPLES / "seed" / "fixtures.jsonl", SAMPLES / "seed" / "corpus")):
        found, _, problems = validate_fixtures(fixtures, corpus)
        assert not problems, problems[:3]
        assert found


def test_committed_ledger_matches_its_digests():
    recorded = json.loads((SAMPLES / "quillstack" / "digests.json").read_text())
    assert table_digests(LEDGER) == recorded


def test_committed_ledger_is_complete_and_self_consistent():
    manifest = load_manifest(LEDGER)
    assert set(manifest["arms"]) == {"candidate", "baseline"}
    for arm in manifest["arms"].values():
        assert len(arm["phases"]) >= 8
    # the ledger's own sources and fixtures re-verify (digests, spans slicing to their quotes)
    _, corpus, fixtures = load_ledger_inputs(LEDGER)
    assert len(fixtures) == manifest["fixture_count"]
    for doc_id, version in manifest["sources"].items():
        assert corpus.sources[doc_id].version == version
    con = connect(LEDGER)
    n = con.execute("SELECT count(*) FROM records").fetchone()[0]
    phases = sum(len(a["phases"]) for a in manifest["arms"].values())
    assert n == phases * len(fixtures)
    size = sum(p.stat().st_size for p in LEDGER.rglob("*") if p.is_file())
    assert size < 20_000_000


def test_sample_ledger_shows_what_the_walkthrough_promises():
    """Reversals in rule-exception and number-scope, failures at steps 3, 6, 7, 8, 9, both control kinds."""
    from ledgerscope.analysis.diagnosis.feed import diagnose_ledger
    from ledgerscope.analysis.reversals import find_reversals

    con = connect(LEDGER)
    segments = {r["segment"] for r in find_reversals(con)}
    assert {"rule-exception", "number-scope"} <= segments
    steps = {r["step"] for r in diagnose_ledger(con, LEDGER)}
    assert {3, 6, 7, 8, 9} <= steps
    verdicts = {v for (v,) in con.sql(
        "SELECT DISTINCT answer_verdict FROM records WHERE NOT answerable").fetchall()}
    assert {"abstained", "false-assertion"} <= verdicts


@pytest.mark.slow
def test_sample_records_reproduce_exactly():
    from ledgerscope.pipeline.rerun import rerun_record

    con = connect(LEDGER)
    picks = con.sql("SELECT arm, qid, phase FROM records WHERE answer_verdict = 'critical-condition-error' "
                    "ORDER BY arm, qid, phase LIMIT 2").fetchall()
    assert picks
    for arm, qid, phase in picks:
        diff = rerun_record(LEDGER, arm, qid, phase)
        assert diff.identical, diff.lines()
