"""Triage of multi-document questions at 80 x 24 (and larger): the grid shows the cursor's row, the walk
explains the support set as a set, every pane opens a new record at its top, the footer keeps Help
and Quit, a bad filter is quoted with a caret, Source moves between the question's documents.

Over a sweep-free ledger of questions whose support lies in two documents, each document's spans
lost at its own step (:mod:`ledgerscope.testing.multidoc`): no model, a second to build.
"""

from __future__ import annotations

import html
import re
from collections import defaultdict
from pathlib import Path

import pytest

from ledgerscope.analysis.diagnosis import STEP_NAMES
from ledgerscope.ledger.read import connect
from ledgerscope.testing.multidoc import make_multidoc_ledger
from ledgerscope.tui.app import LedgerscopeApp
from ledgerscope.tui.data import LedgerSession
from ledgerscope.tui.render_summary import status_text
from ledgerscope.tui.widgets.phase_grid import PhaseGrid
from ledgerscope.tui.widgets.query_list import QueryList

from .tui_pilot import settle

pytestmark = pytest.mark.anyio
SMALL = (80, 24)


@pytest.fixture()
def anyio_backend():
    return "asyncio"


@pytest.fixture(scope="module")
def multidoc(tmp_path_factory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("multidoc") / "ledger"
    return out, make_multidoc_ledger(out, questions=30)


async def press(pilot, *keys: str) -> None:
    for key in keys:
        await pilot.press(key)
        await settle(pilot)


def screen_lines(app) -> list[str]:
    """The screen as text lines (an SVG screenshot's text runs, joined by row)."""
    rows: dict[float, list[tuple[float, str]]] = defaultdict(list)
    for x, y, text in re.findall(
        r'<text[^>]*x="([\d.]+)" y="([\d.]+)"[^>]*>(.*?)</text>', app.export_screenshot(), re.S
    ):
        rows[float(y)].append((float(x), html.unescape(re.sub("<[^>]+>", "", text))))
    return ["".join(t for _, t in sorted(r)).replace("\xa0", " ") for _, r in sorted(rows.items())]


def titles(ledger: Path, docs) -> list[str]:
    con = connect(ledger)
    texts = dict(con.execute("SELECT doc_id, text FROM sources").fetchall())
    return [texts[d].split("\n", 1)[0].lstrip("# ") for d in docs]


@pytest.mark.parametrize("size", [SMALL, (120, 40)])
async def test_last_question_then_grid_shows_the_cursor_row(multidoc, size):
    ledger, _ = multidoc
    app = LedgerscopeApp(LedgerSession(ledger), tune_gc=False)
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        await press(pilot, "G", "2")
        ql = app.query_one(QueryList)
        assert ql.cursor == ql.total - 1 == 29
        grid = app.query_one(PhaseGrid)
        lines = grid.text_lines()
        assert any(line.startswith("▶") and ql.current.qid[:8] in line for line in lines), lines
        # the row is on screen, not only in the grid's window
        assert any(line.lstrip().startswith("▶") and ql.current.qid[:8] in line for line in screen_lines(app))
        await press(pilot, "g")
        assert app.query_one(PhaseGrid).text_lines()[1].startswith("▶")


async def test_a_joint_question_triaged_at_80x24(multidoc):
    ledger, info = multidoc
    app = LedgerscopeApp(LedgerSession(ledger), tune_gc=False)
    async with app.run_test(size=SMALL) as pilot:
        await settle(pilot)
        # the footer keeps Help and Quit at 80 columns
        footer = screen_lines(app)[-1]
        assert "Help" in footer and "Quit" in footer, footer
        # the list shows the question's start beside its opaque id
        ql = app.query_one(QueryList)
        assert "Which team" in ql.row_text(ql.current, 76).plain
        # a question whose two documents are both lost, at different steps, at phase 0
        order = sorted(info)
        qid = next(q for q in order if None not in info[q]["steps"]["0"])
        first, second = info[qid]["steps"]["0"]
        assert first != second
        await press(pilot, *["j"] * order.index(qid), "6")
        assert ql.current.qid == qid and app.main.detail.qid == qid
        diag = app.query_one("#diagnosis-view")
        text = diag.text
        step = min(first, second)
        assert text.splitlines()[0].startswith(f"step {step} · {STEP_NAMES[step]}")
        set_part = text[text.index("the support set") : text.index("evidence")]
        title_a, title_b = titles(ledger, info[qid]["docs"])
        assert title_a in set_part and title_b in set_part
        assert f"lost at step {first} ({STEP_NAMES[first]})" in set_part
        assert f"lost at step {second} ({STEP_NAMES[second]})" in set_part
        assert "first loss" in set_part
        # the pane is focused and marked; scrolled down, a new question opens it at its top
        assert app.focused is diag
        await press(pilot, "end")
        assert diag.scroll_y > 0
        await press(pilot, "k")
        assert app.main.detail.qid != qid and diag.scroll_y == 0
        await press(pilot, "end", "right_square_bracket")
        assert app.main.phase == "1" and diag.scroll_y == 0
        # Source: titles in the headers, d/D between the question's documents
        await press(pilot, "3")
        source = app.query_one("#source-view")
        tabs = app.query_one("TabbedContent")
        assert tabs.active == "source" and app.focused is source  # the focus moved with the pane
        assert "── 1/2 " in source.text and "── 2/2 " in source.text
        await press(pilot, "d")
        top = source.scroll_y
        await press(pilot, "d")
        assert source.scroll_y != top
        await press(pilot, "D")
        assert source.scroll_y == top
        # compare mode names the documents beside the span ids
        await press(pilot, "c")
        compare = app.query_one("#compare-candidate").text
        assert re.search(r"s2 \([^)]+\) [✓◐✗]", compare), compare
        await press(pilot, "c")  # back: the focused compare pane must not pull its tab back
        assert tabs.active == "source" and not app.main.compare
        await press(pilot, "6")
        assert tabs.active == "diagnosis" and app.focused is diag
        # a bad filter: the error quotes what was typed, the caret inside it
        await press(pilot, "escape", "1", "f")
        typed = "step = 'seven' AND"
        app.query_one("#filterbar").value = typed
        await press(pilot, "enter")
        shown = str(app.query_one("#filter-error").render()).splitlines()
        assert shown[0].startswith("✗ syntax error")
        assert shown[1] == "  " + typed
        caret = shown[2].index("^") - 2
        assert 0 <= caret < len(typed) and typed[caret:].startswith("AND")


async def test_help_lists_every_key_tab_included(multidoc):
    ledger, _ = multidoc
    app = LedgerscopeApp(LedgerSession(ledger), tune_gc=False)
    async with app.run_test(size=SMALL) as pilot:
        await settle(pilot)
        await press(pilot, "question_mark")
        body = str(app.screen.query_one("#help-text").render())
        for key_id in ("focus-next", "focus-prev", "doc-next", "doc-prev", "show-filter", "help", "quit"):
            assert key_id in body
        assert "tab" in body and "shift+tab" in body


def test_the_status_line_ellipsises_a_long_filter():
    line = status_text([], "0", ("0", "1"), "candidate", False, "", 0, "step = 8 AND " * 20, width=80)
    assert line.cell_len == 80 and line.plain.endswith("…")
    assert status_text([], "0", ("0",), "a", False, "", 0, "", width=80).plain.endswith("no filter")
