"""Seed-002 trace files read by DuckDB in bulk, exactly when the line-by-line reader would accept them.

The line-by-line reader (:mod:`.traceformat`) is the definition: it decodes
every line with Python's strict JSON and locates every problem. For a large
file of seed 002's shape that is most of an ingest's time, so this module first
tries DuckDB: one pass infers every column's type over the whole file
(``sample_size=-1``), a second reads it with those columns typed, and set
operations check what the types cannot. It only ever *accepts*: anything it
cannot prove valid (a column outside seed 002's record, a type other than the
format's, a NULL where a value is required (a null answer only with the key present), a repeated or
empty id, a score that
is not finite or not aligned, a second trace of a request, a blank line, a line
DuckDB will not parse) sends the whole input to the line-by-line reader, which
then names the problem ``file:line: field: reason`` (or accepts it, when only
this module's caution declined it). When it accepts, it builds the same
``_ig_trace`` and ``_ig_stage`` tables the line-by-line reader's columns make
(``tests/test_ingest_fuzz.py`` compares the two on malformed and valid inputs).
"""

from __future__ import annotations

from pathlib import Path

from ledgerscope.common.sql_tables import sql_literal
from ledgerscope.ingest.read.traceformat import DEFAULT_PHASE
from ledgerscope.inputs.sources import strict_loads
from ledgerscope.ledger.layout import ARM_NAME, PHASE_LABEL
from ledgerscope.trace.spec import FORMAT, MAX_LINE_BYTES

#: the columns of seed 002's shape and the types DuckDB must infer for them
STRING = ("format", "qid", "config", "phase", "question", "answer", "error", "prompt")
LISTS = ("retrieved_ids", "context_ids", "citations")
NUMBER_LISTS = {
    "DOUBLE[]",
    "BIGINT[]",
    "UBIGINT[]",
    "HUGEINT[]",
    "INTEGER[]",
    "UINTEGER[]",
    "FLOAT[]",
    "SMALLINT[]",
    "TINYINT[]",
    "USMALLINT[]",
    "UTINYINT[]",
    "NULL[]",
}
#: a second trace of one request; an id repeated within a list (by hash: a collision only sends the
#: input to the line reader)
_REPEATS = (
    "SELECT count(*) FROM (SELECT arm, phase, qid FROM _ig_trace GROUP BY ALL HAVING count(*) > 1)",
    "SELECT count(*) FROM (SELECT hash(tid, stage, chunk_id) AS h FROM _ig_stage GROUP BY h "
    "HAVING count(*) > 1)",
)
#: a file this small goes to the line-by-line reader directly (DuckDB's set-up costs more)
MIN_BYTES = 4 * 1024 * 1024


def _lines(path: Path) -> int:
    """How many lines the file holds (a last line without its newline counted): when DuckDB reads as
    many rows, no line was blank or held two objects, so a row's number is its line's."""
    n, last = 0, b"\n"
    with path.open("rb") as fh:
        while block := fh.read(1 << 24):
            n += block.count(b"\n")
            last = block[-1:]
    return n + (last != b"\n")


def _lines_and(path: Path, wanted: list[int]) -> tuple[int, list[bytes]]:
    """:func:`_lines`, and the lines numbered ``wanted`` (1-based, ascending), in one pass."""
    if not wanted:
        return _lines(path), []
    got, n, want = [], 0, iter(wanted)
    nxt = next(want)
    with path.open("rb") as fh:
        for n, line in enumerate(fh, start=1):
            if n == nxt:
                got.append(line)
                nxt = next(want, 0)
    return n, got


def _types(con, path: Path) -> dict[str, str] | None:
    """Column -> type over the whole file, or None when DuckDB will not read it."""
    import duckdb

    try:
        rows = con.execute(
            "DESCRIBE SELECT * FROM read_json(?, format='newline_delimited', sample_size=-1, "
            f"maximum_object_size={MAX_LINE_BYTES})",
            [str(path)],
        ).fetchall()
    except duckdb.Error:
        return None
    return {r[0]: r[1] for r in rows}


