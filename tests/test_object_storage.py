"""Ledgers in a bucket, against a real S3-compatible server on 127.0.0.1 (moto's standalone server).

One server per session; credentials are made up for it and set in the environment only, as a user
would set them. A small sweep (2 arms x 2 phases of the rule-exception sample) is written to
``s3://`` by the CLI, read back by diagnose, compare, export and the TUI's data layer, interrupted
mid-sweep and resumed; its tables equal a local-disk sweep's, and the secret key is in no object.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ledgerscope.cli.main import app
from ledgerscope.ledger import storage
from ledgerscope.ledger.digest import table_digests
from tests.sweep_data import write_inputs

moto_server = pytest.importorskip("moto.server")
pytest.importorskip("s3fs")

SECRET = "ls-test-secret-3f9a61c0d2"
ARMS = {
    "stride16": "capacity = 16\noverlap = 0\nphases = [0, 5]\n",
    "stride8": "capacity = 12\noverlap = 4\nphases = [0, 3]\n",
}
runner = CliRunner()


@pytest.fixture(scope="session")
def s3(tmp_path_factory):
    """A moto S3 server on 127.0.0.1 (a free port), its endpoint and credentials in the environment."""
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    env = {
        "AWS_ACCESS_KEY_ID": "ls-test-key",
        "AWS_SECRET_ACCESS_KEY": SECRET,
        "AWS_ENDPOINT_URL": f"http://{host}:{port}",
        "AWS_DEFAULT_REGION": "us-east-1",
        "LEDGERSCOPE_REMOTE_CACHE": str(tmp_path_factory.mktemp("remote-cache")),
    }
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        fs = storage.parse("s3://ledgers").filesystem()
        fs.mkdir("ledgers")
        yield fs
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        server.stop()


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("s3-inputs")
    paths = write_inputs(root)
    for name, text in ARMS.items():
        toml = f'name = "{name}"\n{text}budget_tokens = 40\ntop_k = 1\n'
        (root / f"{name}.toml").write_text(toml, encoding="utf-8")
    return paths


def sweep_args(inputs: dict[str, Path], out: str) -> list[str]:
    root = inputs["fixtures"].parent
    return [
        "sweep", "--fixtures", str(inputs["fixtures"]), "--corpus", str(inputs["corpus"]),
        "--arm", str(root / "stride16.toml"), "--arm", str(root / "stride8.toml"), "--out", out, "--quiet",
    ]  # fmt: skip


@pytest.fixture(scope="module")
def local_ledger(inputs, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("s3-local") / "ledger"
    result = runner.invoke(app, sweep_args(inputs, str(out)))
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture(scope="module")
def remote(s3, inputs) -> str:
    url = "s3://ledgers/runs/first"
    result = runner.invoke(app, sweep_args(inputs, url))
    assert result.exit_code == 0, result.output
    return url


def test_a_sweep_to_a_bucket_records_what_a_local_sweep_records(s3, remote, local_ledger):
    names = {p[len("ledgers/runs/first/") :] for p in s3.find("ledgers/runs/first")}
    assert {"manifest.json", "fixtures.jsonl", "sources/part-0.parquet", "_SWEEP_DONE.json"} <= names
    assert "records/arm=stride16/phase=5/part-0.parquet" in names
    assert "_commits/arm=stride8/phase=3.json" in names
    assert not [n for n in names if n.startswith(".") or "/." in n]  # no staging, no binding file
    assert table_digests(storage.fetch(storage.parse(remote))) == table_digests(local_ledger)


TIMES = ("seconds", "latency", "written_at", "created", "started", "finished")


def _timeless(value):
    """A JSON value without what differs between two runs of one sweep: wall-clock times."""
    if isinstance(value, dict):
        return {k: _timeless(v) for k, v in value.items() if not any(t in k for t in TIMES)}
    if isinstance(value, list):
        return [_timeless(v) for v in value]
    return value


def test_commands_read_from_the_bucket(s3, remote, local_ledger, tmp_path, monkeypatch):
    """Each command's output from the bucket (a local copy; for diagnose also read directly by DuckDB,
    ``LEDGERSCOPE_REMOTE_READ=direct``) equals its output from the local ledger."""
    compare = ["compare", "--candidate", "stride16", "--baseline", "stride8", "--json"]
    for args, modes in ((["diagnose", "--json"], ("copy", "direct")), (compare, ("copy",))):
        outputs = []
        for where, mode in [(remote, m) for m in modes] + [(str(local_ledger), "copy")]:
            monkeypatch.setenv("LEDGERSCOPE_REMOTE_READ", mode)
            result = runner.invoke(app, [args[0], where, *args[1:]])
            assert result.exit_code == 0, result.output
            outputs.append([_timeless(json.loads(line)) for line in result.output.splitlines()])
        assert outputs[0] and all(out == outputs[0] for out in outputs)
    out = tmp_path / "export.jsonl"
    result = runner.invoke(app, ["export", remote, "--format", "jsonl", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert out.stat().st_size > 0


def test_the_tui_data_layer_opens_a_bucket(s3, remote):
    from ledgerscope.tui.data import LedgerSession

    local = storage.fetch(storage.parse(remote))
    session = LedgerSession(local, candidate="stride16", baseline_arm="stride8")
    session.open()
    assert set(session.arms) == {"candidate", "baseline"} and session.phases


def test_a_fetch_reuses_what_it_has_and_drops_what_is_uncommitted(s3, remote):
    local = storage.fetch(storage.parse(remote))
    partition_files = "*/arm=*/phase=*/*.parquet"  # the files a commit marker records
    before = {p: p.stat().st_mtime_ns for p in local.glob(partition_files)}
    marker = "ledgers/runs/first/_commits/arm=stride8/phase=3.json"
    saved = s3.cat_file(marker)
    s3.rm_file(marker)  # as if that partition had not committed yet
    try:
        again = storage.fetch(storage.parse(remote))
        assert again == local and not (local / "records" / "arm=stride8" / "phase=3").exists()
        kept = {p: p.stat().st_mtime_ns for p in local.glob(partition_files)}
        assert kept and all(before[p] == t for p, t in kept.items())  # not downloaded again
    finally:
        s3.pipe_file(marker, saved)


@pytest.mark.parametrize(
    "url, reason",
    [
        ("s3:///run", "bucket"),
        ("ftp://host/run", "unsupported URL scheme"),
        ("s3://key:secret@ledgers/run", "credentials"),
        ("s3://no-such-bucket-here/run", "no such bucket"),
    ],
)
def test_a_malformed_or_unusable_url_is_an_input_error(s3, inputs, tmp_path, monkeypatch, url, reason):
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, sweep_args(inputs, url))
    assert result.exit_code == 2, result.output
    assert reason in result.output and "Traceback" not in result.output
    assert list(tmp_path.iterdir()) == []  # no local folder named after the URL


@pytest.mark.slow
def test_a_sweep_killed_mid_partition_resumes_from_the_bucket(s3, inputs, local_ledger):
    url = "s3://ledgers/runs/killed"
    env = {**os.environ, "LEDGERSCOPE_PARTITION_PAUSE_S": "3"}
    script = "import sys; from ledgerscope.cli.main import main; sys.argv[0] = 'ledgerscope'; main()"
    proc = subprocess.Popen([sys.executable, "-c", script, *sweep_args(inputs, url)], env=env)
    deadline = time.monotonic() + 240
    while not s3.glob("ledgers/runs/killed/_commits/arm=*/phase=*.json"):
        assert proc.poll() is None and time.monotonic() < deadline, "the sweep ended or stalled"
        time.sleep(0.2)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    committed = s3.glob("ledgers/runs/killed/_commits/arm=*/phase=*.json")
    assert 1 <= len(committed) < 4
    result = runner.invoke(app, sweep_args(inputs, url))
    assert result.exit_code == 0, result.output
    assert table_digests(storage.fetch(storage.parse(url))) == table_digests(local_ledger)


@pytest.mark.slow
def test_ray_workers_write_their_partitions_to_the_bucket(s3, ray_cluster, inputs, local_ledger):
    """Workers get the bucket's URL, not a path on the driver's disk: each writes its partition to a
    directory of its own and uploads it (files, then marker). ``s3`` comes first: the cluster's
    processes keep the environment (endpoint, credentials) they started with."""
    from ledgerscope.inputs.fixtures import load_fixtures
    from ledgerscope.inputs.sources import load_corpus
    from ledgerscope.pipeline.arm.config import load_arm
    from ledgerscope.pipeline.run.ray_executor import RayExecutor
    from ledgerscope.pipeline.run.sweep import sweep

    loc = storage.parse("s3://ledgers/runs/ray")
    fixtures, corpus = load_fixtures(inputs["fixtures"], load_corpus(inputs["corpus"]))
    arms = [load_arm(inputs["fixtures"].parent / f"{name}.toml") for name in ARMS]
    out = storage.bind(loc)
    result = sweep(fixtures, corpus, arms, out, executor=RayExecutor())
    storage.publish_all(out, loc)
    assert len(result.written) == 4
    assert not list(out.glob("records/*/*/*.parquet"))  # the driver's directory holds no partition
    assert table_digests(storage.fetch(loc)) == table_digests(local_ledger)


def _table_counts(ledger: Path, con=None) -> dict[str, int]:
    from ledgerscope.ledger.read import connect
    from ledgerscope.ledger.schema import TABLE_NAMES

    con = con or connect(ledger)
    return {t: con.execute(f"SELECT count(*) FROM {t}").fetchall()[0][0] for t in (*TABLE_NAMES, "oracle")}


def test_duckdb_reads_the_tables_from_the_bucket_through_fsspec(s3, remote, local_ledger):
    """Direct reading: only the small files are copied; the views read ``s3://`` through the registered
    file system, every file's digest checked once per object version."""
    from ledgerscope.common.errors import InputError
    from ledgerscope.ledger.read import connect
    from ledgerscope.ledger.remote_read import VERIFIED

    local = storage.fetch(storage.parse(remote), direct=True)
    assert not list(local.glob("*/arm=*/phase=*/*.parquet"))  # no partition table copied
    con = connect(local)
    assert _table_counts(local, con) == _table_counts(local_ledger)
    views = con.execute("SELECT view_name, sql FROM duckdb_views()").fetchall()
    sql = dict(views)["records"]
    assert "'s3://ledgers/runs/first/records/arm=stride8/phase=3/part-0.parquet'" in sql
    verified = json.loads((local.parent / VERIFIED).read_text())
    assert len(verified) >= 4 * 4 and SECRET not in json.dumps(verified)
    key = "ledgers/runs/first/records/arm=stride8/phase=3/part-0.parquet"
    saved = s3.cat_file(key)
    s3.pipe_file(key, saved[:-9] + bytes(9))  # same size, other bytes (a new ETag): hashed again
    try:
        with pytest.raises(InputError, match="corrupted"):
            connect(local)
    finally:
        s3.pipe_file(key, saved)


