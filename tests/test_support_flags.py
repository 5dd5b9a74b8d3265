"""The recorded ``support_*`` flags, recomputed from the ledger's own rows.

Both diagnoses (the pure tree and the SQL one) trust the flags a sweep recorded. Here each flag is
recomputed from what else the ledger stores, with :mod:`ledgerscope.rules.support`'s definitions:
the stage's candidate rows (cut where the cascade cut them: the fused list at ``rerank_depth``, the
reranked list at ``selection_depth``), the phase's units, the resolved citations and the ledger's
fixtures. On the committed sample ledger, and on fresh sweeps whose arms starve fusion, reranking
and packing (so the cuts decide flags).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import NamedTuple

import pytest

from ledgerscope.ledger.fixtures import load_ledger_fixtures
from ledgerscope.ledger.read import connect
from ledgerscope.ledger.schema import SUPPORT_COLUMNS
from ledgerscope.rules import support

#: ranked stages whose candidate rows are all the stage's units (no cut after recording)
WHOLE_STAGES = ("bm25", "dense_exact", "dense_ann", "union", "selected", "packed", "topk")


class Interval(NamedTuple):
    """A unit as support.py reads it."""

    doc_id: str
    version: str
    start: int
    end: int


def _units(con) -> dict[tuple[str, str], dict[str, Interval]]:
    out: dict[tuple[str, str], dict[str, Interval]] = {}
    for arm, phase, unit_id, doc_id, version, start, end in con.execute(
        'SELECT arm, phase, unit_id, doc_id, version, start, "end" FROM units'
    ).fetchall():
        out.setdefault((arm, phase), {})[unit_id] = Interval(doc_id, version, start, end)
    return out


def _candidates(con) -> dict[tuple[str, str, str], dict[str, list[tuple[int, str]]]]:
    out: dict[tuple[str, str, str], dict[str, list[tuple[int, str]]]] = {}
    for arm, phase, qid, stage, rank, unit_id in con.execute(
        'SELECT arm, phase, qid, stage, "rank", unit_id FROM candidates'
    ).fetchall():
        out.setdefault((arm, phase, qid), {}).setdefault(stage, []).append((rank, unit_id))
    return out


def recomputed_flags(
    rec: dict,
    stages: dict[str, list[tuple[int, str]]],
    units: dict[str, Interval],
    fixture,
    texts: dict[str, str],
) -> dict[str, object]:
    """The support columns (and covered_set, single_unit_complete) as the record's rows imply them."""
    names = ("chunked", "exact", "production", "fused", "reranked", "cited", *WHOLE_STAGES)
    if not (fixture.answerable and fixture.sufficient_sets):
        return {f"support_{n}": None for n in names} | {"covered_set": None, "single_unit_complete": None}

    def ranked(stage: str, depth: int | None = None) -> list[Interval]:
        rows = sorted(stages.get(stage, []))
        return [units[u] for rank, u in rows if depth is None or rank <= depth]

    stage_units = {s: ranked(s) for s in WHOLE_STAGES}
    stage_units["chunked"] = list(units.values())
    stage_units["fused"] = ranked("fused", rec["rerank_depth"])
    stage_units["reranked"] = ranked("reranked", rec["selection_depth"])
    stage_units["exact"] = stage_units["bm25"] + stage_units["dense_exact"]
    stage_units["production"] = stage_units["bm25"] + stage_units["dense_ann"]
    cited = [c["unit_id"] for c in json.loads(rec["citations_json"] or "[]") if c.get("unit_id")]
    stage_units["cited"] = [units[u] for u in cited]
    flags: dict[str, object] = {
        f"support_{name}": support.keeps(fixture, us, texts) for name, us in stage_units.items()
    }
    flags["covered_set"] = support.kept_set(fixture, stage_units["packed"], texts)
    flags["single_unit_complete"] = support.single_unit_complete(fixture, stage_units["packed"], texts)
    return flags


def check_support_flags(ledger: Path) -> Counter:
    """Every record's recorded flags equal the recomputed ones; returns (column, value) counts."""
    con = connect(ledger)
    fixtures, texts = load_ledger_fixtures(con, ledger)
    units, cands = _units(con), _candidates(con)
    columns = [*SUPPORT_COLUMNS, "covered_set", "single_unit_complete"]
    sql = (
        "SELECT arm, phase, qid, rerank_depth, selection_depth, citations_json, "
        f"{', '.join(columns)} FROM records"
    )
    seen: Counter = Counter()
    records = con.sql(sql).to_arrow_table().to_pylist()
    for rec in records:
        key = (rec["arm"], rec["phase"], rec["qid"])
        fresh = recomputed_flags(rec, cands.get(key, {}), units[key[:2]], fixtures[rec["qid"]], texts)
        assert set(fresh) == set(columns)
        recorded = {c: rec[c] for c in columns}
        differ = {c: (recorded[c], fresh[c]) for c in columns if recorded[c] != fresh[c]}
        assert not differ, (key, differ)
        seen.update((c, v) for c, v in recorded.items())
    assert records
    return seen


def test_sample_ledger_flags_are_what_its_rows_imply(sample_ledger):
    seen = check_support_flags(sample_ledger)
    # not a check of constants: every stage after chunking both keeps and loses support somewhere
    for column in SUPPORT_COLUMNS:
        if column != "support_chunked":
            assert seen[(column, True)] and seen[(column, False)], (column, seen)


@pytest.mark.slow
def test_fresh_sweeps_record_the_flags_their_rows_imply(rule_exception_ledger, starved_arms_ledger):
    seen = check_support_flags(rule_exception_ledger) + check_support_flags(starved_arms_ledger)
    assert seen[("support_fused", False)] and seen[("support_reranked", False)]
    assert seen[("support_packed", False)] and seen[("support_cited", True)]
