"""Ledger arguments that may name a bucket (``s3://``, ``gs://``, ``az://``): the command runs on a
local directory standing for it (:mod:`ledgerscope.ledger.storage`). ``file://`` URLs are local paths
by the time a command sees them (:mod:`.file_urls`).

:func:`ledger_locations` wraps a command: each argument named in ``read`` is replaced by a local
directory for the remote ledger (:func:`.storage.reader_dir`: a verified copy of its committed files,
or with ``LEDGERSCOPE_REMOTE_READ=direct`` its small files, DuckDB reading the tables from the
bucket); each named in ``write`` by a working directory whose partitions upload themselves as they
commit, everything else uploaded when the command ends; each named in ``upload`` (an output file or
directory: ``report --out``, ``export --out``) by a local temporary path, uploaded to the URL once the
command has succeeded. A malformed or unsupported URL is an input error (exit 2) before the command
starts.
"""

from __future__ import annotations

import functools
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any

import typer

from ledgerscope.cli.shared.output import fail
from ledgerscope.common.errors import LedgerscopeError


def _local_out(value: Any) -> tuple[Path, Any]:
    """A temporary local path for an output URL (same file name), and the URL's location."""
    from ledgerscope.ledger import storage

    loc = storage.parse(value)
    if not loc.remote:
        return Path(loc.path), None
    return Path(tempfile.mkdtemp(prefix="ledgerscope-out-")) / PurePosixPath(loc.path).name, loc


def _upload_outputs(uploads: list[tuple[Path, Any]]) -> None:
    from ledgerscope.ledger import storage

    for local, loc in uploads:
        try:
            if local.exists():
                storage.upload_output(local, loc)
        except LedgerscopeError as exc:
            fail(exc)
        finally:
            shutil.rmtree(local.parent, ignore_errors=True)


def ledger_locations(
    read: tuple[str, ...] = (), write: tuple[str, ...] = (), new: bool = False, upload: tuple[str, ...] = ()
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``new``: the written ledger must not exist yet (``ingest --out``)."""

    def wrap(command: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(command)
        def run(*args: Any, **kwargs: Any) -> Any:
            from ledgerscope.ledger import storage

            bound, uploads = [], []
            try:
                for name in read:
                    if kwargs.get(name) is not None:
                        loc = storage.parse(kwargs[name])
                        kwargs[name] = storage.reader_dir(loc) if loc.remote else Path(loc.path)
                for name in write:
                    loc = storage.parse(kwargs[name])
                    kwargs[name] = storage.bind(loc, new=new) if loc.remote else Path(loc.path)
                    if loc.remote:
                        bound.append((kwargs[name], loc))
                for name in upload:
                    if kwargs.get(name) is not None:
                        kwargs[name], loc = _local_out(kwargs[name])
                        if loc is not None:
                            uploads.append((kwargs[name], loc))
            except LedgerscopeError as exc:
                fail(exc)
            try:
                result = command(*args, **kwargs)
            except typer.Exit as exc:
                if exc.exit_code == 0:
                    _upload_outputs(uploads)
                else:
                    for local, _ in uploads:
                        shutil.rmtree(local.parent, ignore_errors=True)
                raise
            except BaseException:
                for local, _ in uploads:
                    shutil.rmtree(local.parent, ignore_errors=True)
                raise
            finally:
                for local, loc in bound:
                    try:
                        storage.publish_all(local, loc)
                    except LedgerscopeError as exc:
                        fail(exc)
            _upload_outputs(uploads)
            return result

        return run

    return wrap