def test_an_unknown_remote_read_mode_is_an_input_error(s3, remote, monkeypatch):
    monkeypatch.setenv("LEDGERSCOPE_REMOTE_READ", "stream")
    result = runner.invoke(app, ["diagnose", remote, "--json"])
    assert result.exit_code == 2 and "expected one of direct, copy" in result.output


def test_report_reads_the_bucket_and_writes_to_the_bucket(s3, remote, tmp_path, monkeypatch):
    """Read from the bucket, the HTML uploaded once written (a local --out is the same command with
    no upload: the report tests cover it)."""
    monkeypatch.chdir(tmp_path)
    args = ["report", remote, "--candidate", "stride16", "--baseline", "stride8", "--n-resamples", "50"]
    result = runner.invoke(app, [*args, "--out", "s3://ledgers/reports/run1.html"])
    assert result.exit_code == 0, result.output
    page = s3.cat_file("ledgers/reports/run1.html")
    assert page.lstrip().lower().startswith(b"<!doctype html") and b"stride16" in page
    assert list(tmp_path.iterdir()) == []  # no local folder named after the URL


def test_open_through_the_cli_loads_the_ledger_from_the_bucket(s3, remote, monkeypatch):
    """``ledgerscope open s3://...`` as the CLI runs it, the app driven headless (Textual's run_test)
    until its first screen is filled and the ledger's checks have passed."""
    import asyncio

    from ledgerscope.tui.app import LedgerscopeApp

    seen: dict = {}

    def run_headless(self, *args, **kwargs):
        async def drive():
            async with self.run_test(size=(120, 40)) as pilot:
                deadline = time.monotonic() + 60
                while self.main.timings["first_list"] is None or self.main.trust == "checking":
                    assert time.monotonic() < deadline, "the first screen or the checks never came"
                    await pilot.pause(0.05)
                seen["trust"] = self.main.trust
                seen["questions"] = self.main.session.total_questions("candidate")
                seen["ledger"] = self.main.session.arms["candidate"].ledger

        asyncio.run(drive())

    monkeypatch.setattr(LedgerscopeApp, "run", run_headless)
    result = runner.invoke(app, ["open", remote, "--candidate", "stride16", "--baseline", "stride8"])
    assert result.exit_code == 0, result.output
    assert seen["trust"] == "verified" and seen["questions"] > 0
    assert Path(os.environ["LEDGERSCOPE_REMOTE_CACHE"]) in Path(seen["ledger"]).parents


