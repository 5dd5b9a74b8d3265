"""What every command shares on the way out: the console, literal printing, failing, reading a ledger.

Each command module uses these so that errors look alike everywhere: one line per problem on
stderr, control and bidi characters escaped, exit 2 for input and 74 for machine conditions.
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

import typer

from ledgerscope.cli.shared.machine import EXIT_IO, MachineError
from ledgerscope.common.errors import InputError, LedgerscopeError, Problem
from ledgerscope.common.safe_text import safe_line


def print_error(exc: LedgerscopeError) -> None:
    """One line per problem on stderr, control and bidi characters escaped, each line capped."""
    lines = [str(p) for p in exc.problems] if isinstance(exc, InputError) else str(exc).splitlines()
    for line in lines or [type(exc).__name__]:
        print(safe_line(line), file=sys.stderr)


def fail(exc: LedgerscopeError, code: int = 2) -> None:
    """Print a user-facing error (one line per problem) and exit non-zero, no traceback
    (:data:`EXIT_IO` for a condition of the machine)."""
    print_error(exc)
    raise typer.Exit(EXIT_IO if isinstance(exc, MachineError) else code)


@contextlib.contextmanager
def reading(ledger: Path | None):
    """Data a ledger's checks could not see (a corrupted data page) as an input error naming the ledger."""
    import duckdb
    import pyarrow as pa

    try:
        yield
    except (duckdb.IOException, duckdb.InvalidInputException, pa.ArrowException) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise InputError(Problem(str(ledger), None, "ledger", f"could not be read: {first}")) from None


def console():
    """A Rich console that never interprets markup, emoji or highlighting in untrusted text."""
    from rich.console import Console

    return Console(highlight=False, markup=False, emoji=False)


def say(out, text: str) -> None:
    """Print untrusted text literally: escapes shown, never markup."""
    from rich.text import Text

    out.print(Text(safe_line(text)))
