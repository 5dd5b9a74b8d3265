"""A small Chrome DevTools Protocol client for the browser tests: headless chromium on 127.0.0.1.

Chromium starts in its own session (process group) with a throw-away profile and
``--remote-debugging-port=0``; the port it picked is read from ``DevToolsActivePort`` in the
profile. Commands go over one websocket (aiohttp's client) to the browser endpoint, to a page
attached with ``flatten`` sessions. :func:`stop_session` ends every process of a session and
:func:`session_alive` says whether any is left, so a test can prove it leaked none.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
import zlib
from pathlib import Path
from typing import Any

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "chrome")


def find_chromium() -> str | None:
    for name in CHROMIUM_NAMES:
        if path := shutil.which(name):
            return path
    return None


def session_pids(sid: int) -> list[int]:
    """Every live process whose session id is ``sid`` (Linux /proc)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[3]) == sid and fields[0] != "Z":
            out.append(int(entry.name))
    return out


def session_alive(sid: int) -> bool:
    return bool(session_pids(sid))


def stop_session(proc: subprocess.Popen, grace: float = 5.0) -> None:
    """SIGTERM the process group the test started (its own session), then SIGKILL what is left."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=0.1)
            if not session_alive(proc.pid):
                return
    proc.wait(timeout=5)


class Chromium:
    """Headless chromium with a DevTools endpoint on 127.0.0.1; ``async with`` connects and closes."""

    def __init__(self, profile: Path, width: int = 1280, height: int = 900):
        self.profile, self.width, self.height = profile, width, height
        self.proc: subprocess.Popen | None = None
        self.events: list[dict] = []
        self._pending: dict[int, asyncio.Future] = {}
        self._next = 0

    def start(self) -> None:
        exe = find_chromium()
        assert exe, "chromium is not installed (scripts/test installs it)"
        self.profile.mkdir(parents=True, exist_ok=True)
        (self.profile / "DevToolsActivePort").unlink(missing_ok=True)  # a previous run's port
        log = (self.profile / "chromium.log").open("wb")
        self.proc = subprocess.Popen(
            [
                exe,
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--use-gl=swiftshader",
                "--remote-debugging-address=127.0.0.1",
                "--remote-debugging-port=0",
                f"--user-data-dir={self.profile}",
                "--no-first-run",
                "--no-default-browser-check",
                "--disable-extensions",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-default-apps",
                "--mute-audio",
                "--hide-scrollbars",
                f"--window-size={self.width},{self.height}",
                "about:blank",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        port_file = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if port_file.is_file() and len(port_file.read_text().splitlines()) >= 2:
                port, path = port_file.read_text().splitlines()[:2]
                self.ws_url = f"ws://127.0.0.1:{port}{path}"
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise RuntimeError(f"chromium did not start: {(self.profile / 'chromium.log').read_text()[-2000:]}")

    def stop(self) -> None:
        if self.proc is not None:
            stop_session(self.proc)

    async def __aenter__(self) -> Chromium:
        import aiohttp

        self.start()
        self._http = aiohttp.ClientSession()
        try:
            self._ws = await self._http.ws_connect(self.ws_url, max_msg_size=0)
        except BaseException:
            await self._http.close()
            self.stop()
            raise
        self._reader = asyncio.create_task(self._read())
        target = await self.send("Target.createTarget", {"url": "about:blank"})
        attached = await self.send("Target.attachToTarget", {"targetId": target["targetId"], "flatten": True})
        self.session = attached["sessionId"]
        for domain in ("Page", "Runtime", "Network", "Log"):
            await self.page(f"{domain}.enable")
        await self.page(
            "Emulation.setDeviceMetricsOverride",
            {"width": self.width, "height": self.height, "deviceScaleFactor": 1, "mobile": False},
        )
        return self

    async def __aexit__(self, *exc) -> None:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.send("Browser.close"), 5)
        self._reader.cancel()
        with contextlib.suppress(BaseException):
            await self._reader
        await self._ws.close()
        await self._http.close()
        self.stop()

    async def _read(self) -> None:
        async for msg in self._ws:
            data = json.loads(msg.data)
            if "id" in data and data["id"] in self._pending:
                self._pending.pop(data["id"]).set_result(data)
            else:
                self.events.append(data)

    async def send(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        self._next += 1
        msg: dict[str, Any] = {"id": self._next, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        fut = asyncio.get_running_loop().create_future()
        self._pending[self._next] = fut
        await self._ws.send_str(json.dumps(msg))
        reply = await asyncio.wait_for(fut, 60)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    async def page(self, method: str, params: dict | None = None) -> dict:
        return await self.send(method, params, self.session)

    async def wait_event(self, method: str, timeout: float = 30, since: int = 0) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for e in self.events[since:]:
                if e.get("method") == method:
                    return e
            await asyncio.sleep(0.05)
        raise TimeoutError(method)

    async def navigate(self, url: str) -> None:
        mark = len(self.events)
        await self.page("Page.navigate", {"url": url})
        await self.wait_event("Page.loadEventFired", since=mark)

    async def evaluate(self, expression: str) -> Any:
        res = await self.page("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in res:
            raise RuntimeError(res["exceptionDetails"])
        return res["result"].get("value")

    async def screenshot(self, clip: dict | None = None) -> bytes:
        params: dict[str, Any] = {"format": "png"}
        if clip:  # in document coordinates
            params["clip"] = {**clip, "scale": 1}
            params["captureBeyondViewport"] = True
        return base64.b64decode((await self.page("Page.captureScreenshot", params))["data"])

    async def key(self, key: str, text: str | None = None, code: str | None = None) -> None:
        """A key press as the page sees one (keyDown with its text, then keyUp)."""
        base = {"key": key, "code": code or key}
        await self.page(
            "Input.dispatchKeyEvent", {"type": "keyDown", **base, **({"text": text} if text else {})}
        )
        await self.page("Input.dispatchKeyEvent", {"type": "keyUp", **base})

    def console_errors(self) -> list[str]:
        out = []
        for e in self.events:
            m, p = e.get("method"), e.get("params", {})
            if m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append(json.dumps(p.get("args"))[:300])
            elif m == "Runtime.exceptionThrown":
                out.append(json.dumps(p.get("exceptionDetails"))[:300])
            elif m == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                out.append(p["entry"].get("text", "")[:300])
        return out

    def requests(self) -> list[str]:
        return [
            e["params"]["request"]["url"]
            for e in self.events
            if e.get("method") == "Network.requestWillBeSent"
        ]


def png_pixels(data: bytes) -> tuple[int, int, list[bytes]]:
    """Width, height and rows of RGBA or RGB pixels of an 8-bit non-interlaced PNG (what chromium writes)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        length = int.from_bytes(data[pos : pos + 4], "big")
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height = int.from_bytes(body[:4], "big"), int.from_bytes(body[4:8], "big")
            depth, colour, interlace = body[8], body[9], body[12]
            assert depth == 8 and colour in (2, 6) and interlace == 0, (depth, colour, interlace)
            bpp = 4 if colour == 6 else 3
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride, rows, prev = width * bpp, [], bytearray(width * bpp)
    for y in range(height):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line) if bpp == 3 else bytes(v for k, v in enumerate(line) if k % 4 != 3))
        prev = line
    return width, height, rows


def colour_count(rows: list[bytes], rgb: tuple[int, int, int], tolerance: int = 40) -> int:
    """Pixels within ``tolerance`` (per channel) of ``rgb``."""
    n = 0
    for row in rows:
        for i in range(0, len(row), 3):
            if all(abs(row[i + k] - rgb[k]) <= tolerance for k in range(3)):
                n += 1
    return n
