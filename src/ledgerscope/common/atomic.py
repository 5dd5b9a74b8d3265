"""Write-to-temp-then-rename, so an interrupted write never leaves a partial file.

The temporary file lies beside the target as ``.NAME.<pid>.<random>.tmp``. A
process killed mid-write (SIGKILL, power loss) cannot remove it; the target is
then either its old version or absent, never partial. The next write of the
same target removes such leftovers whose process is gone (:func:`clear_stale`);
readers never look at them.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path


def temp_prefix(target: Path) -> str:
    return f".{target.name}.{os.getpid()}."


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    return True


def clear_stale(target: Path, suffix: str = ".tmp") -> list[Path]:
    """Remove ``.NAME.<pid>[.*]<suffix>`` siblings of ``target`` left by a process that no longer runs."""
    pattern = re.compile(re.escape(f".{target.name}.") + r"(\d+)(?:\.[^.]+)?" + re.escape(suffix) + "$")
    removed = []
    try:
        siblings = list(target.parent.iterdir())
    except OSError:
        return removed
    for p in siblings:
        m = pattern.match(p.name)
        if m is None or int(m.group(1)) == os.getpid() or _alive(int(m.group(1))):
            continue
        with contextlib.suppress(OSError):
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p)
            else:
                p.unlink()
            removed.append(p)
    return removed


def fsync_path(path: Path) -> None:
    """Flush a written file (or directory entry) to disk; best effort."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_path(target: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside ``target``; rename it over ``target`` on success.

    On any exception the temporary file is removed and ``target`` is untouched.
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    clear_stale(target)
    fd, tmp = tempfile.mkstemp(prefix=temp_prefix(target), suffix=".tmp", dir=target.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        fsync_path(tmp_path)
        os.replace(tmp_path, target)
        fsync_path(target.parent)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp_path.unlink()
        raise


def atomic_write_text(target: str | Path, text: str) -> None:
    with atomic_path(target) as tmp:
        tmp.write_text(text, encoding="utf-8")
