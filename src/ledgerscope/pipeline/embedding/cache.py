"""A persistent, content-addressed embedding cache shared by every sweep, arm and process.

Layout: ``ROOT/<model id>/<aa>/<sha256 of the text>.emb``, one file per text
(:mod:`ledgerscope.pipeline.embedding.entries`), and ``ROOT/<model id>/model.json`` saying which model that
is. The
model id is a digest of everything that decides the vectors (the model's name and path, the bytes
of its weights, tokenizer and pooling files, the max length, the encoding rule, the device type and
the torch version), so another model published under the same name never hits.

Why it is safe with sweeps writing at once: an entry is written to a unique temporary file in its
own directory and renamed over the target (atomic on POSIX); two writers of one text write the same
bytes, so whichever rename lands last is right. A reader sees a whole entry or none.

Size: bounded by ``LEDGERSCOPE_EMBEDDING_CACHE_MAX`` (default 8G). Eviction is least recently used:
a hit refreshes the entry's mtime, and :func:`prune` (run at the end of each sweep and by
``ledgerscope cache prune``) deletes the oldest entries until the total is under the limit.

A failed write (full disk, read-only directory, file size limit) turns writes off for the rest of
the process and is reported; the sweep goes on, encoding what it does not find.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from ledgerscope.common.errors import LedgerscopeError
from ledgerscope.pipeline.embedding.entries import (
    CorruptEntry,
    Encoded,
    MismatchedEntry,
    pack,
    text_digest,
    unpack,
)

ENV_DIR = "LEDGERSCOPE_EMBEDDING_CACHE"
ENV_MAX = "LEDGERSCOPE_EMBEDDING_CACHE_MAX"
DEFAULT_MAX = 8 << 30
_UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


class CacheError(LedgerscopeError):
    """A cache entry that does not match its key: refused, never used."""


def parse_size(text: str) -> int:
    """``"500M"``, ``"8G"``, ``"1048576"`` -> bytes."""
    t = text.strip().upper().removesuffix("B")
    if t and t[-1] in _UNITS:
        return int(float(t[:-1]) * _UNITS[t[-1]])
    return int(t)


def cache_root() -> Path | None:
    """The cache directory, or None when ``LEDGERSCOPE_EMBEDDING_CACHE`` is ``off``."""
    value = os.environ.get(ENV_DIR)
    if value is not None and value.strip().lower() in ("off", "0", "false", "none"):
        return None
    if value:
        return Path(value).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ledgerscope" / "embeddings"


def max_bytes() -> int:
    return parse_size(os.environ.get(ENV_MAX) or str(DEFAULT_MAX))


@dataclass
class EmbeddingCache:
    """The entries of one model identity under ``root``; counts what it served and refused."""

    root: Path
    model_id: bytes
    describe: dict = field(default_factory=dict)
    hits: int = 0
    corrupt: list[str] = field(default_factory=list)
    write_error: str | None = None
    #: digests of the texts this process read from here or wrote here
    _known: set[bytes] = field(default_factory=set, repr=False)

    @property
    def folder(self) -> Path:
        return self.root / self.model_id.hex()[:32]

    def path(self, key: bytes) -> Path:
        h = key.hex()
        return self.folder / h[:2] / f"{h}.emb"

    def get(self, text: str) -> Encoded | None:
        """The entry for ``text``, or None. ``hits`` counts texts, not reads: one read back after
        its vectors left memory, or one this process wrote, is not another hit."""
        key = text_digest(text)
        path = self.path(key)
        try:
            blob = path.read_bytes()
        except OSError:
            return None
        try:
            enc = unpack(blob, self.model_id, key)
        except MismatchedEntry as exc:
            raise CacheError(
                f"embedding cache entry {path}: {exc}; delete it (or run `ledgerscope cache prune --verify`)"
            ) from None
        except CorruptEntry as exc:
            self.corrupt.append(f"{path}: {exc}")
            with contextlib.suppress(OSError):
                path.unlink()
            return None
        with contextlib.suppress(OSError):
            os.utime(path)  # least recently used eviction reads mtime
        if key not in self._known:
            self.hits += 1
            self._known.add(key)
        return enc

    def model_facts(self) -> dict | None:
        """The max length and dimension this model identity was stored with (``model.json``), so a
        sweep that finds every text here need not load the model; None before the first entry."""
        try:
            desc = json.loads((self.folder / "model.json").read_text(encoding="utf-8"))
            return {"max_seq_length": int(desc["max_seq_length"]), "dim": int(desc["dim"])}
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def put(self, text: str, enc: Encoded) -> None:
        if self.write_error is not None:
            return
        key = text_digest(text)
        target = self.path(key)
        try:
            if not (self.folder / "model.json").is_file():
                self._write(self.folder / "model.json", json.dumps(self.describe, indent=2).encode())
            target.parent.mkdir(parents=True, exist_ok=True)
            self._write(target, pack(self.model_id, key, enc))
            self._known.add(key)
        except OSError as exc:
            self.write_error = f"{type(exc).__name__}: {exc}"

    @staticmethod
    def _write(target: Path, data: bytes) -> None:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.{os.getpid()}.", suffix=".tmp", dir=target.parent)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.replace(tmp, target)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def messages(self) -> list[str]:
        out = [f"embedding cache: corrupt entry re-encoded: {c}" for c in self.corrupt]
        if self.write_error:
            out.append(
                f"embedding cache: writing to {self.root} failed ({self.write_error}); "
                "the sweep went on uncached"
            )
        return out


@dataclass
class Entry:
    path: Path
    size: int
    mtime: float


def entries(root: Path) -> list[Entry]:
    """Every entry file under ``root`` (all models)."""
    return _entries(root, "*/*/*.emb")


def info(root: Path) -> list[dict]:
    """Per model identity: its description, entry count and bytes."""
    rows = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []:
        found = entries_of(folder)
        try:
            desc = json.loads((folder / "model.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            desc = {}
        rows.append(
            {
                "model_id": folder.name,
                "model": desc.get("name", "?"),
                "device": desc.get("device", "?"),
                "entries": len(found),
                "bytes": sum(e.size for e in found),
            }
        )
    return rows


def entries_of(folder: Path) -> list[Entry]:
    """The entry files of one model identity's folder."""
    return _entries(folder, "*/*.emb")


