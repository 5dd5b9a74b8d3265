"""Where a ledger lives: a local directory or an object-store URL, resolved here and nowhere else.

``s3://bucket/run``, ``gs://bucket/run``, ``az://container/run`` (``gcs://``, ``abfs://`` too) name a
ledger in a bucket, read and written through fsspec (s3fs, gcsfs, adlfs: ``ledgerscope[s3]`` and
friends); ``file:///path`` and a plain path name a local directory. Credentials and endpoints come
from each cloud's standard environment (``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``,
``AWS_ENDPOINT_URL``, ``AWS_DEFAULT_REGION``, ``GOOGLE_APPLICATION_CREDENTIALS``,
``AZURE_STORAGE_CONNECTION_STRING`` ...) or its credential chain; a URL carrying credentials is
refused, and nothing here writes one anywhere.

A remote ledger is worked on through a local directory bound to its URL:

* to read it, :func:`fetch` copies its committed files (the manifest, every partition with a commit
  marker and the files the marker lists, the oracle and sources tables) into a cache directory,
  re-using files already fetched at the version the bucket still lists (:mod:`.remote_sync`), and
  removes what is no longer committed; every reader then runs on that copy, with the integrity checks
  it runs on local disk. ``fetch(direct=True)`` copies only the small files, and DuckDB reads the
  partition tables from the bucket (:mod:`.remote_read`); which one a command uses:
  :func:`reader_dir`;
* to write it, :func:`bind` prepares a working directory holding what the bucket already committed
  (so a killed sweep resumes), and :func:`publish_partition` (called by
  :func:`.write.write_partition`) uploads a partition's files and then its commit marker: a reader
  of the bucket never takes a partition whose marker is not there, whatever was uploaded before.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ledgerscope.common.errors import InputError, Problem
from ledgerscope.ledger.layout import CURRENT, Layout, layout_for
from ledgerscope.ledger.remote_sync import DIRECT, sync

#: scheme -> (fsspec protocol, the package that implements it, the extra that installs it)
SCHEMES = {
    "s3": ("s3", "s3fs", "s3"),
    "gs": ("gs", "gcsfs", "gcs"),
    "gcs": ("gs", "gcsfs", "gcs"),
    "az": ("az", "adlfs", "azure"),
    "abfs": ("abfs", "adlfs", "azure"),
}
#: ``scheme:/`` at the start: a URL (``pathlib`` turns ``s3://b/k`` into ``s3:/b/k``, so one slash counts)
_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+):/+(.*)$", re.S)
_BUCKET = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{1,221}[A-Za-z0-9]")
#: the file in a local working directory naming the remote ledger it stands for (the URL only)
BINDING = ".remote.json"


@dataclass(frozen=True)
class Location:
    """A ledger's place: ``scheme`` "" for a local directory (``path``), else a bucket URL whose
    fsspec path (``bucket/key``) is ``path``."""

    scheme: str
    path: str

    @property
    def remote(self) -> bool:
        return bool(self.scheme)

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.path}" if self.scheme else self.path

    def filesystem(self) -> Any:
        """The fsspec file system of a remote location (credentials from the environment)."""
        protocol, package, extra = SCHEMES[self.scheme]
        try:
            import fsspec

            return fsspec.filesystem(protocol, use_listings_cache=False, skip_instance_cache=True)
        except ImportError:
            reason = f"{self.scheme}:// needs {package}: pip install 'ledgerscope[{extra}]'"
            raise InputError(Problem(self.url, None, "location", reason)) from None


def _bad(text: str, reason: str) -> InputError:
    return InputError(Problem(text, None, "location", reason))


def parse(location: str | Path) -> Location:
    """The location a command-line argument names; an unsupported or malformed URL is an
    :class:`InputError` (never a local directory named after it)."""
    text = str(location)
    m = _URL.match(text)
    if m is None:
        return Location("", text)
    scheme, rest = m.group(1).lower(), m.group(2)
    text = f"{m.group(1)}://{rest}"  # as given (pathlib leaves one slash of two)
    if scheme == "file":
        if str(location).lower().startswith("file://") and not str(location).lower().startswith("file:///"):
            raise _bad(text, "a file URL names a local path: file:///absolute/path")
        return Location("", "/" + rest.lstrip("/"))
    if scheme not in SCHEMES:
        known = ", ".join(f"{s}://" for s in (*SCHEMES, "file"))
        raise _bad(text, f"unsupported URL scheme {scheme!r} (supported: {known}, or a local path)")
    bucket, _, key = rest.partition("/")
    if "@" in bucket or ":" in bucket:
        raise _bad(text, "credentials or a port do not belong in the URL; set them in the environment")
    if not _BUCKET.fullmatch(bucket):
        raise _bad(text, f"missing or malformed bucket name {bucket!r}: {scheme}://BUCKET/PATH")
    parts = [p for p in key.split("/") if p]
    if any(p in (".", "..") for p in parts) or "\\" in key:
        raise _bad(text, "a path inside the bucket may not hold '.', '..' or '\\' steps")
    return Location(scheme, "/".join([bucket, *parts]))


def is_remote(location: str | Path) -> bool:
    return parse(location).remote


# ---------------------------------------------------------------------------
# local directories that stand for a remote ledger


def _cache_root() -> Path:
    base = os.environ.get("LEDGERSCOPE_REMOTE_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache"), "ledgerscope", "remote"
    )
    return Path(base)


def local_dir(loc: Location, purpose: str) -> Path:
    """The local directory that stands for ``loc`` (``purpose``: "read" or "write")."""
    digest = hashlib.sha256(loc.url.encode()).hexdigest()[:20]
    return _cache_root() / f"{purpose}-{digest}" / "ledger"


def bound_url(ledger: str | Path) -> str | None:
    """The URL a local working directory stands for, or None for a plain local ledger."""
    try:
        data = json.loads((Path(ledger) / BINDING).read_bytes())
    except (OSError, ValueError):
        return None
    return data.get("url") if isinstance(data, dict) and isinstance(data.get("url"), str) else None


def _remote_layout(fs: Any, root: str) -> Layout | None:
    """The layout the remote manifest names; None when there is no manifest. A bucket that does
    not exist raises :class:`FileNotFoundError`."""
    bucket = root.split("/")[0]
    if not fs.exists(bucket):
        raise FileNotFoundError(f"no bucket {bucket!r}")
    try:
        manifest = json.loads(fs.cat_file(f"{root}/manifest.json"))
    except FileNotFoundError:
        return None
    except ValueError:
        return CURRENT  # the reader reports the manifest once it is fetched
    return layout_for(manifest) if isinstance(manifest, dict) else CURRENT


def _rel(path: Path) -> str:
    """A path a layout built under the ledger "" (relative), as the bucket spells it."""
    return path.as_posix()


def committed_files(fs: Any, root: str, layout: Layout) -> dict[str, dict[str, Any] | None]:
    """{relative path: file record or None} of what a remote ledger has committed: run-level files,
    then each committed partition's listed files, then its marker (markers last)."""
    out: dict[str, dict[str, Any] | None] = {}
    for name in ("manifest.json", "fixtures.jsonl", "_SWEEP_DONE.json"):
        out[name] = None
    out[_rel(layout.sources_path(""))] = None
    for path in fs.glob(f"{root}/runs/*.json"):
        out[path[len(root) + 1 :]] = None
    for path in sorted(fs.glob(f"{root}/{layout.oracle_pattern}")):
        rel = path[len(root) + 1 :]
        out[rel] = None
        out[_rel(layout.oracle_resources_path("", layout.oracle_arm(rel)))] = None
    markers: dict[str, dict[str, Any] | None] = {}
    for path in sorted(fs.glob(f"{root}/{layout.marker_pattern}")):
        rel = path[len(root) + 1 :]
        arm, phase = layout.marker_key(rel)
        try:
            meta = json.loads(fs.cat_file(path))
        except (FileNotFoundError, ValueError):
            meta = {}
        files = meta.get("files") if isinstance(meta, dict) else None
        for key, record in (files or {}).items():
            found = layout.keyed_file("", key, arm, phase)
            if found is not None:
                out[_rel(found[1])] = record if isinstance(record, dict) else None
        markers[rel] = None
    out.update(markers)
    return out


