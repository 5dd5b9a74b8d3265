"""The trace and chunk-store parsers, fuzzed in process (bounded here; ``scripts/fuzz_inputs.py
--parser-cases`` runs 100,000), and the bulk reader against the line-by-line reader."""

from __future__ import annotations

import duckdb
import pytest

from tests import fuzz_harness as fh
from tests import fuzz_ingest as fi

QIDS = [r["qid"] for r in fh.canonical_rows()]
CHUNK_IDS = [c["chunk_id"] for c in fi.base_chunks()]


def test_the_base_files_are_valid():
    from ledgerscope.ingest.read.chunkstore import chunks_from_bytes
    from ledgerscope.ingest.read.traceformat import traces_from_bytes

    traces, problems = traces_from_bytes(fi._dump(fi.base_traces(QIDS, CHUNK_IDS)), "t.jsonl")
    assert not problems and len(traces) == 2 * len(QIDS) + 1
    chunks, problems = chunks_from_bytes(fi._dump(fi.base_chunks()), "c.jsonl")
    assert not problems and len(chunks) == len(CHUNK_IDS) >= 3


@pytest.mark.parametrize("mutation", sorted(fi.TRACE_MUTATIONS))
def test_trace_mutations(mutation):
    failures = [f for seed in range(6) for f in fi.run_parser_case("traces", mutation, seed, QIDS, CHUNK_IDS)]
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("mutation", sorted(fi.CHUNK_MUTATIONS))
def test_chunk_store_mutations(mutation):
    failures = [f for seed in range(6) for f in fi.run_parser_case("chunks", mutation, seed, QIDS, CHUNK_IDS)]
    assert not failures, "\n".join(failures)


def test_the_bulk_reader_never_accepts_what_the_line_reader_refuses(tmp_path):
    con = duckdb.connect()
    accepted = 0
    failures = []
    for mutation in sorted(set(fi.TRACE_MUTATIONS) - {"huge-line", "deep-nesting"}):
        for seed in range(3):
            found = fi.differential_case(con, tmp_path, mutation, seed, QIDS, CHUNK_IDS)
            failures += found
            accepted += con.execute(
                "SELECT count(*) FROM duckdb_tables() WHERE table_name = '_ig_trace'"
            ).fetchall()[0][0]
    assert not failures, "\n".join(failures)
    assert accepted > 0  # the bulk reader took some cases (and built the line reader's tables)


@pytest.mark.parametrize("blank", [b"", b"   ", b" " * 100, b"\t" * 70 + b"\r"])
def test_the_bulk_reader_declines_blank_lines_of_any_length(tmp_path, blank):
    """DuckDB skips blank lines, so a row's number would no longer be its line's: the bulk reader
    must leave such a file to the line reader (a whitespace-only line of 64 bytes or more too)."""
    from ledgerscope.ingest.read import fastread

    lines = fi._dump(fi.base_traces(QIDS, CHUNK_IDS, staged=False)).split(b"\n")
    plain, spaced = tmp_path / "plain.jsonl", tmp_path / "spaced.jsonl"
    plain.write_bytes(b"\n".join(lines))
    spaced.write_bytes(b"\n".join([lines[0], blank, *lines[1:]]))
    saved, fastread.MIN_BYTES = fastread.MIN_BYTES, 0
    try:
        con = duckdb.connect()
        assert fastread.read_fast(con, [plain], None, {str(plain): plain.name})
        con = duckdb.connect()
        assert not fastread.read_fast(con, [spaced], None, {str(spaced): spaced.name})
        assert not con.execute("SELECT count(*) FROM duckdb_tables()").fetchall()[0][0]  # nothing left
    finally:
        fastread.MIN_BYTES = saved


def test_the_bulk_reader_takes_a_null_answer_but_not_a_missing_one(tmp_path):
    """A failed request's answer is null (accepted, the same tables as the line reader's); a line with
    no answer key reads as null too, and only the line reader may refuse it (with its location)."""
    from ledgerscope.ingest.derive.tables import trace_tables
    from ledgerscope.ingest.read import fastread
    from ledgerscope.ingest.read.traceformat import read_traces

    rows = fi.base_traces(QIDS, CHUNK_IDS, staged=False)
    rows[1]["answer"], rows[-1]["answer"] = None, None
    null, missing = tmp_path / "null.jsonl", tmp_path / "missing.jsonl"
    null.write_bytes(fi._dump(rows))
    rows[-1].pop("answer")
    missing.write_bytes(fi._dump(rows)[:-1])  # the last line without its newline too
    saved, fastread.MIN_BYTES = fastread.MIN_BYTES, 0
    try:
        con = duckdb.connect()
        assert fastread.read_fast(con, [null], None, {str(null): null.name})
        tables = ("_ig_trace", "_ig_stage")
        got = [con.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall() for t in tables]
        traces, problems = read_traces([null])
        assert not problems
        trace_tables(con, traces, {str(null): null.name})
        assert got == [con.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall() for t in tables]
        assert not fastread.read_fast(duckdb.connect(), [missing], None, {str(missing): missing.name})
        _, problems = read_traces([missing])
        assert [(p.line, p.field) for p in problems] == [(len(rows), "answer")], problems
    finally:
        fastread.MIN_BYTES = saved