def _entries(folder: Path, pattern: str) -> list[Entry]:
    """Entry files matching ``pattern``; one removed meanwhile (a concurrent prune) is skipped."""
    out = []
    for p in folder.glob(pattern):
        with contextlib.suppress(OSError):
            st = p.stat()
            out.append(Entry(p, st.st_size, st.st_mtime))
    return out


def prune(root: Path, limit: int, verify: bool = False, stale_s: float = 3600.0) -> dict:
    """Delete least recently used entries until the total is at most ``limit`` bytes; also
    temporary files older than ``stale_s`` (a killed writer's) and, with ``verify``, every entry
    that is corrupt or stored under the wrong key. Safe while sweeps run (a vanished file is skipped)."""
    removed = {"evicted": 0, "invalid": 0, "stale": 0, "freed": 0}
    if not root.is_dir():
        return removed | {"kept": 0, "bytes": 0}
    now = time.time()
    for tmp in root.glob("*/*/.*.tmp"):
        with contextlib.suppress(OSError):
            if now - tmp.stat().st_mtime > stale_s:
                tmp.unlink()
                removed["stale"] += 1
    found = entries(root)
    if verify:
        found = [e for e in found if _valid(e, removed)]
    total = sum(e.size for e in found)
    for e in sorted(found, key=lambda e: e.mtime):
        if total <= limit:
            break
        with contextlib.suppress(OSError):
            e.path.unlink()
            removed["evicted"] += 1
            removed["freed"] += e.size
        total -= e.size
    return removed | {"kept": len(found) - removed["evicted"], "bytes": total}


def _valid(e: Entry, removed: dict) -> bool:
    try:
        unpack(e.path.read_bytes(), bytes.fromhex(_model_hex(e.path)), bytes.fromhex(e.path.stem))
        return True
    except (CorruptEntry, MismatchedEntry, ValueError, OSError):
        with contextlib.suppress(OSError):
            e.path.unlink()
        removed["invalid"] += 1
        removed["freed"] += e.size
        return False


def _model_hex(path: Path) -> str:
    """The full model id recorded in the entry itself is checked against its folder's prefix."""
    blob = path.read_bytes()
    from ledgerscope.pipeline.embedding.entries import MAGIC

    model = blob[len(MAGIC) + 32 : len(MAGIC) + 64].hex()
    if not model.startswith(path.parent.parent.name):
        raise ValueError("entry in another model's folder")
    return model
