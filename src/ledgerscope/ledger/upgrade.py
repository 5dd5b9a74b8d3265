"""Moving a ledger's files from one format's layout to another's: ``convert --to parquet`` on an
older Parquet ledger (format 1 or 2) writes format 3, to a new directory or in place.

The table files are copied byte for byte (their rows do not depend on the format), so every
size and digest a commit marker records still holds; only the markers' ``files`` keys and the
manifest's ``format`` change. The result is built beside its target and passes the reader's
checks before it is renamed into place; in place, the old ledger is removed only after that.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from ledgerscope.common.atomic import clear_stale
from ledgerscope.common.errors import InputError, Problem
from ledgerscope.ledger.layout import CURRENT, Layout, ledger_layout
from ledgerscope.ledger.read import connect
from ledgerscope.ledger.verify import load_manifest

#: what lies at a ledger's root in every format and is carried over as it is
_ROOT_FILES = ("fixtures.jsonl", "_SWEEP_DONE.json")
_ROOT_DIRS = ("runs",)


def _copy(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dst)


def relayout(src: str | Path, dst: str | Path, target: Layout) -> dict[str, int]:
    """Copy the ledger ``src`` (any readable format) to the new directory ``dst`` in ``target``'s
    layout. Only committed partitions are carried. Returns counts of what was copied."""
    src, dst = Path(src), Path(dst)
    manifest = load_manifest(src)
    old = ledger_layout(src)
    dst.mkdir(parents=True)
    (dst / "manifest.json").write_text(
        json.dumps({**manifest, "format": target.format}, indent=2, sort_keys=True, ensure_ascii=False)
    )
    for name in _ROOT_FILES:
        if (src / name).is_file():
            _copy(src / name, dst / name)
    for name in _ROOT_DIRS:
        if (src / name).is_dir():
            shutil.copytree(src / name, dst / name)
    if old.sources_path(src).is_file():
        _copy(old.sources_path(src), target.sources_path(dst))
    counts = {"partitions": 0, "oracle": 0}
    for arm, phase in old.finished(src):
        files = old.partition_files(src, arm, phase)
        for table, path in files.items():
            _copy(path, target.table_file(dst, table, arm, phase))
        meta = json.loads(old.marker_path(src, arm, phase).read_bytes())
        if isinstance(meta, dict) and isinstance(meta.get("files"), dict):
            keyed = {old.file_key(table, arm, phase): table for table in files}
            meta["files"] = {
                target.file_key(keyed[key], arm, phase) if key in keyed else key: record
                for key, record in meta["files"].items()
            }
        marker = target.marker_path(dst, arm, phase)
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text(json.dumps(meta, indent=2, sort_keys=True))
        counts["partitions"] += 1
    for arm, path in old.oracle_files(src):
        _copy(path, target.oracle_path(dst, arm))
        if old.oracle_resources_path(src, arm).is_file():
            _copy(old.oracle_resources_path(src, arm), target.oracle_resources_path(dst, arm))
        counts["oracle"] += 1
    return counts


def upgrade(src: str | Path, out: str | Path) -> dict[str, int]:
    """Write ``src`` (a Parquet ledger of any readable format) as a format 3 ledger at ``out``: a
    new directory, or ``src`` itself (upgraded in place). The source is checked first."""
    src, out = Path(src), Path(out)
    in_place = out.exists() and out.resolve() == src.resolve()
    if out.exists() and not in_place:
        reason = "already exists; choose a new directory, or the ledger itself"
        raise InputError(Problem(str(out), None, "out", reason))
    led = src.resolve()
    if not in_place and led in out.resolve().parents:
        raise InputError(Problem(str(out), None, "out", "must lie outside the ledger (or be the ledger)"))
    connect(src).close()  # nothing damaged is carried over
    staging = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    clear_stale(out)
    shutil.rmtree(staging, ignore_errors=True)
    try:
        counts = relayout(src, staging, CURRENT)
        connect(staging).close()
        if in_place:
            old = out.with_name(f".{out.name}.{os.getpid()}.old")
            os.replace(out, old)
            os.replace(staging, out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return counts
