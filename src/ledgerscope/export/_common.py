"""Helpers every export format shares: candidates streamed per record, atomic directories, file modes.

They live apart from the format modules so that each format reads as its
own layout and nothing else, and so that the ways an export touches the
ledger (only reads, through one registered selection table) and the disk
(only temporary paths renamed into place) are written once.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ledgerscope.common.sql_tables import drop_tables

if TYPE_CHECKING:
    from duckdb import DuckDBPyConnection

    from ledgerscope.export.redaction import Redactor
    from ledgerscope.inputs.fixtures import Fixture


@dataclass(frozen=True)
class ExportRequest:
    """What every format's writer gets: the ledger's connection and manifest, the validated filter,
    the selected rows, the fixtures and source texts read once, where to write, and the redactor
    (None: nothing to withhold, the writers as they always were)."""

    con: DuckDBPyConnection
    ledger: Path
    manifest: dict[str, Any]
    predicate: str
    rows: list[dict[str, Any]]
    out: Path
    loaded: tuple[dict[str, Fixture], dict[str, str]]
    redactor: Redactor | None = None


CANDIDATE_COLUMNS = ("rank", "unit_id", "doc_id", "start", "end", "score", "lineage")
_SELECTION_TABLE = "_ls_export_selection"


def _register_selection(con: DuckDBPyConnection, rows: list[dict[str, Any]]) -> str:
    """The selection's keys as a temp table, so candidates join against it instead of a huge IN list."""
    from ledgerscope.common.sql_tables import columns_table

    columns_table(
        con,
        _SELECTION_TABLE,
        {
            "arm": ("VARCHAR", [r["arm"] for r in rows]),
            "phase": ("VARCHAR", [r["phase"] for r in rows]),
            "qid": ("VARCHAR", [r["qid"] for r in rows]),
            "ord": ("BIGINT", [r["_ord"] for r in rows]),
            "selection_depth": ("BIGINT", [r.get("selection_depth") for r in rows]),
        },
    )
    return _SELECTION_TABLE


def stream_candidates(
    con: DuckDBPyConnection,
    rows: list[dict[str, Any]],
    stages: Iterable[str] | None = None,
    cutoff_stage: str | None = None,
) -> Iterator[tuple[int, list[dict[str, Any]]]]:
    """(ord, candidate rows) per selected record that has any, in selection order, streamed.

    Streamed because a ledger's candidates can far outgrow memory. ``stages``
    limits the stages read; rows of ``cutoff_stage`` are kept only down to the
    record's selection depth.
    """
    if not rows:
        return
    sel = _register_selection(con, rows)
    params: list[Any] = []
    stage_filter = ""
    if stages is not None:
        stages = list(stages)
        stage_filter = f" AND c.stage IN ({', '.join('?' for _ in stages)})"
        params.extend(stages)
    cut = ""
    if cutoff_stage is not None:
        cut = ' AND (c.stage <> ? OR c."rank" <= coalesce(s.selection_depth, 0))'
        params.append(cutoff_stage)
    cols = ", ".join(f'c."{c}"' for c in CANDIDATE_COLUMNS)
    try:
        cur = con.execute(
            f"SELECT s.ord, c.stage, {cols} FROM candidates c JOIN {sel} s "
            "ON c.arm = s.arm AND CAST(c.phase AS VARCHAR) = s.phase AND c.qid = s.qid"
            f'{stage_filter}{cut} ORDER BY s.ord, c.stage, c."rank"',
            params,
        )
        names = [d[0] for d in cur.description]
        current: int | None = None
        bucket: list[dict[str, Any]] = []
        while True:
            batch = cur.fetchmany(10_000)
            if not batch:
                break
            for values in batch:
                row = dict(zip(names, values, strict=True))
                ord_ = row.pop("ord")
                if ord_ != current:
                    if current is not None:
                        yield current, bucket
                    current, bucket = ord_, []
                bucket.append(row)
        if current is not None:
            yield current, bucket
    finally:
        drop_tables(con, sel)


@contextlib.contextmanager
def atomic_dir(target: Path) -> Iterator[Path]:
    """Yield an empty temporary directory beside ``target``; swap it in for ``target`` on success.

    On any exception the temporary directory is removed and ``target`` is untouched.
    """
    from ledgerscope.common.atomic import clear_stale, temp_prefix

    target.parent.mkdir(parents=True, exist_ok=True)
    clear_stale(target, ".tmp")
    clear_stale(target, ".old")
    tmp = Path(tempfile.mkdtemp(prefix=temp_prefix(target), suffix=".tmp", dir=target.parent))
    try:
        yield tmp
        publish_mode(tmp, directory=True)
        if target.exists():
            old = Path(tempfile.mkdtemp(prefix=temp_prefix(target), suffix=".old", dir=target.parent))
            os.replace(target, old / "x")
            try:
                os.replace(tmp, target)
            except BaseException:
                os.replace(old / "x", target)
                raise
            finally:
                shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _current_umask() -> int:
    """The process umask (read by setting and restoring it: there is no plain getter)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _current_umask()


def publish_mode(path: Path, directory: bool = False) -> None:
    """Give a temporary file (0600 from mkstemp) or directory the mode a plain create would."""
    path.chmod((0o777 if directory else 0o666) & ~_UMASK)


def json_line(obj: Any) -> str:
    """One JSONL line: non-ASCII kept as is, anything JSON lacks (dates, decimals) as its ``str``."""
    return json.dumps(obj, ensure_ascii=False, default=str) + "\n"


def source_texts(con: DuckDBPyConnection) -> dict[str, str]:
    """Every source's text by doc_id."""
    return {d: t for d, t in con.execute("SELECT doc_id, text FROM sources").fetchall()}


def count_questions(rows: list[dict[str, Any]]) -> int:
    """The distinct questions among the selected records."""
    return len({r["qid"] for r in rows})
