"""Arm configuration: the documented defaults, phase specs, validation, digests."""

from __future__ import annotations

import re
import tomllib
from dataclasses import fields

import pytest

from ledgerscope.common.errors import InputError
from ledgerscope.pipeline.arm.config import (
    DEFAULT_TOML,
    ArmConfig,
    Phase,
    arm_from_dict,
    load_arm,
    resolve_phases,
)

TOP_KEYS = ["capacity", "overlap", "phases", "edge_policy", "budget_tokens", "top_k", "rerank_depth"]


def fields_of(exc: pytest.ExceptionInfo) -> list[str]:
    return [p.field for p in exc.value.problems]


def write(tmp_path, body: str, name: str = "arm.toml"):
    path = tmp_path / name
    path.write_text(body, encoding="utf-8")
    return path


# ---------------------------------------------------------------------------
# defaults


def test_default_toml_parses_and_is_what_an_empty_arm_gets():
    parsed = tomllib.loads(DEFAULT_TOML)
    cfg = arm_from_dict({})
    assert cfg.to_dict() == parsed
    assert set(parsed) == {f.name for f in fields(ArmConfig)}
    # the dataclass defaults of the top-level scalars agree with the documented file
    plain = ArmConfig()
    for key in ["name", *TOP_KEYS]:
        assert getattr(plain, key) == parsed[key], key
    assert cfg.stride == 96
    assert cfg.chunker_kind == "token"
    assert cfg.clearance == frozenset()
    assert [p.offset for p in cfg.phase_list()] == [0, 12, 24, 36, 48, 60, 72, 84]


@pytest.mark.parametrize("key", TOP_KEYS)
def test_most_typed_keys_start_their_own_top_level_line(key):
    lines = [ln for ln in DEFAULT_TOML.splitlines() if re.match(rf"{key}\s*=", ln)]
    assert len(lines) == 1, key
    first_table = DEFAULT_TOML.index("\n[")
    assert DEFAULT_TOML.index("\n" + lines[0]) < first_table  # top level, before any [table]


def test_default_toml_loads_from_a_file(tmp_path):
    cfg = load_arm(write(tmp_path, DEFAULT_TOML))
    assert cfg == arm_from_dict({})


def test_load_arm_overrides_merge_into_the_defaults(tmp_path):
    cfg = load_arm(
        write(
            tmp_path,
            """
name = "small"
capacity = 32
overlap = 8
phases = [0, 5]
[retrieval.hnsw]
ef_search = 128
[chunker]
kind = "sentence"
""",
        )
    )
    assert (cfg.name, cfg.capacity, cfg.overlap, cfg.stride) == ("small", 32, 8, 24)
    assert cfg.retrieval["hnsw"] == {"M": 16, "ef_construction": 200, "ef_search": 128, "seed": 0}
    assert cfg.retrieval["bm25_top_n"] == 50  # siblings keep their defaults
    assert cfg.chunker_kind == "sentence"
    assert cfg.phase_list() == [Phase("0", 0), Phase("5", 5)]


# ---------------------------------------------------------------------------
# resolve_phases


def test_auto_phases_spread_over_the_stride():
    assert resolve_phases("auto:4", 16) == [Phase("0", 0), Phase("1", 4), Phase("2", 8), Phase("3", 12)]
    assert resolve_phases("auto:3", 10) == [Phase(str(k), round(k * 10 / 3)) for k in range(3)]
    assert [p.offset for p in resolve_phases("auto:3", 10)] == [0, 3, 7]
    assert resolve_phases("auto:1", 5) == [Phase("0", 0)]
    assert resolve_phases(" auto:2 ", 5) == [Phase("0", 0), Phase("1", 2)]
    assert [p.offset for p in resolve_phases("auto:7", 7)] == list(range(7))


def test_auto_phases_for_the_sentence_chunker_count_sentences():
    assert resolve_phases("auto:3", None) == [Phase("0", 0), Phase("1", 1), Phase("2", 2)]


