"""Verifying a ledger's files before anything reads them.

The checks at the reading boundary (:func:`verify_ledger`): the manifest's
structure, every finished partition's arm and phase against the manifest, each
Parquet file's footer and columns against :mod:`.schema`, and the sizes and
SHA-256 digests that a partition's commit marker (format 3 ``_commits/arm=A/phase=L.json``,
format 2 ``_SUCCESS.json``) records for its files. Only partitions with a marker count
(files without one are a write that did not finish, or a hand-copied straggler). No row is decoded here:
the row checks run once the ledger is open (:func:`.read.row_problems`). Every
problem names the file and the column. Nothing here writes into the ledger.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from ledgerscope.common.errors import InputError, Problem
from ledgerscope.ledger import schema
from ledgerscope.ledger.layout import ARM_NAME, CURRENT, PHASE_LABEL, Layout, layout_for, ledger_layout


def _kind(value: Any) -> str:
    """A JSON value's kind in words, for messages that say what was found instead."""
    return {
        dict: "an object",
        list: "a list",
        str: "a string",
        bool: "a boolean",
        int: "an integer",
        float: "a number",
        type(None): "null",
    }.get(type(value), type(value).__name__)


def load_manifest(ledger: str | Path) -> dict[str, Any]:
    """The ledger's ``manifest.json``, checked (:func:`manifest_problems`) so readers can rely on it.

    Raises :class:`InputError` when it is missing, unreadable, of another format or malformed.
    """
    path = Path(ledger) / "manifest.json"
    if not path.is_file():
        raise InputError(Problem(str(path), None, "manifest", "not a ledger: manifest.json is missing"))
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
    if manifest.get("format") not in schema.READABLE_FORMATS:
        raise InputError(
            Problem(
                str(path),
                None,
                "format",
                f"unknown ledger format {manifest.get('format')!r} "
                f"(expected {' or '.join(schema.READABLE_FORMATS)})",
            )
        )
    problems = manifest_problems(manifest, str(path))
    if problems:
        raise InputError(problems)
    return manifest


def manifest_problems(manifest: dict[str, Any], where: str) -> list[Problem]:
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
        reason = "missing" if arms is None else f"must be a non-empty object of arms, not {_kind(arms)}"
        out.append(Problem(where, None, "arms", reason))
        return out
    for name, entry in arms.items():
        field = f"arms.{name}"
        if ARM_NAME.fullmatch(name) is None:
            out.append(
                Problem(
                    where, None, field, "an arm name names a directory: only letters, digits, '_', '.', '-'"
                )
            )
        if not isinstance(entry, dict):
            out.append(Problem(where, None, field, f"must be an object, not {_kind(entry)}"))
            continue
        if not isinstance(entry.get("config"), dict):
            out.append(Problem(where, None, f"{field}.config", "missing or not an object"))
        if "config_digest" in entry and not isinstance(entry["config_digest"], str):
            out.append(Problem(where, None, f"{field}.config_digest", "must be a string"))
        out += _phase_problems(entry.get("phases"), where, field)
    return out


def _phase_problems(phases: Any, where: str, field: str) -> list[Problem]:
    """An arm's phase list: objects {label, offset}, labels that can name a directory, no repeats."""
    if not isinstance(phases, list) or not phases:
        return [Problem(where, None, f"{field}.phases", "missing or not a non-empty list")]
    out: list[Problem] = []
    labels: set[str] = set()
    for i, ph in enumerate(phases):
        at = f"{field}.phases[{i}]"
        ok = (
            isinstance(ph, dict)
            and isinstance(ph.get("label"), str)
            and isinstance(ph.get("offset"), int)
            and not isinstance(ph.get("offset"), bool)
        )
        if not ok:
            out.append(Problem(where, None, at, "must be an object {label: string, offset: integer}"))
        elif PHASE_LABEL.fullmatch(ph["label"]) is None:
            out.append(
                Problem(
                    where,
                    None,
                    at,
                    f"label {ph['label'][:40]!r} names a "
                    "directory: only letters, digits, '_', '.', '-' (not '.' first)",
                )
            )
        elif ph["label"] in labels:
            out.append(Problem(where, None, at, f"duplicate label {ph['label']!r}"))
        else:
            labels.add(ph["label"])
    return out


