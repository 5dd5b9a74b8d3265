"""SVG snapshots of each pane (pytest-textual-snapshot; Textual pinned at 8.2.8 in pyproject.toml).

Regenerate after a reviewed change with ``.venv/bin/pytest tests/test_tui_snapshots.py --snapshot-update``
and look at the report before accepting.
"""

from __future__ import annotations

import pytest

from ledgerscope.tui.app import LedgerscopeApp
from ledgerscope.tui.data import LedgerSession

from .test_tui_ledger import ledger  # noqa: F401  (the shared, session-built ledger)
from .tui_pilot import settle

SIZE = (110, 32)
pytestmark = pytest.mark.slow  # the shared ledger loads the model


def steps(*keys: str):
    """A run_before callable: settle, then press each key and settle again."""

    async def run(pilot) -> None:
        await settle(pilot)
        for key in keys:
            await pilot.press(key)
            await settle(pilot)

    return run


def app_for(ledger_dir) -> LedgerscopeApp:
    return LedgerscopeApp(LedgerSession(ledger_dir), tune_gc=False)


PANES = {
    "grid": ("G",),
    "source": ("G", "3"),
    "context": ("G", "4"),
    "answer": ("G", "5"),
    "diagnosis": ("G", "6"),
    "stats": ("7",),
    "compare": ("G", "c"),
    "help": ("question_mark",),
}


@pytest.mark.parametrize("keys", list(PANES.values()), ids=list(PANES))
def test_pane_snapshot(snap_compare, ledger, keys):  # noqa: F811
    assert snap_compare(app_for(ledger), terminal_size=SIZE, run_before=steps(*keys))


def test_markup_document_snapshot(snap_compare, ledger):  # noqa: F811
    """The document holds "[bold red]x[/]" and an escape byte: both appear as typed."""
    assert snap_compare(app_for(ledger), terminal_size=SIZE, run_before=steps("j", "3"))


def test_small_terminal_snapshot(snap_compare, ledger):  # noqa: F811
    """80x24: one pane at a time (here the list; 2-7 show a detail pane instead)."""
    assert snap_compare(app_for(ledger), terminal_size=(80, 24), run_before=steps("G"))
