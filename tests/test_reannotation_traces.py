"""Gold from traces: a pipeline's traces ingested with questions but no gold, exported as tasks that
show the packed context and retrieved documents, marked, imported as the first fixture version
(provenance ``from-trace``), and the ingested ledger rejudged against it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ledgerscope.cli.main import app
from ledgerscope.inputs.fixtures import read_fixtures
from ledgerscope.testing.ledger_files import table_files

from . import ingest_pipeline as pipe
from . import reannotation_data as rd

pytest.importorskip("langchain_text_splitters")
runner = CliRunner()


@pytest.fixture(scope="module")
def goldless(tmp_path_factory) -> dict:
    """The small configuration's traces, ingested against the sample's questions without any gold."""
    from ledgerscope.ingest.build import IngestOptions, ingest

    root = tmp_path_factory.mktemp("traces")
    pipe.run("small", root / "traces.jsonl", root / "chunks.jsonl")
    fixtures = root / "questions.jsonl"
    fixtures.write_text(
        "".join(
            json.dumps(
                {
                    "format": "ledgerscope-fixture/1",
                    "qid": q["qid"],
                    "question": q["question"],
                    "segment": "unanswerable",
                    "answerable": False,
                    "support_only": True,
                    "spans": [],
                    "sufficient_sets": [],
                    "adjudication": {"state": "draft"},
                }
            )
            + "\n"
            for q in pipe.questions()
        )
    )
    ledger = root / "ledger"
    ingest(
        IngestOptions([root / "traces.jsonl"], root / "chunks.jsonl", fixtures, ledger, corpus=pipe.CORPUS)
    )
    return {"root": root, "fixtures": fixtures, "ledger": ledger}


def test_rejudging_an_ingested_ledger_with_its_own_gold_gives_its_records(goldless, tmp_path):
    """The ingest derives flags and verdicts in DuckDB; rejudge recomputes them in Python: they agree."""

    import pyarrow.parquet as pq

    from ledgerscope.ingest.build import IngestOptions, ingest
    from ledgerscope.pipeline.run.rejudge import rejudge

    root, ledger = goldless["root"], tmp_path / "ledger"
    ingest(
        IngestOptions(
            [root / "traces.jsonl"], root / "chunks.jsonl", pipe.FIXTURES, ledger, corpus=pipe.CORPUS
        )
    )
    result = rejudge(ledger, ledger / "fixtures.jsonl", tmp_path / "again")
    assert result.changed_questions == [] and result.changes == []
    again = tmp_path / "again"
    for p, q in zip(table_files(ledger, "records"), table_files(again, "records"), strict=True):
        assert pq.read_table(q).to_pylist() == pq.read_table(p).to_pylist()


def _gold() -> dict:
    """The sample's real gold (quotes), which the annotator marks where the task shows it."""
    return {q["qid"]: q for q in pipe.questions()}


def test_trace_tasks_become_a_first_fixture_version(goldless, tmp_path):
    from ledgerscope.export import export

    out = tmp_path / "tasks.json"
    export(goldless["ledger"], "", "label-studio-tasks", out)
    tasks = json.loads(out.read_text())
    assert tasks and all(t["data"]["origin"] == "trace" and not t["data"]["gold_regions"] for t in tasks)
    assert all(t["data"]["context"] for t in tasks)
    gold, marked = _gold(), []
    for i, t in enumerate(tasks):  # mark each real gold quote where a task shows its document
        doc, text = t["data"]["documents"][0]["doc_id"], t["data"]["doc0"]
        for span in gold[t["data"]["qid"]]["spans"]:
            at = text.find(span["quote"]) if span["doc_id"] == doc else -1
            if at >= 0 and len(marked) < 3 and t["data"]["qid"] not in {m[1] for m in marked}:
                value = {"start": at, "end": at + len(span["quote"]), "text": span["quote"]}
                marked.append(
                    (
                        i,
                        t["data"]["qid"],
                        [
                            {
                                "id": f"m{i}",
                                "from_name": "role_0",
                                "to_name": "doc0",
                                "type": "labels",
                                "value": {**value, "labels": ["support"]},
                            }
                        ],
                    )
                )
    assert len(marked) == 3
    export_file = tmp_path / "export.json"
    export_file.write_text(json.dumps(rd.as_export(tasks, [(i, rd.ALICE, r) for i, _, r in marked])))
    v1 = tmp_path / "v1.jsonl"
    result = runner.invoke(
        app,
        [
            "import",
            "label-studio",
            str(export_file),
            "--fixtures",
            str(goldless["fixtures"]),
            "--out",
            str(v1),
        ],
    )
    assert result.exit_code == 0, result.output
    fixtures = {f.qid: f for f in read_fixtures(v1)[0].fixtures}
    assert len(fixtures) == len(pipe.questions())  # every question kept, the marked ones with gold
    for _, qid, regions in marked:
        fx = fixtures[qid]
        assert fx.answerable and fx.origin == "from-trace" and len(fx.spans) == 1
        assert fx.spans[0].quote == regions[0]["value"]["text"]
        assert fx.annotations["label_studio"]["spans"][fx.spans[0].span_id]["change"] == "from-trace"
    # without --fixtures: the tasks' questions alone become fixtures
    alone = tmp_path / "alone.jsonl"
    cli = runner.invoke(app, ["import", "label-studio", str(export_file), "--out", str(alone)])
    assert cli.exit_code == 0, cli.output
    assert {f.qid for f in read_fixtures(alone)[0].fixtures} == {qid for _, qid, _ in marked}
    _rejudged(goldless["ledger"], v1, {qid for _, qid, _ in marked}, tmp_path)


def _rejudged(ledger: Path, v1: Path, qids: set[str], tmp_path: Path) -> None:
    """The ingested ledger judged against its first gold: the marked questions gain support flags."""
    import duckdb

    out = tmp_path / "rejudged"
    result = runner.invoke(app, ["rejudge", str(ledger), "--fixtures", str(v1), "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    assert set(json.loads(result.output)["changed_questions"]) == qids
    rows = duckdb.sql(
        f"SELECT qid, support_packed, support_bm25 FROM read_parquet('{out}/records/*/*/*.parquet')"
    ).fetchall()
    for qid, packed, bm25 in rows:
        if qid in qids:
            assert packed is not None and bm25 is None  # bm25 is not recorded by this pipeline
        else:
            assert packed is None
