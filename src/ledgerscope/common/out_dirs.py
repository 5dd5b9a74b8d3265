"""Where a command that reads a ledger may write: outside that ledger, and never over a directory of
files it did not write itself (a mistyped ``--out`` must not replace someone's work).

The export formats and the ledger's JSON-lines interchange both write directories from a ledger; each
names its own files and its own reason.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ledgerscope.common.errors import InputError, Problem


def refuse_inside(ledger: Path, out: Path, message: str) -> None:
    """Stop when ``out`` is the ledger, lies inside it, or holds it (``message`` says why not)."""
    led, dst = ledger.resolve(), out.resolve()
    if dst == led or led in dst.parents or dst in led.parents:
        raise InputError(Problem(str(out), None, "out", message))


def refuse_foreign_directory(out: Path, belongs: Callable[[Path], bool], what: str, shown: int = 3) -> None:
    """Stop when the directory ``out`` holds an entry ``belongs`` does not accept: it is more than
    ``what`` (a trec export, an interchange export); the first ``shown`` such names, sorted, are named."""
    dst = out.resolve()
    if not dst.is_dir():
        return
    foreign = sorted(p.name for p in dst.iterdir() if not belongs(p))
    if foreign:
        raise InputError(
            Problem(
                str(out),
                None,
                "out",
                f"refusing to replace a directory that holds more than {what} "
                f"(found {', '.join(foreign[:shown])})",
            )
        )
