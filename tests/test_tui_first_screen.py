"""The first screen of ``ledgerscope open``: painted before the ledger's integrity checks finish,
blocked if they fail; the selected question's text at 80 x 24; ``/`` over question text; the stats
pane with ``compare``'s bootstrap settings.

A small synthetic ledger (no model, digests recorded as a sweep records them) with question texts
that look like markup or carry an escape sequence.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import threading
import time
from collections import defaultdict
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ledgerscope.analysis.stats import DEFAULT_N_RESAMPLES, DEFAULT_SEED
from ledgerscope.common.safe_text import json_text
from ledgerscope.testing.ledger_files import marker_of, table_file
from ledgerscope.testing.synthetic import make_synthetic_ledger
from ledgerscope.tui.app import LedgerscopeApp
from ledgerscope.tui.data import LedgerSession
from ledgerscope.tui.screens.integrity import IntegrityScreen
from ledgerscope.tui.widgets.query_list import QueryList
from ledgerscope.tui.widgets.question_line import QuestionLine

from .tui_pilot import settle

pytestmark = pytest.mark.anyio
SMALL = (80, 24)
QUESTIONS = {
    0: "How long are temporary requests kept in the regional store?",
    1: "Is [bold]x[/] what the style guide writes?",
    2: "Does \x1b[31m turn the terminal red?",
    3: "Which " + "very " * 40 + "long question is this?",
    5: "Which zeppelin retention schedule applies to audit exports?",
}


@pytest.fixture()
def anyio_backend():
    return "asyncio"


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("first-screen") / "ledger"
    make_synthetic_ledger(out, questions=12, phases=3, question_texts=QUESTIONS)
    return out


def tampered(ledger: Path, tmp_path: Path) -> Path:
    """A copy whose records file of one partition no longer matches the digest its marker records."""
    bad = tmp_path / "tampered"
    shutil.copytree(ledger, bad)
    marker, key = marker_of(bad, table_file(bad, "records", "candidate", "1"))
    meta = json.loads(marker.read_text())
    meta["files"][key]["sha256"] = "0" * 64
    marker.write_text(json.dumps(meta))
    return bad


def gated(session: LedgerSession) -> threading.Event:
    """Hold the session's checks until the returned event is set (the first screen must not wait)."""
    gate, check = threading.Event(), session.check

    def held() -> None:
        assert gate.wait(30), "the test never released the checks"
        check()

    session.check = held
    return gate


