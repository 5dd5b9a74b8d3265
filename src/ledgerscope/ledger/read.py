"""Reading a ledger: DuckDB views over the finished partitions, plus the manifest.

Only partitions that carry ``_SUCCESS.json`` are read (a partition directory
exists only once complete, but a hand-copied ledger may hold stragglers).
Views: ``units``, ``boundaries``, ``candidates``, ``records``, ``oracle``,
``sources``. Reading never writes into the ledger directory.

The ledger is checked at this boundary before any query runs
(:func:`verify_ledger`): the manifest's structure, every finished partition's
arm and phase against the manifest, each Parquet file's footer and columns
against :mod:`.schema`, the sizes and SHA-256 digests that ``_SUCCESS.json``
records for its files, and (in :func:`connect`) rows the analyses cannot use:
duplicate records, records filed under another partition, non-finite scores.
Every problem names the file, the row where there is one, and the column.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import InputError, Problem
from . import schema

if TYPE_CHECKING:
    from ..sources import Corpus


def _kind(value: Any) -> str:
    return {
        dict: "an object",
        list: "a list",
        str: "a string",
        bool: "a boolean",
        int: "an integer",
        float: "a number",
        type(None): "null",
    }.get(type(value), type(value).__name__)


def load_manifest(ledger: str | Path) -> dict:
    path = Path(ledger) / "manifest.json"
    if not path.is_file():
        raise InputError(
            Problem(str(path), None, "manifest", "not a ledger: manifest.json is missing")
        )
    try:
        manifest = json.loads(path.read_bytes().decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(Problem(str(path), None, "manifest", f"not valid JSON: {exc}")) from None
    except OSError as exc:
        reason = f"cannot be read: {exc.strerror or exc}"
        raise InputError(Problem(str(path), None, "manifest", reason)) from None
    if not isinstance(manifest, dict):
        reason = f"must be a JSON object, not {_kind(manifest)}"
        raise InputError(Problem(str(path), None, "manifest", reason))
    if manifest.get("format") != schema.FORMAT:
        raise InputError(
            Problem(
                str(path),
                None,
                "format",
                f"unknown ledger format {manifest.get('format')!r} (expected {schema.FORMAT})",
            )
        )
    problems = manifest_problems(manifest, str(path))
    if problems:
        raise InputError(problems)
    return manifest


def manifest_problems(manifest: dict, where: str) -> list[Problem]:
    """What the readers rely on: ``arms`` (each with ``config`` and ``phases``), typed optional keys."""
    out: list[Problem] = []
    for key in ("identity", "created", "fixtures_digest", "ledgerscope_version"):
        if key in manifest and not isinstance(manifest[key], str):
            out.append(Problem(where, None, key, f"must be a string, not {_kind(manifest[key])}"))
    sources = manifest.get("sources", {})
    if not isinstance(sources, dict) or not all(isinstance(v, str) for v in sources.values()):
        out.append(Problem(where, None, "sources", "must be an object of doc_id: version"))
    arms = manifest.get("arms")
    if not isinstance(arms, dict) or not arms:
        reason = (
            "missing" if arms is None else f"must be a non-empty object of arms, not {_kind(arms)}"
        )
        out.append(Problem(where, None, "arms", reason))
        return out
    for name, entry in arms.items():
        field = f"arms.{name}"
        if not isinstance(entry, dict):
            out.append(Problem(where, None, field, f"must be an object, not {_kind(entry)}"))
            continue
        if not isinstance(entry.get("config"), dict):
            out.append(Problem(where, None, f"{field}.config", "missing or not an object"))
        if "config_digest" in entry and not isinstance(entry["config_digest"], str):
            out.append(Problem(where, None, f"{field}.config_digest", "must be a string"))
        phases = entry.get("phases")
        if not isinstance(phases, list) or not phases:
            out.append(Problem(where, None, f"{field}.phases", "missing or not a non-empty list"))
            continue
        labels: set[str] = set()
        for i, ph in enumerate(phases):
            ok = (
                isinstance(ph, dict)
                and isinstance(ph.get("label"), str)
                and isinstance(ph.get("offset"), int)
                and not isinstance(ph.get("offset"), bool)
            )
            if not ok:
                out.append(
                    Problem(
                        where,
                        None,
                        f"{field}.phases[{i}]",
                        "must be an object {label: string, offset: integer}",
                    )
                )
            elif ph["label"] in labels:
                out.append(
                    Problem(where, None, f"{field}.phases[{i}]", f"duplicate label {ph['label']!r}")
                )
            else:
                labels.add(ph["label"])
    return out


def finished_partitions(ledger: str | Path) -> list[Path]:
    root = Path(ledger) / "partitions"
    return sorted(p.parent for p in root.glob("arm=*/phase=*/_SUCCESS.json"))


# ---------------------------------------------------------------------------
# structural checks


def _same_kind(actual, expected) -> bool:
    import pyarrow as pa
    import pyarrow.types as t

    if actual == expected:
        return True
    for pred in (t.is_integer, t.is_floating, t.is_boolean):
        if pred(expected):
            return pred(actual)
    if t.is_string(expected) or t.is_large_string(expected):
        return t.is_string(actual) or t.is_large_string(actual) or actual == pa.string_view()
    if t.is_list(expected) or t.is_large_list(expected):
        return (t.is_list(actual) or t.is_large_list(actual)) and _same_kind(
            actual.value_type, expected.value_type
        )
    return False


def _read_metadata(path: Path):
    """``pyarrow.parquet.read_metadata(path)``: the same reader on the same local file, without
    importing pyarrow's filesystems (pyarrow.parquet); that function where the reader differs."""
    import pyarrow as pa

    try:
        from pyarrow._parquet import ParquetReader

        reader = ParquetReader()
        with pa.OSFile(str(path)) as source:
            reader.open(
                source,
                use_memory_map=False,
                buffer_size=0,
                pre_buffer=False,
                page_checksum_verification=False,
                arrow_extensions_enabled=True,
            )
            for column in reader.column_paths:  # decoded as ParquetFile does (a bad name raises)
                column[0]
            return reader.metadata
    except (ImportError, AttributeError, TypeError):  # pragma: no cover - another pyarrow
        import pyarrow.parquet as pq

        return pq.read_metadata(path)


