"""The ten-step diagnosis of a whole ledger, evidence included, computed inside DuckDB.

:func:`ledgerscope.analysis.diagnosis.tree.diagnose` is the definition: a pure function of one
record. Run per record it costs ~100 us of Python, which on a ledger of a
million candidate rows was most of ``diagnose``'s time. Here the same rows are
one query of set operations over the candidate table:

* the step, label, flags and walk depend only on a record's flags, verdicts and
  oracle row; the distinct combinations (a few hundred at most) go through the
  pure function itself (:mod:`.inputs`), so that logic lives in one place;
* the evidence (closest sufficient set, uncovered parts of each missing span
  with whitespace excused, the input stage's units over them with ranks and
  scores in every list shown, packing detail, packed cover, citations) is
  mirrored in SQL (:mod:`.coverage`, :mod:`.evidence`);
* the JSON text is built by DuckDB (:mod:`.sqltext`), copied to stdout from
  Arrow's buffers, and escaped for a terminal as
  :func:`ledgerscope.common.safe_text.json_text` escapes (only text that is not plain
  ASCII is searched).

Entry points: :func:`write_json_lines` (``diagnose --json``) and :func:`diagnosis_lines` give
every record with its evidence; :func:`heads_table` only what the heads give (``record_view``:
the ``diagnose`` summary, ``export``, the TUI); :func:`diagnosis_evidence` the evidence of
selected records (``export``).
A ledger of more than :data:`SLICE_ROWS` candidate rows, or a selection, is diagnosed in
consecutive slices of ledger order, each one query reading only its partitions, so memory
stays that of one slice.

``tests/test_diagnose_sql.py`` (and the starved, weak-HNSW and seed sweeps in
their own tests) check every record against
:func:`ledgerscope.analysis.diagnosis.feed.diagnose_ledger`, the pure function fed
from the same ledger, including rows edited into corners no sweep produces.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from ledgerscope.analysis.diagnosis.sql import coverage, evidence, inputs
from ledgerscope.common.safe_text import json_escaped
from ledgerscope.common.sql_tables import columns_table, drop_tables

if TYPE_CHECKING:
    from ledgerscope.inputs.fixtures import Fixture

if TYPE_CHECKING:
    from duckdb import DuckDBPyConnection

#: candidate rows per query. The query's memory grows with the rows it reads (about half a
#: gigabyte per million), so a larger ledger is diagnosed in consecutive slices of ledger order,
#: one query each, and its peak memory stays that of one slice.
SLICE_ROWS = 2_000_000

#: a slice of ledger order: the first and last record number (None: the whole ledger)
Slice = tuple[int, int] | None


def prepare(
    con: DuckDBPyConnection,
    ledger: str | Path,
    arm: str | None,
    max_rows: int | None = None,
    fixtures: tuple[dict[str, Fixture], dict[str, str]] | None = None,
    keys: str | None = None,
) -> list[Slice]:
    """Register the small inputs (fixtures, stage members, depths, records, heads); return the
    slices of ledger order to diagnose, each up to ``max_rows`` candidate rows (one record's rows
    are never split). Call :func:`slice_query` per slice, then :func:`drop_inputs`. ``fixtures``:
    :func:`ledgerscope.ledger.fixtures.load_ledger_fixtures`'s result, when the caller has it
    already; ``keys``: a table of (arm, phase, qid) to diagnose only those records."""
    from ledgerscope.ledger.fixtures import load_ledger_fixtures  # pyarrow: only when run

    by_qid, texts = fixtures if fixtures is not None else load_ledger_fixtures(con, ledger)
    inputs.register_fixtures(con, by_qid, texts)
    inputs.register_lists(con, ledger)
    inputs.register_records(con, arm, keys)
    inputs.register_heads(con)
    return inputs.slices(con, arm, max_rows or SLICE_ROWS, selected=keys is not None)


def slice_query(con: DuckDBPyConnection, part: Slice, columns: str) -> str:
    """Point the diagnosis at the records of ``part`` (and the partitions holding them); the SQL
    selecting ``columns`` (over the ``_ls_d`` CTE) for each of them, in ledger order."""
    inputs.select_slice(con, part)
    ctes = [
        *coverage.records(),
        *coverage.candidate_rows(),
        *coverage.coverage(),
        *coverage.sets(),
        *evidence.units(),
        *evidence.around(),
        *evidence.packed(),
        *evidence.assemble(),
    ]
    final = f"SELECT {columns} FROM _ls_d ORDER BY rid"
    bodies = [sql for _, sql in ctes] + [final]

    def materialized(name: str) -> str:  # read more than once: computed once; else inlined
        uses = sum(len(re.findall(rf"\b{name}\b", body)) for body in bodies)
        return "MATERIALIZED" if uses > 1 else "NOT MATERIALIZED"

    body = ",\n".join(f"{name} AS {materialized(name)} ({sql})" for name, sql in ctes)
    return f"WITH {body}\n{final}"


def drop_inputs(con: DuckDBPyConnection) -> None:
    """Remove what :func:`prepare` and :func:`slice_query` registered on the connection."""
    inputs.drop(con)


def diagnosis_lines(
    con: DuckDBPyConnection, ledger: str | Path, arm: str | None = None, max_rows: int | None = None
) -> list[str]:
    """The JSON lines of ``diagnose --json`` (escaped for a terminal), in ledger order."""
    lines: list[str] = []
    try:
        for part in prepare(con, ledger, arm, max_rows):
            rows = con.execute(slice_query(con, part, "line")).fetchall()
            lines.extend(json_escaped(r[0][:-1]) for r in rows)  # without the newline
    finally:
        drop_inputs(con)
    return lines


def heads_table(con: DuckDBPyConnection, table: str) -> None:
    """The table ``table``: the heads of every distinct combination of :data:`.inputs.HEAD_COLUMNS`
    among the ledger's records, ``flags`` a list (milliseconds: no fixtures, no candidate rows); a
    record finds its row with :func:`head_join`. An in-memory table, not TEMP, so the connection's
    cursors see it."""
    try:
        inputs.register_fixtures(con, {}, {}, fates=False)  # the record columns the heads ignore stay empty
        inputs.register_records(con, None)
        inputs.register_heads(con)
        con.execute(
            f"CREATE OR REPLACE TABLE {table} AS SELECT * EXCLUDE (walk_pre, walk_post) REPLACE "
            "(CAST(from_json(flags, '[\"VARCHAR\"]') AS VARCHAR[]) AS flags) FROM _ls_head"
        )
    finally:
        drop_inputs(con)


def head_join(records: str, table: str) -> str:
    """SQL: ``LEFT JOIN`` of ``records`` (an alias whose columns include :data:`.inputs.HEAD_COLUMNS`)
    to its row of :func:`heads_table`'s ``table``, aliased ``h``."""
    return f"LEFT JOIN {table} h ON {inputs.head_match(records)}"


