"""The ten-step diagnosis of a whole ledger, evidence included, computed inside DuckDB.

:func:`ledgerscope.diagnose.diagnose` is the definition: a pure function of one
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
  :func:`ledgerscope.safe_text.json_text` escapes (only text that is not plain
  ASCII is searched).

``tests/test_diagnose_sql.py`` (and the starved, weak-HNSW and seed sweeps in
their own tests) check every record against
:func:`ledgerscope.diagnose_ledger.diagnose_ledger`, the pure function fed
from the same ledger, including rows edited into corners no sweep produces.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import BinaryIO

from ..diagnose_ledger import load_ledger_fixtures
from ..safe_text import json_escaped
from . import coverage, evidence, inputs

#: the columns of query.build_record_view's ``record_diagnosis``
VIEW_COLUMNS = (
    "arm, CAST(phase AS VARCHAR) AS phase, qid, CAST(step AS INTEGER) AS step, step_name, label, "
    "CAST(from_json(flags, '[\"VARCHAR\"]') AS VARCHAR[]) AS flags, evidence_json, walk_json"
)


def diagnosis_query(con, ledger: str | Path, arm: str | None, columns: str) -> str:
    """SQL selecting ``columns`` (over the ``_ls_d`` CTE) for every record, in ledger order.

    Registers the small inputs (fixtures, stage members, depths, heads) first;
    call :func:`drop_inputs` when done with the query.
    """
    fixtures, texts = load_ledger_fixtures(con, ledger)
    inputs.register_fixtures(con, fixtures, texts)
    inputs.register_lists(con, ledger)
    inputs.register_records(con, arm)
    inputs.register_heads(con)
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


def drop_inputs(con) -> None:
    """Remove what :func:`diagnosis_query` registered on the connection."""
    inputs.drop(con)


def diagnosis_lines(con, ledger: str | Path, arm: str | None = None) -> list[str]:
    """The JSON lines of ``diagnose --json`` (escaped for a terminal), in ledger order."""
    try:
        rows = con.execute(diagnosis_query(con, ledger, arm, "line")).fetchall()
    finally:
        drop_inputs(con)
    return [json_escaped(r[0][:-1]) for r in rows]  # without the newline


def diagnosis_rows(con, ledger: str | Path, arm: str | None = None) -> list[dict]:
    """The rows of ``diagnose --json`` as dicts (for tables and views), in ledger order."""
    return [json.loads(line) for line in diagnosis_lines(con, ledger, arm)]


def write_json_lines(con, ledger: str | Path, out: BinaryIO, arm: str | None = None) -> int:
    """Write ``diagnose --json`` to the binary stream ``out``; return the number of lines.

    Every line is built before the first byte is written (no partial output),
    then copied from Arrow's buffers: no Python string per record. A buffer
    that is ASCII without DEL holds nothing a terminal acts on (DuckDB's JSON
    writer escapes C0 controls); any other is escaped as ``json_text`` does.
    """
    try:
        query = diagnosis_query(con, ledger, arm, "line")
        table = con.sql(query).to_arrow_table()
    finally:
        drop_inputs(con)
    for chunk in table.column(0).chunks:
        data = _utf8(chunk)
        if not (data.isascii() and b"\x7f" not in data):
            data = json_escaped(data.decode("utf-8")).encode("utf-8")
        out.write(data)
    return table.num_rows


def _utf8(arr) -> bytes:
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