def parquet_problems(path: Path, table_schema, rows: Any = None) -> list[Problem]:
    """The file's footer is readable and holds every column of ``table_schema`` with a usable type.

    Reads the footer only (no data pages). ``rows``: the row count a partition
    marker recorded for the file, checked when given.
    """
    return _footer_check(path, table_schema, rows)[0]


def _footer_check(path: Path, table_schema, rows: Any = None) -> tuple[list[Problem], Any]:
    """:func:`parquet_problems`, and the file's Arrow schema (None when unreadable)."""
    import pyarrow as pa

    try:
        meta = _read_metadata(path)
        actual = meta.schema.to_arrow_schema()
    except (pa.ArrowException, OSError, ValueError) as exc:
        return [
            Problem(
                str(path),
                None,
                "parquet",
                f"not a readable Parquet file (truncated or corrupted?): {exc}",
            )
        ], None
    out = []
    for field in table_schema:
        idx = actual.get_field_index(field.name)
        if idx < 0:
            out.append(Problem(str(path), None, field.name, "missing column"))
        elif not _same_kind(actual.field(idx).type, field.type):
            out.append(
                Problem(
                    str(path),
                    None,
                    field.name,
                    f"has type {actual.field(idx).type}, expected {field.type}",
                )
            )
    if isinstance(rows, int) and not isinstance(rows, bool) and rows != meta.num_rows:
        out.append(
            Problem(
                str(path), None, "rows", f"{meta.num_rows} rows, but _SUCCESS.json records {rows}"
            )
        )
    return out, actual


def file_record(path: Path) -> dict:
    """Size and SHA-256 of a file, as a partition marker records them."""
    with path.open("rb") as fh:  # hashed in C, the GIL released
        digest = hashlib.file_digest(fh, "sha256").hexdigest()
    return {"bytes": path.stat().st_size, "sha256": digest}


def _marker(path: Path, problems: list[Problem]) -> dict:
    try:
        meta = json.loads(path.read_bytes().decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError, OSError) as exc:
        problems.append(Problem(str(path), None, "_SUCCESS", f"not valid JSON: {exc}"))
        return {}
    if not isinstance(meta, dict):
        problems.append(
            Problem(str(path), None, "_SUCCESS", f"must be a JSON object, not {_kind(meta)}")
        )
        return {}
    return meta


