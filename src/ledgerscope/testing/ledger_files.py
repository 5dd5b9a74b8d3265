"""A ledger's files by table and partition, whatever its format, for tests and scripts that damage,
edit or count them (the readers go through :mod:`ledgerscope.ledger.layout` themselves)."""

from __future__ import annotations

import json
from pathlib import Path

from ledgerscope.ledger.layout import ledger_layout
from ledgerscope.ledger.verify import file_record


def table_file(ledger: str | Path, table: str, arm: str, phase: str) -> Path:
    """The file of partition table ``table`` of (arm, phase), in the ledger's own format."""
    return ledger_layout(ledger).table_file(ledger, table, arm, phase)


def table_files(ledger: str | Path, table: str) -> list[Path]:
    """The committed partitions' files of ``table``, in partition order."""
    layout = ledger_layout(ledger)
    found = [layout.partition_files(ledger, arm, phase) for arm, phase in layout.finished(ledger)]
    return [files[table] for files in found if table in files]


def marker_paths(ledger: str | Path) -> list[Path]:
    """Every committed partition's marker, in partition order."""
    layout = ledger_layout(ledger)
    return [layout.marker_path(ledger, arm, phase) for arm, phase in layout.finished(ledger)]


def marker_of(ledger: str | Path, path: Path) -> tuple[Path, str]:
    """(marker, ``files`` key) of the committed partition holding table file ``path``."""
    layout = ledger_layout(ledger)
    for arm, phase in layout.finished(ledger):
        for name, file in layout.partition_files(ledger, arm, phase).items():
            if Path(file) == Path(path):
                return layout.marker_path(ledger, arm, phase), layout.file_key(name, arm, phase)
    raise ValueError(f"{path} is no committed partition's table file")


def rerecord(ledger: str | Path, path: Path, rows: int | None = None) -> None:
    """Record an edited table file's size and digest (and its row count) in its partition's marker,
    so that the reader takes the edit for the ledger's own content."""
    marker, key = marker_of(ledger, path)
    meta = json.loads(marker.read_text())
    meta["files"][key] = file_record(Path(path))
    table = key.split("/")[0].removesuffix(".parquet")
    if rows is not None and table in meta:
        meta[table] = rows
    marker.write_text(json.dumps(meta))


def marker_path(ledger: str | Path, arm: str, phase: str) -> Path:
    """The (arm, phase) partition's commit marker, in the ledger's own format."""
    return ledger_layout(ledger).marker_path(ledger, arm, phase)


def oracle_file(ledger: str | Path, arm: str) -> Path:
    """The arm's oracle table, in the ledger's own format."""
    return ledger_layout(ledger).oracle_path(ledger, arm)
