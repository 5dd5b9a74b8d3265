"""Where a ledger's files lie, for each ledger format version (the reasons are in :mod:`.schema`).

Format 3 (written now) gives every table a directory of its own, Hive-partitioned:
``records/arm=A/phase=L/part-0.parquet`` (likewise every partition table),
``oracle/arm=A/part-0.parquet``, ``sources/part-0.parquet``; a partition's commit
marker is ``_commits/arm=A/phase=L.json``, outside the table directories. Format 2
(still read) named a partition ``partitions/arm-A/phase-L/`` holding one file per
table and its ``_SUCCESS.json``, the oracle ``oracle/arm-A/oracle.parquet``; format 1
spelled those directories ``arm=A`` and ``phase=L``. The files are the same in all
three: every row carries its ``arm`` and ``phase`` as strings. Everything that
builds or parses a ledger path goes through a layout, so a reader handles every
version and a writer writes only :data:`CURRENT`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from ledgerscope.ledger import schema

#: an arm name and a phase label each name a directory: the characters the arm configuration allows
ARM_NAME = re.compile(r"[A-Za-z0-9_.-]+")
PHASE_LABEL = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]*")
#: a table's name (a directory of a format 3 ledger, a file stem of a format 2 partition)
TABLE_NAME = re.compile(r"[a-z][a-z0-9_]*")


class Layout:
    """The paths of one ledger format. Partitions are named by their (arm, phase) key."""

    format: str

    def table_file(self, ledger: str | Path, table: str, arm: str, phase: str) -> Path:
        """The file of partition table ``table`` of (arm, phase)."""
        raise NotImplementedError

    def marker_path(self, ledger: str | Path, arm: str, phase: str) -> Path:
        """The partition's commit marker: it counts only once this is written, after its files."""
        raise NotImplementedError

    #: the commit markers' paths relative to the ledger, as a glob
    marker_pattern: str
    #: the oracle tables' paths relative to the ledger, as a glob
    oracle_pattern: str

    def marker_key(self, rel: str) -> tuple[str, str]:
        """(arm, phase) of a commit marker at ``rel`` (relative to the ledger, ``/``-separated)."""
        raise NotImplementedError

    def oracle_arm(self, rel: str) -> str:
        """The arm of an oracle table at ``rel`` (relative to the ledger, ``/``-separated)."""
        raise NotImplementedError

    def finished(self, ledger: str | Path) -> list[tuple[str, str]]:
        """(arm, phase) of every partition with a commit marker, sorted: the only ones read."""
        root = Path(ledger)
        rels = (p.relative_to(root).as_posix() for p in root.glob(self.marker_pattern))
        return sorted(self.marker_key(rel) for rel in rels)

    def oracle_path(self, ledger: str | Path, arm: str) -> Path:
        raise NotImplementedError

    def oracle_files(self, ledger: str | Path) -> list[tuple[str, Path]]:
        """(arm, file) of every oracle table, sorted."""
        root = Path(ledger)
        found = root.glob(self.oracle_pattern)
        return sorted((self.oracle_arm(p.relative_to(root).as_posix()), p) for p in found)

    def oracle_resources_path(self, ledger: str | Path, arm: str) -> Path:
        """The resource record of the arm's oracle run."""
        raise NotImplementedError

    def sources_path(self, ledger: str | Path) -> Path:
        raise NotImplementedError

    def file_key(self, table: str, arm: str, phase: str) -> str:
        """How the partition's marker names the file of ``table`` (its ``files`` keys)."""
        raise NotImplementedError

    def keyed_file(self, ledger: str | Path, key: str, arm: str, phase: str) -> tuple[str, Path] | None:
        """(table, path) of a ``files`` key of the (arm, phase) marker; None when the key names no
        table file of that partition (a path step, another partition's file)."""
        raise NotImplementedError

    def records_suffix_sql(self, arm: str, phase: str) -> str:
        """SQL for the path a records file of the row's ``arm`` and ``phase`` ends with
        (``arm`` and ``phase`` are SQL expressions; the layout's names hold no quote)."""
        raise NotImplementedError

    def partition_files(self, ledger: str | Path, arm: str, phase: str) -> dict[str, Path]:
        """{table: file} of the partition's table files that exist (a table added within a format
        is absent from an older partition)."""
        found = {}
        for name in schema.TABLE_NAMES:
            path = self.table_file(ledger, name, arm, phase)
            if path.is_file():
                found[name] = path
        return found

    def is_committed(self, ledger: str | Path, arm: str, phase: str) -> bool:
        return self.marker_path(ledger, arm, phase).is_file()


