"""The main screen's dialogs, opened from its actions: quick filters, export, re-run.

Each function takes the :class:`~ledgerscope.tui.screens.main.MainScreen` whose state it reads
(filters, role, phase, the record under the cursor) and whose state the answer changes.
"""

from __future__ import annotations

from typing import Any

from ledgerscope.common.safe_text import safe
from ledgerscope.tui import messages as msg
from ledgerscope.tui.model import Filters

#: the main screen (not imported: it imports this module)
MainScreen = Any


def quick_filters(screen: MainScreen) -> None:
    """Segment, step, verdict and reversals in a dialog; the list is rebuilt with what it returns."""
    from ledgerscope.tui.screens.filters import FilterScreen

    def apply(result: Filters | None) -> None:
        if result is not None:
            screen.rebuild_list(result)

    screen.app.push_screen(FilterScreen(screen.filters, screen.choices or {}), apply)


def export(screen: MainScreen) -> None:
    """The export dialog over the current arm and filter."""
    from ledgerscope.tui.screens.export import ExportScreen

    arm = screen.session.arms[screen.role]
    screen.app.push_screen(ExportScreen(screen.session, screen.role, arm.ledger, screen.predicate))


def rerun(screen: MainScreen) -> None:
    """Re-run the selected record in a child process (a result already had is shown again)."""
    from ledgerscope.tui.screens.rerun import RerunScreen, show_rerun, start_rerun

    row = screen.query_list.current
    if row is None:
        return
    arm = screen.session.arms[screen.role]
    key = (arm.name, row.qid, screen.phase)
    screen.app.push_screen(RerunScreen(key))
    if key in screen.reruns:
        screen.call_after_refresh(show_rerun, screen.app, screen.reruns[key], screen.palette)
        return
    screen.set_busy("rerun", True)
    start_rerun(screen, arm.ledger, key)


def rerun_done(screen: MainScreen, m: msg.RerunDone) -> None:
    """Keep the result for the session, show it in its dialog, say how it came out."""
    from ledgerscope.tui.screens.rerun import show_rerun

    screen.set_busy("rerun", False)
    screen.reruns[m.key] = m
    show_rerun(screen.app, m, screen.palette)
    state = "failed" if m.error else ("identical" if m.identical else "differs")
    screen.notify(f"re-run {safe(' / '.join(m.key))}: {state}", markup=False)
