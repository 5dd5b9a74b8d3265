"""``ledgerscope serve`` as the serve and browser tests start it: a real server on a free loopback
port, in its own session, stopped with every process it started.

Shared by tests/test_serve.py (plain HTTP) and tests/test_browser.py (headless chromium), so both
start, wait for and stop the server the same way.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from .cdp import stop_session

SAMPLE = Path(__file__).resolve().parents[1] / "sample_ledgers" / "quillstack" / "ledger"


def free_port() -> int:
    """A loopback port nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serving(ledger: Path, log_path: Path, timeout: float = 60) -> Iterator[tuple[subprocess.Popen, int]]:
    """``ledgerscope serve LEDGER`` on a free port, its output in ``log_path``, once it accepts
    connections (a server that exits or never listens fails with its log); its whole session is
    stopped on the way out, so the caller can then assert that nothing is left."""
    port = free_port()
    with log_path.open("wb") as log:
        server = subprocess.Popen(
            [sys.executable, "-m", "ledgerscope.cli", "serve", str(ledger), "--port", str(port)],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                assert server.poll() is None and time.monotonic() < deadline, log_path.read_text()
                time.sleep(0.1)
        yield server, port
    finally:
        stop_session(server)
