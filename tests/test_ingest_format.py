"""The trace format (ledgerscope-trace/1): located problems, the JSON Schema, the recorder.

Every malformed trace or chunk line gives ``file:line: field: reason``, exit 2 and
no ledger; the JSON Schema file names exactly the validator's fields and agrees
with it on every case it can express; ``ledgerscope.trace`` imports nothing heavy
and writes lines both accept.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ledgerscope.ingest.read.chunkstore import read_chunks
from ledgerscope.ingest.read.traceformat import read_traces
from ledgerscope.trace import spec

SCHEMA = Path(spec.__file__).with_name("trace-1.schema.json")
ERROR = re.compile(r"^(?P<file>[^\s:][^:]*?)(?::(?P<line>\d+))?: (?P<field>[^:]+?): (?P<reason>.+)$")

GOOD = {
    "qid": "q1",
    "config": "a",
    "retrieved_ids": ["c1", "c2"],
    "scores": [0.5, 0.25],
    "context_ids": ["c1"],
    "context_text": ["alpha"],
    "answer": "7 days [1]",
    "citations": ["1"],
}

#: (name, the line (a dict, or raw text), the field the problem names, words in the reason)
BAD_TRACES = [
    ("truncated", json.dumps(GOOD)[:40], "line", "not valid JSON"),
    ("not an object", "[1, 2]", "line", "must be a JSON object"),
    ("invalid UTF-8", b'{"qid": "\xff"}', "line", "not valid UTF-8"),
    ("NaN literal", json.dumps(GOOD).replace("0.5", "NaN"), "line", "NaN is not JSON"),
    ("duplicate key", json.dumps(GOOD)[:-1] + ', "qid": "q2"}', "line", "duplicate key"),
    ("unknown version", {**GOOD, "format": "ledgerscope-trace/2"}, "format", "unknown format version"),
    ("unknown field", {**GOOD, "contxt_ids": []}, "contxt_ids", "unknown field"),
    ("missing qid", {k: v for k, v in GOOD.items() if k != "qid"}, "qid", "missing (required)"),
    ("qid a number", {**GOOD, "qid": 7}, "qid", "must be a string, not an integer"),
    ("ids not a list", {**GOOD, "retrieved_ids": "c1"}, "retrieved_ids", "must be a list"),
    ("id a number", {**GOOD, "retrieved_ids": ["c1", 2]}, "retrieved_ids[1]", "must be a string"),
    (
        "duplicate ids",
        {**GOOD, "retrieved_ids": ["c1", "c1"], "scores": [1, 1]},
        "retrieved_ids[1]",
        "duplicate id 'c1' (first at [0])",
    ),
    ("scores misaligned", {**GOOD, "scores": [1.0]}, "scores", "1 score(s) for 2 id(s)"),
    ("score a string", {**GOOD, "scores": [1.0, "x"]}, "scores[1]", "must be a number"),
    (
        "score overflows",
        json.dumps({**GOOD, "scores": [1.0, 2.5]}).replace("2.5", "1e999"),
        "scores[1]",
        "not a finite number",
    ),
    ("context misaligned", {**GOOD, "context_text": ["a", "b"]}, "context_text", "2 text(s) for 1"),
    ("unknown stage", {**GOOD, "stages": {"hyde": {"ids": ["c1"]}}}, "stages.hyde", "unknown stage name"),
    ("retrieved twice", {**GOOD, "stages": {"fused": {"ids": ["c1"]}}}, "retrieved_ids", "the same stage"),
    (
        "stage order",
        {**GOOD, "stages": {"bm25": {"ids": ["c1"]}}, "stage_order": ["reranked", "bm25"]},
        "stage_order[1]",
        "out of cascade order",
    ),
    ("packed differs", {**GOOD, "stages": {"packed": {"ids": ["c2"]}}}, "stages.packed.ids", "differs"),
    (
        "unknown claim",
        {**GOOD, "claims": {"support_everything": True}},
        "claims.support_everything",
        "unknown claim",
    ),
    ("bad config", {**GOOD, "config": "../x"}, "config", "names a directory"),
    (
        "surrogate",
        '{"qid": "q\\ud800", "context_ids": [], "context_text": "", "answer": null, "config": "a"}',
        "qid",
        "lone surrogate",
    ),
]


def _write(path: Path, line) -> Path:
    data = line if isinstance(line, bytes) else (line if isinstance(line, str) else json.dumps(line)).encode()
    path.write_bytes(json.dumps(GOOD).encode() + b"\n" + data + b"\n")
    return path


@pytest.mark.parametrize(("name", "line", "field", "reason"), BAD_TRACES, ids=[c[0] for c in BAD_TRACES])
def test_a_malformed_trace_line_is_located(tmp_path, name, line, field, reason):
    path = _write(tmp_path / "traces.jsonl", line)
    _, problems = read_traces([path])
    assert problems, name
    first = ERROR.match(str(problems[0]))
    assert first and first["file"] == str(path) and first["line"] == "2", str(problems[0])
    assert first["field"] == field and reason in first["reason"], str(problems[0])


def test_a_second_trace_of_the_same_request_and_a_huge_line(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(GOOD) + "\n\n" + json.dumps(GOOD) + "\n")
    _, problems = read_traces([path])
    assert [str(p) for p in problems] == [
        f"{path}:3: qid: a second trace for config 'a', phase '0', qid 'q1' (first at {path}:1)"
    ]
    path.write_bytes(b'{"qid": "' + b"x" * (spec.MAX_LINE_BYTES + 1) + b'"}\n')
    _, problems = read_traces([path])
    assert re.match(
        rf"{re.escape(str(path))}:1: line: [\d,]+ bytes, longer than the 16 MiB", str(problems[0])
    )


BAD_CHUNKS = [
    ("missing text", {"chunk_id": "c1", "doc_id": "d"}, "text", "missing"),
    (
        "offsets without system",
        {"chunk_id": "c1", "doc_id": "d", "text": "x", "start": 0, "end": 1},
        "coordinate_system",
        "need their coordinate system",
    ),
    ("start alone", {"chunk_id": "c1", "doc_id": "d", "text": "x", "start": 0}, "end", "together"),
    (
        "start after end",
        {
            "chunk_id": "c1",
            "doc_id": "d",
            "text": "x",
            "start": 5,
            "end": 1,
            "coordinate_system": "codepoint-half-open",
        },
        "start",
        "after end",
    ),
    (
        "negative",
        {"chunk_id": "c1", "doc_id": "d", "text": "x", "start": -1, "end": 1},
        "start",
        "non-negative integer",
    ),
    (
        "unknown system",
        {"chunk_id": "c1", "doc_id": "d", "text": "x", "start": 0, "end": 1, "coordinate_system": "bytes"},
        "coordinate_system",
        "unknown system",
    ),
    ("duplicate id", {"chunk_id": "c0", "doc_id": "d", "text": "y"}, "chunk_id", "duplicate id 'c0'"),
]


@pytest.mark.parametrize(("name", "line", "field", "reason"), BAD_CHUNKS, ids=[c[0] for c in BAD_CHUNKS])
def test_a_malformed_chunk_line_is_located(tmp_path, name, line, field, reason):
    path = tmp_path / "chunks.jsonl"
    first = json.dumps({"chunk_id": "c0", "doc_id": "d", "text": "x"})
    path.write_text(first + "\n" + json.dumps(line) + "\n")
    _, problems = read_chunks(path)
    first = ERROR.match(str(problems[0]))
    assert first and first["line"] == "2" and first["field"] == field and reason in first["reason"], problems


def test_the_cli_exits_2_located_and_writes_nothing(tmp_path):
    from .ingest_pipeline import CORPUS, FIXTURES

    traces = _write(tmp_path / "traces.jsonl", {**GOOD, "retrieved_ids": ["c1", "c1"]})
    chunks = tmp_path / "chunks.jsonl"
    chunks.write_text(json.dumps({"chunk_id": "c1", "doc_id": "overview.md", "text": "Quillstack"}) + "\n")
    out = tmp_path / "ledger"
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "ledgerscope.cli",
            "ingest",
            str(traces),
            "--chunks",
            str(chunks),
            "--fixtures",
            str(FIXTURES),
            "--corpus",
            str(CORPUS),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 2 and res.stdout == ""
    lines = res.stderr.strip().splitlines()
    assert lines and all(ERROR.match(line) for line in lines), res.stderr
    assert "traces.jsonl:2: retrieved_ids[1]: duplicate id" in res.stderr
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["chunks.jsonl", "traces.jsonl"]


# ---------------------------------------------------------------------------
# the JSON Schema


def _schema() -> dict:
    return json.loads(SCHEMA.read_text())


def _prop(props: dict, name: str) -> dict:
    """A property's own schema (an optional one is ``anyOf`` it or null)."""
    p = props[name]
    return next(a for a in p["anyOf"] if a != {"type": "null"}) if "anyOf" in p else p