def _accepted_types(types: dict[str, str]) -> bool:
    for col, typ in types.items():
        if col in STRING:
            ok = typ in ("VARCHAR", '"NULL"', "NULL")
        elif col in LISTS:
            ok = typ in ("VARCHAR[]", "NULL[]")
        elif col == "scores":
            ok = typ in NUMBER_LISTS
        elif col == "context_text":
            ok = typ in ("VARCHAR", "VARCHAR[]", "NULL[]")
        elif col == "abstained":
            ok = typ == "BOOLEAN"
        else:
            return False  # stages, stage_order, claims, or a field the format does not know
        if not ok:
            return False
    return "qid" in types and "context_ids" in types and "context_text" in types and "answer" in types


def _columns(types: dict[str, str]) -> str:
    """read_json's ``columns``: every field of seed 002's record, typed (absent ones read as NULL)."""
    cols = {c: "VARCHAR" for c in STRING}
    cols.update({c: "VARCHAR[]" for c in LISTS})
    cols["scores"] = "DOUBLE[]"
    cols["abstained"] = "BOOLEAN"
    cols["context_text"] = "VARCHAR[]" if types.get("context_text") in ("VARCHAR[]", "NULL[]") else "VARCHAR"
    return "{" + ", ".join(f"'{c}': '{t}'" for c, t in cols.items()) + "}"


def _violations(default_config: str | None, kind: str) -> str:
    """A WHERE clause true for a row the line-by-line reader might refuse (``kind``: the context_text
    column's, a list or a text)."""

    def ids(col: str, required: bool) -> str:  # repeats are found on the unnested rows (cheaper)
        null = f"{col} IS NULL" if required else "false"
        return f"({null} OR list_contains({col}, '') OR list_aggregate({col}, 'count') <> len({col}))"

    config = f"coalesce(config, {sql_literal(default_config)})"
    return " OR ".join(
        [  # config and phase names are checked on their distinct values
            f"(format IS NOT NULL AND format <> {sql_literal(FORMAT)})",
            "qid IS NULL OR qid = ''",
            f"{config} IS NULL",
            ids("context_ids", True),
            ids("retrieved_ids", False),
            "context_text IS NULL",
            *(
                [
                    "len(context_text) <> len(context_ids)",
                    "list_aggregate(context_text, 'count') <> len(context_text)",
                ]
                if kind == "list"
                else []
            ),
            "(citations IS NOT NULL AND (list_contains(citations, '') "
            "OR list_aggregate(citations, 'count') <> len(citations)))",
            "(scores IS NOT NULL AND (retrieved_ids IS NULL OR len(scores) <> len(retrieved_ids) "
            "OR coalesce(list_max(scores) >= 'inf'::DOUBLE OR list_min(scores) <= '-inf'::DOUBLE, false)))",
        ]
    )


def _build(
    con, checked: list[tuple[int, Path, str]], default_config: str | None, names: dict[str, str]
) -> None:
    """``_ig_trace`` and ``_ig_stage`` from the typed files, appended file by file in line order (a
    trace's ``tid`` is its position over all files), each file's table dropped once copied."""
    offset = 0
    for n, (i, path, kind) in enumerate(checked):
        items = "context_text" if kind == "list" else "CAST(NULL AS VARCHAR[])"
        text = "CAST(NULL AS VARCHAR)" if kind == "list" else "context_text"
        make = "CREATE OR REPLACE TABLE {} AS" if n == 0 else "INSERT INTO {}"
        con.execute(f"""{make.format("_ig_trace")}
            SELECT rowid + {offset} AS tid, {sql_literal(names[str(path)])} AS trace_file,
                   {sql_literal(str(path))} AS trace_path, rowid + 1 AS trace_line, qid,
                   coalesce(config, {sql_literal(default_config)}) AS arm,
                   coalesce(phase, {sql_literal(DEFAULT_PHASE)}) AS phase, question AS trace_question, answer,
                   abstained, error, prompt, {text} AS context_text, {items} AS context_items, citations,
                   CAST(NULL AS VARCHAR) AS claims_json,
                   CASE WHEN retrieved_ids IS NULL THEN ['packed'] ELSE ['fused', 'packed'] END AS recorded,
                   CAST([] AS VARCHAR[]) AS declared,
                   CASE WHEN retrieved_ids IS NOT NULL THEN 'retrieved_ids' END AS fused_from
            FROM _fr_{i}""")
        con.execute(f"""{make.format("_ig_stage")}
            SELECT rowid + {offset} AS tid, 'fused' AS stage,
                   CAST(unnest(range(1, len(retrieved_ids) + 1)) AS INTEGER) AS "rank",
                   unnest(retrieved_ids) AS chunk_id,
                   CAST(unnest(coalesce(scores, list_transform(retrieved_ids, lambda x: NULL))) AS DOUBLE)
                       AS score
            FROM _fr_{i} WHERE retrieved_ids IS NOT NULL""")
        con.execute(f"""INSERT INTO _ig_stage
            SELECT rowid + {offset}, 'packed', CAST(unnest(range(1, len(context_ids) + 1)) AS INTEGER),
                   unnest(context_ids), CAST(NULL AS DOUBLE)
            FROM _fr_{i}""")
        offset += con.execute(f"SELECT count(*) FROM _fr_{i}").fetchall()[0][0]
        con.execute(f"DROP TABLE _fr_{i}")