def _file_problems(part: Path, files: Any, marker: Path) -> tuple[list[Problem], set[str]]:
    """Sizes and digests the marker records; returns the problems and the names that failed."""
    if files is None:
        return [], set()
    if not isinstance(files, dict):
        return [
            Problem(str(marker), None, "files", "must be an object of file name: {bytes, sha256}")
        ], set()
    out, bad = [], set()
    for name, want in files.items():
        path = part / name
        if "/" in name or name.startswith(".") or not isinstance(want, dict):
            out.append(
                Problem(str(marker), None, f"files.{name}", "not a file record of this partition")
            )
            continue
        if not path.is_file():
            out.append(Problem(str(path), None, "file", "missing (listed in _SUCCESS.json)"))
            bad.add(name)
            continue
        size = path.stat().st_size
        if size != want.get("bytes"):
            out.append(
                Problem(
                    str(path),
                    None,
                    "bytes",
                    f"{size} bytes, but _SUCCESS.json records {want.get('bytes')} "
                    "(truncated or replaced)",
                )
            )
            bad.add(name)
        elif file_record(path)["sha256"] != want.get("sha256"):
            out.append(
                Problem(
                    str(path),
                    None,
                    "sha256",
                    "content differs from the digest _SUCCESS.json records (corrupted)",
                )
            )
            bad.add(name)
    return out, bad


def _partition_problems(part: Path, arms: dict, schemas: dict | None = None) -> list[Problem]:
    """One finished partition: its arm and phase, its marker's sizes and digests, its footers
    (each file's Arrow schema into ``schemas``)."""
    problems: list[Problem] = []
    arm, phase = part.parent.name[len("arm=") :], part.name[len("phase=") :]
    labels = {p["label"] for p in arms.get(arm, {}).get("phases", [])}
    if arm not in arms:
        problems.append(
            Problem(
                str(part),
                None,
                "arm",
                f"a partition of arm {arm!r}, which the manifest does not list",
            )
        )
    elif phase not in labels:
        problems.append(
            Problem(
                str(part),
                None,
                "phase",
                f"a partition of phase {phase!r}, which arm {arm!r} does not list",
            )
        )
    marker = part / "_SUCCESS.json"
    meta = _marker(marker, problems)
    found, bad = _file_problems(part, meta.get("files"), marker)
    problems.extend(found)
    for name, table_schema in schema.TABLES.items():
        path = part / f"{name}.parquet"
        if path.is_file() and path.name not in bad:
            found, actual = _footer_check(path, table_schema, meta.get(name))
            problems.extend(found)
            if schemas is not None:
                schemas[path] = actual
    return problems


def verify_ledger(ledger: str | Path) -> dict:
    """Check the manifest and every finished partition's files; return the manifest.

    Raises :class:`InputError` listing every problem (file, column, reason).
    Cost: footers, file sizes and one SHA-256 pass over the partition files
    (about 1 GB/s per thread; partitions are checked on two threads, the
    problems listed in partition order); no row is decoded.
    """
    return _verify(Path(ledger), {})


def _verify(ledger: Path, schemas: dict) -> dict:
    """:func:`verify_ledger`, noting each partition file's Arrow schema in ``schemas``."""
    from concurrent.futures import ThreadPoolExecutor

    import pyarrow._parquet  # noqa: F401 - imported once here, not by two threads at a time

    manifest = load_manifest(ledger)
    arms = manifest["arms"]
    with ThreadPoolExecutor(max_workers=2) as pool:
        found = pool.map(
            lambda part: _partition_problems(part, arms, schemas), finished_partitions(ledger)
        )
        problems = [p for part_problems in found for p in part_problems]
    for path in sorted((ledger / "oracle").glob("arm=*/oracle.parquet")):
        if path.parent.name[len("arm=") :] not in arms:
            problems.append(
                Problem(
                    str(path), None, "arm", "an oracle table of an arm the manifest does not list"
                )
            )
        problems.extend(parquet_problems(path, schema.ORACLE))
    src = ledger / "sources.parquet"
    if src.is_file():
        problems.extend(parquet_problems(src, schema.SOURCES))
    if problems:
        raise InputError(problems)
    return manifest


