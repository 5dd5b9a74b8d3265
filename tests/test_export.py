"""Exports from a real (small) sweep: fixtures, Label Studio, TREC run/qrels, JSONL; atomic, read-only."""

from __future__ import annotations

import hashlib
import itertools
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ledgerscope.cli.main import app
from ledgerscope.common.errors import InputError
from ledgerscope.export import export, trec_scores
from ledgerscope.export import jsonl as export_jsonl
from ledgerscope.export import label_studio as export_label_studio
from ledgerscope.export import trec as export_trec

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def ledger(rule_exception_ledger) -> Path:
    """The shared rule-exception sweep (conftest.py): two arms, five phases, three questions."""
    return rule_exception_ledger


def _checksums(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(autouse=True)
def ledger_untouched(ledger):
    """Every test: the ledger's files (names and bytes) are the same afterwards."""
    before = _checksums(ledger)
    yield
    assert _checksums(ledger) == before


@pytest.fixture()
def view(ledger):
    from ledgerscope.analysis.diagnosis import build_record_view
    from ledgerscope.ledger.read import connect

    con = connect(ledger)
    build_record_view(con)
    return con


def _leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.startswith("."))


# ---------------------------------------------------------------------------
# the view


def test_record_view_matches_diagnosis_and_reversals(ledger, view):
    from ledgerscope.analysis.diagnosis import count_records, select_records
    from ledgerscope.analysis.diagnosis.feed import diagnose_ledger
    from ledgerscope.analysis.reversals import find_reversals

    n = view.execute("SELECT count(*) FROM records").fetchone()[0]
    assert count_records(view, "") == n == 30
    rows = select_records(view, "")
    diag = {(d["arm"], d["phase"], d["qid"]): d for d in diagnose_ledger(view, ledger)}
    for r in rows:
        d = diag[(r["arm"], str(r["phase"]), r["qid"])]
        assert (r["step"], r["step_name"], r["label"], r["flags"]) == (
            d["step"],
            d["step_name"],
            d["label"],
            d["flags"],
        )
    reversed_ = {(x["arm"], x["qid"]) for x in find_reversals(view)}
    assert reversed_, "the sweep data is built to reverse"
    assert {(r["arm"], r["qid"]) for r in rows if r["reversal"]} == reversed_


# ---------------------------------------------------------------------------
# fixtures


def test_fixtures_export_validates_standalone(ledger, view, tmp_path):
    from ledgerscope.analysis.diagnosis import count_records, select_records
    from ledgerscope.inputs.fixtures import read_fixtures

    where = "step > 0 OR NOT answerable"
    out = tmp_path / "reannotate.jsonl"
    result = export(ledger, where, "fixtures", out)
    selected = select_records(view, where)
    assert result.count == count_records(view, where) == len(selected)
    assert result.paths == [out]
    assert result.questions == len({r["qid"] for r in selected})

    validated = CliRunner().invoke(app, ["validate", str(out)])
    assert validated.exit_code == 0, validated.output
    assert "needs-review" in validated.output

    fset, problems = read_fixtures(out)
    assert not problems
    manifest = json.loads((ledger / "manifest.json").read_text())
    assert len(fset.fixtures) == result.questions
    for fx in fset.fixtures:
        ls = fx.annotations["ledgerscope"]
        assert ls["ledger"]["identity"] == manifest["identity"]
        mine = [r for r in selected if r["qid"] == fx.qid]
        assert len(ls["records"]) == len(mine)
        assert {(r["arm"], r["phase"], r["step"]) for r in ls["records"]} == {
            (r["arm"], str(r["phase"]), r["step"]) for r in mine
        }
        for rec in ls["records"]:
            assert {
                "arm",
                "phase",
                "step",
                "step_name",
                "label",
                "evidence",
                "answer",
                "answer_verdict",
                "citation_verdict",
            } <= rec.keys()
        assert fx.adjudication["state"] == "needs-review"
        assert fx.adjudication["reason"].startswith("exported from ledger for re-annotation: steps ")
    # the sources travel inline
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert all("sources" in obj for obj in lines)


# ---------------------------------------------------------------------------
# Label Studio