async def until(pilot, condition, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await pilot.pause(0.02)


def status(app) -> str:
    return str(app.main.query_one("#status").render())


def screen_text(app) -> str:
    """The screen as text lines (an SVG screenshot's text runs, joined by row)."""
    rows: dict[float, list[tuple[float, str]]] = defaultdict(list)
    for x, y, text in re.findall(
        r'<text[^>]*x="([\d.]+)" y="([\d.]+)"[^>]*>(.*?)</text>', app.export_screenshot(), re.S
    ):
        rows[float(y)].append((float(x), html.unescape(re.sub("<[^>]+>", "", text))))
    return "\n".join("".join(t for _, t in sorted(r)).replace("\xa0", " ") for _, r in sorted(rows.items()))


# -- the integrity checks after the first paint -------------------------------------------------------


async def test_a_good_ledger_paints_the_list_before_its_checks_finish_then_is_verified(synthetic):
    session = LedgerSession(synthetic)
    gate = gated(session)
    app = LedgerscopeApp(session, tune_gc=False)
    async with app.run_test(size=SMALL) as pilot:
        await until(pilot, lambda: app.main.timings["first_list"] is not None)
        await pilot.pause(0.2)
        assert app.main.trust == "checking" and app.main.count == 12
        assert app.query_one(QueryList).current.qid == "q000000"
        assert "verifying ledger" in status(app)
        assert "q000000" in screen_text(app)
        gate.set()
        await until(pilot, lambda: app.main.trust != "checking")
        await settle(pilot)
        assert app.main.trust == "verified" and app.main.timings["checks"] > app.main.timings["first_list"]
        assert not any(isinstance(s, IntegrityScreen) for s in app.screen_stack)
        assert "verifying" not in status(app) and not app.main.has_class("-untrusted")
        assert app.main.query_one("#main").display and "q000000" in screen_text(app)
        assert app.main.timings["panes"] >= app.main.timings["first_list"]
        assert "] Next phase" in screen_text(app)  # the footer follows the first frame
        await pilot.press("j")
        await settle(pilot)
        assert app.main.detail.qid == "q000001"


async def test_a_tampered_digest_blocks_the_screen_after_the_list_painted(synthetic, tmp_path):
    session = LedgerSession(tampered(synthetic, tmp_path))
    gate = gated(session)
    app = LedgerscopeApp(session, tune_gc=False)
    async with app.run_test(size=SMALL) as pilot:
        await until(pilot, lambda: app.main.timings["first_list"] is not None)
        assert app.main.count == 12 and "q000000" in screen_text(app)  # painted, not yet checked
        gate.set()
        await until(pilot, lambda: isinstance(app.screen, IntegrityScreen))
        await settle(pilot)
        assert app.main.trust == "failed" and app.main.timings["checks"] > app.main.timings["first_list"]
        problems = str(app.screen.query_one("#integrity-text").render())
        assert "records/arm=candidate/phase=1/part-0.parquet" in problems and "sha256" in problems
        assert "failed its integrity checks" in problems
        # what was painted is hidden, and nothing on screen is a row of the ledger
        assert app.main.has_class("-untrusted") and not app.main.query_one("#main").display
        assert not app.main.query_one(QuestionLine).display
        shown = screen_text(app)
        assert "q00000" not in shown and "integrity checks failed" in shown
        # no key dismisses it or reaches the list; the palette offers nothing to browse
        for key in ("escape", "j", "enter", "1", "slash", "e", "s", "c"):
            await pilot.press(key)
            await pilot.pause()
            assert isinstance(app.screen, IntegrityScreen), key
        assert app.main.query_one(QueryList).cursor == 0 and app.main.detail is None
        assert not app.main.check_action("move", (1,))
        titles = [c.title for c in app.get_system_commands(app.main)]
        assert "Quit" in " ".join(titles) and "Next question" not in titles and "Export" not in titles
        await pilot.press("q")
        await until(pilot, lambda: not app.is_running, timeout=5)


async def test_a_ledger_that_does_not_open_shows_why_in_the_blocking_screen(synthetic, tmp_path):
    broken = tmp_path / "broken"
    shutil.copytree(synthetic, broken)
    table_file(broken, "records", "candidate", "2").write_bytes(b"not parquet")
    app = LedgerscopeApp(LedgerSession(broken), tune_gc=False)
    async with app.run_test(size=SMALL) as pilot:
        await until(pilot, lambda: isinstance(app.screen, IntegrityScreen))
        await settle(pilot)
        problems = str(app.screen.query_one("#integrity-text").render())
        assert "records/arm=candidate/phase=2/part-0.parquet" in problems
        assert app.main.count == 0 and app.main.trust == "failed"


# -- what was asked, at a glance ----------------------------------------------------------------------


async def test_the_selected_question_text_shows_at_80x24_literally_and_follows_the_cursor(synthetic):
    app = LedgerscopeApp(LedgerSession(synthetic), tune_gc=False)
    async with app.run_test(size=SMALL) as pilot:
        await settle(pilot)
        line = app.main.query_one(QuestionLine)
        assert line.region.width == 80 and 0 < line.region.y < 24  # on screen, full width
        assert line.text == f"q000000 · {QUESTIONS[0]}"
        assert QUESTIONS[0] in screen_text(app)
        await pilot.press("j")
        await settle(pilot)
        assert line.text == "q000001 · Is [bold]x[/] what the style guide writes?"
        assert "Is [bold]x[/] what the style guide writes?" in screen_text(app)  # not taken as markup
        await pilot.press("j")
        await settle(pilot)
        assert line.text == "q000002 · Does \\x1b[31m turn the terminal red?" and "\x1b" not in line.text
        assert "Does \\x1b[31m turn the terminal red?" in screen_text(app)
        await pilot.press("j")
        await settle(pilot)
        assert line.text.startswith("q000003 · Which very very") and line.text.endswith("…")
        assert len(line.text) == line.content_size.width  # cut to the width
        await pilot.press("4")  # a detail pane instead of the list: the question stays in view
        await settle(pilot)
        assert line.region.width == 80 and line.text.startswith("q000003 · Which")


async def test_search_finds_a_question_by_a_word_of_its_text(synthetic):
    app = LedgerscopeApp(LedgerSession(synthetic), tune_gc=False)
    async with app.run_test(size=SMALL) as pilot:
        await settle(pilot)
        await pilot.press("slash")
        app.main.query_one("#search").value = "ZEPPELIN"  # in no qid
        await pilot.press("enter")
        await settle(pilot)
        assert app.main.matches == [5] and app.query_one(QueryList).current.qid == "q000005"
        assert app.main.query_one(QuestionLine).text.startswith("q000005 · Which zeppelin")


# -- the stats pane and compare agree -----------------------------------------------------------------


def compare_json(ledger: Path, *extra: str) -> dict:
    from ledgerscope.cli.main import app as cli

    res = CliRunner().invoke(
        cli, ["compare", str(ledger), "--candidate", "candidate", "--baseline", "baseline", "--json", *extra]
    )
    assert res.exit_code == 0, res.output
    return json.loads(res.output)["comparison"]


async def stats_of(app: LedgerscopeApp) -> dict:
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("7")
        await until(pilot, lambda: app.main.stats.comparison is not None or "✗" in app.main.stats.status)
        return json.loads(json_text(app.main.stats.comparison))


async def test_the_stats_pane_uses_compares_default_resamples_and_seed(synthetic):
    tui = await stats_of(LedgerscopeApp(LedgerSession(synthetic), tune_gc=False))
    assert tui["settings"]["n_resamples"] == DEFAULT_N_RESAMPLES and tui["settings"]["seed"] == DEFAULT_SEED
    assert tui == compare_json(synthetic)  # the same intervals, number for number


async def test_open_passes_n_resamples_and_seed_to_the_stats_pane(synthetic, monkeypatch):
    from ledgerscope.cli.main import app as cli

    started: list[LedgerscopeApp] = []
    monkeypatch.setattr(LedgerscopeApp, "run", lambda self: started.append(self))
    res = CliRunner().invoke(cli, ["open", str(synthetic), "--n-resamples", "300", "--seed", "7"])
    assert res.exit_code == 0, res.output
    (app,) = started
    assert (app.main.n_resamples, app.main.seed) == (300, 7)
    tui = await stats_of(app)
    assert tui["settings"]["n_resamples"] == 300 and tui["settings"]["seed"] == 7
    assert tui == compare_json(synthetic, "--n-resamples", "300", "--seed", "7")


def test_open_refuses_settings_that_disagree_with_the_rule(synthetic, tmp_path):
    from ledgerscope.cli.main import app as cli

    rule = tmp_path / "rule.toml"
    rule.write_text(
        'format = "ledgerscope-release-rule/1"\ncandidate = "candidate"\nbaseline = "baseline"\n'
        "n_resamples = 200\nseed = 1\n[max_support_loss]\nmean = -0.5\n"
    )
    res = CliRunner().invoke(cli, ["open", str(synthetic), "--rule", str(rule), "--n-resamples", "300"])
    assert res.exit_code == 2 and "--n-resamples 300 disagrees" in res.output


# -- what the first screen loads ----------------------------------------------------------------------


FIRST_SCREEN = """
import sys
from ledgerscope.tui.app import LedgerscopeApp  # noqa: F401 - the app's imports count too
from ledgerscope.tui.data import LedgerSession
from ledgerscope.tui.model import Filters
session = LedgerSession(sys.argv[1])
session.open()
count, _ = session.build_list("candidate", Filters())
rows = session.page("candidate", 0, 100)
print(count, len(rows), sorted(m for m in ("pyarrow", "numpy", "pandas") if m in sys.modules))
"""


@pytest.mark.parametrize("which", ["synthetic", "sample"])
def test_the_first_screen_needs_neither_pyarrow_nor_numpy(which, synthetic):
    """The views, the list and its first page come from DuckDB alone: pyarrow and numpy (0.2 s of
    start-up) load later, with the checks; the sample ledger has no repairs table (an empty view)."""
    import subprocess
    import sys

    sample = Path(__file__).parents[1] / "sample_ledgers" / "quillstack" / "ledger"
    ledger = synthetic if which == "synthetic" else sample
    out = subprocess.run(
        [sys.executable, "-c", FIRST_SCREEN, str(ledger)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout.split(maxsplit=2)
    assert int(out[0]) > 0 and int(out[1]) > 0 and out[2].strip() == "[]", out
