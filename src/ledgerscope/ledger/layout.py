"""Where a ledger's files lie, for each ledger format version (the reasons are in :mod:`.schema`).

Format 2 (written now) names a partition ``partitions/arm-A/phase-L/`` and an
oracle table ``oracle/arm-A/oracle.parquet``; format 1 (still read) used the
Hive spelling ``arm=A`` and ``phase=L``. The files themselves are the same in
both: every row carries its ``arm`` and ``phase`` as strings. Everything that
builds or parses a partition path goes through a :class:`Layout`, so a reader
handles both versions and a writer writes only :data:`CURRENT`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ledgerscope.ledger import schema

#: an arm name and a phase label each name a directory: the characters the arm configuration allows
ARM_NAME = re.compile(r"[A-Za-z0-9_.-]+")
PHASE_LABEL = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]*")


@dataclass(frozen=True)
class Layout:
    """The directory names of one ledger format: ``<arm_prefix><arm>/<phase_prefix><label>``."""

    format: str
    arm_prefix: str
    phase_prefix: str

    def partition_dir(self, ledger: str | Path, arm: str, phase: str) -> Path:
        return Path(ledger) / "partitions" / f"{self.arm_prefix}{arm}" / f"{self.phase_prefix}{phase}"

    def oracle_path(self, ledger: str | Path, arm: str) -> Path:
        return Path(ledger) / "oracle" / f"{self.arm_prefix}{arm}" / "oracle.parquet"

    @property
    def marker_glob(self) -> str:
        """Every finished partition's ``_SUCCESS.json``, relative to the ledger."""
        return f"partitions/{self.arm_prefix}*/{self.phase_prefix}*/_SUCCESS.json"

    @property
    def oracle_glob(self) -> str:
        return f"oracle/{self.arm_prefix}*/oracle.parquet"

    def partition_key(self, part: Path) -> tuple[str, str]:
        """(arm, phase) of a partition directory this layout named."""
        return part.parent.name[len(self.arm_prefix) :], part.name[len(self.phase_prefix) :]

    def oracle_arm(self, path: Path) -> str:
        return path.parent.name[len(self.arm_prefix) :]

    def records_suffix_sql(self, arm: str, phase: str) -> str:
        """SQL for the path a records file of the row's ``arm`` and ``phase`` ends with
        (``arm`` and ``phase`` are SQL expressions; the prefixes hold no quote)."""
        return f"'/{self.arm_prefix}' || {arm} || '/{self.phase_prefix}' || {phase} || '/records.parquet'"


CURRENT = Layout(schema.FORMAT, "arm-", "phase-")
VERSION_1 = Layout(schema.FORMAT_1, "arm=", "phase=")
LAYOUTS = {layout.format: layout for layout in (CURRENT, VERSION_1)}


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
    ``records.jsonl``, no ``partitions/``. Readers take its tables instead of partition files."""
    path = Path(path)
    return (
        (path / "manifest.json").is_file()
        and (path / "records.jsonl").is_file()
        and not (path / "partitions").exists()
    )