def _same(local: Path, record: dict[str, Any] | None) -> bool:
    """``local`` already holds the file a marker records (size and SHA-256)."""
    if record is None or not local.is_file() or local.stat().st_size != record.get("bytes"):
        return False
    from ledgerscope.ledger.verify import file_record

    return bool(file_record(local)["sha256"] == record.get("sha256"))


def _download(fs: Any, root: str, local: Path, wanted: dict[str, dict[str, Any] | None]) -> None:
    for rel, record in wanted.items():
        target = local / rel
        if _same(target, record):
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            fs.get_file(f"{root}/{rel}", str(target))
        except FileNotFoundError:
            target.unlink(missing_ok=True)  # an optional file (sources, fixtures) or a missing one
            continue


def _prune(local: Path, keep: set[str]) -> None:
    """Remove what the remote ledger no longer commits (hidden files stay: the binding)."""
    for path in sorted(local.rglob("*"), reverse=True):
        rel = path.relative_to(local).as_posix()
        if rel.startswith(".") or "/." in rel:
            continue
        if path.is_file() and rel not in keep:
            path.unlink()
        elif path.is_dir() and not any(path.iterdir()):
            path.rmdir()


def fetch(loc: Location, direct: bool = False) -> Path:
    """A local copy of the remote ledger's committed files, for reading (see the module doc).

    ``direct``: copy only the small files (manifest, markers, oracle, sources, fixtures); the reader
    reads the partition tables from the bucket through DuckDB (:mod:`.remote_read`)."""
    fs = loc.filesystem()
    with remote_errors(loc):
        layout = _remote_layout(fs, loc.path)
        if layout is None:
            raise _bad(loc.url, "not a ledger: manifest.json is missing")
        local = local_dir(loc, "direct" if direct else "read")
        local.mkdir(parents=True, exist_ok=True)
        keep = sync(fs, loc.path, local, layout, tables=not direct)
    _prune(local, keep)
    if direct:
        (local / DIRECT).write_text(json.dumps({"url": loc.url}))
    return local


