"""The re-annotation loop offline: tasks, import (moves, joint sets, disputes, adjudication, refusals),
the fixture diff, rejudging a ledger, and gold built from an ingested trace ledger.

Label Studio's side is simulated here exactly as its JSON export writes it (tests/reannotation_data.py);
tests/test_label_studio_server.py runs the same scenario through a real Label Studio server.
"""

from __future__ import annotations

import copy
import hashlib
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from ledgerscope.cli.main import app
from ledgerscope.common.errors import InputError
from ledgerscope.inputs.fixtures import read_fixtures
from ledgerscope.inputs.importers.reannotate import import_label_studio
from ledgerscope.testing.ledger_files import oracle_file, table_file

from . import reannotation_data as rd

runner = CliRunner()


@pytest.fixture(scope="module")
def exported(sample_ledger, tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("reannotation")
    tasks, config = rd.export_tasks(sample_ledger, root / "tasks.json")
    export = root / "export.json"
    export.write_text(json.dumps(rd.as_export(tasks, rd.scenario(tasks))), encoding="utf-8")
    old = sample_ledger / "fixtures.jsonl"
    import_label_studio(export, root / "v2.jsonl", old)
    import_label_studio(export, root / "v2-bob.jsonl", old, adjudicator=rd.BOB)
    return {
        "root": root,
        "tasks": tasks,
        "config": config,
        "export": export,
        "old": old,
        "v2": root / "v2.jsonl",
        "v2_bob": root / "v2-bob.jsonl",
    }


def _fixtures(path: Path) -> dict:
    return {f.qid: f for f in read_fixtures(path)[0].fixtures}


def test_tasks_hold_a_joint_question_whole_and_other_questions_per_document(exported):
    by_qid: dict[str, list[dict]] = {}
    for t in exported["tasks"]:
        by_qid.setdefault(t["data"]["qid"], []).append(t)
    (joint,) = by_qid["re-team-monthly-legacy"]  # gold in two documents: one task holding both
    docs = [d["doc_id"] for d in joint["data"]["documents"]]
    assert docs[:2] == ["plans/plans-and-limits.md", "changelog.md"]
    assert all(len(t["data"]["documents"]) == 1 for t in by_qid["re-free-upload"] + by_qid["ns-audit-csv"])
    n_slots = max(len(t["data"]["documents"]) for t in exported["tasks"])
    root = ET.fromstring(exported["config"])
    names = {el.get("name") for el in root.iter() if el.get("name")}
    for k in range(n_slots):
        assert {f"doc{k}", f"role_{k}", f"sets_{k}"} <= names
        assert all(f"doc{k}" in t["data"] for t in exported["tasks"])  # every task answers every $docK
    assert {"answerable", "comment", "context"} <= names
    for t in exported["tasks"]:
        data = t["data"]
        for d in data["documents"]:
            text = data[f"doc{d['slot']}"]
            assert d["version"] == "sha256:" + hashlib.sha256(text.encode()).hexdigest()
        for r in t["predictions"][0]["result"]:
            if "start" in r["value"]:
                text = data[r["to_name"]]
                assert text[r["value"]["start"] : r["value"]["end"]] == r["value"]["text"]
                assert r["id"] in data["gold_regions"]


def test_a_moved_span_keeps_its_id_and_gets_exact_code_point_offsets(exported):
    (task,) = [t for t in exported["tasks"] if t["data"]["qid"] == "re-team-monthly-legacy"]
    text = task["data"][f"doc{rd.slot_of(task, 'changelog.md')}"]
    old = _fixtures(exported["old"])["re-team-monthly-legacy"].span("exc")
    new = _fixtures(exported["v2"])["re-team-monthly-legacy"]
    moved = new.span("exc")
    assert (moved.start, moved.end) == (old.start, rd.moved_end(text, old.start, old.end))
    assert moved.quote == text[moved.start : moved.end] and moved.dependency == "exception"
    # the document has characters outside the BMP before the span: UTF-16 offsets would differ
    assert len(text[: moved.start].encode("utf-16-le")) // 2 != moved.start
    prov = new.annotations["label_studio"]["spans"]["exc"]
    assert (prov["change"], prov["annotator"], prov["project"]) == ("moved", rd.ALICE, 7)
    digest = "sha256:" + hashlib.sha256(exported["old"].read_bytes()).hexdigest()
    assert new.annotations["label_studio"]["previous_fixtures"] == digest
    assert new.span("rule") == _fixtures(exported["old"])["re-team-monthly-legacy"].span("rule")


def test_a_span_added_in_another_document_joins_the_set_across_tasks(exported):
    fx = _fixtures(exported["v2"])["re-free-upload"]
    assert fx.sufficient_sets == (("rule", "exc", "ls1"),)
    assert {fx.span(s).doc_id for s in fx.sufficient_sets[0]} == {"plans/plans-and-limits.md", rd.JOINT_DOC}
    prov = fx.annotations["label_studio"]["spans"]
    assert prov["ls1"]["change"] == "added" and prov["ls1"]["annotator"] == rd.BOB
    assert prov["rule"]["change"] == "kept"  # nobody annotated its document's task


def test_a_disagreement_is_disputed_and_the_adjudicator_decides(exported):
    old = _fixtures(exported["old"])["ns-audit-csv"]
    disputed = _fixtures(exported["v2"])["ns-audit-csv"]
    assert disputed.adjudication["state"] == "disputed"
    (versions,) = disputed.adjudication["versions"]
    assert set(versions["by_annotator"]) == {rd.ALICE, rd.BOB}
    assert versions["by_annotator"][rd.BOB]["spans"][0]["role"] == "exception"
    assert versions["agreed"] == []  # same place, another role: not agreed
    assert disputed.spans == old.spans and disputed.sufficient_sets == old.sufficient_sets  # nothing merged
    decided = _fixtures(exported["v2_bob"])["ns-audit-csv"]
    assert decided.adjudication["state"] == "adjudicated" and decided.adjudication["overruled"]
    assert decided.span("csv").dependency == "exception"
    assert decided.annotations["label_studio"]["spans"]["csv"]["change"] == "relabelled"


def test_annotators_who_agree_are_adjudicated(exported, tmp_path):
    tasks = exported["tasks"]
    anns = [
        (i, who, r)
        for i, who, r in rd.scenario(tasks)
        if who == rd.ALICE and tasks[i]["data"]["qid"] == "re-team-monthly-legacy"
    ]
    both = [*anns, (anns[0][0], rd.BOB, copy.deepcopy(anns[0][2]))]
    export = tmp_path / "export.json"
    export.write_text(json.dumps(rd.as_export(tasks, both)))
    import_label_studio(export, tmp_path / "v2.jsonl", exported["old"])
    fx = _fixtures(tmp_path / "v2.jsonl")["re-team-monthly-legacy"]
    assert fx.adjudication["state"] == "adjudicated" and fx.adjudication["rules"] == ["agreed"]
    assert fx.annotations["label_studio"]["spans"]["exc"]["annotator"] == f"{rd.ALICE}, {rd.BOB}"


def test_untouched_questions_are_copied_byte_for_byte(exported):
    old = {json.loads(line)["qid"]: line for line in exported["old"].read_text().splitlines()}
    new = {json.loads(line)["qid"]: line for line in exported["v2"].read_text().splitlines()}
    assert list(old) == list(new)
    assert all(new[q] == old[q] for q in old if q not in rd.QIDS)


def test_a_task_whose_text_changed_is_refused_by_name(exported, tmp_path):
    data = json.loads(exported["export"].read_text())
    data[0]["data"]["doc0"] = data[0]["data"]["doc0"].replace("a", "b", 1)
    bad = tmp_path / "export.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(InputError) as err:
        import_label_studio(bad, tmp_path / "v2.jsonl", exported["old"])
    assert f"task {data[0]['id']} (question {data[0]['data']['qid']!r})" in str(err.value)
    assert "source digest" in str(err.value) and not (tmp_path / "v2.jsonl").exists()
    result = runner.invoke(
        app,
        [
            "import",
            "label-studio",
            str(bad),
            "--fixtures",
            str(exported["old"]),
            "--out",
            str(tmp_path / "v2.jsonl"),
        ],
    )
    assert result.exit_code == 2 and "source digest" in result.output


def test_offsets_in_another_unit_are_refused(exported, tmp_path):
    data = json.loads(exported["export"].read_text())
    task = next(t for t in data if t["data"]["qid"] == "re-team-monthly-legacy")
    for r in task["annotations"][0]["result"]:
        if r["to_name"] != "doc0" and "start" in r["value"]:  # as if counted in UTF-16 units
            text = task["data"][r["to_name"]]
            r["value"]["start"] = len(text[: r["value"]["start"]].encode("utf-16-le")) // 2
    bad = tmp_path / "export.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(InputError, match="does not slice to the region's text"):
        import_label_studio(bad, tmp_path / "v2.jsonl", exported["old"])


def test_fixtures_diff_text_and_json(exported):
    result = runner.invoke(app, ["fixtures", "diff", str(exported["old"]), str(exported["v2"])])
    assert result.exit_code == 0, result.output
    assert "~ exc changelog.md" in result.output and "+ ls1 plans/free-plan.md" in result.output
    assert "adjudicated -> disputed" in result.output and "3 question(s) changed" in result.output
    result = runner.invoke(app, ["fixtures", "diff", str(exported["old"]), str(exported["v2"]), "--json"])
    rows = {r["qid"]: r for r in map(json.loads, result.output.splitlines())}
    assert set(rows) == set(rd.QIDS)
    assert rows["re-free-upload"]["sets"]["after"] == [["rule", "exc", "ls1"]]
    assert rows["re-team-monthly-legacy"]["moved"][0]["id"] == "exc"


def _records(ledger: Path) -> dict[str, list[dict]]:
    from ledgerscope.ledger.layout import ledger_layout

    layout = ledger_layout(ledger)
    return {
        key: pq.read_table(layout.table_file(ledger, "records", *key)).to_pylist()
        for key in layout.finished(ledger)
    }


def test_rejudge_with_the_same_fixtures_gives_the_sweeps_records(sample_ledger, tmp_path):
    from ledgerscope.pipeline.run.rejudge import rejudge

    out = tmp_path / "same"
    result = rejudge(sample_ledger, sample_ledger / "fixtures.jsonl", out)
    assert result.changed_questions == [] and result.changed_records == 0 and result.oracle_rerun == []
    assert _records(out) == _records(sample_ledger)
    for arm in ("candidate", "baseline"):
        assert (
            pq.read_table(oracle_file(out, arm)).to_pylist()
            == pq.read_table(oracle_file(sample_ledger, arm)).to_pylist()
        )


def test_rejudge_changes_only_the_questions_whose_gold_changed(sample_ledger, exported, tmp_path):
    out = tmp_path / "v2"
    result = runner.invoke(
        app,
        [
            "rejudge",
            str(sample_ledger),
            "--fixtures",
            str(exported["v2_bob"]),
            "--out",
            str(out),
            "--no-oracle",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert summary["changed_questions"] == sorted(rd.QIDS) == summary["oracle_stale"]
    assert summary["changes"] and {c["qid"] for c in summary["changes"]} <= set(rd.QIDS)
    before, after = _records(sample_ledger), _records(out)
    changed = {
        r2["qid"] for part in before for r1, r2 in zip(before[part], after[part], strict=True) if r1 != r2
    }
    assert changed and changed <= set(rd.QIDS)
    assert {c["qid"] for c in summary["changes"]} <= changed
    manifest = json.loads((out / "manifest.json").read_text())
    old_manifest = json.loads((sample_ledger / "manifest.json").read_text())
    assert manifest["rejudged"]["fixtures_digest_before"] == old_manifest["fixtures_digest"]
    assert (
        manifest["rejudged"]["fixtures_digest_after"]
        == manifest["fixtures_digest"]
        != old_manifest["fixtures_digest"]
    )
    assert manifest["rejudged"]["oracle"]["stale"] == sorted(rd.QIDS)
    # the new ledger reads like any other, and compare pairs it with the old one
    assert runner.invoke(app, ["diagnose", str(out)]).exit_code == 0
    cmp = runner.invoke(
        app,
        [
            "compare",
            str(out),
            "--candidate",
            "candidate",
            "--baseline",
            "candidate",
            "--baseline-ledger",
            str(sample_ledger),
            "--n-resamples",
            "200",
        ],
    )
    assert cmp.exit_code == 0, cmp.output


def test_unanswerable_marks_and_comments_are_kept(exported, tmp_path):
    tasks = exported["tasks"]
    i = next(
        i for i, t in enumerate(tasks) if t["data"]["qid"] == "ns-audit-csv" and t["data"]["gold_regions"]
    )
    result = [
        *rd.accepted(tasks[i]),
        {
            "id": "u1",
            "from_name": "answerable",
            "to_name": "doc0",
            "type": "choices",
            "value": {"choices": ["unanswerable from this corpus"]},
        },
        {
            "id": "c1",
            "from_name": "comment",
            "to_name": "doc0",
            "type": "textarea",
            "value": {"text": ["the CSV limit moved to the API page"]},
        },
    ]
    export = tmp_path / "export.json"
    export.write_text(json.dumps(rd.as_export(tasks, [(i, rd.ALICE, result)])))
    import_label_studio(export, tmp_path / "v2.jsonl", exported["old"])
    fx = _fixtures(tmp_path / "v2.jsonl")["ns-audit-csv"]
    assert not fx.answerable and fx.sufficient_sets == () and fx.spans  # the spans stay, for the record
    (note,) = fx.annotations["label_studio"]["tasks"]
    assert note["comments"] == {rd.ALICE: "the CSV limit moved to the API page"}
    diff = runner.invoke(app, ["fixtures", "diff", str(exported["old"]), str(tmp_path / "v2.jsonl")])
    assert "answerable True -> False" in diff.output


@pytest.mark.slow
def test_rejudge_reruns_the_oracle_only_where_support_changed(sample_ledger, exported, tmp_path):
    from ledgerscope.pipeline.run.rejudge import rejudge

    out = tmp_path / "oracle"
    result = rejudge(sample_ledger, exported["v2_bob"], out)
    assert result.oracle_rerun == sorted(rd.QIDS) and result.oracle_stale == []
    new = _fixtures(exported["v2_bob"])
    for arm in ("candidate", "baseline"):
        before = {r["qid"]: r for r in pq.read_table(oracle_file(sample_ledger, arm)).to_pylist()}
        after = {r["qid"]: r for r in pq.read_table(oracle_file(out, arm)).to_pylist()}
        assert {q: r for q, r in after.items() if q not in rd.QIDS} == {
            q: r for q, r in before.items() if q not in rd.QIDS
        }
        assert new["re-free-upload"].span("ls1").quote in after["re-free-upload"]["context"]
        records = pq.read_table(table_file(out, "records", arm, "0")).to_pylist()
        for r in records:
            assert r["oracle_verdict"] == after[r["qid"]]["answer_verdict"]


def test_a_deleted_pre_annotation_removes_the_span_and_its_set_membership(exported, tmp_path):
    tasks = exported["tasks"]
    i = next(
        i for i, t in enumerate(tasks) if t["data"]["qid"] == "re-free-upload" and t["data"]["gold_regions"]
    )
    rid = next(r for r, s in tasks[i]["data"]["gold_regions"].items() if s == "exc")
    result = [r for r in rd.accepted(tasks[i]) if r["id"] != rid]
    export = tmp_path / "export.json"
    export.write_text(json.dumps(rd.as_export(tasks, [(i, rd.ALICE, result)])))
    import_label_studio(export, tmp_path / "v2.jsonl", exported["old"])
    fx = _fixtures(tmp_path / "v2.jsonl")["re-free-upload"]
    assert [s.span_id for s in fx.spans] == ["rule"] and fx.sufficient_sets == (("rule",),)
    diff = runner.invoke(app, ["fixtures", "diff", str(exported["old"]), str(tmp_path / "v2.jsonl")])
    assert "- exc plans/plans-and-limits.md" in diff.output


def test_a_partial_agreement_is_disputed_with_the_agreed_spans_listed(exported, tmp_path):
    tasks = exported["tasks"]
    (alice,) = [a for a in rd.scenario(tasks) if tasks[a[0]]["data"]["qid"] == "re-team-monthly-legacy"]
    i, _, result = alice
    extra = copy.deepcopy([r for r in result if r["to_name"] == "doc0"])
    for r in extra:  # bob also marks the first span's sentence again, a little wider: a new region
        r["id"] = "bobextra01"
        r["value"].update(start=0, text=tasks[i]["data"]["doc0"][: r["value"]["end"]])
    export = tmp_path / "export.json"
    export.write_text(json.dumps(rd.as_export(tasks, [alice, (i, rd.BOB, copy.deepcopy(result) + extra)])))
    import_label_studio(export, tmp_path / "v2.jsonl", exported["old"])
    fx = _fixtures(tmp_path / "v2.jsonl")["re-team-monthly-legacy"]
    (versions,) = fx.adjudication["versions"]
    assert fx.adjudication["state"] == "disputed"
    exc = _fixtures(exported["old"])["re-team-monthly-legacy"].span("exc")
    assert {(a["doc_id"], a["start"]) for a in versions["agreed"]} >= {("changelog.md", exc.start)}
    assert fx.span("exc") == exc  # nothing merged: the previous gold stays until someone decides


def test_rejudge_reads_a_format_1_ledger_and_writes_the_current_format(sample_ledger, tmp_path):
    from ledgerscope.ledger import schema
    from ledgerscope.pipeline.run.rejudge import rejudge

    from .test_ledger_engines import as_format_1

    old = as_format_1(sample_ledger, tmp_path / "v1")
    rejudge(old, old / "fixtures.jsonl", tmp_path / "out", no_oracle=True)
    assert json.loads((tmp_path / "out" / "manifest.json").read_text())["format"] == schema.FORMAT
    assert _records(tmp_path / "out") == _records(sample_ledger)
    assert oracle_file(tmp_path / "out", "candidate").is_file()
