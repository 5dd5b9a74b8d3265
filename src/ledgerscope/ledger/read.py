"""Opening a ledger: DuckDB views over the finished partitions, and the checks on their rows.

Views: ``units``, ``boundaries``, ``candidates``, ``records``, ``repairs`` (empty when a partition
has no ``repairs.parquet``), ``oracle``,
``sources``. Reading never writes into the ledger directory.

:func:`connect` first verifies the ledger's files (:mod:`.verify`), then looks
for rows the analyses cannot use (:func:`row_problems`): duplicate records,
records filed under another partition, non-finite scores. Every problem names
the file, the row where there is one, and the column. :func:`open_unchecked`
and :func:`check_ledger` are the same two halves apart, for a reader that shows
rows while the checks run and trusts none of them until they pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ledgerscope.common.errors import InputError, Problem
from ledgerscope.common.sql_tables import sql_literal
from ledgerscope.ledger import schema
from ledgerscope.ledger.layout import CURRENT, Layout, is_interchange, layout_for
from ledgerscope.ledger.remote_read import direct_url
from ledgerscope.ledger.sources import sources_corpus  # noqa: F401 - part of this module's interface
from ledgerscope.ledger.verify import finished_partitions, oracle_files, verify_ledger

if TYPE_CHECKING:
    from duckdb import DuckDBPyConnection


def _sql_list(paths: Sequence[str | Path]) -> str:
    return "[" + ", ".join(sql_literal(str(p)) for p in paths) + "]"


def connect(ledger: str | Path, con: DuckDBPyConnection | None = None) -> DuckDBPyConnection:
    """A DuckDB connection with one view per ledger table (empty views when none written).

    The ledger's files are verified first (:func:`.verify.verify_ledger`), then the rows every
    analysis relies on (:func:`row_problems`); either raises :class:`InputError`. A JSONL
    interchange directory (``convert --to jsonl``) is read too, into tables with the ledger's
    schemas, after the checks a conversion back makes (:func:`.interchange.connect_jsonl`).
    """
    from concurrent.futures import ThreadPoolExecutor

    import duckdb

    ledger = Path(ledger)
    if is_interchange(ledger):
        from ledgerscope.ledger.jsonl_read import connect_jsonl

        return connect_jsonl(ledger, con)
    schemas: dict[Path, Any] = {}
    if con is None:
        with ThreadPoolExecutor(max_workers=1) as pool:  # a new database starts while the files are checked
            opened = pool.submit(duckdb.connect)
            layout = layout_for(_verify(ledger, schemas))
            con = opened.result()
    else:
        layout = layout_for(_verify(ledger, schemas))
    files = _create_views(con, ledger, layout, schemas)
    problems = row_problems(con, ledger, files["records"], files["candidates"], layout)
    if problems:
        raise InputError(problems)
    return con


def open_unchecked(ledger: str | Path, con: DuckDBPyConnection | None = None) -> DuckDBPyConnection:
    """:func:`connect`'s views without its checks: nothing read through them is to be trusted until
    :func:`check_ledger` has passed. For a reader that shows rows while the checks run (the TUI's
    first screen); it needs no pyarrow (the manifest is still checked: it says where the files are).
    """
    from ledgerscope.ledger.verify import load_manifest

    ledger = Path(ledger)
    if is_interchange(ledger):  # a JSONL directory is read into tables, checked as it is read
        from ledgerscope.ledger.jsonl_read import connect_jsonl

        return connect_jsonl(ledger, con)
    layout = layout_for(load_manifest(ledger))
    if con is None:
        import duckdb

        con = duckdb.connect()
    _create_views(con, ledger, layout, None)
    return con


def check_ledger(ledger: str | Path, con: DuckDBPyConnection) -> None:
    """:func:`connect`'s checks, for a connection :func:`open_unchecked` made (``con`` or a cursor of
    it): the files (:func:`.verify.verify_ledger`: footers, sizes, digests), then the rows
    (:func:`row_problems`). Raises :class:`InputError` listing every problem."""
    ledger = Path(ledger)
    if is_interchange(ledger):
        return  # open_unchecked read it with connect_jsonl's checks
    layout = layout_for(_verify(ledger))
    files = _table_files(ledger, layout)
    problems = row_problems(con, ledger, files["records"], files["candidates"], layout)
    if problems:
        raise InputError(problems)


def _verify(ledger: Path, schemas: dict[Path, Any] | None = None) -> dict[str, Any]:
    """:func:`.verify.verify_ledger`, or for a directory reading its tables from a bucket
    :func:`.remote_read.verify_direct`; returns the manifest."""
    if direct_url(ledger) is not None:
        from ledgerscope.ledger.remote_read import verify_direct

        return verify_direct(ledger)
    return verify_ledger(ledger, schemas)


def _table_files(ledger: Path, layout: Layout) -> dict[str, list[Path]] | dict[str, list[str]]:
    """Each partition table's files in the finished partitions, in partition order (URLs in the
    bucket for a directory that reads its tables from there: :mod:`.remote_read`)."""
    if direct_url(ledger) is not None:
        from ledgerscope.ledger.remote_read import table_urls

        return table_urls(ledger, layout)
    found = [layout.partition_files(ledger, arm, phase) for arm, phase in finished_partitions(ledger, layout)]
    return {name: [files[name] for files in found if name in files] for name in schema.TABLE_NAMES}


def _create_views(
    con: DuckDBPyConnection, ledger: Path, layout: Layout, schemas: dict[Path, Any] | None
) -> dict[str, list[Path]] | dict[str, list[str]]:
    """The views; ``schemas`` (file -> Arrow schema, from the checks) lets files that all share one
    schema skip DuckDB's column matching; None (unchecked): match by name. Returns the files."""
    files = _table_files(ledger, layout)
    if direct_url(ledger) is not None:
        from ledgerscope.ledger.remote_read import register

        register(ledger, con)
    for name, paths in files.items():
        found = [(schemas or {}).get(f) for f in paths if isinstance(f, Path)]
        alike = bool(found) and all(x is not None and x.equals(found[0]) for x in found)
        _view(con, name, paths, union=not alike)
    _view(con, "oracle", oracle_files(ledger, layout))
    src = layout.sources_path(ledger)
    _view(con, "sources", [src] if src.is_file() else [])
    return files