def test_explicit_phase_list_and_table():
    assert resolve_phases([0, 5, 9], 10) == [Phase("0", 0), Phase("5", 5), Phase("9", 9)]
    assert resolve_phases({"a": 0, "mid": 4}, 10) == [Phase("a", 0), Phase("mid", 4)]
    assert resolve_phases([3, 100], None) == [Phase("3", 3), Phase("100", 100)]


@pytest.mark.parametrize(
    ("spec", "stride", "message"),
    [
        ([0, 10], 10, r"phase '10': offset 10 must be an integer in \[0, 10\)"),
        ({"late": 12}, 10, r"phase 'late': offset 12 must be an integer in \[0, 10\)"),
        ([-1], 10, r"offset -1 must be an integer"),
        ([1.5], 10, r"offset 1.5 must be an integer"),
        ([True], 10, r"offset True must be an integer"),
        ("auto:0", 10, r"expected 'auto:N' with N >= 1"),
        ("auto:x", 10, r"expected 'auto:N' with N >= 1"),
        ("every:3", 10, r"expected 'auto:N'"),
        ("auto:11", 10, r"auto:11 asks for more phases than the stride \(10\)"),
        ([2, 2], 10, r"phase labels must be unique"),
        ([], 10, r"at least one phase"),
        (3, 10, r"phases must be 'auto:N', a list of offsets or a table"),
    ],
)
def test_bad_phase_specs_raise_clear_messages(spec, stride, message):
    with pytest.raises(ValueError, match=message):
        resolve_phases(spec, stride)


# ---------------------------------------------------------------------------
# load_arm validation


@pytest.mark.parametrize(
    ("body", "field", "reason"),
    [
        ("capasity = 96", "capasity", "unknown key"),
        ("[retrieval]\nbm25_topn = 10", "retrieval.bm25_topn", "unknown key"),
        ("[retrieval.hnsw]\nef = 10", "retrieval.hnsw.ef", "unknown key"),
        ("[fusion]\nweights = { bm25 = 1.0, lexical = 2.0 }", "fusion.weights.lexical", "unknown key"),
        ('top_k = "4"', "top_k", "must be a non-negative integer"),
        ("capacity = 9.5", "capacity", "must be a non-negative integer"),
        ("overlap = true", "overlap", "must be a non-negative integer"),
        ("budget_tokens = -1", "budget_tokens", "must be a non-negative integer"),
        ('[embedding]\nbatch_size = "64"', "embedding.batch_size", "must be an integer, not a string"),
        ("[retrieval]\nbm25_k1 = true", "retrieval.bm25_k1", "must be a number, not a boolean"),
        ('[selection]\ndedup = "yes"', "selection.dedup", "must be a boolean, not a string"),
        ("[generator]\nmodel = 3", "generator.model", "must be a string, not an integer"),
        ('chunker = "sentence"', "chunker", "must be a table, not a string"),
        ("[retrieval]\nhnsw = 3", "retrieval.hnsw", "must be a table, not an integer"),
        ('[access]\nclearance = "secret"', "access.clearance", "must be a list"),
        ("capacity = 8\noverlap = 8", "overlap", "must be smaller than capacity"),
        ("capacity = 0", "capacity", "must be at least 1"),
        ("top_k = 0", "top_k", "must be at least 1"),
        ('name = "has space"', "name", "must be letters, digits"),
        ('edge_policy = "drop"', "edge_policy", "must be one of keep-short, merge-short"),
        ('[chunker]\nkind = "paragraph"', "chunker.kind", "must be one of token, sentence"),
        ('[fusion]\nmethod = "max"', "fusion.method", "must be one of rrf"),
        ('[rerank]\nkind = "cross-encoder"', "rerank.model", "a cross-encoder needs a model"),
        ('[generator]\nkind = "endpoint"', "generator.base_url", "an endpoint generator needs base_url"),
        ("capacity = 10\nphases = [10]", "phases", "offset 10 must be an integer in [0, 10)"),
        ('phases = "auto:0"', "phases", "expected 'auto:N'"),
    ],
)
def test_load_arm_reports_each_problem_with_its_field(tmp_path, body, field, reason):
    path = write(tmp_path, body + "\n")
    with pytest.raises(InputError) as exc:
        load_arm(path)
    assert fields_of(exc) == [field]
    problem = exc.value.problems[0]
    assert problem.file == str(path)
    assert reason in problem.reason
    # file:line: field: reason, the line of the key (or of its table when the key is not written)
    assert problem.line is not None
    assert f"{path}:{problem.line}: {field}: " in str(exc.value)