def finished_partitions(ledger: str | Path, layout: Layout | None = None) -> list[tuple[str, str]]:
    """(arm, phase) of every partition with a commit marker, sorted: the only ones read.

    ``layout``: the ledger's (:mod:`.layout`); by default the one its manifest names.
    """
    layout = layout or ledger_layout(ledger)
    return layout.finished(ledger)


def oracle_files(ledger: str | Path, layout: Layout | None = None) -> list[Path]:
    """The per-arm oracle tables, sorted."""
    layout = layout or ledger_layout(ledger)
    return [path for _, path in layout.oracle_files(ledger)]


# ---------------------------------------------------------------------------
# the partition files: footers, sizes and digests


def _same_kind(actual: Any, expected: Any) -> bool:
    import pyarrow as pa
    import pyarrow.types as t

    if actual == expected:
        return True
    for pred in (t.is_integer, t.is_floating, t.is_boolean):
        if pred(expected):
            return bool(pred(actual))
    if t.is_string(expected) or t.is_large_string(expected):
        return bool(t.is_string(actual) or t.is_large_string(actual) or actual == pa.string_view())
    if t.is_list(expected) or t.is_large_list(expected):
        return (t.is_list(actual) or t.is_large_list(actual)) and _same_kind(
            actual.value_type, expected.value_type
        )
    return False


def _read_metadata(path: Path) -> Any:
    """``pyarrow.parquet.read_metadata(path)``: the same reader on the same local file, without
    importing pyarrow's filesystems (pyarrow.parquet imports them, on the TUI's first screen); that
    function where the reader differs. ``pyarrow._parquet`` is private: if its reader changes, the
    public function takes over (the ``except`` below), so a pyarrow upgrade costs speed, not answers."""
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


_OPTIONAL = frozenset(c for cols in schema.OPTIONAL_COLUMNS.values() for c in cols)


def parquet_problems(path: Path, table_schema: Any, rows: Any = None) -> list[Problem]:
    """The file's footer is readable and holds every column of ``table_schema`` with a usable type.

    Reads the footer only (no data pages). ``rows``: the row count a partition
    marker recorded for the file, checked when given.
    """
    return _footer_check(path, table_schema, rows)[0]


def _footer_check(path: Path, table_schema: Any, rows: Any = None) -> tuple[list[Problem], Any]:
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
            if field.name not in _OPTIONAL:  # added within the format: an older file lacks it
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
            Problem(str(path), None, "rows", f"{meta.num_rows} rows, but the commit marker records {rows}")
        )
    return out, actual


def file_record(path: Path) -> dict[str, Any]:
    """Size and SHA-256 of a file, as a partition marker records them."""
    with path.open("rb") as fh:  # hashed in C, the GIL released
        digest = hashlib.file_digest(fh, "sha256").hexdigest()
    return {"bytes": path.stat().st_size, "sha256": digest}


def _marker(path: Path, problems: list[Problem]) -> dict[str, Any]:
    try:
        meta = json.loads(path.read_bytes().decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError, OSError) as exc:
        problems.append(Problem(str(path), None, "_SUCCESS", f"not valid JSON: {exc}"))
        return {}
    if not isinstance(meta, dict):
        problems.append(Problem(str(path), None, "_SUCCESS", f"must be a JSON object, not {_kind(meta)}"))
        return {}
    return meta


