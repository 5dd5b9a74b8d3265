"""``file://`` URLs on the command line, read before any option becomes a :class:`~pathlib.Path`.

``pathlib`` collapses ``file://host/path`` and ``file:///path`` alike into ``file:/...``, so the host
would be lost (and ``file://host/run`` taken as the local ``/host/run``). The raw arguments are
therefore read here, for every command and every option (ledgers, output files, inputs):
``file:///abs/path`` and ``file://localhost/abs/path`` (the same file, RFC 8089) become the local path
``/abs/path`` (percent-escapes decoded), and a URL naming another host is an input error (exit 2): a
ledger on another machine is read through object storage or a mount, never by guessing a path.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import unquote

from typer.core import TyperGroup

from ledgerscope.common.errors import InputError, Problem

_SCHEME = "file://"


def local_file_url(value: str) -> str:
    """The local path a ``file:///`` or ``file://localhost/`` URL names; :class:`InputError` for a file
    URL with another host. Anything else is returned unchanged."""
    if value[: len(_SCHEME)].lower() != _SCHEME:
        return value
    rest = value[len(_SCHEME) :]
    host, _, path = rest.partition("/")
    if not host or host.lower() == "localhost":
        return "/" + unquote(path)
    reason = (
        f"a file URL naming the host {host!r} (another machine): use file:///absolute/path, "
        "file://localhost/absolute/path, or an s3://, gs://, az:// URL"
    )
    raise InputError(Problem(value, None, "location", reason))


#: a bucket URL on the command line
_BUCKET_URL = re.compile(r"^(s3|gs|gcs|az|abfs)://", re.IGNORECASE)
#: the commands whose ledger (and report/export output) arguments take a bucket URL (cli/main.py)
URL_COMMANDS = frozenset({"diagnose", "compare", "report", "export", "open", "serve", "sweep", "ingest"})


def bucket_urls_allowed(args: list[str]) -> None:
    """A bucket URL given to a command that reads and writes local paths only is an input error (its
    ``Path`` would otherwise become a local folder named ``s3:``)."""
    command = next((a for a in args if not a.startswith("-")), None)
    if command is None or command in URL_COMMANDS:
        return
    for arg in args:
        value = arg.partition("=")[2] if arg.startswith("--") else arg
        if _BUCKET_URL.match(value):
            takes = ", ".join(sorted(URL_COMMANDS))
            reason = f"`ledgerscope {command}` takes local paths only (bucket URLs: {takes})"
            raise InputError(Problem(value, None, "location", reason))


def local_file_args(args: list[str]) -> list[str]:
    """Every argument (and every ``--option=value``'s value) through :func:`local_file_url`."""
    out = []
    for arg in args:
        name, eq, value = arg.partition("=")
        if arg.startswith("--") and eq:
            out.append(f"{name}={local_file_url(value)}")
        else:
            out.append(local_file_url(arg))
    return out


class FileUrlGroup(TyperGroup):
    """The command group that checks ``file://`` arguments before a command parses them."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        from ledgerscope.cli.shared.output import fail

        try:
            bucket_urls_allowed(args)
            args = local_file_args(args)
        except InputError as exc:
            fail(exc)
        return super().parse_args(ctx, args)
