"""In a real browser: headless chromium driven over the DevTools protocol on 127.0.0.1 (:mod:`.cdp`).

* The report renders with no console error and no request beyond its own file; a screenshot of
  the phase curve is not blank and shows both arms' curves.
* A report of hostile text runs none of it: no script ran, no element came from the data.
* ``ledgerscope serve``: the browser shows the query list, and keys sent through the protocol
  move between questions and phases.
* Every process a test starts (the app server, its app, chromium) is gone when it ends.

``LEDGERSCOPE_DOCS_IMG=docs/img`` also saves the screenshots the walkthrough shows.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import shutil
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ledgerscope.cli.main import app

from .cdp import Chromium, colour_count, find_chromium, png_pixels, session_alive
from .served import SAMPLE, serving

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]
ROOT = Path(__file__).resolve().parents[1]
RULE = ROOT / "sample_ledgers" / "release_rule.toml"
CANDIDATE_RGB, BASELINE_RGB = (0xC2, 0x41, 0x0C), (0x0F, 0x76, 0x6E)


@pytest.fixture(scope="module", autouse=True)
def _chromium_installed():
    assert find_chromium(), "chromium is missing: ./scripts/test installs it (apt-get install chromium)"


def _save(name: str, png: bytes, tmp_path: Path) -> None:
    (tmp_path / name).write_bytes(png)
    if target := os.environ.get("LEDGERSCOPE_DOCS_IMG"):
        Path(target).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(tmp_path / name, Path(target) / name)


async def _clip(browser: Chromium, selector: str, height: int | None = None, pad: int = 8) -> bytes:
    # document coordinates: the clip is captured beyond the viewport
    rect = json.loads(
        await browser.evaluate(
            f"(() => {{const r = document.querySelector({json.dumps(selector)}).getBoundingClientRect(); "
            "return JSON.stringify({x: r.x + window.scrollX, y: r.y + window.scrollY, width: r.width, "
            "height: r.height});})()"
        )
    )
    clip = {
        "x": max(0, rect["x"] - pad),
        "y": max(0, rect["y"] - pad),
        "width": rect["width"] + 2 * pad,
        "height": (height or rect["height"]) + 2 * pad,
    }
    return await browser.screenshot(clip)


def test_the_report_renders_offline_with_the_phase_curve(tmp_path):
    out = tmp_path / "report.html"
    res = CliRunner().invoke(
        app,
        [
            "report",
            str(SAMPLE),
            "--candidate",
            "candidate",
            "--baseline",
            "baseline",
            "--rule",
            str(RULE),
            "--out",
            str(out),
        ],
    )
    assert res.exit_code == 0, res.output

    async def scenario() -> Chromium:
        async with Chromium(tmp_path / "profile", 1200, 900) as browser:
            await browser.navigate(out.as_uri())
            assert "release decision: REJECT" in await browser.evaluate("document.body.innerText")
            _save("report-decision.png", await browser.screenshot(), tmp_path)
            curve = await _clip(browser, "#phase-curve-representative-support")
            _save("report-phase-curve.png", curve, tmp_path)
            card = await browser.evaluate(
                "[...document.querySelectorAll('article.card')].findIndex(a => a.querySelector('h3')"
                ".textContent.startsWith('re-free-upload · candidate · answer'))"
            )
            assert card >= 0
            _save("report-boundary.png", await _clip(browser, f"#rev-{card}", height=620), tmp_path)
            browser.curve = curve
            return browser

    browser = asyncio.run(scenario())
    assert browser.console_errors() == []
    assert browser.requests() == [out.as_uri()]  # nothing but the file itself, no other host
    width, height, rows = png_pixels(browser.curve)
    assert width > 400 and height > 200
    assert len(set(rows)) > 50  # not blank: many distinct pixel rows
    assert colour_count(rows, CANDIDATE_RGB) > 200 and colour_count(rows, BASELINE_RGB) > 200
    assert not session_alive(browser.proc.pid)


def test_a_hostile_report_runs_none_of_its_text(tmp_path, hostile_ledger):
    ledger = hostile_ledger
    out = tmp_path / "hostile.html"
    res = CliRunner().invoke(
        app,
        [
            "report",
            str(ledger),
            "--candidate",
            "candidate",
            "--baseline",
            "baseline",
            "--n-resamples",
            "200",
            "--include-restricted",
            "--out",
            str(out),
        ],
    )
    assert res.exit_code == 0, res.output

    async def scenario() -> tuple[Chromium, dict]:
        async with Chromium(tmp_path / "profile", 1200, 900) as browser:
            await browser.navigate(out.as_uri())
            await asyncio.sleep(0.5)
            found = json.loads(
                await browser.evaluate(
                    "JSON.stringify({pwned: typeof window.__pwned, scripts: document.scripts.length, "
                    "onerror: document.querySelectorAll('[onerror]').length, imgs: document.images.length, "
                    "text: document.body.textContent})"
                )
            )
            return browser, found

    browser, found = asyncio.run(scenario())
    assert found["pwned"] == "undefined" and found["scripts"] == 0 and found["onerror"] == 0
    assert found["imgs"] == 0
    assert "<script>window.__pwned=1</script>" in found["text"]
    assert '<img src=x onerror="window.__pwned=2">' in found["text"]
    assert "\\u202eevil" in found["text"] and "\u202e" not in found["text"]
    assert browser.console_errors() == []  # a CSP violation would be one
    assert not session_alive(browser.proc.pid)


def _screen_text(events: list[dict]) -> str:
    """What the app wrote to the terminal, escape sequences removed (websocket frames as received)."""
    data = b""
    for e in events:
        if e.get("method") == "Network.webSocketFrameReceived":
            frame = e["params"]["response"]
            data += base64.b64decode(frame["payloadData"]) if frame["opcode"] == 2 else b""
    text = data.decode("utf-8", "replace")
    text = re.sub(r"\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)", "", text)  # OSC
    return re.sub(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-Z\\-_]", "", text)  # CSI and two-byte escapes


async def _until(browser: Chromium, since: int, needle: str, timeout: float = 30) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = _screen_text(browser.events[since:])
        if needle in text:
            return text
        await asyncio.sleep(0.2)
    last = _screen_text(browser.events[since:])[-800:]
    raise AssertionError(f"{needle!r} never shown; last screen text: {last!r}")


def test_the_served_tui_shows_the_questions_and_follows_keys(tmp_path):
    app_pids: list[int] = []
    with serving(SAMPLE, tmp_path / "serve.log") as (server, port):

        async def scenario() -> Chromium:
            async with Chromium(tmp_path / "profile", 1280, 800) as browser:
                await browser.navigate(f"http://127.0.0.1:{port}/")
                first = await _until(browser, 0, "cr-audit-deleted-workspace", timeout=90)
                assert "56 of 56 questions" in first and "phase 0 (1/8)" in first
                await _until(browser, 0, "cr-backup-after-deletion")
                app_pids.extend(p for p in _children(server.pid) if p != server.pid)
                await asyncio.sleep(1.0)
                (tmp_path / "serve-query-list.png").write_bytes(await browser.screenshot())
                await browser.evaluate("document.querySelector('.xterm-helper-textarea').focus()")
                mark = len(browser.events)
                await browser.key("j", "j", "KeyJ")  # next question
                await _until(browser, mark, "▶↕ cr-backup-after-deletion")
                mark = len(browser.events)
                await browser.key("]", "]", "BracketRight")  # next phase
                await _until(browser, mark, "phase 1 (2/8)")
                await asyncio.sleep(0.5)
                _save("serve-phase-1.png", await browser.screenshot(), tmp_path)
                return browser

        browser = asyncio.run(scenario())
        assert all(
            u.startswith(f"http://127.0.0.1:{port}/") or u.startswith(f"ws://127.0.0.1:{port}/")
            for u in browser.requests()
        ), browser.requests()
        assert not session_alive(browser.proc.pid)
        assert app_pids, "the served app ran in no process of the server's session"
    assert not session_alive(server.pid)  # the server and every app it started are gone
    assert not any(Path(f"/proc/{p}").exists() and _state(p) != "Z" for p in app_pids)
    logged = (tmp_path / "serve.log").read_text(errors="replace")
    assert 'GET /favicon.ico HTTP/1.1" 200' in logged, logged[-2000:]  # the browser asked; it was there


def _children(sid: int) -> list[int]:
    from .cdp import session_pids

    return session_pids(sid)


def _state(pid: int) -> str:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return "Z"
    return stat[stat.rindex(")") + 2 :].split()[0]
