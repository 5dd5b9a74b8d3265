"""Reading a ledger's tables straight from its bucket: DuckDB over a registered fsspec file system.

:func:`.storage.fetch` with ``direct=True`` copies only a remote ledger's small files (the manifest,
the commit markers, the oracle and sources tables, fixtures, run records) into a local directory and
leaves there a file naming the URL (:data:`DIRECT`). The reader (:mod:`.read`) then builds its
partition-table views over ``s3://...`` (``gs://``, ``az://``) URLs, read by DuckDB through
``register_filesystem`` (the bucket's fsspec file system: no httpfs extension, which would have to be
downloaded). Nothing large is copied: a query reads only the row groups and columns it needs.

Integrity, as on local disk, but paid once per file: each partition file the markers list must be in
the bucket with the size its marker records, and its SHA-256 (streamed from the bucket) must equal the
marker's. A file whose digest matched is remembered by its object version (ETag, size) in
``verified.json`` beside the local directory, so a later open lists the bucket (one request) instead
of reading every byte again; an object replaced since (another ETag) is hashed again. Footers are not
read up front (on local disk they are): a file whose bytes match the writer's digest holds the footer
the writer wrote.
"""

from __future__ import annotations

import hashlib
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ledgerscope.common.errors import InputError, Problem
from ledgerscope.ledger import schema
from ledgerscope.ledger.layout import Layout, layout_for
from ledgerscope.ledger.remote_sync import DIRECT, version_tag

if TYPE_CHECKING:
    from duckdb import DuckDBPyConnection

#: object versions whose bytes matched their marker's digest, beside the direct-read directory
VERIFIED = "verified.json"


def direct_url(ledger: str | Path) -> str | None:
    """The URL whose partition tables a direct-read directory stands for; None for any other ledger."""
    try:
        data = json.loads((Path(ledger) / DIRECT).read_bytes())
    except (OSError, ValueError):
        return None
    return data.get("url") if isinstance(data, dict) and isinstance(data.get("url"), str) else None


def _markers(ledger: Path, layout: Layout) -> list[tuple[tuple[str, str], dict[str, Any]]]:
    """((arm, phase), the marker's ``files``) of every committed partition, in partition order."""
    out = []
    for arm, phase in layout.finished(ledger):
        try:
            meta = json.loads(layout.marker_path(ledger, arm, phase).read_bytes())
        except (OSError, ValueError):
            meta = {}
        files = meta.get("files") if isinstance(meta, dict) else None
        out.append(((arm, phase), files if isinstance(files, dict) else {}))
    return out


def listed_files(ledger: Path, layout: Layout) -> list[tuple[str, str, dict[str, Any]]]:
    """(table, path relative to the ledger, the marker's file record) of every committed partition
    file, in partition order."""
    out = []
    for (arm, phase), files in _markers(ledger, layout):
        for key, record in files.items():
            found = layout.keyed_file(ledger, key, arm, phase)
            if found is not None:
                rel = found[1].relative_to(ledger).as_posix()
                out.append((found[0], rel, record if isinstance(record, dict) else {}))
    return out


def table_urls(ledger: Path, layout: Layout) -> dict[str, list[str]]:
    """Each partition table's files as URLs in the bucket, in partition order."""
    url = direct_url(ledger)
    out: dict[str, list[str]] = {name: [] for name in schema.TABLE_NAMES}
    for table, rel, _ in listed_files(ledger, layout):
        if table in out:
            out[table].append(f"{url}/{rel}")
    return out


def register(ledger: Path, con: DuckDBPyConnection) -> None:
    """Give ``con`` the bucket's file system (its protocol: ``s3``, ``gs``, ``az`` ...)."""
    from ledgerscope.ledger.storage import parse

    con.register_filesystem(parse(str(direct_url(ledger))).filesystem())


def _sha256(fs: Any, path: str) -> str:
    digest = hashlib.sha256()
    with fs.open(path, "rb", block_size=8 << 20) as fh:
        for chunk in iter(lambda: fh.read(8 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _load_verified(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def verify_remote_files(ledger: Path, layout: Layout) -> list[Problem]:
    """Every listed partition file in the bucket, with its marker's size and SHA-256 (hashed once per
    object version, see the module doc). Problems name the file's URL."""
    from ledgerscope.ledger.storage import parse, remote_errors

    url = str(direct_url(ledger))
    loc = parse(url)
    fs = loc.filesystem()
    with remote_errors(loc):
        infos = {p[len(loc.path) + 1 :]: i for p, i in fs.find(loc.path, detail=True).items()}
    cache_file = ledger.parent / VERIFIED
    verified = _load_verified(cache_file)
    problems, to_hash = [], []
    for _, rel, want in listed_files(ledger, layout):
        info = infos.get(rel)
        where = f"{url}/{rel}"
        if info is None:
            problems.append(Problem(where, None, "file", "missing (listed in its commit marker)"))
        elif info.get("size") != want.get("bytes"):
            reason = f"{info.get('size')} bytes, but the commit marker records {want.get('bytes')}"
            problems.append(Problem(where, None, "bytes", reason + " (truncated or replaced)"))
        else:
            seen = {"etag": version_tag(info), "bytes": info.get("size"), "sha256": want.get("sha256")}
            if seen["etag"] is None or verified.get(rel) != seen:
                to_hash.append((rel, seen))
    with remote_errors(loc), ThreadPoolExecutor(max_workers=4) as pool:
        digests = list(pool.map(lambda item: _sha256(fs, f"{loc.path}/{item[0]}"), to_hash))
    for (rel, seen), digest in zip(to_hash, digests, strict=True):
        if digest != seen["sha256"]:
            reason = "content differs from the digest the commit marker records (corrupted)"
            problems.append(Problem(f"{url}/{rel}", None, "sha256", reason))
            verified.pop(rel, None)
        elif seen["etag"] is not None:
            verified[rel] = seen
    if to_hash:
        cache_file.write_text(json.dumps(verified, sort_keys=True))
    return problems


def verify_direct(ledger: Path) -> dict[str, Any]:
    """:func:`.verify.verify_ledger` for a direct-read directory: the manifest, each partition's arm and
    phase, the local oracle and sources tables, and the bucket's partition files
    (:func:`verify_remote_files`). Returns the manifest; raises :class:`InputError`."""
    from ledgerscope.ledger.verify import load_manifest, run_level_problems

    manifest = load_manifest(ledger)
    arms, layout = manifest["arms"], layout_for(manifest)
    problems = []
    for arm, phase in layout.finished(ledger):
        labels = {p["label"] for p in arms.get(arm, {}).get("phases", [])}
        if arm not in arms or phase not in labels:
            where = str(layout.marker_path(ledger, arm, phase))
            problems.append(Problem(where, None, "arm/phase", "a partition the manifest does not list"))
    problems += verify_remote_files(ledger, layout)
    problems += run_level_problems(ledger, layout, arms)
    if problems:
        raise InputError(problems)
    return manifest
