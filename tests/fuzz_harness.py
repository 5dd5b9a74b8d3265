"""Malformed-input cases and the runner that checks how the CLI ends on each.

Shared by ``tests/test_fuzz.py`` (hypothesis, bounded) and ``scripts/fuzz_inputs.py``
(the long seeded run). A case is an input kind (fixtures in three forms,
corpora, arm TOML, ledgers in Parquet and JSONL interchange), a mutation and a
seed; :func:`build_case` writes it into a directory and :func:`check_case` runs
every CLI command that reads that kind of input, each in a child forked from a
clean fork server, and returns the outcomes.

What a command must do with malformed input (:func:`judge`): exit non-zero
(2) with every error line shaped ``file[:line]: field: reason``, never a
Python traceback, never the internal-error catch-all (exit 70), never hang
(timeout), never write a partial output (a sweep's ``--out`` must not exist, an
export's must not exist, stdout must be empty), never change an input byte,
and a sweep must fail before any model is imported (the children block
``torch``, ``transformers`` and ``sentence_transformers``: reaching them is
recorded as "reached model load"). Cases marked ``any`` may also succeed (the
mutation can leave the input valid); the same invariants apply.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import multiprocessing
import os
import random
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data"
HUGE = 5 * 1024 * 1024  # a 5 MB single line

# ---------------------------------------------------------------------------
# running one command in a forked child


BLOCKED = ("torch", "transformers", "sentence_transformers")
MODEL_EXIT = 99


class _ModelLoad(BaseException):
    """Raised in a child at the first import of a model library (a BaseException: nothing catches it)."""


class _Blocker:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise _ModelLoad(name)
        return None


def _child(argv: list[str], out: str, err: str, block_models: bool, code_file: str | None = None) -> None:
    fd_out = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    fd_err = os.open(err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(fd_out, 1)
    os.dup2(fd_err, 2)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    sys.stdout = io.TextIOWrapper(os.fdopen(1, "wb", closefd=False), encoding="utf-8", write_through=True)
    sys.stderr = io.TextIOWrapper(os.fdopen(2, "wb", closefd=False), encoding="utf-8", write_through=True)
    sys.stdin = open(os.devnull, encoding="utf-8")  # noqa: SIM115
    if block_models:
        sys.meta_path.insert(0, _Blocker())
    sys.argv = ["ledgerscope", *argv]
    code = 1
    try:
        from ledgerscope.cli.main import main

        main()
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except _ModelLoad as exc:
        print(f"FUZZ: model library import reached: {exc}", file=sys.stderr)
        code = MODEL_EXIT
    except BaseException:  # what a user would see: a traceback
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        if code_file:  # the exit status, first hand (a fork server may report 255 when it loses track)
            with contextlib.suppress(Exception):
                Path(code_file).write_text(str(code))
        os._exit(code)


_CTX = None


def _context():
    global _CTX
    if _CTX is None:
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(
            [
                "tests.fuzz_harness",
                "ledgerscope.cli.main",
                "ledgerscope.inputs.fixtures",
                "ledgerscope.inputs.validate",
                "ledgerscope.pipeline.arm.config",
                "duckdb",
                "pyarrow.parquet",
                "rich.console",
            ]
        )
        _CTX = ctx
    return _CTX


@dataclass
class Run:
    argv: list[str]
    rc: int | None
    stdout: bytes
    stderr: bytes
    seconds: float
    timed_out: bool = False

    @property
    def model_reached(self) -> bool:
        return self.rc == MODEL_EXIT


def run_cli(argv: list[str], timeout: float = 60.0, block_models: bool = True) -> Run:
    """Run ``ledgerscope ARGV`` in a child forked from a clean server; kill it after ``timeout``."""
    with tempfile.TemporaryDirectory(prefix="ls-fuzz-io-") as io_dir:
        out, err = os.path.join(io_dir, "out"), os.path.join(io_dir, "err")
        code_file = os.path.join(io_dir, "code")
        t0 = time.monotonic()
        proc = _context().Process(target=_child, args=(list(argv), out, err, block_models, code_file))
        proc.start()
        proc.join(timeout)
        timed_out = proc.is_alive()
        if timed_out:
            proc.kill()
            proc.join()
        seconds = time.monotonic() - t0
        stdout = Path(out).read_bytes() if os.path.exists(out) else b""
        stderr = Path(err).read_bytes() if os.path.exists(err) else b""
        rc = proc.exitcode
        if not timed_out and os.path.exists(code_file):
            rc = int(Path(code_file).read_text() or rc)
    return Run(list(argv), None if timed_out else rc, stdout, stderr, seconds, timed_out)


# ---------------------------------------------------------------------------
# judging one run


ERROR_LINE = re.compile(r"^(?P<file>[^\s:][^:]*?)(?::(?P<line>\d+))?: (?P<field>[^:]+?): (?P<reason>.+)$")
SUMMARY_LINE = re.compile(r"^\d+ problem\(s\); nothing written\.$")


@dataclass
class Verdict:
    outcome: str  # "clean error" | "success" | "valid (stopped at model load)" | "FAIL"
    reasons: list[str] = field(default_factory=list)


def judge(run: Run, expect: str, outputs: list[Path], changed: list[str], stdout_may_hold: bool) -> Verdict:
    """Sort one run into an outcome; FAIL lists why."""
    bad: list[str] = []
    err = run.stderr.decode("utf-8", "replace")
    if run.timed_out:
        bad.append(f"hang: no exit after {run.seconds:.0f} s")
    if "Traceback (most recent call last)" in err:
        bad.append("a Python traceback reached the terminal")
    if run.rc == 70 or "internal error" in err:
        bad.append("the internal-error catch-all fired (no specific message)")
    if changed:
        bad.append(f"input bytes changed: {', '.join(changed[:3])}")
    if run.model_reached:
        if expect == "error":
            bad.append("a malformed input got as far as loading a model")
        return Verdict("FAIL" if bad else "valid (stopped at model load)", bad)
    if run.rc == 0:
        if expect == "error":
            bad.append("malformed input accepted (exit 0)")
        return Verdict("FAIL" if bad else "success", bad)
    if run.rc is not None and run.rc != 2 and not bad:
        bad.append(f"exit status {run.rc} (input errors exit 2)")
    lines = [ln for ln in err.splitlines() if ln.strip() and not SUMMARY_LINE.match(ln)]
    if not lines and not run.timed_out:
        bad.append("non-zero exit with no message")
    for ln in lines[:50]:
        if not ERROR_LINE.match(ln) and "Traceback" not in err:
            bad.append(f"error line not shaped file:line: field: reason: {ln[:200]!r}")
            break
    if any(b in err for b in ("\x1b", "\x07", "\u202e")):
        bad.append("raw escape or bidi character on stderr")
    for out in outputs:
        if out.exists():
            bad.append(f"output left behind after a failure: {out.name}")
    for out in outputs:
        parent = out.parent
        if parent.is_dir():
            stray = [p.name for p in parent.iterdir() if p.name.startswith(f".{out.name}.")]
            if stray:
                bad.append(f"temporary files left behind: {stray[:3]}")
    if run.stdout.strip() and not stdout_may_hold:
        bad.append(f"partial output on stdout after a failure ({len(run.stdout)} bytes)")
    return Verdict("FAIL" if bad else "clean error", bad)


def checksums(paths: list[Path]) -> dict[str, str]:
    out = {}
    for root in paths:
        files = (
            [root]
            if root.is_file()
            else sorted(p for p in root.rglob("*") if p.is_file())
            if root.is_dir()
            else []
        )
        for p in files:
            out[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


# ---------------------------------------------------------------------------
# base inputs


def _sweep_data():
    from tests.sweep_data import DISTRACTORS, FIXTURES, POLICY

    return POLICY, DISTRACTORS, FIXTURES


def write_corpus_dir(root: Path) -> Path:
    policy, distractors, _ = _sweep_data()
    corpus = root / "corpus"
    (corpus / "policy").mkdir(parents=True, exist_ok=True)
    (corpus / "policy" / "retention.md").write_text(policy, encoding="utf-8")
    for name, text in distractors.items():
        (corpus / name).write_text(text, encoding="utf-8")
    return corpus


def corpus_rows() -> list[dict]:
    policy, distractors, _ = _sweep_data()
    return [{"doc_id": "policy/retention.md", "text": policy}] + [
        {"doc_id": k, "text": v} for k, v in sorted(distractors.items())
    ]


def canonical_rows() -> list[dict]:
    return json.loads(json.dumps(_sweep_data()[2]))


ARM = (
    'name = "fuzz"\ncapacity = 16\noverlap = 0\nphases = [0]\nbudget_tokens = 40\ntop_k = 1\n'
    "[generator]\nabstain_threshold = 0.3\n"
)


def _jsonl(rows: list) -> str:
    return "".join((r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)) + "\n" for r in rows)


# ---------------------------------------------------------------------------
# byte-level mutations (any text input)


def m_truncate(data: bytes, rnd: random.Random) -> bytes:
    return data[: rnd.randrange(0, max(1, len(data)))]


def m_invalid_utf8(data: bytes, rnd: random.Random) -> bytes:
    bad = rnd.choice([b"\xff", b"\xfe\xff", b"\xc0\xaf", b"\x80", b"\xed\xa0\x80", b"\xe2\x82"])
    # inside the text of a value when there is one (a quote), else anywhere
    quotes = [i for i, b in enumerate(data) if b == 0x22] or [rnd.randrange(0, len(data) + 1)]
    i = rnd.choice(quotes) + 1
    return data[:i] + bad + data[i:]


def m_huge_line(data: bytes, rnd: random.Random) -> bytes:
    junk = rnd.choice([b'{"qid": "', b"[", b'x = "', b"{"]) + b"A" * HUGE
    return data + b"\n" + junk + b"\n"


def m_flip(data: bytes, rnd: random.Random) -> bytes:
    b = bytearray(data)
    for _ in range(rnd.randint(1, 8)):
        if b:
            b[rnd.randrange(len(b))] = rnd.randrange(256)
    return bytes(b)


def m_nul(data: bytes, rnd: random.Random) -> bytes:
    i = rnd.randrange(0, len(data) + 1)
    return data[:i] + b"\x00" + data[i:]


def m_empty(data: bytes, rnd: random.Random) -> bytes:
    return b""


BYTE_MUTATIONS: dict[str, tuple[Callable[[bytes, random.Random], bytes], str]] = {
    "truncated": (m_truncate, "any"),
    "invalid-utf8": (m_invalid_utf8, "error"),
    "huge-line-5mb": (m_huge_line, "error"),
    "bytes-flipped": (m_flip, "any"),
    "nul-byte": (m_nul, "any"),
    "empty-file": (m_empty, "error"),
}


# ---------------------------------------------------------------------------
# the case


@dataclass
class Case:
    kind: str
    mutation: str
    seed: int
    expect: str  # "error" | "any"
    root: Path
    inputs: list[Path]
    commands: list[tuple[str, list[str], list[Path], bool]]  # (name, argv, outputs, stdout may hold)
    expect_by_command: dict[str, str] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"{self.kind}/{self.mutation}#{self.seed}"


@dataclass
class Result:
    case: Case
    command: str
    verdict: Verdict
    run: Run


def _validate_and_sweep(root: Path, fixtures: Path, corpus: Path | None, arm: Path) -> list:
    cmds = []
    extra = ["--corpus", str(corpus)] if corpus is not None else []
    cmds.append(("validate", ["validate", str(fixtures), *extra], [], False))
    out = root / "sweep-out"
    cmds.append(
        (
            "sweep",
            ["sweep", "--quiet", "--fixtures", str(fixtures), *extra, "--arm", str(arm), "--out", str(out)],
            [out],
            False,
        )
    )
    return cmds


# --- fixtures, seed 000 JSON ------------------------------------------------


def _inside_utf8(text: str) -> list[int]:
    """Byte offsets that fall inside a multi-byte character."""
    return [i for i, b in enumerate(text.encode("utf-8")) if b & 0xC0 == 0x80]


def _inside_utf16(text: str) -> list[int]:
    """UTF-16 offsets between the two halves of a surrogate pair."""
    out, units = [], 0
    for ch in text:
        width = 2 if ord(ch) > 0xFFFF else 1
        if width == 2:
            out.append(units + 1)
        units += width
    return out


def _seed000() -> dict:
    return json.loads((DATA / "seed000_fixture.json").read_text(encoding="utf-8"))


def _seed000_nonascii() -> dict:
    return json.loads((DATA / "nonascii_fixture.json").read_text(encoding="utf-8"))


def _set(obj: dict, key: str, value):
    obj = dict(obj)
    obj[key] = value
    return obj


def _del(obj: dict, key: str):
    obj = dict(obj)
    obj.pop(key, None)
    return obj


SEED000: dict[str, Callable[[random.Random], str]] = {
    "wrong-type-source_text": lambda r: json.dumps(
        _set(_seed000(), "source_text", r.choice([123, None, [], {}]))
    ),
    "wrong-type-spans": lambda r: json.dumps(_set(_seed000(), "spans", r.choice([[0, 37], "rule", 5]))),
    "wrong-type-offset": lambda r: json.dumps(
        _set(_seed000(), "spans", {"rule": ["0", 37], "qualifier": [38, 89]})
    ),
    "wrong-type-sets": lambda r: json.dumps(
        _set(_seed000(), "sufficient_support_sets", r.choice(["rule", [1]]))
    ),
    "missing-field": lambda r: json.dumps(
        _del(_seed000(), r.choice(["fixture_id", "source_text", "question", "spans"]))
    ),
    "offset-out-of-range": lambda r: json.dumps(
        _set(
            _seed000(),
            "spans",
            {"rule": r.choice([[0, 10**6], [-5, 10], [37, 0], [0, 10**30]]), "qualifier": [38, 89]},
        )
    ),
    "offset-inside-character": lambda r: json.dumps(
        _set(
            _seed000_nonascii(),
            "spans",
            {"rule": [0, 43], "qualifier": [44, r.choice(_inside_utf8(_seed000_nonascii()["source_text"]))]},
        ),
        ensure_ascii=False,
    ),
    "nan-offset": lambda r: json.dumps(
        _set(_seed000(), "spans", {"rule": [float("nan"), 37], "qualifier": [38, 89]})
    ),
    "digest-mismatch": lambda r: json.dumps(
        _set(_seed000(), "source_version", _seed000()["source_version"][:-1] + "0")
    ),
    "unknown-coordinate-system": lambda r: json.dumps(_set(_seed000(), "coordinate_system", "utf32-closed")),
    "duplicate-span-key": lambda r: json.dumps(_seed000()).replace(
        '"qualifier": [38, 89]', '"qualifier": [38, 89], "rule": [38, 89]'
    ),
    "duplicate-fixture-id": lambda r: json.dumps([_seed000(), _seed000()]),
    "lone-surrogate": lambda r: json.dumps(_seed000()).replace("Requests may", "Requests \\ud800may"),
}

# --- fixtures, seed 002 gold --------------------------------------------------


def _seed002() -> dict:
    return json.loads((DATA / "seed002_gold.json").read_text(encoding="utf-8"))


def _gold(**change) -> dict:
    obj = _seed002()
    gold = [dict(g) for g in obj["gold"]]
    gold[0].update(change)
    obj["gold"] = gold
    return obj


SEED002: dict[str, Callable[[random.Random], str]] = {
    "wrong-type-gold": lambda r: json.dumps(_set(_seed002(), "gold", r.choice([{}, "docs/x", 3]))),
    "wrong-type-start": lambda r: json.dumps(_gold(start=r.choice(["4120", 4120.5, None, True]))),
    "wrong-type-doc": lambda r: json.dumps(_gold(doc=r.choice([3, None, ["a"]]))),
    "missing-field": lambda r: json.dumps(_del(_seed002(), r.choice(["qid", "text"]))),
    "offset-out-of-range": lambda r: json.dumps(
        _gold(**r.choice([{"end": 10**7}, {"start": -1}, {"start": 4610, "end": 4120}]))
    ),
    "nan-offset": lambda r: json.dumps(_gold(start=float("nan"))),
    "unknown-document": lambda r: json.dumps(_gold(doc="docs/nowhere.md")),
    "duplicate-qid": lambda r: json.dumps([_seed002(), _seed002()]),
}

# --- fixtures, canonical JSONL ------------------------------------------------


def _canon(i: int = 0, **change) -> list[dict]:
    rows = canonical_rows()
    rows[i].update(change)
    return rows


NONASCII_SOURCE = {"doc_id": "inline/größe.md", "text": "Größe: 7 Tage 🕒 für temporäre Anfragen."}


def _inline(span: dict, system: str) -> dict:
    return {
        "format": "ledgerscope-fixture/1",
        "qid": "inline",
        "question": "Wie lange?",
        "segment": "number-scope",
        "coordinate_system": system,
        "sources": [NONASCII_SOURCE],
        "answer": {"expected": "7 Tage"},
        "spans": [{"id": "s", "doc_id": NONASCII_SOURCE["doc_id"], **span}],
        "sufficient_sets": [["s"]],
    }


CANONICAL: dict[str, Callable[[random.Random], str]] = {
    "unknown-format-version": lambda r: _jsonl(_canon(format=r.choice(["ledgerscope-fixture/2", "x", 1]))),
    "wrong-type-spans": lambda r: _jsonl(_canon(spans=r.choice(["x", {"id": "a"}, 3]))),
    "wrong-type-question": lambda r: _jsonl(_canon(question=r.choice([1, None, ["q"]]))),
    "wrong-type-answer": lambda r: _jsonl(_canon(answer=r.choice([["7 days"], "7 days", 7]))),
    "wrong-type-sets": lambda r: _jsonl(_canon(sufficient_sets=r.choice([[[1]], "rule", [["nope"]]]))),
    "missing-field": lambda r: _jsonl(
        [_del(canonical_rows()[0], r.choice(["qid", "question", "segment"])), *canonical_rows()[1:]]
    ),
    "duplicate-qid": lambda r: _jsonl([*canonical_rows(), canonical_rows()[0]]),
    "duplicate-key": lambda r: _jsonl([json.dumps(canonical_rows()[1])[:-1] + ', "qid": "other"}']),
    "offset-out-of-range": lambda r: _jsonl(
        [_inline({"start": 0, "end": r.choice([10**6, 10**20])}, "codepoint-half-open")]
    ),
    "offset-inside-character": lambda r: _jsonl(
        [
            _inline(
                *r.choice(
                    [
                        (
                            {"start": 0, "end": r.choice(_inside_utf8(NONASCII_SOURCE["text"]))},
                            "utf8-byte-half-open",
                        ),
                        (
                            {"start": 0, "end": r.choice(_inside_utf16(NONASCII_SOURCE["text"]))},
                            "utf16-half-open",
                        ),
                    ]
                )
            )
        ]
    ),
    "nan-offset": lambda r: _jsonl([_inline({"start": float("nan"), "end": 4}, "codepoint-half-open")]),
    "digest-mismatch": lambda r: _jsonl(
        [_inline({"start": 0, "end": 5, "version": "sha256:" + "0" * 64}, "codepoint-half-open")]
    ),
    "quote-mismatch": lambda r: _jsonl(
        _canon(
            spans=[
                {"id": "rule", "doc_id": "policy/retention.md", "start": 0, "end": 10, "quote": "not this"}
            ]
        )
    ),
    "unknown-segment": lambda r: _jsonl(_canon(segment=r.choice(["rule-exceptoin", "x" * 100_000]))),
    "source-wrong-types": lambda r: _jsonl(
        [
            {
                **_inline({"start": 0, "end": 5}, "codepoint-half-open"),
                "sources": [
                    r.choice(
                        [
                            {"doc_id": 1, "text": "x"},
                            {"doc_id": "inline/größe.md", "text": 5},
                            {**NONASCII_SOURCE, "observed": 5},
                            {**NONASCII_SOURCE, "access": [1]},
                            "text",
                        ]
                    )
                ],
            }
        ]
    ),
    "not-an-object": lambda r: _jsonl([r.choice(["[1, 2]", '"fixture"', "null"])]),
}

# --- corpora ------------------------------------------------------------------


def _corpus_jsonl(i: int = 0, drop: str | None = None, **change) -> str:
    rows = corpus_rows()
    rows[i].update(change)
    if drop:
        rows[i].pop(drop)
    return _jsonl(rows)


CORPUS_JSONL: dict[str, Callable[[random.Random], str]] = {
    "missing-field": lambda r: _corpus_jsonl(drop=r.choice(["doc_id", "text"])),
    "wrong-type-text": lambda r: _corpus_jsonl(text=r.choice([5, None, ["x"], {"t": 1}])),
    "wrong-type-doc_id": lambda r: _corpus_jsonl(doc_id=r.choice([5, "", None])),
    "wrong-type-access": lambda r: _corpus_jsonl(access=r.choice([5, [1], {"a": 1}])),
    "wrong-type-observed": lambda r: _corpus_jsonl(observed=r.choice([5, [], {"d": 1}, True])),
    "nan-text": lambda r: _corpus_jsonl(text=float("nan")),
    "digest-mismatch": lambda r: _corpus_jsonl(version="sha256:" + "0" * 64),
    "duplicate-doc-different-text": lambda r: (
        _corpus_jsonl() + _jsonl([{"doc_id": "policy/retention.md", "text": "other"}])
    ),
    "lone-surrogate": lambda r: _corpus_jsonl().replace("Support requests", "Support \\udc00requests", 1),
    "not-an-object": lambda r: _corpus_jsonl() + "[1]\n",
}


def _corpus_dir_mutation(name: str, corpus: Path, rnd: random.Random) -> None:
    target = corpus / "policy" / "retention.md"
    if name == "invalid-utf8-file":
        target.write_bytes(m_invalid_utf8(target.read_bytes(), rnd))
    elif name == "document-missing":
        target.unlink()
    elif name == "empty-directory":
        shutil.rmtree(corpus)
        corpus.mkdir()
    elif name == "huge-invalid-file":
        target.write_bytes(b"A" * HUGE + b"\xff")
    elif name == "huge-valid-document":
        target.write_bytes(target.read_bytes() + b"B" * HUGE)
    elif name == "symlink-loop":
        (corpus / "loop").symlink_to(corpus, target_is_directory=True)
    elif name == "not-a-directory":
        shutil.rmtree(corpus)
        corpus.write_bytes(b"\xff\xfe not a corpus")


CORPUS_DIR = {
    "invalid-utf8-file": "error",
    "document-missing": "error",
    "empty-directory": "error",
    "huge-invalid-file": "error",
    "huge-valid-document": "any",
    "symlink-loop": "any",
    "not-a-directory": "error",
}

# --- arm TOML -----------------------------------------------------------------

ARM_MUTATIONS: dict[str, Callable[[random.Random], str]] = {
    "unknown-key": lambda r: ARM + "capasity = 3\n",
    "wrong-type": lambda r: ARM.replace(
        "capacity = 16", r.choice(['capacity = "16"', "capacity = 1.5", "capacity = true", "capacity = [16]"])
    ),
    "wrong-type-table": lambda r: (
        ARM
        + r.choice(
            [
                '[retrieval]\nbm25_top_n = "x"\n',
                "[embedding]\nbatch_size = 1.5\n",
                "[access]\nclearance = [1]\n",
                "[fusion]\nweights = 3\n",
            ]
        )
    ),
    "nan-or-inf": lambda r: ARM.replace(
        "abstain_threshold = 0.3",
        r.choice(["abstain_threshold = nan", "abstain_threshold = inf", "temperature = -inf"]),
    ),
    "huge-integer": lambda r: ARM.replace(
        "budget_tokens = 40", r.choice(["budget_tokens = 9223372036854775807", "budget_tokens = 4294967296"])
    ),
    "out-of-range": lambda r: (
        ARM
        + r.choice(
            [
                "[embedding]\nbatch_size = 0\n",
                "[retrieval.hnsw]\nM = 1\n",
                "[fusion]\nrrf_k = -1\n",
                "[retrieval]\nbm25_b = 2.0\n",
                "[generator]\nmax_tokens = 0\n",
                "[retrieval.hnsw]\nseed = -3\n",
                "[selection]\nneighbours = -1\n",
            ]
        )
    ),
    "negative": lambda r: ARM.replace("top_k = 1", r.choice(["top_k = -1", "top_k = 0"])),
    "bad-phases": lambda r: ARM.replace(
        "phases = [0]",
        r.choice(
            [
                'phases = "auto:0"',
                'phases = "auto:99999999999"',
                "phases = [16]",
                "phases = [-1]",
                'phases = { "../../escape" = 0 }',
                'phases = { "a/b" = 1 }',
                "phases = [0, 0]",
                'phases = "sometimes"',
                "phases = []",
                'phases = { ".hidden" = 0 }',
            ]
        ),
    ),
    "bad-name": lambda r: ARM.replace(
        'name = "fuzz"',
        r.choice(['name = ""', 'name = "../x"', 'name = "a b"', "name = 3", 'name = "x\\u001b[31m"']),
    ),
    "duplicate-key": lambda r: ARM + "capacity = 8\n",
    "unknown-choice": lambda r: (
        ARM
        + r.choice(
            ['edge_policy = "drop"\n', '[chunker]\nkind = "page"\n', '[rerank]\nkind = "cross-encoder"\n']
        )
    ),
    "not-toml": lambda r: r.choice(["capacity = = 3\n", "[[[x\n", "name = 'unterminated\n"]),
}

# --- ledgers ------------------------------------------------------------------

LEDGER_TABLES = ("records", "candidates", "units", "boundaries")


def _partitions(ledger: Path) -> list[tuple[str, str]]:
    from ledgerscope.ledger.layout import ledger_layout

    return ledger_layout(ledger).finished(ledger)


def _rewrite(path: Path, table, rerecord: bool = True) -> None:
    """Replace a partition table with ``table`` and re-record its digest (a consistent, wrong file)."""
    import pyarrow.parquet as pq

    from ledgerscope.testing.ledger_files import rerecord as record

    pq.write_table(table, path)
    if rerecord:  # a table file lies three steps below its ledger in every format
        with contextlib.suppress(ValueError, KeyError, TypeError, json.JSONDecodeError):  # a broken marker
            record(path.parents[3], path, table.num_rows)


def _ledger_mutation(name: str, ledger: Path, rnd: random.Random) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ledgerscope.ledger.layout import ledger_layout
    from ledgerscope.testing.ledger_files import table_file as file_of

    layout = ledger_layout(ledger)
    arm, phase = rnd.choice(_partitions(ledger))
    manifest = ledger / "manifest.json"

    def table_file(name: str | None = None) -> Path:
        return file_of(ledger, name or rnd.choice(LEDGER_TABLES), arm, phase)

    if name == "parquet-truncated":
        f = rnd.choice(
            [
                table_file(),
                layout.sources_path(ledger),
                layout.oracle_files(ledger)[0][1],
            ]
        )
        data = f.read_bytes()
        f.write_bytes(data[: rnd.randrange(0, len(data))])
    elif name == "parquet-bytes-flipped":
        f = table_file()
        f.write_bytes(m_flip(f.read_bytes(), rnd))
    elif name == "parquet-emptied":
        table_file().write_bytes(b"")
    elif name == "parquet-deleted":
        table_file().unlink()
    elif name == "parquet-not-parquet":
        table_file().write_bytes(b"PAR1" + os.urandom(64) + b"PAR1")
    elif name == "records-wrong-types":
        f = table_file("records")
        t = pq.read_table(f)
        col = rnd.choice(["phase_offset", "answerable", "support_packed", "qid", "packed_unit_ids"])
        i = t.schema.get_field_index(col)
        values = [json.dumps(v) if not isinstance(v, str) else 7 for v in t[col].to_pylist()]
        arr = pa.array([str(v) for v in values]) if col != "qid" else pa.array(range(t.num_rows), pa.int64())
        _rewrite(f, t.set_column(i, col, arr))
    elif name == "records-missing-column":
        f = table_file("records")
        t = pq.read_table(f)
        _rewrite(f, t.drop_columns([rnd.choice(["qid", "answer_verdict", "support_packed", "arm"])]))
    elif name == "records-duplicate-ids":
        f = table_file("records")
        t = pq.read_table(f)
        _rewrite(f, pa.concat_tables([t, t.slice(rnd.randrange(t.num_rows), 1)]))
    elif name == "records-null-key":
        f = table_file("records")
        t = pq.read_table(f)
        col = rnd.choice(["qid", "arm", "phase"])
        vals = t[col].to_pylist()
        vals[rnd.randrange(len(vals))] = None
        _rewrite(f, t.set_column(t.schema.get_field_index(col), col, pa.array(vals, pa.string())))
    elif name == "records-misfiled":
        f = table_file("records")
        t = pq.read_table(f)
        col = rnd.choice(["arm", "phase"])
        _rewrite(
            f,
            t.set_column(
                t.schema.get_field_index(col), col, pa.array(["elsewhere"] * t.num_rows, pa.string())
            ),
        )
    elif name == "nan-scores":
        f = table_file("candidates")
        t = pq.read_table(f)
        scores = t["score"].to_pylist()
        idx = [i for i, s in enumerate(scores) if s is not None] or [0]
        scores[rnd.choice(idx)] = rnd.choice([float("nan"), float("inf"), -float("inf")])
        _rewrite(f, t.set_column(t.schema.get_field_index("score"), "score", pa.array(scores, pa.float64())))
    elif name == "manifest-unknown-version":
        m = json.loads(manifest.read_text())
        m["format"] = rnd.choice(["ledgerscope-ledger/3", "ledgerscope-ledger/0", None, 1])
        manifest.write_text(json.dumps(m))
    elif name == "manifest-missing-key":
        m = json.loads(manifest.read_text())
        key = rnd.choice(["arms", "format", "arms.phases", "arms.config"])
        if "." in key:
            m["arms"][rnd.choice(sorted(m["arms"]))].pop(key.split(".")[1])
        else:
            m.pop(key)
        manifest.write_text(json.dumps(m))
    elif name == "manifest-wrong-types":
        m = json.loads(manifest.read_text())
        arm = rnd.choice(sorted(m["arms"]))
        target = rnd.choice(["arms", "arm", "phases", "phase-label", "sources", "identity"])
        if target == "arms":
            m["arms"] = rnd.choice([[], "candidate", 3])
        elif target == "arm":
            m["arms"][arm] = "x"
        elif target == "phases":
            m["arms"][arm]["phases"] = rnd.choice(["0", {"label": "0"}, [1, 2]])
        elif target == "phase-label":
            m["arms"][arm]["phases"][0]["label"] = rnd.choice([0, None, ["0"]])
        elif target == "sources":
            m["sources"] = rnd.choice([[], {"x": 1}])
        else:
            m["identity"] = 12
        manifest.write_text(json.dumps(m))
    elif name == "manifest-not-object":
        manifest.write_text(rnd.choice(["[]", "null", '"ledger"', "3"]))
    elif name == "manifest-deleted":
        manifest.unlink()
    elif name == "marker-corrupted":
        layout.marker_path(ledger, arm, phase).write_bytes(rnd.choice([b"{", b"[]", b"\xff\xfe", b""]))
    elif name == "partition-of-unknown-arm":
        marker = layout.marker_path(ledger, arm, phase)
        for src in [*layout.partition_files(ledger, arm, phase).values(), marker]:
            dest = Path(str(src).replace(f"arm-{arm}", "arm-ghost").replace(f"arm={arm}", "arm=ghost"))
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(src, dest)
    elif name == "sources-digest-mismatch":
        f = layout.sources_path(ledger)
        t = pq.read_table(f)
        texts = t["text"].to_pylist()
        i = rnd.randrange(len(texts))
        texts[i] = texts[i][:-1] + ("X" if not texts[i].endswith("X") else "Y")
        pq.write_table(
            t.set_column(t.schema.get_field_index("text"), "text", pa.array(texts, pa.string())), f
        )
    elif name == "sources-duplicate-doc":
        f = layout.sources_path(ledger)
        t = pq.read_table(f)
        row = t.slice(0, 1)
        from ledgerscope.inputs.sources import text_version

        other = row.set_column(row.schema.get_field_index("text"), "text", pa.array(["changed"], pa.string()))
        other = other.set_column(
            other.schema.get_field_index("version"),
            "version",
            pa.array([text_version("changed")], pa.string()),
        )
        pq.write_table(pa.concat_tables([t, other]), f)
    elif name.startswith("fixtures-"):
        f = ledger / "fixtures.jsonl"
        lines = f.read_text(encoding="utf-8").splitlines()
        i = rnd.randrange(len(lines))
        obj = json.loads(lines[i])
        kind = name[len("fixtures-") :]
        if kind == "truncated":
            data = f.read_bytes()
            cut = data.index(b"\n") + rnd.randrange(2, 40)
            f.write_bytes(data[:cut])
            return
        if kind == "unknown-version":
            obj["format"] = "ledgerscope-fixture/9"
        elif kind == "wrong-types":
            obj[rnd.choice(["spans", "question", "sufficient_sets"])] = 7
        elif kind == "offset-out-of-range":
            spans = obj.get("spans") or []
            if spans:
                spans[0]["end"] = 10**9
            else:
                obj["segment"] = "no-such-segment"
        elif kind == "duplicate-qid":
            lines.append(json.dumps(obj))
        elif kind == "deleted":
            f.unlink()
            return
        lines[i] = json.dumps(obj)
        f.write_text("\n".join(lines) + "\n", encoding="utf-8")
    else:  # pragma: no cover
        raise ValueError(name)


LEDGER_MUTATIONS = {
    "parquet-truncated": "error",
    "parquet-bytes-flipped": "error",
    "parquet-emptied": "error",
    "parquet-deleted": "error",
    "parquet-not-parquet": "error",
    "records-wrong-types": "error",
    "records-missing-column": "error",
    "records-duplicate-ids": "error",
    "records-null-key": "error",
    "records-misfiled": "error",
    "nan-scores": "error",
    "manifest-unknown-version": "error",
    "manifest-missing-key": "error",
    "manifest-wrong-types": "error",
    "manifest-not-object": "error",
    "manifest-deleted": "error",
    "marker-corrupted": "error",
    "partition-of-unknown-arm": "error",
    "sources-digest-mismatch": "error",
    "sources-duplicate-doc": "error",
    "fixtures-truncated": "error",
    "fixtures-unknown-version": "error",
    "fixtures-wrong-types": "error",
    "fixtures-offset-out-of-range": "error",
    "fixtures-duplicate-qid": "error",
    "fixtures-deleted": "error",
    "manifest-huge-line": "error",
    "manifest-invalid-utf8": "error",
    "manifest-truncated": "error",
}
#: compare reads records, candidates, oracle and the manifest only: damage to the sources or the
#: fixtures cannot stop it (and need not)
_COMPARE_ANY = {
    "sources-digest-mismatch",
    "sources-duplicate-doc",
    "fixtures-truncated",
    "fixtures-unknown-version",
    "fixtures-wrong-types",
    "fixtures-offset-out-of-range",
    "fixtures-duplicate-qid",
    "fixtures-deleted",
}


def _ledger_commands(case_root: Path, ledger: Path, qid: str, name: str) -> list:
    out = case_root / "out"
    out.mkdir(exist_ok=True)
    L = str(ledger)
    cmds = [
        ("diagnose", ["diagnose", L], [], False),
        ("diagnose --json", ["diagnose", L, "--json"], [], False),
        (
            "compare",
            ["compare", L, "--candidate", "candidate", "--baseline", "baseline", "--n-resamples", "50"],
            [],
            False,
        ),
        ("rerun", ["rerun", L, "--arm", "candidate", "--qid", qid, "--phase", "0"], [], False),
    ]
    cmds.append(
        (
            "convert --to jsonl",
            ["convert", L, "--to", "jsonl", "--out", str(out / "interchange")],
            [out / "interchange"],
            False,
        )
    )
    for fmt, target in (
        ("jsonl", "x.jsonl"),
        ("fixtures", "x.fixtures.jsonl"),
        ("label-studio", "x.ls.json"),
        ("trec", "trec"),
    ):
        paths = [out / target] + ([out / f"{target}.config.xml"] if fmt == "label-studio" else [])
        cmds.append(
            (f"export {fmt}", ["export", L, "--format", fmt, "--out", str(out / target)], paths, False)
        )
    return cmds


# --- ledgers as JSONL interchange ---------------------------------------------


def _edit_line(path: Path, rnd: random.Random, edit: Callable[[dict], object]) -> None:
    lines = path.read_text(encoding="utf-8").splitlines()
    i = rnd.randrange(len(lines))
    obj = json.loads(lines[i])
    edit(obj)
    lines[i] = json.dumps(obj)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _interchange_mutation(name: str, src: Path, rnd: random.Random) -> None:
    rec, cand = src / "records.jsonl", src / "candidates.jsonl"
    if name == "records-wrong-types":
        _edit_line(
            rec,
            rnd,
            lambda o: o.update(
                {
                    rnd.choice(["phase_offset", "answerable", "packed_unit_ids"]): rnd.choice(
                        ["seven", {"x": 1}, 7.5]
                    )
                }
            ),
        )
    elif name == "records-unknown-field":
        _edit_line(rec, rnd, lambda o: o.update({"surprise": True}))
    elif name == "records-missing-key":
        _edit_line(rec, rnd, lambda o: o.pop(rnd.choice(["qid", "arm", "phase"])))
    elif name == "records-duplicate-ids":
        lines = rec.read_text(encoding="utf-8").splitlines()
        rec.write_text("\n".join([*lines, rnd.choice(lines)]) + "\n", encoding="utf-8")
    elif name == "arm-path-traversal":
        _edit_line(rec, rnd, lambda o: o.update({"arm": rnd.choice(["../../escape", "/tmp/x", "ghost"])}))
    elif name == "phase-unknown":
        _edit_line(rec, rnd, lambda o: o.update({"phase": rnd.choice(["../up", "99", ""])}))
    elif name == "nan-scores":
        lines = cand.read_text(encoding="utf-8").splitlines()
        i = rnd.randrange(len(lines))
        obj = json.loads(lines[i])
        obj["score"] = 1.0
        lines[i] = json.dumps(obj).replace('"score": 1.0', '"score": ' + rnd.choice(["NaN", "Infinity"]))
        cand.write_text("\n".join(lines) + "\n", encoding="utf-8")
    elif name == "truncated-line":
        f = rnd.choice([rec, cand, src / "units.jsonl"])
        data = f.read_bytes().rstrip(b"\n")
        f.write_bytes(data[: len(data) - rnd.randint(1, 40)] + b"\n")
    elif name == "invalid-utf8":
        rec.write_bytes(m_invalid_utf8(rec.read_bytes(), rnd))
    elif name == "huge-line-5mb":
        rec.write_bytes(m_huge_line(rec.read_bytes(), rnd))
    elif name == "manifest-unknown-version":
        m = json.loads((src / "manifest.json").read_text())
        m["format"] = "ledgerscope-ledger/7"
        (src / "manifest.json").write_text(json.dumps(m))
    elif name == "sources-digest-mismatch":
        _edit_line(src / "sources.jsonl", rnd, lambda o: o.update({"text": o["text"] + "!"}))
    elif name == "fixtures-garbage-line":
        with (src / "fixtures.jsonl").open("a", encoding="utf-8") as fh:
            fh.write(rnd.choice(["{not json", "[1, 2]", '{"format": "ledgerscope-fixture/1"}']) + "\n")
    elif name == "table-missing":
        (src / rnd.choice(["units.jsonl", "oracle.jsonl", "sources.jsonl", "fixtures.jsonl"])).unlink()
    elif name == "table-empty":
        (src / rnd.choice(["records.jsonl", "candidates.jsonl"])).write_bytes(b"")
    else:  # pragma: no cover
        raise ValueError(name)


INTERCHANGE_MUTATIONS = (
    "records-wrong-types",
    "records-unknown-field",
    "records-missing-key",
    "records-duplicate-ids",
    "arm-path-traversal",
    "phase-unknown",
    "nan-scores",
    "truncated-line",
    "invalid-utf8",
    "huge-line-5mb",
    "manifest-unknown-version",
    "sources-digest-mismatch",
    "fixtures-garbage-line",
    "table-missing",
    "table-empty",
)


# ---------------------------------------------------------------------------
# building a case


KINDS = (
    "fixture-seed000",
    "fixture-seed002",
    "fixture-canonical",
    "corpus-dir",
    "corpus-jsonl",
    "arm-toml",
    "ledger",
    "ledger-jsonl",
    "traces",
    "chunk-store",
)


def mutations(kind: str) -> list[str]:
    """Every mutation of a kind (structured ones first, then the byte-level ones where they apply)."""
    structured = {
        "fixture-seed000": list(SEED000),
        "fixture-seed002": list(SEED002),
        "fixture-canonical": list(CANONICAL),
        "corpus-dir": list(CORPUS_DIR),
        "corpus-jsonl": list(CORPUS_JSONL),
        "arm-toml": list(ARM_MUTATIONS),
        "ledger": list(LEDGER_MUTATIONS),
        "ledger-jsonl": list(INTERCHANGE_MUTATIONS),
        "traces": [*_fuzz_ingest().TRACE_MUTATIONS, "id-not-in-store", "qid-not-in-fixtures"],
        "chunk-store": [*_fuzz_ingest().CHUNK_MUTATIONS, "unlocatable-text"],
    }[kind]
    byte_level = (
        []
        if kind in ("corpus-dir", "ledger", "ledger-jsonl", "traces", "chunk-store")
        else list(BYTE_MUTATIONS)
    )
    return structured + [f"bytes:{m}" for m in byte_level]


def build_case(kind: str, mutation: str, seed: int, root: Path, base_ledger: Path | None = None) -> Case:
    """Write case ``kind/mutation#seed`` under ``root`` and list the commands that read it."""
    rnd = random.Random(f"{kind}/{mutation}/{seed}")
    root.mkdir(parents=True, exist_ok=True)
    arm = root / "arm.toml"
    arm.write_text(ARM, encoding="utf-8")
    expect = "error"
    by_command: dict[str, str] = {}
    byte_mut = BYTE_MUTATIONS.get(mutation.removeprefix("bytes:")) if mutation.startswith("bytes:") else None

    def mutate_bytes(path: Path) -> None:
        nonlocal expect
        fn, expect = byte_mut
        path.write_bytes(fn(path.read_bytes(), rnd))

    if kind == "fixture-seed000":
        fixtures, corpus = root / "seed000.json", None
        fixtures.write_text(json.dumps(_seed000()) if byte_mut else SEED000[mutation](rnd), encoding="utf-8")
        if byte_mut:
            mutate_bytes(fixtures)
        commands = _validate_and_sweep(root, fixtures, corpus, arm)
        inputs = [fixtures, arm]
    elif kind == "fixture-seed002":
        fixtures = root / "gold.json"
        corpus = root / "corpus"
        shutil.copytree(DATA / "seed002_corpus", corpus)
        fixtures.write_text(json.dumps(_seed002()) if byte_mut else SEED002[mutation](rnd), encoding="utf-8")
        if byte_mut:
            mutate_bytes(fixtures)
        commands = _validate_and_sweep(root, fixtures, corpus, arm)
        inputs = [fixtures, corpus, arm]
    elif kind == "fixture-canonical":
        fixtures = root / "fixtures.jsonl"
        corpus = write_corpus_dir(root)
        fixtures.write_text(
            _jsonl(canonical_rows()) if byte_mut else CANONICAL[mutation](rnd), encoding="utf-8"
        )
        if byte_mut:
            mutate_bytes(fixtures)
        commands = _validate_and_sweep(root, fixtures, corpus, arm)
        inputs = [fixtures, corpus, arm]
    elif kind == "corpus-dir":
        fixtures = root / "fixtures.jsonl"
        fixtures.write_text(_jsonl(canonical_rows()), encoding="utf-8")
        corpus = write_corpus_dir(root)
        _corpus_dir_mutation(mutation, corpus, rnd)
        expect = CORPUS_DIR[mutation]
        commands = _validate_and_sweep(root, fixtures, corpus, arm)
        inputs = [fixtures, corpus, arm]
    elif kind == "corpus-jsonl":
        fixtures = root / "fixtures.jsonl"
        fixtures.write_text(_jsonl(canonical_rows()), encoding="utf-8")
        corpus = root / "corpus.jsonl"
        corpus.write_text(
            _jsonl(corpus_rows()) if byte_mut else CORPUS_JSONL[mutation](rnd), encoding="utf-8"
        )
        if byte_mut:
            mutate_bytes(corpus)
        commands = _validate_and_sweep(root, fixtures, corpus, arm)
        inputs = [fixtures, corpus, arm]
    elif kind == "arm-toml":
        fixtures = root / "fixtures.jsonl"
        fixtures.write_text(_jsonl(canonical_rows()), encoding="utf-8")
        corpus = write_corpus_dir(root)
        arm.write_text(ARM if byte_mut else ARM_MUTATIONS[mutation](rnd), encoding="utf-8")
        if byte_mut:
            mutate_bytes(arm)
            if mutation == "bytes:empty-file":
                expect = "any"  # an empty arm file is the documented default arm
        commands = [c for c in _validate_and_sweep(root, fixtures, corpus, arm) if c[0] == "sweep"]
        inputs = [fixtures, corpus, arm]
    elif kind == "ledger":
        if base_ledger is None:
            raise ValueError("a ledger case needs a base ledger")
        ledger = root / "ledger"
        shutil.copytree(base_ledger, ledger)
        if mutation in ("manifest-huge-line", "manifest-invalid-utf8", "manifest-truncated"):
            fn = {
                "manifest-huge-line": m_huge_line,
                "manifest-invalid-utf8": m_invalid_utf8,
                "manifest-truncated": lambda d, r: d[: r.randrange(0, len(d) - 1)],
            }[mutation]
            (ledger / "manifest.json").write_bytes(fn((ledger / "manifest.json").read_bytes(), rnd))
        else:
            _ledger_mutation(mutation, ledger, rnd)
        expect = LEDGER_MUTATIONS[mutation]
        if mutation in _COMPARE_ANY:
            by_command["compare"] = "any"
        qid = first_qid(base_ledger)
        commands = _ledger_commands(root, ledger, qid, mutation)
        inputs = [ledger]
    elif kind == "ledger-jsonl":
        if base_ledger is None:
            raise ValueError("a ledger case needs a base ledger")
        src = root / "interchange"
        shutil.copytree(interchange_of(base_ledger), src)
        _interchange_mutation(mutation, src, rnd)
        out = root / "out" / "ledger"
        out.parent.mkdir(parents=True, exist_ok=True)
        commands = [
            (
                "convert --to parquet",
                ["convert", str(src), "--to", "parquet", "--out", str(out)],
                [out],
                False,
            )
        ]
        inputs = [src]
    elif kind in ("traces", "chunk-store"):
        expect, commands, inputs = _ingest_case(kind, mutation, seed, root)
    else:
        raise ValueError(kind)
    return Case(kind, mutation, seed, expect, root, inputs, commands, by_command)


