"""``ledgerscope serve``: the TUI in a browser, through textual-serve.

textual-serve runs one ``ledgerscope open`` process per browser tab and relays its screen over
a websocket. The app has no authentication: anyone who reaches the port gets the TUI and can
read the ledger. Hence loopback by default; another address only with an explicit flag and a
warning. The safe way to share it is SSH port forwarding (README): the port stays on loopback.
"""

from __future__ import annotations

import ipaddress
import shlex
import struct
import sys
import zlib
from functools import cache
from pathlib import Path

from ledgerscope.common.errors import InputError, Problem

TEMPLATES = Path(__file__).parent / "templates"
NO_AUTH_WARNING = (
    "warning: ledgerscope serve has no authentication: anyone who can reach {url} gets the TUI and can "
    "read every document, question and answer in the ledger. Prefer binding 127.0.0.1 and SSH port "
    "forwarding (ssh -L {port}:127.0.0.1:{port} HOST)."
)


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine only (127.0.0.0/8, ::1, localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_host(host: str, allow_remote: bool) -> str | None:
    """None for a loopback host; the warning for another with ``allow_remote``; else an error."""
    if is_loopback(host):
        return None
    if not allow_remote:
        raise InputError(
            Problem(
                "--host",
                None,
                "host",
                f"{host} is not a loopback address and the app has no authentication; "
                "pass --allow-remote to bind it anyway, or keep 127.0.0.1 and use SSH port "
                "forwarding (see the README)",
            )
        )
    return "remote"


def open_command(ledger: Path, options: list[str]) -> str:
    """The shell command textual-serve runs per session: this Python, ``ledgerscope open``."""
    return shlex.join([sys.executable, "-m", "ledgerscope.cli", "open", str(ledger.resolve()), *options])


def url_of(host: str, port: int) -> str:
    shown = f"[{host}]" if ":" in host and not host.startswith("[") else host
    return f"http://{shown}:{port}/"


@cache
def favicon_png(size: int = 16) -> bytes:
    """The served page's icon, a PNG drawn here (no file to ship): a teal square holding a light
    ledger line per three rows. Browsers ask for ``/favicon.ico`` whatever the page says."""
    teal, light = b"\x0f\x76\x6e\xff", b"\xe6\xf2\xf0\xff"
    rows = []
    for y in range(size):
        ruled = 2 < y < size - 2 and y % 3 == 0
        rows.append(b"\x00" + b"".join(light if ruled and 2 < x < size - 3 else teal for x in range(size)))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", size, size, 8, 6, 0, 0, 0)  # 8-bit RGBA
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(b"".join(rows)))
        + chunk(b"IEND", b"")
    )


#: the path textual-serve leaves unanswered, and browsers ask for whatever the page says
FAVICON_PATH = "/favicon.ico"


def _server_class():
    """textual-serve's Server, also answering :data:`FAVICON_PATH` (it has no route for it: a 404 a page).

    textual-serve has no public way to add a route: its routes are fixed in the private
    ``_make_app``. Its public hook ``on_startup(app)`` (documented: "Called on startup", with the
    aiohttp application) is used instead: aiohttp runs startup handlers before it freezes the
    router, so a route added there is served. ``tests/test_serve.py`` builds the app the way
    textual-serve does and fails loudly if either stops being true.
    """
    from aiohttp import web
    from textual_serve.server import Server

    async def favicon(_request: web.Request) -> web.Response:
        return web.Response(
            body=favicon_png(), content_type="image/png", headers={"Cache-Control": "max-age=86400"}
        )

    class LedgerscopeServer(Server):
        async def on_startup(self, app: web.Application) -> None:
            await super().on_startup(app)
            app.router.add_get(FAVICON_PATH, favicon, name="favicon")

    return LedgerscopeServer


def make_server(ledger: Path, host: str, port: int, options: list[str]):
    """The textual-serve server for ``ledgerscope open LEDGER OPTIONS`` on ``host:port`` (not started)."""
    url = url_of(host, port)
    return _server_class()(
        open_command(ledger, options),
        host=host,
        port=port,
        title=f"ledgerscope · {ledger.name}",
        public_url=url.rstrip("/"),
        templates_path=TEMPLATES,
    )


def serve(ledger: Path, host: str, port: int, options: list[str], allow_remote: bool) -> None:
    """Serve ``ledgerscope open LEDGER OPTIONS`` on ``host:port`` until interrupted."""
    remote = check_host(host, allow_remote)
    url = url_of(host, port)
    if remote:
        print(NO_AUTH_WARNING.format(url=url, port=port), file=sys.stderr)
    server = make_server(ledger, host, port, options)
    print(f"ledgerscope: serving {ledger} at {url} (Ctrl+C to stop)", flush=True)
    server.serve()
