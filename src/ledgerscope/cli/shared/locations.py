"""Ledger arguments that may name a bucket (``s3://``, ``gs://``, ``az://``, ``file://``): the command
runs on a local directory standing for it (:mod:`ledgerscope.ledger.storage`).

:func:`ledger_locations` wraps a command: each argument named in ``read`` is replaced by a local copy
of the remote ledger's committed files; each named in ``write`` by a working directory whose
partitions upload themselves as they commit, everything else uploaded when the command ends. A
malformed or unsupported URL is an input error (exit 2) before the command starts.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ledgerscope.cli.shared.output import fail
from ledgerscope.common.errors import LedgerscopeError


def ledger_locations(
    read: tuple[str, ...] = (), write: tuple[str, ...] = (), new: bool = False
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``new``: the written ledger must not exist yet (``ingest --out``)."""

    def wrap(command: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(command)
        def run(*args: Any, **kwargs: Any) -> Any:
            from ledgerscope.ledger import storage

            bound = []
            try:
                for name in read:
                    if kwargs.get(name) is not None:
                        loc = storage.parse(kwargs[name])
                        kwargs[name] = storage.fetch(loc) if loc.remote else Path(loc.path)
                for name in write:
                    loc = storage.parse(kwargs[name])
                    kwargs[name] = storage.bind(loc, new=new) if loc.remote else Path(loc.path)
                    if loc.remote:
                        bound.append((kwargs[name], loc))
            except LedgerscopeError as exc:
                fail(exc)
            try:
                return command(*args, **kwargs)
            finally:
                for local, loc in bound:
                    try:
                        storage.publish_all(local, loc)
                    except LedgerscopeError as exc:
                        fail(exc)

        return run

    return wrap
