"""Malformed trace files and chunk stores: the cases, an in-process runner, and the CLI cases.

Shared by ``tests/test_ingest_fuzz.py`` (bounded), ``scripts/fuzz_inputs.py``
(``--parser-cases``: the long in-process run) and ``tests/fuzz_harness.py`` (the
``traces`` and ``chunk-store`` kinds, through ``ledgerscope ingest``). A case is
a base file (valid: seed 002's records, staged traces, a chunk store over the
harness's corpus), a mutation and a seed. What a parser must do with it: never
raise, and give problems shaped ``file:line: field: reason`` naming this file and
a line it has (or none); a mutation marked ``error`` must give at least one.
The bulk reader (:mod:`ledgerscope.ingest.read.fastread`) must never accept what the
line-by-line reader refuses, and when it accepts, build the same tables.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable

ERROR = re.compile(r"^(?P<file>[^\s:][^:]*?)(?::(?P<line>\d+))?: (?P<field>[^:]+?): (?P<reason>.+)$")

#: the chunk store's chunks: over the fuzz harness's corpus (policy/retention.md), offsets verified
DOC = "policy/retention.md"


def base_chunks() -> list[dict]:
    from tests.fuzz_harness import corpus_rows

    text = next(r["text"] for r in corpus_rows() if r["doc_id"] == DOC)
    out, pos = [], 0
    for i, para in enumerate(p for p in text.split("\n\n") if p.strip()):
        start = text.index(para, pos)
        pos = start + len(para)
        out.append(
            {
                "chunk_id": f"c{i}",
                "doc_id": DOC,
                "text": para,
                "start": start,
                "end": pos,
                "coordinate_system": "codepoint-half-open",
            }
        )
    return out


def base_traces(qids: list[str], chunk_ids: list[str], staged: bool = True) -> list[dict]:
    """Seed-002 records for every question (two configs), and staged ones for the first."""
    rnd = random.Random(0)
    out = []
    for config in ("a", "b"):
        for q in qids:
            ids = rnd.sample(chunk_ids, min(4, len(chunk_ids)))
            out.append(
                {
                    "qid": q,
                    "config": config,
                    "retrieved_ids": ids,
                    "scores": [round(1 - i / 10, 2) for i in range(len(ids))],
                    "context_ids": ids[:2],
                    "context_text": ["x", "y"][: len(ids[:2])],
                    "answer": "7 days [1]",
                    "citations": ["1"],
                }
            )
    if staged:
        ids = chunk_ids[:3]
        out.append(
            {
                "qid": qids[0],
                "config": "staged",
                "phase": "p1",
                "context_ids": ids[:1],
                "context_text": "literal",
                "answer": None,
                "error": "timeout",
                "stages": {
                    "bm25": {"ids": ids, "scores": [3.0, 2.0, 1.0]},
                    "hyde": {"ids": ids[1:]},
                    "reranked": {"ids": ids[:2]},
                },
                "stage_order": ["bm25", "hyde", "reranked"],
                "claims": {"support_packed": True},
            }
        )
    return out


def _dump(rows: list) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in rows)  # a lone surrogate as its escape


def _pick(rnd: random.Random, rows: list[dict]) -> dict:
    return rows[rnd.randrange(len(rows))]


WRONG = [7, -1.5, True, None, "x", "", [], [1], {}, {"a": 1}, ["", "a"], 1e308]


def _wrong_type(rows: list[dict], rnd: random.Random) -> bytes:
    row = _pick(rnd, rows)
    key = rnd.choice(sorted(row))
    row[key] = rnd.choice([w for w in WRONG if w != row[key]])
    return _dump(rows)


def _with(edit: Callable[[dict, random.Random], None]) -> Callable[[list[dict], random.Random], bytes]:
    def mutate(rows: list[dict], rnd: random.Random) -> bytes:
        edit(_pick(rnd, rows), rnd)
        return _dump(rows)

    return mutate


def _first_ids(row: dict) -> list:
    if "retrieved_ids" in row:
        return row["retrieved_ids"]
    return next(iter(row["stages"].values()))["ids"]


def _raw(edit: Callable[[bytes, random.Random], bytes]) -> Callable[[list[dict], random.Random], bytes]:
    return lambda rows, rnd: edit(_dump(rows), rnd)


def _line_edit(edit: Callable[[bytes, random.Random], bytes]) -> Callable[[bytes, random.Random], bytes]:
    def on_one_line(data: bytes, rnd: random.Random) -> bytes:
        lines = data.split(b"\n")
        i = rnd.randrange(max(1, len(lines) - 1))
        lines[i] = edit(lines[i], rnd)
        return b"\n".join(lines)

    return on_one_line


def _truncate(line: bytes, rnd: random.Random) -> bytes:
    return line[: rnd.randrange(1, max(2, len(line) - 1))]


def _invalid_utf8(line: bytes, rnd: random.Random) -> bytes:
    i = rnd.randrange(len(line))
    return line[:i] + rnd.choice([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x80"]) + line[i:]


def _duplicate_key(line: bytes, rnd: random.Random) -> bytes:
    return line[:-1] + b', "qid": "again"}' if line.endswith(b"}") else line + b"{"


def _surrogate(row: dict, rnd: random.Random) -> None:
    row["qid"] = row["qid"] + "\ud800"


def _nan(row: dict, rnd: random.Random) -> None:
    if "scores" in row:
        row["scores"][0] = float("nan")
    else:
        row["qid"] = float("inf")


def _dup_ids(row: dict, rnd: random.Random) -> None:
    ids = _first_ids(row)
    ids.append(ids[0])
    if "scores" in row:
        row["scores"].append(0.0)


def _unknown_stage(row: dict, rnd: random.Random) -> None:
    row.setdefault("stages", {})[rnd.choice(["hyde2", "BM25", "re-ranked", "x" * 50])] = {"ids": ["c0"]}


#: mutation -> (edit of the base rows into bytes, "error" | "any"); "any": may still be valid
TRACE_MUTATIONS: dict[str, tuple[Callable[[list[dict], random.Random], bytes], str]] = {
    "truncated-line": (_raw(_line_edit(_truncate)), "error"),
    "invalid-utf8": (_raw(_line_edit(_invalid_utf8)), "error"),
    "duplicate-key": (_raw(_line_edit(_duplicate_key)), "error"),
    "huge-line": (_raw(lambda d, r: d + b'{"qid": "' + b"x" * (16 * 1024 * 1024 + 10) + b'"}\n'), "error"),
    "not-an-object": (_raw(lambda d, r: d + r.choice([b"[1, 2]", b"7", b'"x"', b"null"]) + b"\n"), "error"),
    "deep-nesting": (_raw(lambda d, r: d + b"[" * 100_000 + b"\n"), "error"),
    "wrong-type": (_wrong_type, "any"),
    "nan-score": (_with(_nan), "error"),
    "lone-surrogate": (_with(_surrogate), "error"),
    "duplicate-ids": (_with(_dup_ids), "error"),
    "unknown-stage": (_with(_unknown_stage), "error"),
    "unknown-version": (
        _with(lambda row, r: row.update(format=r.choice(["ledgerscope-trace/2", "v1", 1]))),
        "error",
    ),
    "unknown-field": (
        _with(lambda row, r: row.update({r.choice(["contxt_ids", "Qid", "retrieved"]): []})),
        "error",
    ),
    "missing-required": (
        _with(lambda row, r: row.pop(r.choice(["qid", "context_ids", "context_text", "answer"]))),
        "error",
    ),
    "null-required": (
        _with(lambda row, r: row.update({r.choice(["qid", "context_ids", "context_text"]): None})),
        "error",
    ),
    "scores-misaligned": (
        _with(lambda row, r: row.update(scores=[1.0] * (len(_first_ids(row)) + 1))),
        "error",
    ),
    "context-misaligned": (
        _with(lambda row, r: row.update(context_text=["a"] * (len(row["context_ids"]) + 1))),
        "error",
    ),
    "second-trace": (lambda rows, r: _dump([*rows, dict(rows[0])]), "error"),
    "bad-config": (_with(lambda row, r: row.update(config=r.choice(["../x", "a b", "", "é"]))), "error"),
    "bad-phase": (_with(lambda row, r: row.update(phase=r.choice([".x", "a/b", ""]))), "error"),
    "stage-order": (
        _with(
            lambda row, r: row.update(
                stage_order=["reranked", "bm25"],
                stages={"bm25": {"ids": ["c0"]}, "reranked": {"ids": ["c0"]}},
            )
        ),
        "error",
    ),
    "unknown-claim": (_with(lambda row, r: row.update(claims={"support_everything": True})), "error"),
    "empty-file": (lambda rows, r: b"", "error"),
    "blank-lines": (
        lambda rows, r: (
            b"\n".join(_dump(rows).split(b"\n")[:2]) + b"\n\n \n" + b"\n".join(_dump(rows).split(b"\n")[2:])
        ),
        "any",
    ),
    "bit-flip": (
        _raw(lambda d, r: bytes(b ^ (1 << r.randrange(8)) if r.random() < 0.01 else b for b in d)),
        "any",
    ),
    "unchanged": (lambda rows, r: _dump(rows), "any"),
    "optional-fields": (_with(lambda row, r: _vary(row, r)), "any"),
}


def _vary(row: dict, rnd: random.Random) -> None:
    """Valid variations of a record: optional fields dropped or added, the context as one text."""
    for key in ("scores", "citations", "config"):
        if rnd.random() < 0.3:
            row.pop(key, None)
    if rnd.random() < 0.5:
        row["context_text"] = "one literal context"
    row.update(
        {
            k: v
            for k, v in (
                ("abstained", rnd.random() < 0.5),
                ("prompt", "P"),
                ("question", "Q?"),
                ("phase", rnd.choice(["0", "p5", "07"])),
                ("error", None),
                ("format", "ledgerscope-trace/1"),
            )
            if rnd.random() < 0.5
        }
    )


def _chunk_edit(edit: Callable[[dict, random.Random], None]) -> Callable[[list[dict], random.Random], bytes]:
    return _with(edit)


CHUNK_MUTATIONS: dict[str, tuple[Callable[[list[dict], random.Random], bytes], str]] = {
    "truncated-line": (_raw(_line_edit(_truncate)), "error"),
    "invalid-utf8": (_raw(_line_edit(_invalid_utf8)), "error"),
    "huge-line": (
        _raw(lambda d, r: d + b'{"chunk_id": "' + b"x" * (16 * 1024 * 1024 + 10) + b'"}\n'),
        "error",
    ),
    "wrong-type": (_wrong_type, "any"),
    "duplicate-id": (lambda rows, r: _dump([*rows, {**rows[0], "text": "other"}]), "error"),
    "missing-text": (_chunk_edit(lambda c, r: c.pop("text")), "error"),
    "offsets-without-system": (_chunk_edit(lambda c, r: c.pop("coordinate_system")), "error"),
    "start-after-end": (_chunk_edit(lambda c, r: c.update(start=c["end"] + 1)), "error"),
    "start-alone": (_chunk_edit(lambda c, r: c.pop("end")), "error"),
    "unknown-system": (_chunk_edit(lambda c, r: c.update(coordinate_system="bytes")), "error"),
    "unknown-version": (_chunk_edit(lambda c, r: c.update(format="ledgerscope-trace/9")), "error"),
    "unknown-field": (_chunk_edit(lambda c, r: c.update(offset=3)), "error"),
    "nan-offset": (_raw(lambda d, r: d.replace(b'"start": 0', b'"start": NaN', 1)), "any"),
    "lone-surrogate": (_chunk_edit(lambda c, r: c.update(text=c["text"] + "\udfff")), "error"),
    "empty-file": (lambda rows, r: b"", "error"),
    "bit-flip": (
        _raw(lambda d, r: bytes(b ^ (1 << r.randrange(8)) if r.random() < 0.01 else b for b in d)),
        "any",
    ),
}


def trace_case(
    mutation: str, seed: int, qids: list[str], chunk_ids: list[str], staged: bool | None = None
) -> tuple[bytes, str]:
    fn, expect = TRACE_MUTATIONS[mutation]
    rnd = random.Random(f"traces/{mutation}/{seed}")
    staged = rnd.random() < 0.5 if staged is None else staged
    return fn(base_traces(qids, chunk_ids, staged=staged), rnd), expect


def chunk_case(mutation: str, seed: int) -> tuple[bytes, str]:
    fn, expect = CHUNK_MUTATIONS[mutation]
    rnd = random.Random(f"chunks/{mutation}/{seed}")
    return fn(base_chunks(), rnd), expect


def judge(problems: list, data: bytes, file: str, expect: str) -> list[str]:
    """What is wrong with a parser's answer to one case (empty: nothing)."""
    bad = []
    n_lines = data.count(b"\n") + 1
    for p in problems:
        text = str(p)
        m = ERROR.match(text)
        if m is None or "\n" in text:
            bad.append(f"problem not shaped file:line: field: reason: {text[:200]!r}")
            continue
        if m["file"] != file:
            bad.append(f"problem names another file: {text[:200]!r}")
        if m["line"] is not None and not 1 <= int(m["line"]) <= n_lines:
            bad.append(f"problem names line {m['line']} of a {n_lines}-line file")
    if expect == "error" and not problems:
        bad.append("malformed input accepted")
    return bad


