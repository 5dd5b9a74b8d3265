"""diagnose_sql (the whole ledger diagnosed in DuckDB) equals the pure diagnosis, record for record.

The pure function (:func:`ledgerscope.analysis.diagnosis.tree.diagnose`, fed by
:func:`ledgerscope.analysis.diagnosis.feed.diagnose_ledger`) is the definition; these
tests run both on real sweeps (the sample ledger; the starved and weak-HNSW
sweeps and the seed sweep check it in their own modules), on a synthetic
ledger that reaches steps 2-9, and on the sample ledger with its rows edited
into the corners the sweeps never produce.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

import pytest

from ledgerscope.analysis.diagnosis.sql import diagnosis_lines
from ledgerscope.ledger.read import connect
from ledgerscope.testing.synthetic import make_synthetic_ledger

SAMPLE = Path(__file__).resolve().parents[1] / "sample_ledgers" / "quillstack" / "ledger"


def test_sample_ledger_matches_record_for_record(sql_matches_python):
    steps = sql_matches_python(connect(SAMPLE), SAMPLE)
    assert sum(steps.values()) == 896
    assert {0, 3, 6, 7, 8, 9, 10} <= set(steps)


def test_one_arm_only(sql_matches_python):
    con = connect(SAMPLE)
    steps = sql_matches_python(con, SAMPLE, arm="candidate")
    assert sum(steps.values()) == 448
    assert sql_matches_python(con, SAMPLE, arm="nope") == {}


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("synthetic") / "ledger"
    make_synthetic_ledger(out, questions=60, phases=3, seed=7)
    return out


def test_synthetic_ledger_matches_on_every_support_step(synthetic, sql_matches_python):
    steps = sql_matches_python(connect(synthetic), synthetic)
    assert set(range(2, 10)) <= set(steps), steps


def _edit(con, table: str, select: str) -> None:
    """Replace a ledger view by an edited copy of ``_orig_<table>`` (both diagnoses read the edit)."""
    con.execute(f"CREATE TABLE _orig_{table} AS SELECT * FROM {table}")
    con.execute(f"CREATE OR REPLACE VIEW {table} AS {select}")


def _sql(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


HOSTILE = "evil \x1b[31mred\x1b[0m \u202eevig\u202c \x9b2J \x7f end"


def test_corner_cases_match(tmp_path, sql_matches_python):
    """Edited rows: gold absent, unknown question, missing depths, broken JSON, hostile text, NaN."""
    con = connect(SAMPLE)
    long_answer = "x" * 250 + HOSTILE
    _edit(
        con,
        "records",
        f"""
        SELECT * REPLACE (
            CASE WHEN hash(qid, phase) % 11 = 0 AND answerable THEN 'absent' ELSE gold_status END
                AS gold_status,
            CASE WHEN hash(qid, phase) % 13 = 1 THEN 'zz-no-such-question' ELSE qid END AS qid,
            CASE WHEN hash(qid, phase) % 3 = 0 THEN NULL ELSE selection_depth END AS selection_depth,
            CASE WHEN hash(qid, phase) % 5 = 0 THEN NULL ELSE rerank_depth END AS rerank_depth,
            CASE WHEN hash(qid, phase) % 4 = 0 THEN 7 WHEN hash(qid, phase) % 4 = 1 THEN NULL
                 ELSE covered_set END AS covered_set,
            CASE WHEN hash(qid, phase) % 7 = 0 THEN '{{not json'
                 WHEN hash(qid, phase) % 7 = 1 THEN {
            _sql(json.dumps([1, "x", {"doc_id": None, "start": 3}, {"note": HOSTILE}], ensure_ascii=False))
        }
                 ELSE citations_json END AS citations_json,
            CASE WHEN hash(qid, phase) % 6 = 0 THEN {_sql(long_answer)} ELSE answer END AS answer,
            CASE WHEN hash(qid, phase) % 9 = 0 THEN 'infrastructure-failure'
                 WHEN hash(qid, phase) % 9 = 1 THEN NULL ELSE answer_verdict END AS answer_verdict,
            CASE WHEN hash(qid, phase) % 8 = 0 THEN {
            _sql(HOSTILE)
        } ELSE citation_reason END AS citation_reason,
            CASE WHEN hash(qid, phase) % 2 = 0 THEN
                '[{{"unit_id": "' || packed_unit_ids[1] || '", "tokens": 9}}, 5, {{"unit_id": null}}]'
                 ELSE overflow_json END AS overflow_json,
            CASE WHEN hash(qid, phase) % 2 = 1 AND len(packed_unit_ids) > 0 THEN
                '[{{"unit_id": "' || packed_unit_ids[1] || '", "reason": "access"}}]'
                 ELSE expansion_dropped_json END AS expansion_dropped_json,
            CASE WHEN hash(qid, phase) % 10 = 0 THEN [] ELSE packed_unit_ids END AS packed_unit_ids)
        FROM _orig_records""",
    )
    _edit(
        con,
        "candidates",
        """
        SELECT * REPLACE (CASE WHEN hash(unit_id, "rank") % 17 = 0 THEN 'nan'::DOUBLE
                               WHEN hash(unit_id, "rank") % 17 = 1 THEN NULL ELSE score END AS score)
        FROM _orig_candidates""",
    )
    _edit(con, "oracle", "SELECT * FROM _orig_oracle WHERE hash(qid) % 4 <> 0")
    steps = sql_matches_python(con, SAMPLE)
    assert steps[1] > 0 and steps[9] > 0 and steps[8] > 0, steps
    rows = [json.loads(line) for line in diagnosis_lines(con, SAMPLE)]
    assert any(r["evidence"].get("note") for r in rows)  # the unknown question
    assert any(str(r["evidence"].get("answer") or "").endswith("…") for r in rows)


def test_cli_json_is_the_sql_diagnosis_and_escaped():
    """``diagnose --json`` writes the SQL lines, each valid JSON, nothing raw a terminal acts on."""
    out = subprocess.run(
        [sys.executable, "-m", "ledgerscope.cli.main", "diagnose", str(SAMPLE), "--json"],
        capture_output=True,
        check=True,
    ).stdout
    lines = out.decode("utf-8").splitlines()
    assert len(lines) == 896
    con = connect(SAMPLE)
    assert lines == diagnosis_lines(con, SAMPLE)
    assert all(json.loads(line)["step_name"] for line in lines)
    for bad in (b"\x1b", b"\x7f", "\u202e".encode(), "\x9b".encode()):
        assert bad not in out


def test_slices_give_the_same_lines_in_the_same_order():
    """A ledger diagnosed slice by slice (bounded memory) reads exactly as one query over it."""
    from ledgerscope.analysis.diagnosis.sql import drop_inputs, prepare

    con = connect(SAMPLE)
    whole = diagnosis_lines(con, SAMPLE)
    parts = prepare(con, SAMPLE, None, max_rows=100_000)
    drop_inputs(con)
    assert len(parts) == 4  # 306,174 candidate rows
    assert parts[0][0] == 1 and parts[-1][1] == len(whole)
    assert all(a[1] + 1 == b[0] for a, b in itertools.pairwise(parts))  # contiguous
    assert diagnosis_lines(con, SAMPLE, max_rows=100_000) == whole
    one_arm = diagnosis_lines(con, SAMPLE, "candidate")
    assert diagnosis_lines(con, SAMPLE, "candidate", max_rows=60_000) == one_arm
    assert not con.execute(
        "SELECT * FROM duckdb_tables() WHERE table_name LIKE '\\_ls\\_%' ESCAPE '\\'"
    ).fetchall()


def test_sliced_json_is_written_whole_or_not_at_all(monkeypatch):
    """Several slices gather in a temporary file: the same bytes as one slice, and none on failure."""
    import io

    import ledgerscope.analysis.diagnosis.sql as dsql

    con = connect(SAMPLE)
    one, several = io.BytesIO(), io.BytesIO()
    assert dsql.write_json_lines(con, SAMPLE, one) == 896
    assert dsql.write_json_lines(con, SAMPLE, several, max_rows=100_000) == 896
    assert several.getvalue() == one.getvalue()

    calls = []
    real = dsql.slice_query

    def failing(con, part, columns):
        calls.append(part)
        if len(calls) == 3:
            raise RuntimeError("disk gone")
        return real(con, part, columns)

    monkeypatch.setattr(dsql, "slice_query", failing)
    out = io.BytesIO()
    with pytest.raises(RuntimeError):
        dsql.write_json_lines(con, SAMPLE, out, max_rows=100_000)
    assert out.getvalue() == b"" and len(calls) == 3


def test_evidence_of_a_selection_is_that_of_the_whole_diagnosis():
    """export's evidence: only the selected records, sliced or not, the same as every record's."""
    from ledgerscope.analysis.diagnosis.sql import diagnosis_evidence

    con = connect(SAMPLE)
    rows = [json.loads(line) for line in diagnosis_lines(con, SAMPLE)]
    chosen = rows[::7]
    keys = [(r["arm"], r["phase"], r["qid"]) for r in chosen]
    for max_rows in (None, 20_000):
        found = diagnosis_evidence(con, SAMPLE, keys, max_rows=max_rows)
        assert sorted(found) == sorted(keys)
        for r in chosen:
            evidence, walk = found[(r["arm"], r["phase"], r["qid"])]
            assert json.loads(evidence) == r["evidence"] and json.loads(walk) == r["walk"]
    assert diagnosis_evidence(con, SAMPLE, []) == {}
    assert diagnosis_evidence(con, SAMPLE, [("candidate", "0", "no-such-question")]) == {}


def test_summary_steps_are_the_full_diagnosis_steps():
    """``diagnose``'s summary reads step and name from the heads alone: the same as the full rows,
    in the same order."""
    from ledgerscope.analysis.diagnosis import ledger_heads

    con = connect(SAMPLE)
    for arm in (None, "candidate"):
        full = [
            {k: r[k] for k in ("arm", "phase", "qid", "step", "step_name")}
            for r in map(json.loads, diagnosis_lines(con, SAMPLE, arm))
        ]
        assert ledger_heads(con, arm) == full
        assert len(full) == (896 if arm is None else 448)


def test_cli_summary_shows_steps_survival_and_recall_at_80_columns():
    import os

    out = subprocess.run(
        [sys.executable, "-m", "ledgerscope.cli.main", "diagnose", str(SAMPLE)],
        capture_output=True,
        check=True,
        text=True,
        env={**os.environ, "COLUMNS": "80"},
    ).stdout
    for needle in (
        "records per step",
        "stage survival",
        "reranker regret",
        "duplicate ratio",
        "reversals",
        "recall@k",
        "@50",
        "dense_ann",
        "896 records",
    ):
        assert needle in out, needle
    assert max(len(line) for line in out.splitlines()) <= 80


@pytest.mark.parametrize("shape", ["seed-002", "staged"])
def test_ingested_ledger_matches(tmp_path, shape, sql_matches_python):
    """Ingested traces: stages not recorded (NULL flags), steps collapsed, citations not recorded."""
    pytest.importorskip("langchain_text_splitters")
    from ledgerscope.ingest.build import IngestOptions, ingest

    from . import ingest_pipeline as pipe

    for config in pipe.CONFIGS:
        record = pipe.run if shape == "seed-002" else pipe.run_staged
        record(config, tmp_path / "t.jsonl", tmp_path / "c.jsonl")
    out = tmp_path / "ledger"
    ingest(
        IngestOptions([tmp_path / "t.jsonl"], tmp_path / "c.jsonl", pipe.FIXTURES, out, corpus=pipe.CORPUS)
    )
    con = connect(out)
    steps = sql_matches_python(con, out)
    assert sum(steps.values()) == 112
    lines = [json.loads(line) for line in diagnosis_lines(con, out)]
    labels = {r["label"] for r in lines}
    collapsed = {"seed-002": {"lost-in-steps-7-8"}, "staged": {"lost-in-steps-5-7"}}[shape]
    assert collapsed <= labels, labels
    # the TUI's filter view (record_view, SQL over the records alone) says the same
    from ledgerscope.analysis.diagnosis import build_record_view

    build_record_view(con)
    view = {
        (a, p, q): (s, n, lab, list(f))
        for a, p, q, s, n, lab, f in con.execute(
            "SELECT arm, phase, qid, step, step_name, label, flags FROM record_view"
        ).fetchall()
    }
    for r in lines:
        want = (r["step"], r["step_name"], r["label"], r["flags"])
        assert view[(r["arm"], r["phase"], r["qid"])] == want, r