def test_the_schema_names_the_validators_fields():
    schema = _schema()
    assert set(schema["properties"]) == set(spec.TRACE_FIELDS)
    assert set(schema["required"]) == {k for k, (_, req) in spec.TRACE_FIELDS.items() if req}
    assert set(_prop(schema["properties"], "claims")["properties"]) == spec.CLAIM_KEYS
    chunk = schema["$defs"]["chunk"]
    assert set(chunk["properties"]) == set(spec.CHUNK_FIELDS)
    assert set(chunk["required"]) == {k for k, (_, req) in spec.CHUNK_FIELDS.items() if req}
    assert _prop(schema["properties"], "format")["const"] == spec.FORMAT
    for name, (_, required) in spec.TRACE_FIELDS.items():  # optional: null is as if absent
        prop = schema["properties"][name]
        nullable = "anyOf" in prop or "null" in prop.get("type", [])
        assert nullable != required or name == "answer", name


def test_the_schema_agrees_with_the_validator(tmp_path):
    jsonschema = pytest.importorskip("jsonschema")
    validator = jsonschema.Draft202012Validator(_schema())
    validator.check_schema(_schema())
    assert not list(validator.iter_errors(GOOD))
    for name, line, _, _ in BAD_TRACES:
        across = (
            "scores misaligned",
            "context misaligned",
            "retrieved twice",
            "stage order",
            "packed differs",
            "unknown stage",
        )
        if not isinstance(line, dict) or name in across:
            continue  # not JSON, or a check across fields the schema cannot express
        assert list(validator.iter_errors(line)), name
    chunk = jsonschema.Draft202012Validator({**_schema()["$defs"]["chunk"], "$defs": _schema()["$defs"]})
    for name, line, _, _ in BAD_CHUNKS:
        if name in ("offsets without system", "start after end", "duplicate id"):
            continue
        assert list(chunk.iter_errors(line)), name