#: how a command reads a bucket: DuckDB over the bucket's file system (:mod:`.remote_read`), or a
#: verified local copy of every committed file; ``LEDGERSCOPE_REMOTE_READ`` overrides a command's choice
READ_MODES = ("direct", "copy")


def reader_dir(loc: Location, mode: str | None = None, default: str = "copy") -> Path:
    """The local directory a reader opens for the remote ledger ``loc`` (:func:`fetch`), read the
    ``mode`` way (else ``LEDGERSCOPE_REMOTE_READ``'s, else ``default``)."""
    mode = mode or os.environ.get("LEDGERSCOPE_REMOTE_READ") or default
    if mode not in READ_MODES:
        reason = f"LEDGERSCOPE_REMOTE_READ={mode!r}: expected one of {', '.join(READ_MODES)}"
        raise _bad(loc.url, reason)
    return fetch(loc, direct=mode == "direct")


def bind(loc: Location, new: bool = False) -> Path:
    """A local working directory for writing the remote ledger ``loc``: what the bucket has
    committed (nothing else), and the binding that makes partition writes upload themselves.
    ``new``: the ledger must not exist yet (the directory is left for the command to create)."""
    fs = loc.filesystem()
    local = local_dir(loc, "write")
    shutil.rmtree(local, ignore_errors=True)  # only what the bucket committed counts
    with remote_errors(loc):
        layout = _remote_layout(fs, loc.path)
        if new:
            if layout is not None:
                raise _bad(loc.url, "already holds a ledger; choose a new location")
            local.parent.mkdir(parents=True, exist_ok=True)
            return local
        local.mkdir(parents=True)
        if layout is not None:
            _download(fs, loc.path, local, committed_files(fs, loc.path, layout))
    (local / BINDING).write_text(json.dumps({"url": loc.url}))
    return local


def working_dir(out: str | Path) -> Path:
    """Where a worker writes for ``out``: a local directory, or for a URL a fresh local directory
    bound to it (a Ray worker on a node without the driver's disk)."""
    loc = parse(out)
    if not loc.remote:
        return Path(loc.path)
    import tempfile

    local = Path(tempfile.mkdtemp(prefix="ledgerscope-part-"))
    (local / BINDING).write_text(json.dumps({"url": loc.url}))
    return local


def upload_output(local: Path, loc: Location) -> None:
    """Upload a command's output file (or directory, e.g. ``export --format trec``) to ``loc``."""
    fs = loc.filesystem()
    with remote_errors(loc):
        if local.is_dir():
            fs.put(str(local), loc.path, recursive=True)
        else:
            fs.put_file(str(local), loc.path)


#: (remote file, size, mtime) of what this process uploaded: a run-level file is sent again only if changed
_SENT: set[tuple[str, int, int]] = set()


