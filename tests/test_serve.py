"""``ledgerscope serve`` over plain HTTP (no browser): the page and its icon, and nothing left running.

The browser tests (tests/test_browser.py) drive the served TUI itself; this one asks for what a
browser asks for before the app starts: the page, and ``/favicon.ico`` (textual-serve has no route
for it, so every page load logged a 404).
"""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest

from ledgerscope.cli.serve import favicon_png

from .cdp import png_pixels, session_alive
from .served import SAMPLE, free_port, serving

pytestmark = pytest.mark.timeout(120)


def _get(url: str) -> tuple[int, str, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as res:
            return res.status, res.headers.get("Content-Type", ""), res.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("Content-Type", ""), exc.read()


def test_the_icon_is_a_small_png():
    width, height, rows = png_pixels(favicon_png())
    assert (width, height) == (16, 16) and len(rows) == 16
    assert len({bytes(r) for r in rows}) > 1  # not a blank square


def test_serve_answers_the_page_and_the_favicon(tmp_path):
    log_path = tmp_path / "serve.log"
    with serving(SAMPLE, log_path) as (server, port):
        status, kind, page = _get(f"http://127.0.0.1:{port}/")
        assert status == 200 and "text/html" in kind and b"ledgerscope" in page
        status, kind, icon = _get(f"http://127.0.0.1:{port}/favicon.ico")
        assert status == 200 and kind.startswith("image/png") and icon == favicon_png()
        assert _get(f"http://127.0.0.1:{port}/no-such-thing")[0] == 404  # the control: 404s still are
    assert not session_alive(server.pid)
    logged = log_path.read_text(errors="replace")
    assert "/favicon.ico" in logged and 'GET /favicon.ico HTTP/1.1" 404' not in logged


def test_the_favicon_route_joins_textual_serves_app():
    """The icon's route goes in through textual-serve's public ``on_startup(app)`` hook, since its
    routes are fixed in the private ``Server._make_app``. This builds the app as textual-serve does
    and serves it in-process (aiohttp's own test server, 127.0.0.1): if textual-serve stops building
    its app there, stops calling the hook, or aiohttp freezes the router before startup, it fails
    and says which."""
    import asyncio

    from aiohttp.test_utils import TestClient, TestServer

    from ledgerscope.cli.serve import FAVICON_PATH, make_server

    server = make_server(SAMPLE, "127.0.0.1", free_port(), [])
    assert callable(getattr(server, "_make_app", None)), (
        "textual-serve no longer builds its aiohttp app in Server._make_app: re-check how "
        "ledgerscope.cli.serve._server_class adds the favicon route"
    )

    async def scenario() -> tuple[int, str, bytes, int]:
        app = await server._make_app()
        assert server.on_startup in app.on_startup, (
            "textual-serve no longer registers Server.on_startup on its app: the favicon route is never added"
        )
        async with TestClient(TestServer(app, host="127.0.0.1")) as client:
            icon = await client.get(FAVICON_PATH)
            page = await client.get("/")
            return icon.status, icon.content_type, await icon.read(), page.status

    status, kind, body, page_status = asyncio.run(scenario())
    assert (status, kind, page_status) == (200, "image/png", 200)
    assert body == favicon_png()
