"""Pilot tests of ``ledgerscope open``: every pane and action on the shared ledger."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

from ledgerscope.analysis.diagnosis.tree import STEP_NAMES
from ledgerscope.analysis.stats import DEFAULT_N_RESAMPLES
from ledgerscope.tui.app import LedgerscopeApp
from ledgerscope.tui.data import LedgerSession
from ledgerscope.tui.widgets.phase_grid import PhaseGrid
from ledgerscope.tui.widgets.query_list import QueryList

from .test_tui_ledger import ledger  # noqa: F401  (the shared, session-built ledger)
from .tui_pilot import settle

SIZE = (120, 40)
pytestmark = [pytest.mark.anyio, pytest.mark.slow]  # the shared ledger loads the model


@pytest.fixture()
def anyio_backend():
    return "asyncio"


def make_app(ledger_dir: Path, **kw) -> LedgerscopeApp:
    return LedgerscopeApp(LedgerSession(ledger_dir), tune_gc=False, **kw)


async def submit(pilot, selector: str, value: str) -> None:
    """Type into an input (set its value) and press enter."""
    pilot.app.query_one(selector).value = value
    await press(pilot, "enter")


async def press(pilot, *keys: str) -> None:
    for key in keys:
        await pilot.press(key)
        await settle(pilot)


def pane(app, name: str) -> str:
    return app.query_one(f"#{name}-view").text


def current_qid(app) -> str:
    return app.query_one(QueryList).current.qid


def digest(ledger_dir: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(ledger_dir.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(ledger_dir)).encode())
            h.update(p.read_bytes())
    return h.hexdigest()


async def test_open_fills_the_list_and_the_first_record(ledger):  # noqa: F811
    app = make_app(ledger)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        ql = app.query_one(QueryList)
        assert (app.main.count, app.main.total, ql.total) == (4, 4, 4)
        assert app.focused is ql
        assert app.main.timings["first_list"] is not None
        assert current_qid(app) == "backup-weekly"
        assert app.main.detail.qid == "backup-weekly" and app.main.detail.phase == "0"
        row = ql.row_text(ql.current, 60).plain
        assert "backup-weekly" in row and any(g in row for g in "✓✗!∅")
        grid = app.query_one(PhaseGrid).text_lines()
        assert "[0]" in grid[0] and any(line.startswith("▶") and "backup-weekly" in line for line in grid)
        status = str(app.query_one("#status").render())
        assert "phase 0 (1/5)" in status and "arm candidate" in status
        assert "candidate arm 'candidate' vs baseline arm 'baseline'" in str(app.query_one("#title").render())


async def test_moving_across_questions_and_phases_updates_the_panes(ledger):  # noqa: F811
    app = make_app(ledger)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await press(pilot, "j")
        assert current_qid(app) == "markup-notes" and app.main.detail.qid == "markup-notes"
        await press(pilot, "G")
        assert current_qid(app) == "temp-retention"
        await press(pilot, "k", "g")
        assert current_qid(app) == "backup-weekly"
        await press(pilot, "G", "right_square_bracket")
        main = app.main
        assert main.phase == "1" and main.detail.phase == "1" and main.detail.qid == "temp-retention"
        await press(pilot, "l", "l")
        assert app.main.phase == "5"
        await press(pilot, "h", "left_square_bracket", "left_square_bracket", "left_square_bracket")
        assert app.main.phase == "9"  # wraps around
        assert app.query_one(QueryList).phase == "9"
        assert "[9]" in app.query_one(PhaseGrid).text_lines()[0]
        assert len(app.main.timings["question"]) >= 3 and len(app.main.timings["phase"]) >= 3


async def test_a_stale_record_never_paints_over_a_newer_one(ledger):  # noqa: F811
    """Two quick moves: the first record's load is held back until the second is shown; the
    panes keep the second, and the first load, cancelled, posts nothing."""
    import threading

    from ledgerscope.tui import messages as msg

    app = make_app(ledger)
    session = app.main.session
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await press(pilot, "5")  # the answer pane: a record move redraws it
        ql = app.query_one(QueryList)
        first, second = ql.row(1).qid, ql.row(2).qid
        release, held = threading.Event(), threading.Event()
        store = session._details
        real_load = store._load

        def load(qid, phases, cancelled=None):
            if qid == first:
                held.set()
                release.wait(10)
            return real_load(qid, phases, cancelled)

        store._load = load
        store._kept.clear()  # nothing kept: both moves load
        app.main._records.prefetch = lambda keys: None  # and no prefetch loads them
        posted: list[tuple] = []
        real_post = app.main.post_message

        def post(message):
            if isinstance(message, msg.DetailLoaded):
                posted.append(message.key)
            return real_post(message)

        app.main.post_message = post
        await pilot.press("j")  # the first record: its load waits
        assert await _wait(pilot, held.is_set)
        await pilot.press("j")  # the second: loads at once, shown
        assert await _wait(pilot, lambda: app.main.detail.qid == second)
        release.set()
        await settle(pilot)
        assert current_qid(app) == second and app.main.detail.qid == second
        from ledgerscope.tui.render import answer_text

        expected = answer_text(app.main.detail.arms["candidate"], app.palette).plain
        assert pane(app, "answer").split() == expected.split()  # the second record's text, as drawn
        assert (first, "0") not in posted  # cancelled: nothing posted


async def _wait(pilot, cond, seconds: float = 10.0) -> bool:
    import asyncio
    import time

    deadline = time.monotonic() + seconds
    while not cond():
        if time.monotonic() > deadline:
            return False
        await pilot.pause()
        await asyncio.sleep(0.01)
    return True


async def test_every_pane_shows_the_selected_record(ledger):  # noqa: F811
    app = make_app(ledger)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await press(pilot, "G", "3")
        assert app.query_one("TabbedContent").active == "source"
        source = pane(app, "source")
        assert "policy/retention.md" in source and "⟪rule⟫" in source and "⟪qualifier:exception⟫" in source
        assert "┃" in source and "⟦r1" in source and "packed units in this document" in source
        await press(pilot, "t")
        assert app.main.source_stage == "selected" and "selected rank" in pane(app, "source")
        await press(pilot, "4")
        context = pane(app, "context")
        assert "budget" in context and "/40 tokens" in context and "packed context (literal)" in context
        assert "gold in packed context: rule" in context
        await press(pilot, "5")
        answer = pane(app, "answer")
        assert "How long may requests be retained" in answer and "citations" in answer and "oracle" in answer
        await press(pilot, "6")
        diag = pane(app, "diagnosis")
        # the record's own step heads the pane: the Python diagnosis agrees with the list's SQL one
        cell = app.query_one(QueryList).current.cells["candidate"]["0"]
        assert cell.step == 8  # the selector leaves the qualifier out (tests/sweep_data.py's budget)
        lines = diag.splitlines()
        assert lines[0] == f"step {cell.step} · {STEP_NAMES[cell.step]} · label {cell.label}", lines[0]
        start = lines.index("the walk") + 1
        walk = [line.split() for line in lines[start : lines.index("", start)]]
        failed = [int(w[1]) for w in walk if w[0] == "✗"]
        assert failed == ([cell.step] if cell.step else []) and walk[-1][0] == ("✗" if cell.step else "✓")
        assert "stage survival" in diag
        assert "chunked" in diag and "reranker regret" in diag
        await press(pilot, "7")
        stats = pane(app, "stats")
        assert "paired comparison: candidate minus baseline" in stats and "phase average" in stats
        assert "segments" in stats
        assert app.main.stats.comparison["settings"]["n_resamples"] == DEFAULT_N_RESAMPLES
        await press(pilot, "2")
        assert app.query_one("TabbedContent").active == "grid"


async def test_compare_mode_shows_both_arms_with_differences(ledger):  # noqa: F811
    app = make_app(ledger)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await press(pilot, "G", "c")
        assert app.main.compare and app.query_one("TabbedContent").active == "compare"
        cand = app.query_one("#compare-candidate").text
        base = app.query_one("#compare-baseline").text
        assert cand.startswith("candidate: candidate · phase 0") and base.startswith(
            "baseline: baseline · phase 0"
        )
        assert "≠" in cand and "packed units" in cand and ("+ r1" in cand or "= r1" in cand)
        await press(pilot, "right_square_bracket")
        assert "phase 1" in app.query_one("#compare-candidate").text
        await press(pilot, "c")
        assert not app.main.compare and app.query_one("TabbedContent").active == "grid"


async def test_filter_bar_validates_inline_and_filters(ledger):  # noqa: F811
    app = make_app(ledger)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await press(pilot, "f")
        bar = app.query_one("#filterbar")
        assert bar.display and app.focused is bar
        await pilot.press(*"stpe")
        await submit(pilot, "#filterbar", bar.value + " = 8")
        err = app.query_one("#filter-error")
        assert (
            err.display
            and "unknown column 'stpe'" in str(err.render())
            and "did you mean step" in str(err.render())
        )
        assert app.main.count == 4  # the list is unchanged
        assert bar.display and app.focused is bar and bar.value == "stpe = 8"  # open for correction
        await submit(pilot, "#filterbar", "segment = 'rule-exception'")
        assert not bar.display
        assert app.main.count == 1 and current_qid(app) == "temp-retention"
        assert not app.query_one("#filter-error").display
        assert "segment = 'rule-exception'" in app.main.predicate
        await press(pilot, "x")  # reversals only, on top of the filter
        assert app.main.filters.reversal and app.main.count == 1 and "reversal" in app.main.predicate
        await press(pilot, "f")
        await submit(pilot, "#filterbar", "")
        assert app.main.count == 3  # reversals only, no predicate: the unanswerable control never reverses
        await press(pilot, "x")
        assert app.main.count == 4


async def test_quick_filters_dialog(ledger):  # noqa: F811
    from ledgerscope.tui.model import Filters
    from ledgerscope.tui.screens.filters import FilterScreen

    app = make_app(ledger)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await press(pilot, "o")
        screen = app.screen
        assert isinstance(screen, FilterScreen)
        screen.query_one("#f-segment").value = "number-scope"
        await pilot.click("#f-apply")
        await settle(pilot)
        assert app.main.filters == Filters(segment="number-scope") and app.main.count == 2


async def test_search_jumps_and_cycles(ledger):  # noqa: F811
    app = make_app(ledger)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await press(pilot, "slash")
        await submit(pilot, "#search", "RETENTION")
        assert app.main.matches == [3] and current_qid(app) == "temp-retention"
        await press(pilot, "g", "slash")
        await submit(pilot, "#search", "e")  # every question holds an 'e'
        assert current_qid(app) == "backup-weekly"
        await press(pilot, "n")
        assert current_qid(app) == "markup-notes"
        await press(pilot, "N", "N")
        assert current_qid(app) == "temp-retention"


async def test_switching_arm(ledger):  # noqa: F811
    app = make_app(ledger)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await press(pilot, "G", "a")
        assert app.main.role == "baseline" and app.main.predicate == "arm = 'baseline'"
        assert current_qid(app) == "temp-retention"  # the selection is kept
        assert "baseline" in str(app.query_one("#list-header").render())
        await press(pilot, "6")
        assert "(baseline, phase 0" in pane(app, "diagnosis")


async def test_export_writes_the_filtered_records(ledger, tmp_path):  # noqa: F811
    from ledgerscope.tui.screens.export import ExportScreen

    app = make_app(ledger)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await press(pilot, "f")
        await submit(pilot, "#filterbar", "step = 8")
        await press(pilot, "e")
        screen = app.screen
        assert isinstance(screen, ExportScreen)
        await settle(pilot)
        assert screen.query_one("#x-where").value == app.main.predicate
        n, _questions = screen.count
        assert n > 0 and "record(s) of" in str(screen.query_one("#x-count").render())
        out = tmp_path / "picked.jsonl"
        screen.query_one("#x-path").value = str(out)
        await pilot.click("#x-go")
        await settle(pilot)
        assert screen.result is not None and screen.result.count == n and out.is_file()
        lines = [json.loads(x) for x in out.read_text().splitlines()]
        assert len(lines) == n and {r["arm"] for r in lines} == {"candidate"}
        assert all(r["diagnosis"]["step"] == 8 for r in lines)
        assert "✓ exported" in str(screen.query_one("#x-result").render())
        screen.query_one("#x-format").value = "trec"
        screen.query_one("#x-path").value = str(ledger / "inside")
        await pilot.click("#x-go")
        await settle(pilot)
        assert "outside the ledger" in str(screen.query_one("#x-result").render())
        await press(pilot, "escape")
        assert not isinstance(app.screen, ExportScreen)


async def test_rerun_shows_the_difference_and_never_writes_the_ledger(ledger):  # noqa: F811
    from ledgerscope.tui.screens.rerun import RerunScreen

    before = digest(ledger)
    app = make_app(ledger)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await press(pilot, "G")
        await pilot.press("r")
        assert isinstance(app.screen, RerunScreen)
        await pilot.pause()
        await press(pilot, "j")  # the UI stays responsive while the model loads (the key goes to the dialog)
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, RerunScreen) and screen.result is not None, app.main.reruns
        assert screen.result.error is None and screen.result.identical is True
        assert "✓ identical" in str(screen.query_one("#rerun-status").render())
        assert ("candidate", "temp-retention", "0") in app.main.reruns
    assert digest(ledger) == before


async def test_help_lists_every_binding_id_and_the_palette_has_every_action(ledger):  # noqa: F811
    from ledgerscope.tui.bindings import all_bindings, binding_ids
    from ledgerscope.tui.screens.help import HelpScreen

    app = make_app(ledger)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await press(pilot, "question_mark")
        assert isinstance(app.screen, HelpScreen)
        body = app.screen.body().plain
        for binding_id in binding_ids():
            assert binding_id in body
        assert "✓ correct" in body and "⊘ false-assertion" in body
        await press(pilot, "escape")
        assert not isinstance(app.screen, HelpScreen)
        titles = {c.title for c in app.get_system_commands(app.screen)}
        for b in all_bindings():
            if b.action not in ("quit", "command_palette"):
                assert b.description in titles


async def test_keymap_file_rebinds_by_id(ledger, tmp_path, monkeypatch):  # noqa: F811
    km = tmp_path / "keymap.toml"
    km.write_text('[keymap]\ngo-down = "w"\nnot-a-binding = "z"\n')
    monkeypatch.setenv("LEDGERSCOPE_KEYMAP", str(km))
    app = make_app(ledger)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await press(pilot, "w")
        assert current_qid(app) == "markup-notes"
        await press(pilot, "j")  # no longer bound
        assert current_qid(app) == "markup-notes"
        rows = dict((i, k) for i, k, _ in app.binding_rows())
        assert rows["go-down"] == "w"


async def test_untrusted_text_renders_literally(ledger):  # noqa: F811
    app = make_app(ledger)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await press(pilot, "j", "3")
        assert current_qid(app) == "markup-notes"
        source = pane(app, "source")
        assert "[bold red]x[/" in source and "\\x1b[31m" in source and "\x1b" not in source
        await press(pilot, "5")
        assert "How long are [bold]draft[/bold] notes kept?" in pane(app, "answer")
        # the screen itself shows the characters (Textual did not parse them as markup)
        svg = app.export_screenshot()
        assert "[bold]draft[/bold]" in svg.replace("&#160;", " ")


async def test_small_terminal_shows_one_pane_at_a_time(ledger):  # noqa: F811
    app = make_app(ledger)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        left, detail = app.query_one("#left"), app.query_one("#detail")
        assert app.screen.has_class("-narrow")
        assert left.region.width == 80 and detail.region.width == 0
        await press(pilot, "4")
        assert detail.region.width == 80 and left.region.width == 0
        assert "budget" in pane(app, "context")
        await press(pilot, "j")  # still moves through questions with the list hidden
        assert app.main.detail.qid == "markup-notes"
        await press(pilot, "1")
        assert left.region.width == 80 and app.focused is app.query_one(QueryList)


#: colours of the window Rich draws around an SVG screenshot (traffic lights, default text)
SVG_FRAME = {"#ff5f57", "#febc2e", "#28c840", "#c5c8c6"}


def screen_colours(app) -> set[str]:
    """The colours on screen (of an SVG screenshot), greys and the frame left out."""
    found = {c.lower() for c in re.findall(r"#[0-9a-fA-F]{6}\b", app.export_screenshot())}
    return {c for c in found - SVG_FRAME if not c[1:3] == c[3:5] == c[5:7]}


async def test_themes_switch_and_no_color(ledger, monkeypatch):  # noqa: F811
    monkeypatch.delenv("NO_COLOR", raising=False)
    app = make_app(ledger, theme="ledgerscope-dark")  # the control: colours on screen, one palette per theme
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert screen_colours(app)
        dark = app.palette
        app.theme = "ledgerscope-light"
        await settle(pilot)
        assert app.palette != dark and app.main.palette is app.palette and screen_colours(app)
    monkeypatch.setenv("NO_COLOR", "1")
    app = make_app(ledger, theme="ledgerscope-high-contrast")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert app.theme == "ledgerscope-high-contrast"
        assert screen_colours(app) == set()
        for name in ("ledgerscope-light", "ledgerscope-ansi", "ledgerscope-dark"):
            app.theme = name
            await settle(pilot)
            assert app.palette["v-correct"].bold and screen_colours(app) == set(), name
        # meaning survives without colour: glyphs in the list
        ql = app.query_one(QueryList)
        assert any(g in ql.row_text(ql.current, 60).plain for g in "✓✗!∅?⚠⊘")


async def test_stats_pane_shows_the_release_decision_with_a_rule(ledger, tmp_path):  # noqa: F811
    rule = tmp_path / "rule.toml"
    rule.write_text(
        'format = "ledgerscope-release-rule/1"\ndescription = "tui test"\ncandidate = "candidate"\n'
        'baseline = "baseline"\nconfidence = 0.9\nn_resamples = 300\nseed = 3\n'
        'interval_handling = "conservative"\nmin_questions = 2\nstress_sets = ["representative"]\n'
        "[max_support_loss]\nmean = -0.5\n"
    )
    app = make_app(ledger, rule=rule)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await press(pilot, "s")
        assert app.query_one("TabbedContent").active == "stats"
        stats = pane(app, "stats")
        assert "release decision:" in stats and "bootstrap 300×, seed 3, 90% intervals" in stats


def test_cli_open_reports_a_bad_ledger_or_arm_without_starting_the_screen(ledger, tmp_path):  # noqa: F811
    from typer.testing import CliRunner

    from ledgerscope.cli.main import app as cli

    runner = CliRunner()
    result = runner.invoke(cli, ["open", str(tmp_path)])
    assert result.exit_code == 2 and "not a ledger" in result.output
    result = runner.invoke(cli, ["open", str(ledger), "--candidate", "nope"])
    assert result.exit_code == 2 and "no arm 'nope'" in result.output
    result = runner.invoke(cli, ["open", "--help"])
    assert result.exit_code == 0 and "--baseline-arm" in result.output


async def test_a_damaged_ledger_shows_why_on_screen(ledger, tmp_path):  # noqa: F811
    import shutil

    broken = tmp_path / "broken"
    shutil.copytree(ledger, broken)
    from ledgerscope.testing.ledger_files import table_file

    table_file(broken, "records", "candidate", "1").write_bytes(b"not parquet")
    app = make_app(broken)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        err = app.main.query_one("#filter-error")
        assert err.display and "part-0.parquet" in str(err.render())
        assert app.main.count == 0
        # the checks say where, on the screen that blocks the app (tests/test_tui_first_screen.py)
        assert type(app.screen).__name__ == "IntegrityScreen" and app.main.trust == "failed"
        shown = str(app.screen.query_one("#integrity-text").render())
        assert "records/arm=candidate/phase=1/part-0.parquet" in shown
        await press(pilot, "j", "3")  # nothing to show, nothing breaks
        assert app.main.detail is None