def test_label_studio_regions_slice_the_document(ledger, view, tmp_path):
    from ledgerscope.ledger.fixtures import load_ledger_fixtures

    out = tmp_path / "tasks.json"
    result = export(ledger, "answerable", "label-studio", out)
    config_path = tmp_path / "tasks.json.config.xml"
    assert result.paths == [out, config_path]
    tasks = json.loads(out.read_text())
    fixtures, texts = load_ledger_fixtures(view, ledger)
    units = {
        (a, str(p), u): t
        for a, p, u, t in view.execute("SELECT arm, phase, unit_id, text FROM units").fetchall()
    }

    per_record: dict[tuple, list[dict]] = {}
    used_labels = set()
    kinds = set()
    for task in tasks:
        data = task["data"]
        assert {"text", "question", "qid", "arm", "phase", "doc_id"} <= data.keys()
        assert data["text"] == texts[data["doc_id"]]
        per_record.setdefault((data["arm"], data["phase"], data["qid"]), []).append(task)
        (pred,) = task["predictions"]
        assert pred["model_version"] == "ledgerscope gold+retrieved"
        ids = [r["id"] for r in pred["result"]]
        assert len(ids) == len(set(ids))
        for region in pred["result"]:
            assert (region["from_name"], region["to_name"], region["type"]) == ("label", "text", "labels")
            v = region["value"]
            assert data["text"][v["start"] : v["end"]] == v["text"]
            (label,) = v["labels"]
            used_labels.add(label)
            kind = label.split(":")[0].split(" ")[0]
            kinds.add(kind)
            if kind == "gold":
                span = fixtures[data["qid"]].span(label.removeprefix("gold:"))
                assert v["text"] == span.quote and span.doc_id == data["doc_id"]
    assert kinds == {"gold", "packed", "reranked"}
    # one task per (record, document involved); every selected answerable record has its gold doc
    assert len(per_record) == result.count
    for (_arm, _phase, qid), ts in per_record.items():
        docs = [t["data"]["doc_id"] for t in ts]
        assert len(docs) == len(set(docs))
        assert set(fixtures[qid].doc_ids) <= set(docs)

    # packed and reranked regions are those units' own text; reranked ones stop at the selection cutoff
    cands = view.execute(
        'SELECT c.arm, c.phase, c.qid, c.stage, c."rank", c.unit_id, r.selection_depth FROM candidates c '
        "JOIN records r USING (arm, phase, qid) WHERE c.stage IN ('packed', 'reranked')"
    ).fetchall()
    by_key = {(a, str(p), q, st, int(rk)): (u, depth) for a, p, q, st, rk, u, depth in cands}
    for task in tasks:
        d = task["data"]
        for region in task["predictions"][0]["result"]:
            stage, _, rank = region["value"]["labels"][0].partition(" rank ")
            if stage in ("packed", "reranked"):
                unit, depth = by_key[(d["arm"], d["phase"], d["qid"], stage, int(rank))]
                assert units[(d["arm"], d["phase"], unit)] == region["value"]["text"]
                assert stage == "packed" or int(rank) <= depth

    root = ET.fromstring(config_path.read_text())
    labels_el = root.find("Labels")
    assert labels_el is not None and labels_el.get("name") == "label" and labels_el.get("toName") == "text"
    assert root.find("Text").get("name") == "text" and root.find("Text").get("value") == "$text"
    assert {el.get("value") for el in labels_el.findall("Label")} == used_labels


# ---------------------------------------------------------------------------
# TREC