class PartitionDirLayout(Layout):
    """Formats 1 and 2: one directory per partition, ``<arm_prefix><arm>/<phase_prefix><label>``,
    holding a file per table and ``_SUCCESS.json``."""

    def __init__(self, format: str, arm_prefix: str, phase_prefix: str) -> None:
        self.format, self.arm_prefix, self.phase_prefix = format, arm_prefix, phase_prefix
        self.marker_pattern = f"partitions/{arm_prefix}*/{phase_prefix}*/_SUCCESS.json"
        self.oracle_pattern = f"oracle/{arm_prefix}*/oracle.parquet"

    def partition_dir(self, ledger: str | Path, arm: str, phase: str) -> Path:
        return Path(ledger) / "partitions" / f"{self.arm_prefix}{arm}" / f"{self.phase_prefix}{phase}"

    def table_file(self, ledger: str | Path, table: str, arm: str, phase: str) -> Path:
        return self.partition_dir(ledger, arm, phase) / f"{table}.parquet"

    def marker_path(self, ledger: str | Path, arm: str, phase: str) -> Path:
        return self.partition_dir(ledger, arm, phase) / "_SUCCESS.json"

    def marker_key(self, rel: str) -> tuple[str, str]:
        arm_dir, phase_dir = rel.split("/")[1:3]
        return arm_dir[len(self.arm_prefix) :], phase_dir[len(self.phase_prefix) :]

    def oracle_path(self, ledger: str | Path, arm: str) -> Path:
        return Path(ledger) / "oracle" / f"{self.arm_prefix}{arm}" / "oracle.parquet"

    def oracle_arm(self, rel: str) -> str:
        return rel.split("/")[1][len(self.arm_prefix) :]

    def oracle_resources_path(self, ledger: str | Path, arm: str) -> Path:
        return self.oracle_path(ledger, arm).with_name("resources.json")

    def sources_path(self, ledger: str | Path) -> Path:
        return Path(ledger) / "sources.parquet"

    def file_key(self, table: str, arm: str, phase: str) -> str:
        return f"{table}.parquet"

    def keyed_file(self, ledger: str | Path, key: str, arm: str, phase: str) -> tuple[str, Path] | None:
        if "/" in key or "\\" in key or key.startswith(".") or not key.endswith(".parquet"):
            return None
        return key[: -len(".parquet")], self.partition_dir(ledger, arm, phase) / key

    def records_suffix_sql(self, arm: str, phase: str) -> str:
        return f"'/{self.arm_prefix}' || {arm} || '/{self.phase_prefix}' || {phase} || '/records.parquet'"


#: a format 3 partition table's file name (one file per partition; a retried write replaces it)
PART_FILE = "part-0.parquet"


class TableDirLayout(Layout):
    """Format 3: a directory per table, Hive-partitioned, commit markers under ``_commits/``."""

    format = schema.FORMAT

    def table_file(self, ledger: str | Path, table: str, arm: str, phase: str) -> Path:
        return Path(ledger) / self.file_key(table, arm, phase)

    def marker_path(self, ledger: str | Path, arm: str, phase: str) -> Path:
        return Path(ledger) / "_commits" / f"arm={arm}" / f"phase={phase}.json"

    marker_pattern = "_commits/arm=*/phase=*.json"

    def marker_key(self, rel: str) -> tuple[str, str]:
        arm_dir, name = rel.split("/")[1:3]
        return arm_dir[len("arm=") :], name[len("phase=") : -len(".json")]

    def oracle_path(self, ledger: str | Path, arm: str) -> Path:
        return Path(ledger) / "oracle" / f"arm={arm}" / PART_FILE

    oracle_pattern = f"oracle/arm=*/{PART_FILE}"

    def oracle_arm(self, rel: str) -> str:
        return rel.split("/")[1][len("arm=") :]

    def oracle_resources_path(self, ledger: str | Path, arm: str) -> Path:
        return Path(ledger) / "_commits" / "oracle" / f"arm={arm}.json"

    def sources_path(self, ledger: str | Path) -> Path:
        return Path(ledger) / "sources" / PART_FILE

    def file_key(self, table: str, arm: str, phase: str) -> str:
        return f"{table}/arm={arm}/phase={phase}/{PART_FILE}"

    def keyed_file(self, ledger: str | Path, key: str, arm: str, phase: str) -> tuple[str, Path] | None:
        table, _, rest = key.partition("/")
        if TABLE_NAME.fullmatch(table) is None or rest != f"arm={arm}/phase={phase}/{PART_FILE}":
            return None
        return table, Path(ledger) / key

    def records_suffix_sql(self, arm: str, phase: str) -> str:
        return f"'/records/arm=' || {arm} || '/phase=' || {phase} || '/{PART_FILE}'"


CURRENT: Layout = TableDirLayout()
VERSION_2 = PartitionDirLayout(schema.FORMAT_2, "arm-", "phase-")
VERSION_1 = PartitionDirLayout(schema.FORMAT_1, "arm=", "phase=")
LAYOUTS = {layout.format: layout for layout in (CURRENT, VERSION_2, VERSION_1)}


def layout_for(manifest: dict[str, Any]) -> Layout:
    """The layout of a ledger whose (checked) manifest this is; the current one for an unknown format."""
    return LAYOUTS.get(str(manifest.get("format")), CURRENT)


def ledger_layout(ledger: str | Path) -> Layout:
    """The layout the ledger's ``manifest.json`` names, without checking the rest of it.

    For readers that open files by path after the ledger was verified (an
    unreadable manifest gives the current layout; verifying reports it).
    """
    try:
        manifest = json.loads((Path(ledger) / "manifest.json").read_bytes())
    except (OSError, ValueError):
        return CURRENT
    return layout_for(manifest) if isinstance(manifest, dict) else CURRENT


def is_interchange(path: str | Path) -> bool:
    """A JSONL interchange directory (:mod:`.interchange`), not a Parquet ledger: ``manifest.json`` and
    ``records.jsonl``, no ``partitions/`` or ``records/``. Readers take its tables instead of
    partition files."""
    path = Path(path)
    return (
        (path / "manifest.json").is_file()
        and (path / "records.jsonl").is_file()
        and not (path / "partitions").exists()
        and not (path / "records").exists()
    )