def _fuzz_ingest():
    from tests import fuzz_ingest

    return fuzz_ingest


def _ingest_case(kind: str, mutation: str, seed: int, root: Path) -> tuple[str, list, list[Path]]:
    """A trace file or chunk store mutated (tests/fuzz_ingest.py), and ``ledgerscope ingest`` over it."""
    fi = _fuzz_ingest()
    corpus = write_corpus_dir(root)
    fixtures = root / "fixtures.jsonl"
    fixtures.write_text(_jsonl(canonical_rows()), encoding="utf-8")
    chunk_rows = fi.base_chunks()
    qids = [r["qid"] for r in canonical_rows()]
    traces_data = fi._dump(fi.base_traces(qids, [c["chunk_id"] for c in chunk_rows]))
    chunks_data = fi._dump(chunk_rows)
    expect = "error"
    if kind == "traces" and mutation == "id-not-in-store":
        rows = fi.base_traces(qids, [c["chunk_id"] for c in chunk_rows])
        rows[seed % len(rows)]["context_ids"] = ["no-such-chunk"]
        rows[seed % len(rows)]["context_text"] = ["x"]
        traces_data = fi._dump(rows)
    elif kind == "traces" and mutation == "qid-not-in-fixtures":
        rows = fi.base_traces(qids, [c["chunk_id"] for c in chunk_rows])
        rows[seed % len(rows)]["qid"] = "no-such-question"
        traces_data = fi._dump(rows)
    elif kind == "traces":
        traces_data, expect = fi.trace_case(mutation, seed, qids, [c["chunk_id"] for c in chunk_rows])
    elif mutation == "unlocatable-text":  # a chunk the first trace names, whose text no document holds
        named = fi.base_traces(qids, [c["chunk_id"] for c in chunk_rows])[0]["context_ids"][0]
        chunk_rows = [
            c
            if c["chunk_id"] != named
            else {"chunk_id": named, "doc_id": c["doc_id"], "text": "a passage no document holds"}
            for c in chunk_rows
        ]
        chunks_data = fi._dump(chunk_rows)
    else:
        chunks_data, expect = fi.chunk_case(mutation, seed)
    traces, chunks = root / "traces.jsonl", root / "chunks.jsonl"
    traces.write_bytes(traces_data)
    chunks.write_bytes(chunks_data)
    out = root / "ledger"
    argv = [
        "ingest",
        str(traces),
        "--chunks",
        str(chunks),
        "--fixtures",
        str(fixtures),
        "--corpus",
        str(corpus),
        "--out",
        str(out),
    ]
    if mutation == "unlocatable-text":  # with --strict a named chunk that lies nowhere stops the ingest
        argv.append("--strict")
    return expect, [("ingest", argv, [out], False)], [traces, chunks, fixtures, corpus]


