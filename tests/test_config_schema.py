"""The typed arm schema: one definition renders `config default` and docs/config.md, keeps every
recorded digest, and names each problem with its key's line in the arm file."""

from __future__ import annotations

import importlib.util
import json
import re
import tomllib
from pathlib import Path

import pytest

from ledgerscope.common.errors import InputError
from ledgerscope.common.toml_lines import key_lines, line_of
from ledgerscope.pipeline.arm import schema
from ledgerscope.pipeline.arm.config import DEFAULT_TOML, ArmConfig, arm_from_dict, load_arm
from ledgerscope.pipeline.arm.schema_text import markdown_table
from ledgerscope.pipeline.arm.validate import schema_problems

ROOT = Path(__file__).resolve().parents[1]


def _paths(model=schema.Arm, prefix=()):
    for name, info in model.model_fields.items():
        yield (*prefix, name), info
        sub = schema.submodel(info)
        if sub is not None:
            yield from _paths(sub, (*prefix, name))


# --- one definition ------------------------------------------------------------------------------


def test_the_committed_key_table_is_the_one_the_schema_renders():
    spec = importlib.util.spec_from_file_location("config_docs", ROOT / "scripts" / "config_docs.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    text = (ROOT / "docs" / "config.md").read_text(encoding="utf-8")
    assert script.render(text, markdown_table()) == text, "stale: run python scripts/config_docs.py"
    for path, info in _paths():
        table = schema.submodel(info) is not None and not schema.meta(info).get("inline")
        assert (f"`[{'.'.join(path)}]`" if table else f"`{'.'.join(path)}`") in text, path


def test_every_key_has_a_doc_and_a_default_of_its_type():
    for path, info in _paths():
        assert info.description, path
        extra = schema.meta(info)
        if schema.submodel(info) is None and info.default is not None and path != ("phases",):
            problems = schema_problems(_nest(path, info.default), "x")
            assert problems == ([], []), (path, problems)
        if "example" in extra:
            assert schema_problems(_nest(path, extra["example"]), "x") == ([], []), path


def _nest(path: tuple[str, ...], value) -> dict:
    for name in reversed(path):
        value = {name: value}
    return value


def test_the_default_arm_is_the_schema_defaults_and_an_empty_arm():
    assert tomllib.loads(DEFAULT_TOML) == schema.defaults() == arm_from_dict({}).to_dict()
    assert ArmConfig() == arm_from_dict({})


def test_each_optional_key_in_config_default_uncomments_to_its_example(tmp_path):
    """Every optional key is a comment inside its own table; uncommented alone, the file still loads
    and the arm then holds the key (the retriever slots are whole commented tables, left out here)."""
    lines = DEFAULT_TOML.splitlines()
    table, checked = "", 0
    for number, line in enumerate(lines):
        header = re.match(r"\[([\w.]+)\]$", line)
        table = header.group(1) if header else table
        match = re.match(r"# (\w+) = ", line)
        if not match or table.startswith("retrieval."):
            continue
        path = (*table.split("."), match.group(1)) if table else (match.group(1),)
        info = schema.field_info(path)
        assert info is not None and schema.meta(info).get("optional"), path
        body = "\n".join([*lines[:number], line[2:], *lines[number + 1 :]])
        cfg = load_arm(_write(tmp_path, body))
        section = cfg.to_dict()
        for name in path[:-1]:
            section = section[name]
        example = schema.meta(info).get("example", info.default)
        assert section[path[-1]] == example, path
        checked += 1
    optional = [
        p
        for p, i in _paths()
        if schema.meta(i).get("optional") and p[:2] not in (("retrieval", "lexical"), ("retrieval", "ann"))
    ]
    assert checked == len(optional)


def _write(tmp_path: Path, body: str, name: str = "arm.toml") -> Path:
    path = tmp_path / name
    path.write_text(body, encoding="utf-8")
    return path


# --- digests ---------------------------------------------------------------------------------------


def test_digests_recorded_before_the_schema_are_unchanged():
    """Arms (every key singly at several values, random mixes, the docs' arms) with the digests the
    hand-written validation computed: a ledger recorded then still resumes and reruns."""
    cases = json.loads((ROOT / "tests" / "data" / "arm_config_digests.json").read_text(encoding="utf-8"))
    assert len(cases) > 150
    # recorded when the reader's defaults were 0.3 / 0.06 (issue 26 changed them): an arm that leaves
    # them out meant those then; a ledger stores them, so its digest is unchanged (test_samples)
    old_reader = {"abstain_threshold": 0.3, "abstain_margin": 0.06}
    for case in cases:
        arm = {**case["arm"], "generator": {**old_reader, **(case["arm"].get("generator") or {})}}
        assert arm_from_dict(arm, "x").digest() == case["digest"], case["arm"]


def test_phase_scope_counts_only_when_it_is_not_the_default(tmp_path):
    plain = arm_from_dict({})
    assert plain.phase_scope == "all"
    assert arm_from_dict({"phase_scope": "all"}).digest() == plain.digest()
    assert arm_from_dict({"phase_scope": "evidence"}).digest() != plain.digest()
    with pytest.raises(InputError) as exc:
        load_arm(_write(tmp_path, 'name = "x"\nphase_scope = "gold"\n'))
    assert str(exc.value) == f"{tmp_path / 'arm.toml'}:2: phase_scope: must be one of all, evidence"


def test_the_device_is_never_part_of_the_digest():
    assert arm_from_dict({"embedding": {"device": "auto"}}).digest() == arm_from_dict({}).digest()


def test_setting_reads_the_arm_else_the_schema_default():
    cfg = arm_from_dict({"embedding": {"timeout": 5}})
    assert cfg.setting("embedding.timeout") == 5
    assert cfg.setting("embedding.retries") == 2 and cfg.setting("generator.retries") == 1
    assert cfg.setting("retrieval.hnsw.M") == 16 and cfg.setting("capacity") == 96
    assert arm_from_dict({"capacity": 32}).setting("capacity") == 32
    with pytest.raises(KeyError):
        cfg.setting("embedding.nope")


# --- problems with their lines ---------------------------------------------------------------------


def test_problems_name_the_line_of_the_key_or_of_its_table(tmp_path):
    path = _write(
        tmp_path,
        """\
name = "x"
top_k = "4"

[retrieval.hnsw]
M = 1
[fusion]
weights = { bm25 = 1.0, lexical = 2.0 }
[rerank]
kind = "cross-encoder"
[embedding]
device = "gpu"
generator.max_tokens = 0
""",
    )
    with pytest.raises(InputError) as exc:
        load_arm(path)
    got = {p.field: (p.line, p.reason) for p in exc.value.problems}
    assert got == {
        "top_k": (2, "must be a non-negative integer"),
        "retrieval.hnsw.M": (5, "must be at least 2"),
        "fusion.weights.lexical": (7, "unknown key"),
        "rerank.model": (8, "a cross-encoder needs a model name or path"),  # not written: its table
        "embedding.device": (11, "must be one of cpu, auto, cuda, mps"),
        "embedding.generator": (12, "unknown key"),  # a dotted key under [embedding]
    }
    assert f"{path}:5: retrieval.hnsw.M: must be at least 2" in str(exc.value).splitlines()


def test_problems_of_an_arm_read_from_a_manifest_have_no_line():
    with pytest.raises(InputError) as exc:
        arm_from_dict({"top_k": 0}, "LEDGER/manifest.json")
    assert str(exc.value) == "LEDGER/manifest.json: top_k: must be at least 1"


def test_the_key_scanner_skips_strings_arrays_and_comments():
    text = '''# [not.a.table]
name = "x"  # c = 1
s = """multi
a = 1 \\"""
"""
lit = \'\'\'a
b = 2\'\'\'
arr = [
  1, # c ]
  "x]",
]
[retrieval.hnsw]
M = 3
"quoted.key" = 1
a.b = { d = 1, e = { f = 2 } }
[ fusion ]
esc = "a\\"b"
after = 1
'''
    tomllib.loads(text)  # the scanner is only ever given TOML tomllib accepted
    assert key_lines(text) == {
        "name": 2,
        "s": 3,
        "lit": 6,
        "arr": 8,
        "retrieval.hnsw": 12,
        "retrieval.hnsw.M": 13,
        "retrieval.hnsw.quoted.key": 14,
        "retrieval.hnsw.a": 15,
        "retrieval.hnsw.a.b": 15,
        "retrieval.hnsw.a.b.d": 15,
        "retrieval.hnsw.a.b.e": 15,
        "retrieval.hnsw.a.b.e.f": 15,
        "fusion": 16,
        "fusion.esc": 17,
        "fusion.after": 18,
    }
    lines = key_lines(text)
    assert line_of(lines, "retrieval.hnsw.ef_search") == 12
    assert line_of(lines, "rerank.model") is None


def test_the_readme_shows_the_schema_defaults():
    """README's "Arm configuration" block is documentation, not a definition: it shows the defaults."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("### Arm configuration") :]
    block = tomllib.loads(re.search(r"```\n(.*?)```", section, re.S).group(1))
    assert block and all(value == schema.default_of(name) for name, value in block.items()), block


def test_a_problem_found_by_the_sweep_names_the_line_of_the_arms_key(tmp_path, monkeypatch):
    """After the arm is read (here: the API key's variable is unset) the key's line is still given."""
    from typer.testing import CliRunner

    from ledgerscope.cli.main import app

    monkeypatch.delenv("LEDGERSCOPE_TEST_NO_SUCH_KEY", raising=False)
    arm = _write(
        tmp_path,
        'name = "remote"\n\n[embedding]\nkind = "endpoint"\nbase_url = "http://127.0.0.1:9"\n'
        'api_key_env = "LEDGERSCOPE_TEST_NO_SUCH_KEY"\n',
    )
    fixtures = ROOT / "tests" / "data" / "seed000_fixture.json"
    result = CliRunner().invoke(
        app,
        [
            "sweep",
            "--fixtures",
            str(fixtures),
            "--arm",
            str(arm),
            "--out",
            str(tmp_path / "ledger"),
            "--quiet",
        ],
    )
    assert result.exit_code == 2, result.output
    assert f"{arm}:6: embedding.api_key_env: arm 'remote': environment variable" in result.output
    assert not (tmp_path / "ledger").exists()
