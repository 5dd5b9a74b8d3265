"""``ledgerscope serve``: the TUI in a browser, through textual-serve.

textual-serve runs one ``ledgerscope open`` process per browser tab and relays its screen over
a websocket. The app has no authentication: anyone who reaches the port gets the TUI and can
read the ledger. Hence loopback by default; another address only with an explicit flag and a
warning. The safe way to share it is SSH port forwarding (README): the port stays on loopback.
"""

from __future__ import annotations

import ipaddress
import shlex
import sys
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
        raise InputError(Problem("--host", None, "host",
                                 f"{host} is not a loopback address and the app has no authentication; "
                                 "pass --allow-remote to bind it anyway, or keep 127.0.0.1 and use SSH port "
                                 "forwarding (see the README)"))
    return "remote"


def open_command(ledger: Path, options: list[str]) -> str:
    """The shell command textual-serve runs per session: this Python, ``ledgerscope open``."""
    return shlex.join([sys.executable, "-m", "ledgerscope.cli", "open", str(ledger.resolve()), *options])


def url_of(host: str, port: int) -> str:
    shown = f"[{host}]" if ":" in host and not host.startswith("[") else host
    return f"http://{shown}:{port}/"


def serve(ledger: Path, host: str, port: int, options: list[str], allow_remote: bool) -> None:
    """Serve ``ledgerscope open LEDGER OPTIONS`` on ``host:port`` until interrupted."""
    remote = check_host(host, allow_remote)
    from textual_serve.server import Server

    url = url_of(host, port)
    if remote:
        print(NO_AUTH_WARNING.format(url=url, port=port), file=sys.stderr)
    server = Server(open_command(ledger, options), host=host, port=port, title=f"ledgerscope · {ledger.name}",
                    public_url=url.rstrip("/"), templates_path=TEMPLATES)
    print(f"ledgerscope: serving {ledger} at {url} (Ctrl+C to stop)", flush=True)
    server.serve()