#: at most this many offending rows are listed per check
_SHOW = 5


#: a record without its key
_NULL_KEY = "arm IS NULL OR phase IS NULL OR qid IS NULL"


def _misfiled(layout: Layout) -> str:
    """A record filed under another partition's directory (its path does not name its arm and phase)."""
    return f"NOT contains('/' || replace(filename, '\\', '/'), {layout.records_suffix_sql('arm', 'phase')})"


def _record_counts(con: DuckDBPyConnection, src: str, misfiled: str) -> tuple[int, int, int]:
    """One pass over the records: how many rows each records check of :func:`row_problems` lists.

    Null keys, records filed under another partition, repeated (file, arm, phase, qid)
    rows after the first (NULLs group together, as in the listing's window).
    """
    row = con.execute(
        f"SELECT sum(n) FILTER (WHERE {_NULL_KEY}), "
        f"sum(n) FILTER (WHERE {misfiled}), sum(n - 1) FILTER (WHERE qid IS NOT NULL) "
        f"FROM (SELECT filename, arm, phase, qid, count(*) AS n FROM {src} GROUP BY ALL)"
    ).fetchall()[0]
    nulls, misfiled_rows, duplicates = (int(x or 0) for x in row)
    return nulls, misfiled_rows, duplicates


def row_problems(
    con: DuckDBPyConnection,
    ledger: Path,
    record_files: Sequence[str | Path],
    candidate_files: Sequence[str | Path],
    layout: Layout = CURRENT,
) -> list[Problem]:
    """Rows no analysis can use: duplicate or misfiled records, records without a key, non-finite scores.

    Rows are numbered from 1 within their file. One counting pass decides which
    checks have rows to list; only those are listed (at most five rows each).
    ``layout``: the ledger's, which names the directory a record belongs in.
    """
    import duckdb

    out: list[Problem] = []
    src = _numbered_scan(record_files)
    cands = _numbered_scan(candidate_files)
    try:
        misfiled_sql = _misfiled(layout)
        if src:
            nulls, misfiled, duplicates = _record_counts(con, src, misfiled_sql)
            if nulls:
                out += _null_key_rows(con, src)
            if misfiled:
                out += _misfiled_rows(con, src, misfiled_sql)
            if duplicates:
                out += _duplicate_rows(con, src)
        if cands:
            out += _non_finite_scores(con, cands)
    except duckdb.Error as exc:
        raise InputError(
            Problem(str(ledger), None, "ledger", f"rows could not be read: {_first_line(exc)}")
        ) from None
    return out


def _numbered_scan(files: Sequence[str | Path]) -> str | None:
    """A ``read_parquet`` over ``files`` that keeps each row's file and row number (for the
    problem text) and reads every file's columns by name; None when there are no files."""
    if not files:
        return None
    return (
        f"read_parquet({_sql_list(files)}, filename = true, file_row_number = true, "
        "union_by_name = true, hive_partitioning = false)"
    )