def interchange_of(ledger: Path) -> Path:
    """The JSONL interchange form of ``ledger`` (made once, beside it)."""
    out = ledger.with_name(ledger.name + ".jsonl")
    if not out.is_dir():
        from ledgerscope.ledger.interchange import to_jsonl

        to_jsonl(ledger, out)
    return out


def first_qid(ledger: Path) -> str:
    line = (ledger / "fixtures.jsonl").read_text(encoding="utf-8").splitlines()[0]
    return json.loads(line)["qid"]


def check_case(case: Case, only: list[str] | None = None, timeout: float = 60.0) -> list[Result]:
    """Run the case's commands (or the named subset) and judge each."""
    results = []
    for name, argv, outputs, stdout_ok in case.commands:
        if only is not None and name not in only:
            continue
        before = checksums(case.inputs)
        run = run_cli(argv, timeout=timeout)
        after = checksums(case.inputs)
        changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
        expect = case.expect_by_command.get(name, case.expect)
        verdict = judge(run, expect, outputs, changed, stdout_ok)
        results.append(Result(case, name, verdict, run))
        for out in outputs:  # a successful command's output is not the next command's problem
            if out.is_dir():
                shutil.rmtree(out, ignore_errors=True)
            elif out.exists():
                out.unlink()
        sweep_out = case.root / "sweep-out"
        if name == "sweep" and sweep_out.exists():
            shutil.rmtree(sweep_out, ignore_errors=True)
    return results