def test_load_arm_reports_all_problems_at_once(tmp_path):
    path = write(
        tmp_path,
        """
capasity = 96
top_k = "four"
capacity = 8
overlap = 8
[retrieval]
bm25_topn = 10
[rerank]
kind = "cross-encoder"
[generator]
kind = "endpoint"
""",
    )
    with pytest.raises(InputError) as exc:
        load_arm(path)
    assert sorted(fields_of(exc)) == sorted(
        ["capasity", "retrieval.bm25_topn", "top_k", "overlap", "rerank.model", "generator.base_url"]
    )
    message = str(exc.value)
    lines = {p.field: p.line for p in exc.value.problems}
    assert lines == {
        "capasity": 2,
        "top_k": 3,
        "overlap": 5,
        "retrieval.bm25_topn": 7,
        "rerank.model": 8,
        "generator.base_url": 10,
    }
    for name in fields_of(exc):
        assert f"{path}:{lines[name]}: {name}: " in message


def test_a_valid_cross_encoder_and_endpoint_arm_loads(tmp_path):
    cfg = load_arm(
        write(
            tmp_path,
            """
[rerank]
kind = "cross-encoder"
model = "some/cross-encoder"
[generator]
kind = "endpoint"
base_url = "http://127.0.0.1:8080"
temperature = 0
""",
        )
    )
    assert cfg.rerank["model"] == "some/cross-encoder"
    assert cfg.generator["temperature"] == 0  # an integer where a number is expected is fine


def test_load_arm_missing_file_and_bad_toml(tmp_path):
    with pytest.raises(InputError) as exc:
        load_arm(tmp_path / "nope.toml")
    assert fields_of(exc) == ["arm"] and "no such file" in str(exc.value)
    with pytest.raises(InputError) as exc:
        load_arm(write(tmp_path, "capacity = = 3\n"))
    assert fields_of(exc) == ["toml"]
    bad = tmp_path / "latin1.toml"
    bad.write_bytes('name = "caf\xe9"\n'.encode("latin-1"))
    with pytest.raises(InputError) as exc:
        load_arm(bad)
    assert fields_of(exc) == ["toml"]


# ---------------------------------------------------------------------------
# digest


def test_digest_is_stable_and_order_independent(tmp_path):
    a = load_arm(write(tmp_path, "capacity = 64\noverlap = 4\n[fusion]\nrrf_k = 30\n", "a.toml"))
    b = load_arm(
        write(
            tmp_path,
            "overlap = 4  # same values, other order\ncapacity = 64\n[fusion]\nrrf_k = 30\n",
            "b.toml",
        )
    )
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", a.digest())
    assert a.digest() == b.digest() == a.digest()
    assert arm_from_dict({}).digest() == arm_from_dict({}).digest()


@pytest.mark.parametrize(
    "change",
    [
        {"name": "other"},
        {"capacity": 97},
        {"overlap": 1},
        {"phases": "auto:4"},
        {"phases": [0, 12]},
        {"edge_policy": "merge-short"},
        {"budget_tokens": 321},
        {"top_k": 5},
        {"rerank_depth": 31},
        {"chunker": {"kind": "sentence"}},
        {"embedding": {"batch_size": 32}},
        {"retrieval": {"hnsw": {"ef_search": 65}}},
        {"retrieval": {"bm25_k1": 1.2}},
        {"fusion": {"weights": {"bm25": 2.0}}},
        {"rerank": {"kind": "none"}},
        {"selection": {"dedup": False}},
        {"generator": {"max_tokens": 64}},
        {"access": {"clearance": ["secret"]}},
    ],
)
def test_digest_changes_when_any_value_changes(change):
    base = arm_from_dict({})
    changed = arm_from_dict(change)
    assert changed.digest() != base.digest()
    assert changed.digest() == arm_from_dict(change).digest()
