"""The re-annotation round trip through a real Label Studio server.

Label Studio (the PyPI ``label-studio`` package) runs from its own venv, ``.venv-labelstudio``, which
``./scripts/test`` builds once (scripts/_venv.sh, ``ensure_labelstudio``) and reuses: it pins many
packages of its own and never enters the project's venv. The first run also keeps a migrated data
directory with two annotators (alice, bob, legacy API tokens) inside that venv, so later sessions
start the server from a copy in seconds. The server binds 127.0.0.1 on a free port with a temporary
data directory and is stopped after the module.

Through its HTTP API, as the annotation UI does: a project with the exported labeling config, the
exported tasks imported (gold as predictions), then each annotator's submission starting from the
prediction (alice moves a span in a document with emoji, bob adds a span in another document to the
set, and they disagree on a third question). The exports (the API's and the UI's snapshot, both
naming annotators by id, with the users list) come back through ``ledgerscope import label-studio``,
and the new fixture version, its diff and the rejudged ledger are checked.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ledgerscope.cli.main import app
from ledgerscope.inputs.fixtures import read_fixtures

from . import reannotation_data as rd
from .cdp import stop_session
from .served import free_port

#: the first run migrates Label Studio's database once (minutes on a busy machine); later runs copy it
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

REPO = Path(__file__).resolve().parents[1]
VENV = REPO / ".venv-labelstudio"
LABEL_STUDIO = VENV / "bin" / "label-studio"
TEMPLATE = VENV / "ledgerscope-template"
TOKENS = {rd.ALICE: "alice-token-ledgerscope-0001", rd.BOB: "bob-token-ledgerscope-0002"}
runner = CliRunner()


def _env(data_dir: Path) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "TMPDIR")}
    return {
        **keep,
        "HOME": str(data_dir),
        "LABEL_STUDIO_BASE_DATA_DIR": str(data_dir),
        "COLLECT_ANALYTICS": "false",
        "LABEL_STUDIO_DISABLE_SIGNUP_WITHOUT_LINK": "false",
    }


def _template() -> Path:
    """A migrated data directory holding both annotators, built once into the Label Studio venv."""
    if (TEMPLATE / ".ready").is_file():
        return TEMPLATE
    staging = VENV / "ledgerscope-template.tmp"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    for who in (rd.ALICE, rd.BOB):  # alice first: her organisation enables the legacy tokens
        subprocess.run(
            [
                str(LABEL_STUDIO),
                "init",
                "--data-dir",
                str(staging),
                "--username",
                who,
                "--password",
                f"{who}-password",
                "--user-token",
                TOKENS[who],
                "--enable-legacy-api-token",
                "--quiet",
            ],
            env=_env(staging),
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
            timeout=900,
        )
    (staging / ".ready").write_text("alice, bob\n")
    shutil.rmtree(TEMPLATE, ignore_errors=True)
    staging.rename(TEMPLATE)
    return TEMPLATE


@pytest.fixture(scope="module")
def label_studio(tmp_path_factory):
    """(base url) of a Label Studio server on loopback, from a copy of the template, stopped after."""
    if not (LABEL_STUDIO.is_file() and (VENV / ".installed").is_file()):  # the stamp: a finished build
        pytest.skip(
            ".venv-labelstudio could not be built (or was never built): ./scripts/test builds it "
            "with scripts/_venv.sh ensure_labelstudio; without it the real Label Studio round trip "
            "is not tested"
        )
    data = tmp_path_factory.mktemp("label-studio") / "data"
    shutil.copytree(_template(), data)
    port = free_port()
    log = data.parent / "server.log"
    with log.open("wb") as out:
        server = subprocess.Popen(
            [
                str(LABEL_STUDIO),
                "start",
                "--data-dir",
                str(data),
                "--internal-host",
                "127.0.0.1",
                "--port",
                str(port),
                "--no-browser",
                "--enable-legacy-api-token",
            ],
            env=_env(data),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300
        while True:
            try:
                with urllib.request.urlopen(base + "/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            alive = server.poll() is None and time.monotonic() < deadline
            assert alive, log.read_text(errors="replace")[-3000:]
            time.sleep(1)
        yield base
    finally:
        stop_session(server)


def _call(base: str, method: str, path: str, who: str, body=None, raw: bool = False):
    req = urllib.request.Request(
        base + path,
        method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": f"Token {TOKENS[who]}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=120) as r:
        data = r.read()
    return data if raw else json.loads(data or b"null")


def _key(data: dict) -> tuple:
    """A task by its question and documents (Label Studio numbers tasks its own way)."""
    return data["qid"], tuple(x["doc_id"] for x in data["documents"])


def test_round_trip_through_label_studio(label_studio, sample_ledger, tmp_path):
    base = label_studio
    tasks, config = rd.export_tasks(sample_ledger, tmp_path / "tasks.json")
    project = _call(
        base,
        "POST",
        "/api/projects/",
        rd.ALICE,
        {"title": "ledgerscope re-annotation", "label_config": config},
    )["id"]
    imported = _call(base, "POST", f"/api/projects/{project}/import", rd.ALICE, tasks)
    assert imported["task_count"] == len(tasks) and imported["prediction_count"] == len(tasks)
    listed = _call(base, "GET", f"/api/tasks/?project={project}&page_size=1000&fields=all", rd.ALICE)["tasks"]
    by_key = {_key(t["data"]): t for t in listed}
    for i, who, result in rd.scenario(tasks):  # as the UI submits: the prediction's regions, edited
        task = by_key[_key(tasks[i]["data"])]
        prediction = task["predictions"][0]
        _call(
            base,
            "POST",
            f"/api/tasks/{task['id']}/annotations/?project={project}",
            who,
            {
                "result": result,
                "lead_time": 12.5,
                "project": project,
                "parent_prediction": prediction["id"] if isinstance(prediction, dict) else prediction,
            },
        )
    export = tmp_path / "export.json"
    path = f"/api/projects/{project}/export?exportType=JSON"
    export.write_bytes(_call(base, "GET", path, rd.ALICE, raw=True))
    users = tmp_path / "users.json"
    users.write_text(json.dumps(_call(base, "GET", "/api/users/", rd.ALICE)))
    old = sample_ledger / "fixtures.jsonl"
    v2, v2_bob = tmp_path / "v2.jsonl", tmp_path / "v2-bob.jsonl"
    for out, extra in ((v2, []), (v2_bob, ["--adjudicator", rd.BOB])):
        result = runner.invoke(
            app,
            [
                "import",
                "label-studio",
                str(export),
                "--fixtures",
                str(old),
                "--users",
                str(users),
                "--out",
                str(out),
                *extra,
            ],
        )
        assert result.exit_code == 0, result.output
    # the UI's Export (a snapshot, every task) reads the same as the API's export
    exports = f"/api/projects/{project}/exports/"
    snapshot = _call(base, "POST", exports, rd.ALICE, {})["id"]
    deadline = time.monotonic() + 120
    while _call(base, "GET", f"{exports}{snapshot}", rd.ALICE)["status"] != "completed":
        assert time.monotonic() < deadline, "the snapshot export did not complete"
        time.sleep(1)
    ui_export = tmp_path / "ui-export.json"
    download = f"{exports}{snapshot}/download?exportType=JSON"
    ui_export.write_bytes(_call(base, "GET", download, rd.ALICE, raw=True))
    from_ui = tmp_path / "v2-ui.jsonl"
    result = runner.invoke(
        app,
        [
            "import",
            "label-studio",
            str(ui_export),
            "--fixtures",
            str(old),
            "--users",
            str(users),
            "--out",
            str(from_ui),
        ],
    )
    assert result.exit_code == 0, result.output
    assert from_ui.read_bytes() == v2.read_bytes()
    _check_versions(tasks, old, v2, v2_bob, project)
    _check_diff_and_rejudge(sample_ledger, old, v2_bob, tmp_path)


def _fixtures(path: Path) -> dict:
    return {f.qid: f for f in read_fixtures(path)[0].fixtures}


def _check_versions(tasks: list[dict], old: Path, v2: Path, v2_bob: Path, project: int) -> None:
    (joint,) = [t for t in tasks if t["data"]["qid"] == "re-team-monthly-legacy"]
    text = joint["data"][f"doc{rd.slot_of(joint, 'changelog.md')}"]
    before, new, decided = _fixtures(old), _fixtures(v2), _fixtures(v2_bob)
    exc = before["re-team-monthly-legacy"].span("exc")
    moved = new["re-team-monthly-legacy"].span("exc")
    assert (moved.start, moved.end) == (exc.start, rd.moved_end(text, exc.start, exc.end))  # code points
    assert moved.quote == text[moved.start : moved.end]
    assert len(text[: moved.start].encode("utf-16-le")) // 2 != moved.start  # emoji before it
    prov = new["re-team-monthly-legacy"].annotations["label_studio"]["spans"]["exc"]
    assert (prov["annotator"], prov["project"], prov["change"]) == (rd.ALICE, project, "moved")
    upload = new["re-free-upload"]
    assert upload.sufficient_sets == (("rule", "exc", "ls1"),)
    assert {upload.span(s).doc_id for s in upload.sufficient_sets[0]} == {
        "plans/plans-and-limits.md",
        rd.JOINT_DOC,
    }
    assert upload.annotations["label_studio"]["spans"]["ls1"]["annotator"] == rd.BOB
    assert new["ns-audit-csv"].adjudication["state"] == "disputed"
    assert set(new["ns-audit-csv"].adjudication["versions"][0]["by_annotator"]) == {rd.ALICE, rd.BOB}
    assert decided["ns-audit-csv"].adjudication["state"] == "adjudicated"
    assert decided["ns-audit-csv"].span("csv").dependency == "exception"


def _check_diff_and_rejudge(ledger: Path, old: Path, v2_bob: Path, tmp_path: Path) -> None:
    diff = runner.invoke(app, ["fixtures", "diff", str(old), str(v2_bob), "--json"])
    rows = {r["qid"]: r for r in map(json.loads, diff.output.splitlines())}
    assert set(rows) == set(rd.QIDS)
    assert rows["re-team-monthly-legacy"]["moved"][0]["id"] == "exc"
    assert rows["re-free-upload"]["added"][0]["doc_id"] == rd.JOINT_DOC
    out = tmp_path / "rejudged"
    result = runner.invoke(
        app, ["rejudge", str(ledger), "--fixtures", str(v2_bob), "--out", str(out), "--no-oracle", "--json"]
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["changed_questions"] == sorted(rd.QIDS)
