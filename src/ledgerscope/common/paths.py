"""Paths as shared artefacts show them: the name the user gave, relative to the working directory.

A report, a JUnit file or a Markdown summary travels to other machines; an absolute path from the
machine that wrote it (a home or temporary directory) tells the reader nothing and leaks a user name.
"""

from __future__ import annotations

import os
from pathlib import Path


def shown_path(path: str | Path, cwd: str | Path | None = None) -> str:
    """``path`` relative to ``cwd`` (default: the working directory), never absolute; a path on
    another drive, which has no relative form, is shown by its name only."""
    p = os.fspath(path)
    if not os.path.isabs(p):
        return os.path.normpath(p) if p else p
    base = os.fspath(cwd) if cwd is not None else os.getcwd()
    try:
        return os.path.relpath(p, base)
    except ValueError:  # Windows: another drive
        return Path(p).name