def test_trec_run_and_qrels_read_by_ir_measures(ledger, view, tmp_path):
    import ir_measures
    from ir_measures import R, nDCG

    from ledgerscope.analysis.diagnosis import select_records

    out = tmp_path / "trec"
    where = "answerable"
    result = export(ledger, where, "trec", out)
    selected = select_records(view, where)
    groups = {(r["arm"], str(r["phase"])) for r in selected}
    names = {p.name for p in out.iterdir()}
    assert names == {f"{kind}.{a}.{p}.txt" for a, p in groups for kind in ("run", "qrels")}
    assert result.questions == 2

    n_rows = 0
    for arm, phase in sorted(groups):
        run_path, qrels_path = out / f"run.{arm}.{phase}.txt", out / f"qrels.{arm}.{phase}.txt"
        lines = [line.split() for line in run_path.read_text().splitlines()]
        n_rows += len(lines)
        assert all(len(parts) == 6 and parts[1] == "Q0" for parts in lines)
        for qid in {parts[0] for parts in lines}:
            mine = [parts for parts in lines if parts[0] == qid]
            ranks = [int(parts[3]) for parts in mine]
            assert ranks == list(range(1, len(mine) + 1))
            by_score = sorted(mine, key=lambda parts: -float(parts[4]))
            assert [int(parts[3]) for parts in by_score] == ranks, "score order is rank order"
            assert len({parts[4] for parts in mine}) == len(mine), "no tied scores"
        qrels = list(ir_measures.read_trec_qrels(str(qrels_path)))
        run = list(ir_measures.read_trec_run(str(run_path)))
        assert qrels and run
        agg = ir_measures.calc_aggregate([nDCG @ 10, R @ 10], qrels, run)
        assert set(agg) == {nDCG @ 10, R @ 10}
        assert all(0.0 <= v <= 1.0 for v in agg.values())
        # relevance = the unit overlaps a gold span of the question
        units = {
            u: (d, s, e)
            for u, d, s, e in view.execute(
                'SELECT unit_id, doc_id, "start", "end" FROM units WHERE arm = ? AND phase = ?', [arm, phase]
            ).fetchall()
        }
        from ledgerscope.ledger.fixtures import load_ledger_fixtures

        fixtures, _ = load_ledger_fixtures(view, ledger)
        for q in qrels:
            d, s, e = units[q.doc_id]
            assert q.relevance == 1
            assert any(sp.doc_id == d and s < sp.end and e > sp.start for sp in fixtures[q.query_id].spans)
    expected = view.execute(
        "SELECT count(*) FROM candidates c JOIN records r USING (arm, phase, qid) "
        "WHERE c.stage = 'reranked' AND r.answerable"
    ).fetchone()[0]
    assert n_rows == expected


def test_trec_scores_break_ties_by_rank():
    cands = [
        {"rank": 1, "score": 0.5},
        {"rank": 2, "score": 0.5},
        {"rank": 3, "score": 0.7},
        {"rank": 4, "score": None},
        {"rank": 5, "score": float("nan")},
        {"rank": 6, "score": 0.1},
    ]
    scores = trec_scores(cands)
    assert all(a > b for a, b in itertools.pairwise(scores))
    assert scores[0] == pytest.approx(0.5 - 1e-9)


# ---------------------------------------------------------------------------
# JSONL


def test_jsonl_rows_are_self_contained(ledger, view, tmp_path):
    from ledgerscope.analysis.diagnosis import count_records
    from ledgerscope.ledger import schema

    where = "reversal AND arm = 'candidate'"
    out = tmp_path / "records.jsonl"
    result = export(ledger, where, "jsonl", out)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == result.count == count_records(view, where) > 0
    counts = {
        (a, str(p), q, s): n
        for a, p, q, s, n in view.execute(
            "SELECT arm, phase, qid, stage, count(*) FROM candidates GROUP BY ALL"
        ).fetchall()
    }
    for row in rows:
        assert set(schema.RECORDS.names) <= row.keys()
        assert row["reversal"] is True and row["arm"] == "candidate"
        assert set(row["candidates"]) == set(schema.STAGES)
        for stage, lst in row["candidates"].items():
            assert len(lst) == counts.get((row["arm"], row["phase"], row["qid"], stage), 0)
            assert [c["rank"] for c in lst] == sorted(c["rank"] for c in lst)
            for c in lst:
                assert {"rank", "unit_id", "doc_id", "start", "end", "score", "lineage"} <= c.keys()
        assert [c["unit_id"] for c in row["candidates"]["packed"]] == row["packed_unit_ids"]
        assert row["packed_context"]
        diag = row["diagnosis"]
        assert {"step", "step_name", "label", "evidence", "flags", "walk"} <= diag.keys()
        assert isinstance(diag["evidence"], dict) and isinstance(diag["walk"], list)


# ---------------------------------------------------------------------------
# failures: no partial output, exit status 2


def test_cli_export_prints_summary(ledger, view, tmp_path):
    from ledgerscope.analysis.diagnosis.feed import diagnose_ledger

    # the expected records come from the pure diagnosis, not from the export under test
    expected = sorted(
        (d["arm"], d["phase"], d["qid"]) for d in diagnose_ledger(view, ledger) if d["step"] == 0
    )
    assert 0 < len(expected) < 30, "the predicate must select some records, not all"
    out = tmp_path / "r.jsonl"
    res = CliRunner().invoke(
        app, ["export", str(ledger), "--where", "step = 0", "--format", "jsonl", "--out", str(out)]
    )
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted((r["arm"], str(r["phase"]), r["qid"]) for r in rows) == expected
    assert f"exported {len(expected)} record(s) (" in res.output and str(out) in res.output