def run_parser_case(kind: str, mutation: str, seed: int, qids: list[str], chunk_ids: list[str]) -> list[str]:
    """One in-process case: the parser's answer judged; an exception is a failure too."""
    from ledgerscope.ingest.read.chunkstore import chunks_from_bytes
    from ledgerscope.ingest.read.traceformat import traces_from_bytes

    file = "traces.jsonl" if kind == "traces" else "chunks.jsonl"
    data, expect = (
        trace_case(mutation, seed, qids, chunk_ids) if kind == "traces" else chunk_case(mutation, seed)
    )
    try:
        _, problems = traces_from_bytes(data, file) if kind == "traces" else chunks_from_bytes(data, file)
    except Exception as exc:
        return [f"{kind}/{mutation}#{seed}: raised {type(exc).__name__}: {exc}"[:300]]
    return [f"{kind}/{mutation}#{seed}: {b}" for b in judge(problems, data, file, expect)]


def differential_case(
    con, root, mutation: str, seed: int, qids: list[str], chunk_ids: list[str]
) -> list[str]:
    """The bulk reader against the line-by-line reader on one seed-002 case (files under ``root``)."""
    from ledgerscope.ingest.derive.tables import trace_tables
    from ledgerscope.ingest.read import fastread
    from ledgerscope.ingest.read.traceformat import read_traces

    data, _ = trace_case(mutation, seed, qids, chunk_ids, staged=False)  # the bulk reader's shape
    path = root / "traces.jsonl"
    path.write_bytes(data)
    names = {str(path): path.name}
    for t in ("_ig_trace", "_ig_stage"):
        con.execute(f"DROP TABLE IF EXISTS {t}")
    saved, fastread.MIN_BYTES = fastread.MIN_BYTES, 0
    try:
        fast = fastread.read_fast(con, [path], None, names)
        got = (
            [con.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall() for t in ("_ig_trace", "_ig_stage")]
            if fast
            else None
        )
    except Exception as exc:
        return [f"fast/{mutation}#{seed}: raised {type(exc).__name__}: {exc}"[:300]]
    finally:
        fastread.MIN_BYTES = saved
    traces, problems = read_traces([path])
    if not fast:
        return []
    if problems:
        return [
            f"fast/{mutation}#{seed}: the bulk reader accepted what the line reader refuses: {problems[0]}"
        ]
    trace_tables(con, traces, names)
    want = [con.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall() for t in ("_ig_trace", "_ig_stage")]
    return [] if got == want else [f"fast/{mutation}#{seed}: the two readers built different tables"]
