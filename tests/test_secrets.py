"""API keys: read from the environment only, never written anywhere.

A real local llama.cpp server that demands a key; a sweep through the CLI whose endpoint arm names
the key's environment variable; then every reader and writer that can run on the ledger (diagnose,
compare, rerun, convert, export in all four formats). Every byte of the ledger, of every output
and of every command's stdout and stderr (the logs) is scanned for the key: none is found. The key
was really needed (the server answers only with it), so the scan is not vacuous.
"""

from __future__ import annotations

import json
import os

import pytest

from tests import fuzz_harness as fh

from .test_endpoint import _skip_reason

pytestmark = pytest.mark.slow
SECRET = "sk-ls-7f3a9c-secret-do-not-write"
KEY_ENV = "LEDGERSCOPE_TEST_SECRET_KEY"


def _arm(name: str, base_url: str | None) -> str:
    text = f'name = "{name}"\ncapacity = 16\noverlap = 0\nphases = [0, 5]\nbudget_tokens = 80\ntop_k = 2\n'
    if base_url:
        text += (
            f'[generator]\nkind = "endpoint"\nbase_url = "{base_url}"\nmodel = "smollm2"\n'
            f'api_key_env = "{KEY_ENV}"\nmax_tokens = 24\n'
        )
    return text


def _cli(*args: str, env: dict):
    """The CLI in this process (the model loaded once per test session); stdout and stderr as bytes."""
    from typer.testing import CliRunner

    from ledgerscope.cli.main import app

    return CliRunner().invoke(app, list(args), env=env)


def test_the_key_is_in_no_ledger_manifest_log_or_export_byte(tmp_path):
    from ledgerscope.pipeline.generation.endpoint import bundled_smollm2_path, start_local_server

    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    env = {KEY_ENV: SECRET}
    os.environ[KEY_ENV] = SECRET  # the server demands the same key
    try:
        server, base_url = (
            start_local_server(  # one thread: llama.cpp spin-waits, which a busy machine punishes
                bundled_smollm2_path(), n_ctx=2048, n_threads=1, api_key_env=KEY_ENV
            )
        )
    finally:
        del os.environ[KEY_ENV]
    logs: dict[str, bytes] = {}
    try:
        corpus = fh.write_corpus_dir(tmp_path)
        fixtures = tmp_path / "fixtures.jsonl"
        fixtures.write_text("".join(json.dumps(r) + "\n" for r in fh.canonical_rows()), encoding="utf-8")
        (tmp_path / "llm.toml").write_text(_arm("llm", base_url), encoding="utf-8")
        (tmp_path / "base.toml").write_text(_arm("base", None), encoding="utf-8")
        ledger, out = tmp_path / "ledger", tmp_path / "out"
        out.mkdir()
        # without the variable the sweep stops before any model loads, and writes nothing
        unset = _cli(
            "sweep",
            "--fixtures",
            str(fixtures),
            "--corpus",
            str(corpus),
            "--arm",
            str(tmp_path / "llm.toml"),
            "--out",
            str(ledger),
            env={KEY_ENV: None},
        )
        assert unset.exit_code == 2 and b"is not set or empty" in unset.stderr_bytes and not ledger.exists()
        commands = {
            "sweep": [
                "sweep",
                "--fixtures",
                str(fixtures),
                "--corpus",
                str(corpus),
                "--arm",
                str(tmp_path / "llm.toml"),
                "--arm",
                str(tmp_path / "base.toml"),
                "--out",
                str(ledger),
            ],
            "diagnose": ["diagnose", str(ledger), "--json"],
            "compare": [
                "compare",
                str(ledger),
                "--candidate",
                "llm",
                "--baseline",
                "base",
                "--json",
                "--n-resamples",
                "200",
            ],
            "rerun": [
                "rerun",
                str(ledger),
                "--arm",
                "llm",
                "--qid",
                "temp-retention",
                "--phase",
                "0",
                "--json",
            ],
            "convert": ["convert", str(ledger), "--to", "jsonl", "--out", str(out / "interchange")],
        }
        for fmt, name in (
            ("jsonl", "x.jsonl"),
            ("fixtures", "x.fx.jsonl"),
            ("label-studio", "x.ls.json"),
            ("trec", "trec"),
        ):
            commands[f"export {fmt}"] = ["export", str(ledger), "--format", fmt, "--out", str(out / name)]
        for label, argv in commands.items():
            result = _cli(*argv, env=env)
            assert result.exit_code in (0, 1), (label, result.output[-2000:])  # rerun: 1 = it differs
            logs[f"{label} stdout"], logs[f"{label} stderr"] = result.stdout_bytes, result.stderr_bytes
    finally:
        server.close()

    from ledgerscope.ledger.read import connect

    rows = connect(ledger).execute("SELECT answer, generator_error FROM records WHERE arm = 'llm'").fetchall()
    assert rows and all(err is None and answer for answer, err in rows)  # the server took the key
    files = [p for root in (ledger, out) for p in root.rglob("*") if p.is_file()]
    assert len(files) > 25 and {"manifest.json", "x.jsonl", "x.fx.jsonl", "x.ls.json"} <= {
        p.name for p in files
    }
    scanned = {str(p): p.read_bytes() for p in files} | logs
    needles = (SECRET.encode(), SECRET.encode("utf-16-le"), SECRET[4:-4].encode())
    found = {where: n for where, data in scanned.items() for n in needles if n in data}
    assert found == {}, found
    assert sum(len(d) for d in scanned.values()) > 100_000  # there were bytes to find it in
    print(
        f"secret scan: {len(files)} files and {len(logs)} command outputs, "
        f"{sum(len(d) for d in scanned.values())} bytes, {len(found)} occurrences"
    )
    manifest = json.loads((ledger / "manifest.json").read_text())
    assert manifest["arms"]["llm"]["components"]["generator"]["api_key_env"] == KEY_ENV


@pytest.mark.parametrize(
    ("generator", "field"),
    [
        ('base_url = "http://user:sk-abc@127.0.0.1:1"', "generator.base_url"),
        ('base_url = "http://127.0.0.1:1"\napi_key_env = "sk-live-abc123"', "generator.api_key_env"),
    ],
)
def test_a_key_in_the_configuration_is_refused(tmp_path, generator, field):
    from ledgerscope.common.errors import InputError
    from ledgerscope.pipeline.arm.config import load_arm

    path = tmp_path / "arm.toml"
    path.write_text(f'[generator]\nkind = "endpoint"\n{generator}\n', encoding="utf-8")
    with pytest.raises(InputError) as exc:
        load_arm(path)
    assert [p.field for p in exc.value.problems] == [field]