def _null_key_rows(con: DuckDBPyConnection, src: str) -> list[Problem]:
    """Records with a null arm, phase or qid: no analysis can key them."""
    return [
        Problem(file, None, col, f"row {row}: missing (null)")
        for file, row, col in con.execute(
            "SELECT filename, file_row_number + 1, "
            "CASE WHEN arm IS NULL THEN 'arm' WHEN phase IS NULL THEN 'phase' ELSE 'qid' END "
            f"FROM {src} WHERE {_NULL_KEY} "
            f"ORDER BY filename, file_row_number LIMIT {_SHOW}"
        ).fetchall()
    ]


def _misfiled_rows(con: DuckDBPyConnection, src: str, misfiled_sql: str) -> list[Problem]:
    """Records whose arm and phase belong in another partition's file (a reader by partition
    would miss them)."""
    return [
        Problem(
            file,
            None,
            "arm/phase",
            f"row {row}: a record of arm {arm!r}, phase {phase!r} in another partition's file",
        )
        for file, row, arm, phase in con.execute(
            f"SELECT filename, file_row_number + 1, arm, phase FROM {src} WHERE {misfiled_sql} "
            f"ORDER BY filename, file_row_number LIMIT {_SHOW}"
        ).fetchall()
    ]


def _duplicate_rows(con: DuckDBPyConnection, src: str) -> list[Problem]:
    """Every copy after the first of a record key, with the row of the first in its file."""
    return [
        Problem(
            file,
            None,
            "qid",
            f"row {row}: duplicate record (arm {arm!r}, phase {phase!r}, qid {qid!r}; first at row {first})",
        )
        for file, row, arm, phase, qid, first in con.execute(
            "SELECT filename, r + 1, arm, phase, qid, f + 1 FROM ("
            "SELECT filename, file_row_number AS r, arm, phase, qid, "
            "min(file_row_number) OVER (PARTITION BY filename, arm, phase, qid) AS f, "
            "count(*) OVER (PARTITION BY arm, phase, qid) AS n "
            f"FROM {src} WHERE qid IS NOT NULL) WHERE n > 1 AND r <> f "
            f"ORDER BY filename, r LIMIT {_SHOW}"
        ).fetchall()
    ]


def _non_finite_scores(con: DuckDBPyConnection, cands: str) -> list[Problem]:
    """Candidate rows with a NaN or infinite score, listed only when a count finds any (counting
    costs less than listing)."""
    finite = "SELECT count(*) FROM {} WHERE NOT isfinite(score)"
    # fetchall, not fetchone: DuckDB keeps a half-read result open on the connection
    if not con.execute(finite.format(cands)).fetchall()[0][0]:
        return []
    return [
        Problem(
            file,
            None,
            "score",
            f"row {row}: {score} (qid {qid!r}, stage {stage!r}, rank {rank}); scores must be finite",
        )
        for file, row, qid, stage, rank, score in con.execute(
            f"SELECT filename, file_row_number + 1, qid, stage, rank, score FROM {cands} "
            "WHERE NOT isfinite(score) "
            f"ORDER BY filename, file_row_number LIMIT {_SHOW}"
        ).fetchall()
    ]


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _view(con: DuckDBPyConnection, name: str, files: Sequence[str | Path], union: bool = True) -> None:
    """``union``: files may differ in columns (matched by name); off when all share one schema. A
    table with no files is a view over an empty in-memory table, which the connection's cursors
    (the TUI's worker threads) read too."""
    if files:
        scan = (
            f"read_parquet({_sql_list(files)}, hive_partitioning = false, "
            f"union_by_name = {'true' if union else 'false'})"
        )
        con.execute(f"CREATE OR REPLACE VIEW {name} AS SELECT * FROM {scan}")
        extra = _missing_optional(con, name)
        if extra:  # columns added within the format, absent from an older ledger's files: NULL
            con.execute(f"CREATE OR REPLACE VIEW {name} AS SELECT *, {extra} FROM {scan}")
    else:  # an empty table with the right columns, so queries still bind (declared in SQL: no pyarrow)
        con.execute(f"CREATE OR REPLACE TABLE _{name}_empty ({schema.duckdb_columns(name)})")
        con.execute(f"CREATE OR REPLACE VIEW {name} AS SELECT * FROM _{name}_empty")


def _missing_optional(con: DuckDBPyConnection, name: str) -> str:
    """``CAST(NULL AS T) AS "c", ...`` for each optional column of table ``name`` its view lacks."""
    optional = schema.OPTIONAL_COLUMNS.get(name, ())
    if not optional:
        return ""
    have = {r[0] for r in con.execute(f"DESCRIBE {name}").fetchall()}
    types = dict(schema.COLUMNS[name])
    sql = {"bool": "BOOLEAN", "string": "VARCHAR"}
    return ", ".join(f'CAST(NULL AS {sql[types[c]]}) AS "{c}"' for c in optional if c not in have)
