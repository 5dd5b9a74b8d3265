"""The committed sample ledgers: valid, matching their recorded digests, reproducible record by record."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ledgerscope.inputs.validate import validate_fixtures
from ledgerscope.ledger import digest
from ledgerscope.ledger.read import connect
from ledgerscope.ledger.verify import load_manifest
from ledgerscope.pipeline.run.rerun import load_ledger_inputs

SAMPLES = Path(__file__).resolve().parents[1] / "sample_ledgers"
LEDGER = SAMPLES / "quillstack" / "ledger"


def test_sample_fixtures_validate():
    for fixtures, corpus in (
        (SAMPLES / "fixtures.jsonl", SAMPLES / "corpus"),
        (SAMPLES / "contractnli" / "fixtures.jsonl", SAMPLES / "contractnli" / "corpus.jsonl"),
        (SAMPLES / "seed" / "fixtures.jsonl", SAMPLES / "seed" / "corpus"),
    ):
        found, _, problems = validate_fixtures(fixtures, corpus)
        assert not problems, problems[:3]
        assert found


def _digest(rows: list[dict], table: str) -> dict:
    """{"rows", "sha256"} of ``rows`` as :func:`table_digests` computes it for ``table``, the rows typed
    as the ledger's own table (Arrow, then the same DuckDB serialisation)."""
    import duckdb
    import pyarrow as pa

    typed = connect(LEDGER).sql(f"SELECT * FROM {table} LIMIT 0").to_arrow_table().schema
    con = duckdb.connect()
    con.register("derived", pa.Table.from_pylist(rows, schema=typed))
    return digest.relation_digest(con, "derived", digest.ORDER[table])


def _rechunk(ledger: Path) -> tuple[list[dict], list[dict]]:
    """Units and boundaries rows re-derived by chunking the ledger's sources with its arms' configs (the
    rows built by the sweep's own builders)."""
    from ledgerscope.pipeline.arm import kinds
    from ledgerscope.pipeline.arm.config import arm_from_dict
    from ledgerscope.pipeline.embedding.encoder import TokenCounter
    from ledgerscope.pipeline.run.cascade import ArmRuntime, chunk_phase
    from ledgerscope.pipeline.run.partition import boundary_table, unit_table

    manifest, corpus, _ = load_ledger_inputs(ledger)
    units, bounds = [], []
    for name, entry in manifest["arms"].items():
        cfg = arm_from_dict(entry["config"])
        counter = TokenCounter(cfg.embedding["model"])
        chunker = kinds.resolve(kinds.CHUNKERS[cfg.chunker.get("kind", "token")])(cfg, None, counter)
        rt = ArmRuntime(cfg, None, counter, chunker, None, None, None)  # chunking needs no model
        phases = cfg.phase_list()
        assert [(p.label, p.offset) for p in phases] == [(p["label"], p["offset"]) for p in entry["phases"]]
        visible = [s for s in corpus if set(s.access) <= cfg.clearance]
        for phase in phases:
            us, bs = chunk_phase(rt, phase, visible)
            units += unit_table(name, phase.label, us)
            bounds += boundary_table(rt, phase, corpus, bs)
    return units, bounds


def test_committed_digests_are_what_chunking_the_committed_sources_gives(sample_ledger):
    """The recorded units and boundaries digests, re-derived: chunk the ledger's own sources with its
    arms' configurations and phases (tokenizer only, no model), digest the rows as the ledger does."""
    recorded = json.loads((SAMPLES / "quillstack" / "digests.json").read_text())
    units, bounds = _rechunk(sample_ledger)
    for table, rows in (("units", units), ("boundaries", bounds)):
        if _digest(rows, table) != recorded[table]:  # say which rows differ from the committed ledger
            keys = digest.ORDER[table]
            committed = connect(sample_ledger).sql(f"SELECT * FROM {table} ORDER BY {keys}").to_arrow_table()
            fresh = sorted(rows, key=lambda r: [r[k.strip().strip('"')] for k in keys.split(",")])
            diff = next(((a, b) for a, b in zip(committed.to_pylist(), fresh, strict=False) if a != b), None)
            pytest.fail(
                f"{table}: {len(rows)} rows re-derived, {committed.num_rows} committed; first "
                f"difference (committed, re-derived): {diff}"
            )


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
    verdicts = {
        v for (v,) in con.sql("SELECT DISTINCT answer_verdict FROM records WHERE NOT answerable").fetchall()
    }
    assert {"abstained", "false-assertion"} <= verdicts


@pytest.mark.slow
def test_sample_records_reproduce_exactly():
    from ledgerscope.pipeline.run.rerun import rerun_record

    con = connect(LEDGER)
    picks = con.sql(
        "SELECT arm, qid, phase FROM records WHERE answer_verdict = 'critical-condition-error' "
        "ORDER BY arm, qid, phase LIMIT 2"
    ).fetchall()
    assert picks
    for arm, qid, phase in picks:
        diff = rerun_record(LEDGER, arm, qid, phase)
        assert diff.identical, diff.lines()
