"""Arm configuration for endpoint stages: every mistake named by file and key before anything runs;
keys added for them are optional, so an arm that does not use them keeps its digest."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from ledgerscope.common.errors import InputError
from ledgerscope.pipeline.arm.config import DEFAULT_TOML, arm_from_dict, load_arm

SAMPLE = Path(__file__).resolve().parents[1] / "sample_ledgers" / "quillstack" / "ledger"


def _problems(data: dict) -> dict[str, str]:
    with pytest.raises(InputError) as err:
        arm_from_dict(data, "arm.toml")
    assert all(p.file == "arm.toml" for p in err.value.problems)
    return {p.field: p.reason for p in err.value.problems}


@pytest.mark.parametrize(
    ("data", "field", "reason"),
    [
        (
            {"embedding": {"kind": "openai"}},
            "embedding.kind",
            "must be one of sentence-transformers, endpoint",
        ),
        ({"embedding": {"kind": "endpoint"}}, "embedding.base_url", "an endpoint embedding needs base_url"),
        (
            {"embedding": {"kind": "endpoint", "base_url": "http://h:1"}, "rerank": {"kind": "maxsim"}},
            "rerank.kind",
            "maxsim needs the embedding model's token vectors",
        ),
        ({"rerank": {"kind": "endpoint"}}, "rerank.base_url", "an endpoint rerank needs base_url"),
        (
            {"rerank": {"kind": "endpoint", "base_url": "ftp://h"}},
            "rerank.base_url",
            "must start with http://",
        ),
        (
            {"embedding": {"kind": "endpoint", "base_url": "http://user:sk-1@h:1"}},
            "embedding.base_url",
            "must not carry credentials",
        ),
        (
            {"embedding": {"kind": "endpoint", "base_url": "http://h:1", "api_key_env": "sk-live-123"}},
            "embedding.api_key_env",
            "never the key itself",
        ),
        (
            {"rerank": {"kind": "endpoint", "base_url": "http://h:1", "path": "v1/rerank"}},
            "rerank.path",
            "must start with '/'",
        ),
        ({"embedding": {"timeout": 0}}, "embedding.timeout", "must be at least 0.001"),
        ({"embedding": {"retries": -1}}, "embedding.retries", "must be at least 0"),
        ({"embedding": {"dimensions": "384"}}, "embedding.dimensions", "must be an integer, not a string"),
        ({"embedding": {"tokenizer": 5}}, "embedding.tokenizer", "must be a string"),
        ({"embedding": {"endpoint": "x"}}, "embedding.endpoint", "unknown key"),
        (
            {"rerank": {"kind": "reranker-9000"}},
            "rerank.kind",
            "must be one of maxsim, cross-encoder, none, endpoint",
        ),
    ],
)
def test_endpoint_mistakes_are_named_by_key(data, field, reason):
    problems = _problems(data)
    assert field in problems and reason in problems[field], problems


def test_endpoint_embeddings_declare_their_reranker():
    remote = {"kind": "endpoint", "base_url": "http://127.0.0.1:9"}
    assert arm_from_dict({"embedding": remote}).rerank["kind"] == "none"
    assert (
        arm_from_dict({"embedding": remote, "rerank": {"kind": "endpoint", "base_url": "http://h:1"}}).rerank[
            "kind"
        ]
        == "endpoint"
    )
    assert arm_from_dict({}).rerank["kind"] == "maxsim"  # in-process embeddings keep the default


def test_optional_keys_leave_an_arm_that_does_not_use_them_unchanged(tmp_path):
    plain = arm_from_dict({"name": "a", "capacity": 32})
    assert "kind" not in plain.embedding and "system" not in plain.generator
    assert "lexical" not in plain.retrieval and "callable" not in plain.rerank
    assert arm_from_dict({}).to_dict() == tomllib.loads(DEFAULT_TOML)
    # the committed sample ledger's arms keep the digests recorded before these keys existed
    manifest = json.loads((SAMPLE / "manifest.json").read_text(encoding="utf-8"))
    for name, entry in manifest["arms"].items():
        assert arm_from_dict(entry["config"]).digest() == entry["config_digest"], name
    # the documented default file still loads to the same arm; its optional keys are comments
    path = tmp_path / "default.toml"
    uncommented = DEFAULT_TOML.replace('# kind = "sentence-transformers"', 'kind = "sentence-transformers"')
    path.write_text(uncommented, encoding="utf-8")
    assert load_arm(path).embedding["kind"] == "sentence-transformers"


def test_the_arm_file_is_named_in_problems_found_after_loading(tmp_path):
    path = tmp_path / "remote.toml"
    path.write_text('[embedding]\nkind = "endpoint"\nbase_url = "http://127.0.0.1:9"\n', encoding="utf-8")
    assert load_arm(path).where == str(path)