@pytest.mark.slow
def test_serve_serves_a_ledger_in_a_bucket(s3, remote, tmp_path):
    import urllib.request

    from tests.served import serving

    log = tmp_path / "serve.log"
    with serving(remote, log) as (_, port), urllib.request.urlopen(f"http://127.0.0.1:{port}/") as res:
        assert res.status == 200 and b"ledgerscope" in res.read()
    assert SECRET not in (tmp_path / "serve.log").read_text(errors="replace")


@pytest.fixture(scope="module")
def traces(tmp_path_factory) -> Path:
    pytest.importorskip("langchain_text_splitters")
    from tests import ingest_pipeline as pipe

    root = tmp_path_factory.mktemp("s3-traces")
    for config in pipe.CONFIGS:
        pipe.run(config, root / "traces.jsonl", root / "chunks.jsonl")
    return root


def test_ingest_writes_a_new_ledger_to_the_bucket(s3, traces):
    from tests import ingest_pipeline as pipe

    def ingest_args(out: str) -> list[str]:
        return [
            "ingest", str(traces / "traces.jsonl"), "--chunks", str(traces / "chunks.jsonl"),
            "--fixtures", str(pipe.FIXTURES), "--corpus", str(pipe.CORPUS), "--out", out,
        ]  # fmt: skip

    url = "s3://ledgers/ingested/run1"
    result = runner.invoke(app, ingest_args(url))
    assert result.exit_code == 0, result.output
    assert set(_table_counts(storage.fetch(storage.parse(url))).values()) - {0}  # committed, readable
    again = runner.invoke(app, ingest_args(url))
    assert again.exit_code == 2 and "already holds a ledger" in again.output


def test_no_object_holds_the_secret_key(s3, remote, inputs):
    """Last in the module: every object and cache file the tests above wrote (sweeps, ingest, report,
    the direct reader's verified.json) is searched."""
    objects = s3.find("ledgers")
    assert objects
    leaked = [o for o in objects if SECRET.encode() in s3.cat_file(o)]
    assert not leaked
    cache = Path(os.environ["LEDGERSCOPE_REMOTE_CACHE"])
    assert not [p for p in cache.rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()]