def sources_corpus(path: Path, rows) -> Corpus:
    """The ledger's sources (rows of ``doc_id, version, text, observed, access``), digests re-checked.

    Rows are numbered from 1 in the message of any problem.
    """
    from ..errors import DigestMismatch
    from ..sources import Corpus, make_source

    corpus, problems = Corpus(), []
    for i, (doc_id, version, text, observed, access) in enumerate(rows, start=1):
        if not isinstance(doc_id, str) or not isinstance(text, str):
            problems.append(
                Problem(
                    str(path),
                    None,
                    "doc_id" if not isinstance(doc_id, str) else "text",
                    f"row {i}: missing (null)",
                )
            )
            continue
        try:
            corpus.add(make_source(doc_id, text, version, observed, tuple(access or ())))
        except DigestMismatch as exc:
            problems.append(Problem(str(path), None, "version", f"row {i}: {exc}"))
        except InputError as exc:
            problems.extend(
                Problem(str(path), None, p.field, f"row {i}: {p.reason}") for p in exc.problems
            )
    if problems:
        raise InputError(problems)
    return corpus


def _sql_list(paths: list[Path]) -> str:
    return "[" + ", ".join("'" + str(p).replace("'", "''") + "'" for p in paths) + "]"


def connect(ledger: str | Path, con=None):
    """A DuckDB connection with one view per ledger table (empty views when none written).

    The ledger is verified first (:func:`verify_ledger`), then the rows every
    analysis relies on (:func:`row_problems`); either raises :class:`InputError`.
    """
    from concurrent.futures import ThreadPoolExecutor

    import duckdb

    ledger = Path(ledger)
    schemas: dict = {}
    with ThreadPoolExecutor(
        max_workers=1
    ) as pool:  # a new database starts while the files are checked
        opened = pool.submit(duckdb.connect) if con is None else None
        _verify(ledger, schemas)
        con = opened.result() if opened is not None else con
    parts = finished_partitions(ledger)
    files: dict[str, list[Path]] = {}
    for name, table_schema in schema.TABLES.items():
        files[name] = [p / f"{name}.parquet" for p in parts if (p / f"{name}.parquet").is_file()]
        found = [schemas.get(f) for f in files[name]]  # one schema in every file: nothing to unify
        alike = bool(found) and all(x is not None and x.equals(found[0]) for x in found)
        _view(con, name, files[name], table_schema, union=not alike)
    oracle_files = sorted((ledger / "oracle").glob("arm=*/oracle.parquet"))
    _view(con, "oracle", oracle_files, schema.ORACLE)
    src = ledger / "sources.parquet"
    _view(con, "sources", [src] if src.is_file() else [], schema.SOURCES)
    problems = row_problems(con, ledger, files["records"], files["candidates"])
    if problems:
        raise InputError(problems)
    return con


#: at most this many offending rows are listed per check
_SHOW = 5


def _record_counts(con, src: str) -> tuple[int, int, int]:
    """One pass over the records: how many rows each records check of :func:`row_problems` lists.

    Null keys, records filed under another partition, repeated (file, arm, phase, qid)
    rows after the first (NULLs group together, as in the listing's window).
    """
    misfiled = (
        "NOT contains('/' || replace(filename, '\\', '/'), "
        "'/arm=' || arm || '/phase=' || phase || '/records.parquet')"
    )
    row = con.execute(
        "SELECT sum(n) FILTER (WHERE arm IS NULL OR phase IS NULL OR qid IS NULL), "
        f"sum(n) FILTER (WHERE {misfiled}), sum(n - 1) FILTER (WHERE qid IS NOT NULL) "
        f"FROM (SELECT filename, arm, phase, qid, count(*) AS n FROM {src} GROUP BY ALL)"
    ).fetchall()[0]
    return tuple(int(x or 0) for x in row)


