"""The main screen's detail panes: which tab is active, what each pane draws from, the stats pane's run.

A mixin of :class:`~ledgerscope.tui.screens.main.MainScreen` (it holds the reactives these
methods read and set): the panes draw from a :class:`~ledgerscope.tui.panes.PaneView` of the
browsing state, and their data (survival counts, the paired bootstrap) comes back as messages
from thread workers.
"""

from __future__ import annotations

from textual.widgets import TabbedContent

from ledgerscope.tui import messages as msg
from ledgerscope.tui.model import StatsState
from ledgerscope.tui.panes import TABS, DetailPanes, PaneView, draw_pane, load_comparison, load_survival


class PaneDrawing:
    """Draws the active pane when what it shows changes; starts the stats pane's bootstrap once."""

    def _active_tab(self) -> str:
        tabs = self.query_one(DetailPanes).tabs
        return (tabs.active if tabs is not None else "") or "grid"

    def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        tab = event.pane.id or ""
        if tab != "compare":
            self.previous_tab = tab
        self.compare = tab == "compare" or (self.compare and tab == "grid")
        if tab == "stats":
            self._start_stats()
        self._refresh_panes()

    def _refresh_panes(self, all_panes: bool = False) -> None:
        """Draw the active pane (every pane after a theme change); the others draw when shown."""
        if not self.is_mounted or self.query_one(DetailPanes).tabs is None:
            return
        tabs = [*TABS, "compare"] if all_panes else [self._active_tab()]
        if "diagnosis" in tabs and self.detail is not None and self.role not in self.survival:
            load_survival(self, self.session, self.role)
        view = PaneView(
            self.session,
            self.detail,
            self.role,
            self.phase,
            self.compare,
            self.palette,
            self.summaries,
            self.survival,
            self.stats,
            self.source_stage,
        )
        for tab in tabs:
            draw_pane(self, tab, view)

    def on_survival_loaded(self, m: msg.SurvivalLoaded) -> None:
        self.survival = {**self.survival, m.role: m.rows}

    def watch_survival(self) -> None:
        if self._active_tab() == "diagnosis":
            self._refresh_panes()

    def _start_stats(self) -> None:
        if self.stats.comparison is not None or self.stats.running:
            return
        if "baseline" not in self.session.arms:
            no_baseline = "paired comparison: no baseline arm (open with --baseline or --baseline-arm)"
            self.stats = StatsState(no_baseline)
            return
        if self.trust != "verified":  # no decision from rows not yet verified
            self._stats_waiting = True
            self.stats = StatsState("⟳ waiting for the ledger's integrity checks…")
            return
        n = "the rule's settings" if self.rule else f"{self.n_resamples} resamples, seed {self.seed}"
        self.stats = StatsState(f"⟳ computing the paired bootstrap ({n})…", running=True)
        self.set_busy("stats", True)
        load_comparison(self, self.session, self.n_resamples, self.seed, self.rule)

    def on_stats_loaded(self, m: msg.StatsLoaded) -> None:
        self.set_busy("stats", False)
        status = "✗ " + m.error if m.error else self.stats.status
        self.stats = StatsState(status, False, m.comparison, m.decision)

    def watch_stats(self) -> None:
        self._refresh_panes()

    def watch_source_stage(self) -> None:
        self._refresh_panes()