def make_base_ledger(root: Path, real: bool = False) -> Path:
    """The ledger the ledger cases mutate: a small synthetic one, or (``real``) a real sweep's."""
    out = root / "base-ledger"
    if real:
        from ledgerscope.inputs.fixtures import load_fixtures
        from ledgerscope.inputs.sources import load_corpus
        from ledgerscope.pipeline.arm.config import arm_from_dict
        from ledgerscope.pipeline.run.sweep import sweep

        corpus = write_corpus_dir(root)
        fixtures = root / "fixtures.jsonl"
        fixtures.write_text(_jsonl(canonical_rows()), encoding="utf-8")
        fx, merged = load_fixtures(fixtures, load_corpus(corpus))
        arms = [
            arm_from_dict({"name": n, "capacity": 16, "phases": [0, 5], "budget_tokens": 40, "top_k": 1})
            for n in ("candidate", "baseline")
        ]
        sweep(fx, merged, arms, out)
    else:
        from ledgerscope.testing.synthetic import make_synthetic_ledger

        make_synthetic_ledger(out, questions=12, phases=2)
    return out


def summary(results: list[Result]) -> dict:
    """Counts per input kind: cases, command runs, and runs per outcome."""
    kinds: dict[str, dict] = {}
    for r in results:
        k = kinds.setdefault(r.case.kind, {"cases": set(), "runs": 0, "outcomes": {}})
        k["cases"].add(r.case.label)
        k["runs"] += 1
        k["outcomes"][r.verdict.outcome] = k["outcomes"].get(r.verdict.outcome, 0) + 1
    return {
        kind: {"cases": len(v["cases"]), "runs": v["runs"], "outcomes": v["outcomes"]}
        for kind, v in sorted(kinds.items())
    }


def failures(results: list[Result]) -> list[str]:
    out = []
    for r in results:
        if r.verdict.outcome == "FAIL":
            err = r.run.stderr.decode("utf-8", "replace").strip().splitlines()
            tail = err[-1][:300] if err else ""
            out.append(
                f"{r.case.label} [{r.command}] rc={r.run.rc}: {'; '.join(r.verdict.reasons)} | stderr: {tail}"
            )
    return out