def _null_answer_lines(con, i: int) -> list[int]:
    """The line numbers of ``_fr_{i}``'s rows with a null answer (a failed request's)."""
    sql = f"SELECT rowid FROM _fr_{i} WHERE answer IS NULL ORDER BY rowid"
    return [r[0] + 1 for r in con.execute(sql).fetchall()]


def _answer_keys(lines: list[bytes]) -> bool:
    """Every line holds an ``answer`` key (required; null is allowed): typed reading cannot tell an
    absent key from a null, so the lines with a null answer are decoded as the line reader does
    (a line it would refuse makes this False too)."""
    for line in lines:
        try:
            obj = strict_loads(line.decode("utf-8"))
        except (ValueError, RecursionError):  # JSONDecodeError, UnicodeDecodeError, StrictJSONError
            return False
        if not isinstance(obj, dict) or "answer" not in obj:
            return False
    return True


def _read_one(con, i: int, path: Path, default_config: str | None) -> str | None:
    """``_fr_{i}``: one file typed, when every check passes; its context_text kind ('list' or
    'text'), or None (the caller drops what was made)."""
    import duckdb

    types = _types(con, path)
    if types is None or not _accepted_types(types):
        return None
    kind = "list" if types.get("context_text") in ("VARCHAR[]", "NULL[]") else "text"
    try:
        con.execute(
            f"CREATE OR REPLACE TABLE _fr_{i} AS SELECT * FROM read_json(?, "
            f"format='newline_delimited', columns={_columns(types)}, "
            f"maximum_object_size={MAX_LINE_BYTES})",
            [str(path)],
        )
        rows = con.execute(f"SELECT count(*) FROM _fr_{i}").fetchall()[0][0]
        bad = con.execute(
            f"SELECT count(*) FROM _fr_{i} WHERE {_violations(default_config, kind)}"
        ).fetchall()[0][0]
        pairs = con.execute(f"SELECT DISTINCT config, phase FROM _fr_{i}").fetchall()
        nulls = _null_answer_lines(con, i)  # a failed request's answer is null: is the key there?
    except duckdb.Error:
        return None
    names_ok = all(
        ARM_NAME.fullmatch((default_config if c is None else c) or "")
        and PHASE_LABEL.fullmatch(DEFAULT_PHASE if p is None else p)
        for c, p in pairs
    )
    if bad or not names_ok:
        return None
    lines, null_lines = _lines_and(path, nulls)
    return kind if rows == lines and _answer_keys(null_lines) else None


def read_fast(con, paths: list[Path], default_config: str | None, names: dict[str, str]) -> bool:
    """``_ig_trace`` and ``_ig_stage`` from ``paths`` when DuckDB proves them valid; False otherwise
    (nothing created: the caller reads them line by line)."""
    if sum(p.stat().st_size for p in paths) < MIN_BYTES:
        return False
    checked = []
    for i, path in enumerate(paths):
        kind = _read_one(con, i, path, default_config)
        if kind is None:
            for j in range(i + 1):
                con.execute(f"DROP TABLE IF EXISTS _fr_{j}")
            return False
        checked.append((i, path, kind))
    _build(con, checked, default_config, names)
    if any(con.execute(sql).fetchall()[0][0] for sql in _REPEATS):
        con.execute("DROP TABLE _ig_trace")
        con.execute("DROP TABLE _ig_stage")
        return False
    return True