# ---------------------------------------------------------------------------
# the recorder


def test_the_recorder_imports_nothing_heavy():
    code = (
        "import sys, ledgerscope.trace; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('duckdb', 'pyarrow', 'numpy', 'torch', 'tokenizers', 'textual', 'rich', 'typer', 'pandas')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stdout + out.stderr


def test_the_recorders_lines_pass_the_validator_and_the_schema(tmp_path):
    from ledgerscope.trace import Recorder

    with Recorder(tmp_path / "t.jsonl", chunks=tmp_path / "c.jsonl", config="a") as rec:
        rec.chunk("c1", "d.md", "alpha", start=0, end=5)
        rec.chunk("c1", "d.md", "alpha", start=0, end=5)  # once per id
        rec.chunk("c2", "d.md", "beta")
        rec.record(
            qid="q1",
            retrieved=[("c1", 0.9), ("c2", 0.1)],
            context=[("c1", "alpha")],
            answer="x",
            citations=["1"],
            claims={"support_packed": True},
        )
        rec.record(
            qid="q2",
            retrieved=["c2"],
            context=["c2"],
            context_text="beta",
            answer=None,
            error="timeout",
            phase="7",
        )
        with pytest.raises(ValueError, match="not finite"):
            rec.record(qid="q3", retrieved=[("c1", float("nan"))], context=[], context_text="", answer="")
    traces, problems = read_traces([tmp_path / "t.jsonl"])
    assert not problems and len(traces) == 2 and traces.phase == ["0", "7"]
    chunks, problems = read_chunks(tmp_path / "c.jsonl")
    assert not problems and [c.chunk_id for c in chunks] == ["c1", "c2"]
    jsonschema = pytest.importorskip("jsonschema")
    validator = jsonschema.Draft202012Validator(_schema())
    for line in (tmp_path / "t.jsonl").read_text().splitlines():
        assert not list(validator.iter_errors(json.loads(line)))


def test_the_trace_claim_flags_mirror_the_ledgers_support_columns() -> None:
    """trace/ installs and imports without ledger/, so it names the support flags a producer may
    claim itself; they stay the ledger's support columns, in order (all but ``support_topk``)."""
    from ledgerscope.ledger.schema import SUPPORT_COLUMNS
    from ledgerscope.trace.spec import CLAIM_FLAGS

    assert tuple(c for c in SUPPORT_COLUMNS if c != "support_topk") == CLAIM_FLAGS