def row_problems(
    con, ledger: Path, record_files: list[Path], candidate_files: list[Path]
) -> list[Problem]:
    """Rows no analysis can use: duplicate or misfiled records, records without a key, non-finite scores.

    Rows are numbered from 1 within their file. One counting pass decides which
    checks have rows to list; only those are listed (at most five rows each).
    """
    import duckdb

    out: list[Problem] = []
    src = (
        f"read_parquet({_sql_list(record_files)}, filename = true, file_row_number = true, "
        "union_by_name = true, hive_partitioning = false)"
        if record_files
        else None
    )
    cands = (
        f"read_parquet({_sql_list(candidate_files)}, filename = true, "
        "file_row_number = true, union_by_name = true, hive_partitioning = false)"
        if candidate_files
        else None
    )
    try:
        nulls, misfiled, duplicates = _record_counts(con, src) if src else (0, 0, 0)
        if nulls:
            for file, row, col in con.execute(
                "SELECT filename, file_row_number + 1, "
                "CASE WHEN arm IS NULL THEN 'arm' WHEN phase IS NULL THEN 'phase' ELSE 'qid' END "
                f"FROM {src} WHERE arm IS NULL OR phase IS NULL OR qid IS NULL "
                f"ORDER BY filename, file_row_number LIMIT {_SHOW}"
            ).fetchall():
                out.append(Problem(file, None, col, f"row {row}: missing (null)"))
        if misfiled:
            for file, row, arm, phase in con.execute(
                f"SELECT filename, file_row_number + 1, arm, phase FROM {src} "
                "WHERE NOT contains('/' || replace(filename, '\\', '/'), "
                "'/arm=' || arm || '/phase=' || phase || '/records.parquet') "
                f"ORDER BY filename, file_row_number LIMIT {_SHOW}"
            ).fetchall():
                out.append(
                    Problem(
                        file,
                        None,
                        "arm/phase",
                        f"row {row}: a record of arm {arm!r}, phase {phase!r} in another "
                        "partition's file",
                    )
                )
        if duplicates:
            for file, row, arm, phase, qid, first in con.execute(
                "SELECT filename, r + 1, arm, phase, qid, f + 1 FROM ("
                "SELECT filename, file_row_number AS r, arm, phase, qid, "
                "min(file_row_number) OVER (PARTITION BY filename, arm, phase, qid) AS f, "
                "count(*) OVER (PARTITION BY arm, phase, qid) AS n "
                f"FROM {src} WHERE qid IS NOT NULL) WHERE n > 1 AND r <> f "
                f"ORDER BY filename, r LIMIT {_SHOW}"
            ).fetchall():
                out.append(
                    Problem(
                        file,
                        None,
                        "qid",
                        f"row {row}: duplicate record (arm {arm!r}, phase {phase!r}, qid {qid!r}; "
                        f"first at row {first})",
                    )
                )
        finite = "SELECT count(*) FROM {} WHERE NOT isfinite(score)"
        # fetchall, not fetchone: DuckDB keeps a half-read result open on the connection
        if cands and con.execute(finite.format(cands)).fetchall()[0][0]:  # counting costs less than listing
            for file, row, qid, stage, rank, score in con.execute(
                f"SELECT filename, file_row_number + 1, qid, stage, rank, score FROM {cands} "
                "WHERE NOT isfinite(score) "
                f"ORDER BY filename, file_row_number LIMIT {_SHOW}"
            ).fetchall():
                out.append(
                    Problem(
                        file,
                        None,
                        "score",
                        f"row {row}: {score} (qid {qid!r}, stage {stage!r}, rank {rank}); "
                        "scores must be finite",
                    )
                )
    except duckdb.Error as exc:
        raise InputError(
            Problem(str(ledger), None, "ledger", f"rows could not be read: {_first_line(exc)}")
        ) from None
    return out


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _view(con, name: str, files: list[Path], table_schema, union: bool = True) -> None:
    """``union``: files may differ in columns (matched by name); off when all share one schema."""
    if files:
        con.execute(
            f"CREATE OR REPLACE VIEW {name} AS SELECT * FROM read_parquet({_sql_list(files)}, "
            "hive_partitioning = false, "
            f"union_by_name = {'true' if union else 'false'})"
        )
    else:  # an empty table with the right columns, so queries still bind
        empty = table_schema.empty_table()  # as pa.Table.from_pylist([]) (which imports pandas)
        con.register(f"_{name}_empty", empty)
        con.execute(f"CREATE OR REPLACE VIEW {name} AS SELECT * FROM _{name}_empty")
