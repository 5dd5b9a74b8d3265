"""Conditions of the machine, not of the code: a full disk, a permission, a read-only file system.

They are no bug to report: the message names the path and what to do, and the exit status is
:data:`EXIT_IO` (BSD sysexits EX_IOERR), apart from input errors (2) and bugs (70).
"""

from __future__ import annotations

import contextlib
import errno
from collections.abc import Iterator
from pathlib import Path

from ledgerscope.common.errors import LedgerscopeError

EXIT_IO = 74

#: errno -> (what happened, what to do)
CONDITIONS = {
    errno.ENOSPC: ("no space left on the device", "free some space there or write elsewhere"),
    errno.EDQUOT: ("disk quota exceeded", "free some space within the quota or write elsewhere"),
    errno.EACCES: ("permission denied", "check the permissions of the path, or choose one you may use"),
    errno.EPERM: ("operation not permitted", "check the permissions of the path, or choose one you may use"),
    errno.EROFS: ("read-only file system", "write to a writable location instead"),
}


class MachineError(LedgerscopeError):
    """An operating-system condition at a path, with what to do about it."""

    def __init__(self, path: str, what: str, todo: str):
        self.path, self.what, self.todo = path, what, todo
        super().__init__(f"ledgerscope: {path}: {what}; {todo}")


def machine_error(exc: OSError, fallback: str | Path | None = None) -> MachineError | None:
    """The :class:`MachineError` for a machine condition (None for any other OSError)."""
    condition = CONDITIONS.get(exc.errno)
    if condition is None:
        return None
    path = exc.filename or exc.filename2 or fallback or "(unknown path)"
    return MachineError(str(path), *condition)


@contextlib.contextmanager
def writing(path: str | Path | None) -> Iterator[None]:
    """Machine conditions while writing ``path`` (an OSError without a file name is about it)."""
    try:
        yield
    except OSError as exc:
        err = machine_error(exc, path)
        if err is None:
            raise
        raise err from None