@pytest.mark.parametrize(
    "where", ["step = ", "nosuch = 1", "1=1; DROP TABLE x", "qid IN (SELECT * FROM read_csv('x'))"]
)
@pytest.mark.parametrize("fmt", ["jsonl", "trec"])
def test_cli_bad_predicate_exits_2_without_output(ledger, tmp_path, where, fmt):
    out = tmp_path / "out"
    res = CliRunner().invoke(
        app, ["export", str(ledger), "--where", where, "--format", fmt, "--out", str(out)]
    )
    assert res.exit_code == 2
    assert res.stdout == ""
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("filter: where: ")
    assert "Traceback" not in res.output
    assert not out.exists() and _leftovers(tmp_path) == []


def test_cli_unknown_format_and_out_inside_ledger(ledger, tmp_path):
    res = CliRunner().invoke(app, ["export", str(ledger), "--format", "xml", "--out", str(tmp_path / "x")])
    assert res.exit_code == 2 and "unknown format" in res.stderr
    res = CliRunner().invoke(
        app, ["export", str(ledger), "--format", "jsonl", "--out", str(ledger / "x.jsonl")]
    )
    assert res.exit_code == 2 and "outside the ledger" in res.stderr
    assert not (ledger / "x.jsonl").exists()


def _fail_on_call(n: int, real):
    calls = {"n": 0}

    def wrapper(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] >= n:
            raise RuntimeError("simulated failure mid-write")
        return real(*args, **kwargs)

    return wrapper


def test_jsonl_failure_mid_write_leaves_nothing(ledger, tmp_path, monkeypatch):
    out = tmp_path / "records.jsonl"
    monkeypatch.setattr(export_jsonl, "_jsonl_row", _fail_on_call(3, export_jsonl._jsonl_row))
    with pytest.raises(RuntimeError):
        export(ledger, "", "jsonl", out)
    assert not out.exists()
    assert list(tmp_path.iterdir()) == []


def test_jsonl_failure_keeps_an_earlier_export(ledger, tmp_path, monkeypatch):
    out = tmp_path / "records.jsonl"
    export(ledger, "step = 0", "jsonl", out)
    before = out.read_bytes()
    monkeypatch.setattr(export_jsonl, "_jsonl_row", _fail_on_call(2, export_jsonl._jsonl_row))
    with pytest.raises(RuntimeError):
        export(ledger, "", "jsonl", out)
    assert out.read_bytes() == before
    assert _leftovers(tmp_path) == []


def test_trec_failure_mid_write_leaves_nothing(ledger, tmp_path, monkeypatch):
    out = tmp_path / "trec"
    # the run files are written; the qrels writer then fails
    monkeypatch.setattr(export_trec, "_qrels_lines", _fail_on_call(2, export_trec._qrels_lines))
    with pytest.raises(RuntimeError):
        export(ledger, "", "trec", out)
    assert not out.exists()
    assert list(tmp_path.iterdir()) == []


def test_trec_failure_keeps_an_earlier_export_and_refuses_foreign_dirs(ledger, tmp_path, monkeypatch):
    out = tmp_path / "trec"
    export(ledger, "arm = 'candidate'", "trec", out)
    before = _checksums(out)
    monkeypatch.setattr(export_trec, "_run_lines", _fail_on_call(2, export_trec._run_lines))
    with pytest.raises(RuntimeError):
        export(ledger, "", "trec", out)
    assert _checksums(out) == before
    assert _leftovers(tmp_path) == []
    monkeypatch.undo()
    export(ledger, "arm = 'baseline'", "trec", out)  # replaces an earlier trec export
    assert all(".baseline." in p.name for p in out.iterdir())
    (out / "notes.md").write_text("mine")
    with pytest.raises(InputError, match="refusing to replace"):
        export(ledger, "", "trec", out)
    assert (out / "notes.md").read_text() == "mine"


def test_label_studio_failure_leaves_neither_file(ledger, tmp_path, monkeypatch):
    out = tmp_path / "tasks.json"

    def broken(labels):
        raise RuntimeError("simulated failure writing the config")

    monkeypatch.setattr(export_label_studio, "label_config", broken)
    with pytest.raises(RuntimeError):
        export(ledger, "", "label-studio", out)
    assert list(tmp_path.iterdir()) == []


def test_bad_predicate_raises_input_error_before_writing(ledger, tmp_path):
    for fmt in ("fixtures", "label-studio", "trec", "jsonl"):
        with pytest.raises(InputError):
            export(ledger, "EXISTS (SELECT 1 FROM sources)", fmt, tmp_path / fmt)
    assert list(tmp_path.iterdir()) == []
