"""Copying a remote ledger's committed files into a local directory, with one listing per open.

A recursive listing of the ledger's prefix gives every object's size and version tag (S3's ETag,
GCS's generation or md5, Azure's etag). A file whose local copy was fetched at the tag the bucket
still shows is not asked for again (the tags are kept in :data:`FETCHED`), so opening a ledger a
second time costs the listing and the manifest, not a request per file. What is fetched: the run-level
files, the oracle tables, every commit marker, and (unless only the small files are wanted) each
file a marker lists; a partition without its marker is not there, whatever its files. The reader
still checks every copied file against its marker's size and SHA-256.
"""

from __future__ import annotations

import json
from pathlib import Path, PurePosixPath
from typing import Any

from ledgerscope.ledger.layout import Layout

#: {relative path: the version tag it was fetched at}, in the local directory
FETCHED = ".fetched.json"
#: the file in a direct-read directory naming the remote ledger whose tables it reads (the URL only;
#: :mod:`.remote_read`)
DIRECT = ".remote-read.json"


def version_tag(info: dict[str, Any]) -> str | None:
    """An object's version tag from its listing (None when the store gives none)."""
    for key in ("ETag", "etag", "generation", "md5Hash"):
        if info.get(key):
            return str(info[key])
    return None


def _match(rel: str, pattern: str) -> bool:
    """``rel`` matches ``pattern`` step by step (a ``*`` never crosses a ``/``)."""
    path = PurePosixPath(rel)
    return len(path.parts) == len(PurePosixPath(pattern).parts) and path.match(pattern)


def _small_files(infos: dict[str, Any], layout: Layout) -> list[str]:
    """The run-level files, oracle tables (and their resource records) and commit markers listed."""
    names = ["manifest.json", "fixtures.jsonl", "_SWEEP_DONE.json", layout.sources_path("").as_posix()]
    names += sorted(r for r in infos if _match(r, "runs/*.json"))
    for rel in sorted(r for r in infos if _match(r, layout.oracle_pattern)):
        names += [rel, layout.oracle_resources_path("", layout.oracle_arm(rel)).as_posix()]
    names += sorted(r for r in infos if _match(r, layout.marker_pattern))
    return [n for n in names if n in infos]


def _table_files(local: Path, layout: Layout, markers: list[str]) -> list[str]:
    """Each file the (local copies of the) commit markers list."""
    out = []
    for rel in markers:
        arm, phase = layout.marker_key(rel)
        try:
            meta = json.loads((local / rel).read_bytes())
        except (OSError, ValueError):
            continue  # the reader reports the marker
        for key in (meta.get("files") or {}) if isinstance(meta, dict) else {}:
            found = layout.keyed_file("", key, arm, phase)
            if found is not None:
                out.append(found[1].as_posix())
    return out


def _get(
    fs: Any, root: str, local: Path, rels: list[str], infos: dict[str, Any], fetched: dict[str, Any]
) -> None:
    """Download the ``rels`` whose local copy is missing or was fetched at another tag (in one batch)."""
    stale = []
    for rel in rels:
        tag = version_tag(infos[rel])
        if tag is None or fetched.get(rel) != tag or not (local / rel).is_file():
            stale.append(rel)
            fetched[rel] = tag
    for rel in stale:
        (local / rel).parent.mkdir(parents=True, exist_ok=True)
    if stale:
        fs.get([f"{root}/{rel}" for rel in stale], [str(local / rel) for rel in stale])


def sync(fs: Any, root: str, local: Path, layout: Layout, tables: bool = True) -> set[str]:
    """Bring ``local`` up to the committed files under ``root`` (``tables``: the partition files too);
    returns the relative paths that belong there (the caller removes the rest)."""
    infos = {p[len(root) + 1 :]: i for p, i in fs.find(root, detail=True).items()}
    try:
        fetched = json.loads((local / FETCHED).read_bytes())
    except (OSError, ValueError):
        fetched = {}
    small = _small_files(infos, layout)
    _get(fs, root, local, small, infos, fetched)
    keep = set(small)
    if tables:
        markers = [r for r in small if _match(r, layout.marker_pattern)]
        files = [r for r in _table_files(local, layout, markers) if r in infos]
        _get(fs, root, local, files, infos, fetched)
        keep.update(files)
    (local / FETCHED).write_text(json.dumps({k: v for k, v in fetched.items() if k in keep}, sort_keys=True))
    return keep