def _upload(fs: Any, local: Path, root: str, rels: list[str]) -> None:
    for rel in rels:
        path = local / rel
        try:
            st = path.stat()
        except OSError:
            continue
        key = (f"{root}/{rel}", st.st_size, st.st_mtime_ns)
        if key not in _SENT:
            fs.put_file(str(path), f"{root}/{rel}")
            _SENT.add(key)


def _run_level(local: Path) -> list[str]:
    """The working directory's files that are not a partition's (manifest first)."""
    layout = CURRENT
    rels = ["manifest.json", "fixtures.jsonl", _rel(layout.sources_path(""))]
    for arm, path in layout.oracle_files(local):
        rels += [path.relative_to(local).as_posix(), _rel(layout.oracle_resources_path("", arm))]
    rels += sorted(p.relative_to(local).as_posix() for p in local.glob("runs/*.json"))
    return rels


def publish_partition(ledger: Path, arm: str, phase: str) -> None:
    """Upload a partition committed in a bound working directory: the run-level files it needs to be
    read, its table files, then its commit marker. A no-op for a plain local ledger."""
    url = bound_url(ledger)
    if url is None:
        return
    loc = parse(url)
    fs = loc.filesystem()
    files = [
        path.relative_to(ledger).as_posix() for path in CURRENT.partition_files(ledger, arm, phase).values()
    ]
    marker = CURRENT.marker_path(ledger, arm, phase).relative_to(ledger).as_posix()
    with remote_errors(loc):
        _upload(fs, ledger, loc.path, [*_run_level(ledger), *files])
        _upload(fs, ledger, loc.path, [marker])


def publish_run_level(ledger: Path) -> None:
    """Upload a bound working directory's run-level files (the manifest, sources, fixtures, oracle)."""
    url = bound_url(ledger)
    if url is None:
        return
    loc = parse(url)
    with remote_errors(loc):
        _upload(loc.filesystem(), ledger, loc.path, _run_level(ledger))


def is_published(ledger: Path, arm: str, phase: str) -> bool:
    """A bound working directory's partition is committed in the bucket (a retried worker skips it)."""
    url = bound_url(ledger)
    if url is None:
        return False
    loc = parse(url)
    rel = CURRENT.marker_path("", arm, phase).as_posix()
    with remote_errors(loc):
        return bool(loc.filesystem().exists(f"{loc.path}/{rel}"))


def publish_all(ledger: Path, loc: Location) -> None:
    """Upload what a working directory for ``loc`` holds and this process has not sent: run-level
    files, then each committed partition (its files, then its marker), then ``_SWEEP_DONE.json``."""
    if not (ledger / "manifest.json").is_file():
        return  # the command wrote nothing (it failed before the manifest)
    if bound_url(ledger) is None:
        (ledger / BINDING).write_text(json.dumps({"url": loc.url}))
    fs = loc.filesystem()
    with remote_errors(loc):
        _upload(fs, ledger, loc.path, _run_level(ledger))
        for arm, phase in CURRENT.finished(ledger):
            files = CURRENT.partition_files(ledger, arm, phase).values()
            _upload(fs, ledger, loc.path, [p.relative_to(ledger).as_posix() for p in files])
            _upload(fs, ledger, loc.path, [CURRENT.marker_path("", arm, phase).as_posix()])
        _upload(fs, ledger, loc.path, ["_SWEEP_DONE.json"])


@contextlib.contextmanager
def remote_errors(loc: Location) -> Iterator[None]:
    """A bucket that cannot be reached or refuses us is a machine condition or an input problem, named."""
    try:
        yield
    except PermissionError as exc:
        raise _bad(loc.url, f"access denied: {_first_line(exc)}") from None
    except FileNotFoundError as exc:
        raise _bad(loc.url, f"not found (no such bucket?): {_first_line(exc)}") from None
    except OSError as exc:
        reason = f"cannot reach the object store (endpoint, network?): {_first_line(exc)}"
        raise _bad(loc.url, reason) from None
    except Exception as exc:  # the cloud libraries' own errors: no credentials, a refused request
        if type(exc).__module__.split(".")[0] not in _CLOUD_MODULES:
            raise
        where = "credentials and endpoint come from the environment"
        reason = f"{type(exc).__name__}: {_first_line(exc)} ({where})"
        raise _bad(loc.url, reason) from None


_CLOUD_MODULES = frozenset(
    {"botocore", "aiobotocore", "s3fs", "gcsfs", "google", "adlfs", "azure", "aiohttp"}
)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