def _file_problems(
    ledger: Path, key: tuple[str, str], files: Any, marker: Path, layout: Layout
) -> tuple[list[Problem], set[Path]]:
    """Sizes and digests the marker records; returns the problems and the files that failed."""
    if files is None:
        return [], set()
    if not isinstance(files, dict):
        return [Problem(str(marker), None, "files", "must be an object of file name: {bytes, sha256}")], set()
    out, bad = [], set()
    for name, want in files.items():
        found = layout.keyed_file(ledger, name, *key)
        if found is None or not isinstance(want, dict):
            out.append(Problem(str(marker), None, f"files.{name}", "not a file record of this partition"))
            continue
        path = found[1]
        if not path.is_file():
            out.append(Problem(str(path), None, "file", "missing (listed in its commit marker)"))
            bad.add(path)
            continue
        size = path.stat().st_size
        if size != want.get("bytes"):
            out.append(
                Problem(
                    str(path),
                    None,
                    "bytes",
                    f"{size} bytes, but the commit marker records {want.get('bytes')} "
                    "(truncated or replaced)",
                )
            )
            bad.add(path)
        elif file_record(path)["sha256"] != want.get("sha256"):
            out.append(
                Problem(
                    str(path),
                    None,
                    "sha256",
                    "content differs from the digest the commit marker records (corrupted)",
                )
            )
            bad.add(path)
    return out, bad


def _partition_problems(
    ledger: Path,
    key: tuple[str, str],
    arms: dict[str, Any],
    schemas: dict[Path, Any] | None = None,
    layout: Layout = CURRENT,
) -> list[Problem]:
    """One finished partition: its arm and phase, its marker's sizes and digests, its footers
    (each file's Arrow schema into ``schemas``); ``layout`` names its files."""
    problems: list[Problem] = []
    arm, phase = key
    part = layout.marker_path(ledger, arm, phase)
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
    marker = part
    meta = _marker(marker, problems)
    found, bad = _file_problems(ledger, key, meta.get("files"), marker, layout)
    problems.extend(found)
    for name, table_schema in schema.TABLES.items():
        path = layout.table_file(ledger, name, arm, phase)
        if path.is_file() and path not in bad:
            found, actual = _footer_check(path, table_schema, meta.get(name))
            problems.extend(found)
            if schemas is not None:
                schemas[path] = actual
    return problems


def verify_ledger(ledger: str | Path, schemas: dict[Path, Any] | None = None) -> dict[str, Any]:
    """Check the manifest and every finished partition's files; return the manifest.

    Raises :class:`InputError` listing every problem (file, column, reason).
    Cost: footers, file sizes and one SHA-256 pass over the partition files
    (about 1 GB/s per thread; partitions are checked on two threads, the
    problems listed in partition order); no row is decoded. ``schemas``, when
    given, receives each partition file's Arrow schema (``connect`` builds its
    views from them without opening the footers again).
    """
    from concurrent.futures import ThreadPoolExecutor

    import pyarrow._parquet  # noqa: F401 - imported once here, not by two threads at a time

    ledger = Path(ledger)
    schemas = {} if schemas is None else schemas
    manifest = load_manifest(ledger)
    arms, layout = manifest["arms"], layout_for(manifest)
    with ThreadPoolExecutor(max_workers=2) as pool:
        found = pool.map(
            lambda key: _partition_problems(ledger, key, arms, schemas, layout),
            finished_partitions(ledger, layout),
        )
        problems = [p for part_problems in found for p in part_problems]
    problems += run_level_problems(ledger, layout, arms)
    if problems:
        raise InputError(problems)
    return manifest


def run_level_problems(ledger: Path, layout: Layout, arms: dict[str, Any]) -> list[Problem]:
    """What is wrong with the tables beside the partitions: each arm's oracle table (an arm the
    manifest lists, the oracle schema) and the sources table (its schema)."""
    problems: list[Problem] = []
    for arm, path in layout.oracle_files(ledger):
        if arm not in arms:
            reason = "an oracle table of an arm the manifest does not list"
            problems.append(Problem(str(path), None, "arm", reason))
        problems.extend(parquet_problems(path, schema.ORACLE))
    src = layout.sources_path(ledger)
    if src.is_file():
        problems.extend(parquet_problems(src, schema.SOURCES))
    return problems