def diagnosis_evidence(
    con: DuckDBPyConnection,
    ledger: str | Path,
    keys: list[tuple[str, str, str]],
    max_rows: int | None = None,
    fixtures: tuple[dict[str, Fixture], dict[str, str]] | None = None,
) -> dict[tuple[str, str, str], tuple[str, str]]:
    """(arm, phase, qid) -> (evidence JSON, walk JSON) for the records ``keys`` name, reading only
    the partitions that hold them."""
    out: dict[tuple[str, str, str], tuple[str, str]] = {}
    if not keys:
        return out
    columns: dict[str, tuple[str, list[Any]]] = {
        "arm": ("VARCHAR", []),
        "phase": ("VARCHAR", []),
        "qid": ("VARCHAR", []),
    }
    for key in keys:
        for (_, values), value in zip(columns.values(), key, strict=True):
            values.append(value)
    columns_table(con, "_ls_keys", columns)
    try:
        for part in prepare(con, ledger, None, max_rows, fixtures, keys="_ls_keys"):
            query = slice_query(con, part, "arm, CAST(phase AS VARCHAR), qid, evidence_json, walk_json")
            for arm, phase, qid, evidence_json, walk_json in con.execute(query).fetchall():
                out[(arm, phase, qid)] = (evidence_json, walk_json)
    finally:
        drop_inputs(con)
        drop_tables(con, "_ls_keys")
    return out


def write_json_lines(
    con: DuckDBPyConnection,
    ledger: str | Path,
    out: BinaryIO,
    arm: str | None = None,
    max_rows: int | None = None,
) -> int:
    """Write ``diagnose --json`` to the binary stream ``out``; return the number of lines.

    Every line is built before the first byte reaches ``out`` (no partial output): one
    slice is written from the query's result, several are gathered in a temporary file
    first. Lines are copied from Arrow's buffers, no Python string per record. A buffer
    that is ASCII without DEL holds nothing a terminal acts on (DuckDB's JSON writer
    escapes C0 controls); any other is escaped as ``json_text`` does.
    """
    with contextlib.ExitStack() as stack:
        stack.callback(drop_inputs, con)
        parts = prepare(con, ledger, arm, max_rows)
        sink = out if len(parts) == 1 else stack.enter_context(tempfile.TemporaryFile())
        n = 0
        for part in parts:
            table = con.sql(slice_query(con, part, "line")).to_arrow_table()
            for chunk in table.column(0).chunks:
                data = _utf8(chunk)
                if not (data.isascii() and b"\x7f" not in data):
                    data = json_escaped(data.decode("utf-8")).encode("utf-8")
                sink.write(data)
            n += table.num_rows
            del table
        if sink is not out:
            sink.seek(0)
            shutil.copyfileobj(sink, out, 1 << 20)
    return n


def _utf8(arr: Any) -> bytes:
    """The concatenated UTF-8 of an Arrow string array, straight from its data buffer."""
    import numpy as np
    import pyarrow as pa

    if arr.null_count or not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)):
        return "".join(v for v in arr.to_pylist() if v is not None).encode()
    _, offsets, data = arr.buffers()
    width = np.int64 if pa.types.is_large_string(arr.type) else np.int32
    offs = np.frombuffer(offsets, dtype=width)[arr.offset : arr.offset + len(arr) + 1]
    if len(offs) == 0 or data is None:
        return b""
    return memoryview(data)[int(offs[0]) : int(offs[-1])].tobytes()
