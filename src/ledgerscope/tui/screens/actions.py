"""The main screen's browsing keys: moving, what is shown, filter and search, the dialogs.

A mixin of :class:`~ledgerscope.tui.screens.main.MainScreen` (it holds the reactives these
actions set and the watchers that redraw): each action is one key of
:mod:`ledgerscope.tui.bindings`, and changes state or opens a modal dialog, nothing more.
"""

from __future__ import annotations

from textual.widgets import Input

from ledgerscope.common.safe_text import safe
from ledgerscope.tui import messages as msg
from ledgerscope.tui.model import Filters, next_match
from ledgerscope.tui.panes import TABS
from ledgerscope.tui.render_source import SOURCE_STAGES
from ledgerscope.tui.screens import dialogs
from ledgerscope.tui.widgets.queries_panel import QueriesPanel

#: under this many columns one pane shows at a time
NARROW_WIDTH = 100


class BrowseActions:
    """The ``action_*`` methods the browsing bindings name, and the bars' and dialogs' replies."""

    # -- actions: moving -----------------------------------------------------

    def action_move(self, delta: int) -> None:
        self._move_to(self.query_list.cursor + delta)

    def action_go_top(self) -> None:
        self._move_to(0)

    def action_go_bottom(self) -> None:
        self._move_to(self.query_list.total - 1)

    def action_page(self, direction: int) -> None:
        self._move_to(self.query_list.cursor + direction * self.query_list.page_height)

    def _move_to(self, index: int) -> None:
        self._start_move("question")
        self.query_list.move_to(index)

    def action_phase(self, delta: int) -> None:
        phases = self.session.phases
        if not phases:
            return
        i = phases.index(self.phase) if self.phase in phases else 0
        self._start_move("phase")
        new = phases[(i + delta) % len(phases)]
        if new == self.phase:  # one phase: the record shown is already the one asked for
            self._timer.finish()
        self.phase = new

    def watch_phase(self) -> None:
        self.query_list.show_phase(self.phase)
        self._request_detail()
        if self._active_tab() == "grid":
            self._refresh_panes()

    # -- actions: what is shown ----------------------------------------------

    async def action_pane(self, number: int) -> None:
        if number == 1:
            self.show_list = True
            self.query_list.focus()
            return
        self.show_list = False
        self._show_tab(await self._build_panes(), TABS[number - 2])

    def _show_tab(self, tabs, tab: str, focus: str | None = None) -> None:
        """Activate ``tab`` and, once drawn, focus its pane (``focus``: another widget id). The focus
        leaves the old pane first: a hidden pane keeping it would hand it to another pane's widget,
        and the tabs follow the focus (they would switch back)."""
        focused = self.focused
        if focused is not None and focused is not self.query_list:
            self.set_focus(None)
        tabs.active = tab
        self.call_after_refresh(self._focus_pane, focus or tab)

    def _focus_pane(self, tab: str, tries: int = 4) -> None:
        """The pane shown takes the focus: its scroll keys act on it (the grid follows the list)."""
        if tab == "grid":  # the grid follows the list, which keeps the keys where it shows
            if self.size.width >= NARROW_WIDTH:
                self.query_list.focus()
            return
        found = self.query(f"#{tab}" if tab.startswith("compare-") else f"#{tab}-view")
        if found and found.first().focusable:
            found.first().focus()
        elif tries:  # mounted with its first drawing, shown once its tab is laid out
            self.call_after_refresh(self._focus_pane, tab, tries - 1)

    async def action_source_doc(self, direction: int) -> None:
        """The next (previous) gold document of the question in the Source pane, its header on top."""
        tabs = await self._build_panes()
        if tabs.active != "source":
            await self.action_pane(TABS.index("source") + 2)
            self.call_after_refresh(self._source_doc, direction)
            return
        self._source_doc(direction)

    def _source_doc(self, direction: int) -> None:
        from ledgerscope.tui.render_source import DOC_HEADING
        from ledgerscope.tui.widgets.text_pane import TextPane

        found = self.query("#source-view")
        if found and not found.first(TextPane).scroll_to_heading(DOC_HEADING, direction):
            self.notify("no document to move to", markup=False)

    def action_show_filter(self) -> None:
        """The status line cuts a long filter; this shows it whole."""
        text = self.filters.describe()
        self.notify(safe(f"filter: {text}") if text else "no filter", timeout=15, markup=False)

    async def action_toggle_compare(self) -> None:
        tabs = await self._build_panes()
        if tabs.active == "compare":
            self.compare = False
            self._show_tab(tabs, self.previous_tab if self.previous_tab != "compare" else "grid")
        else:
            self.compare = True
            self._show_tab(tabs, "compare", "compare-candidate")
        if self.size.width < NARROW_WIDTH:
            self.show_list = False

    async def action_source_stage(self) -> None:
        i = SOURCE_STAGES.index(self.source_stage)
        tabs = await self._build_panes()
        if tabs.active != "source":
            self._show_tab(tabs, "source")
        self.source_stage = SOURCE_STAGES[(i + 1) % len(SOURCE_STAGES)]

    async def action_stats(self) -> None:
        await self.action_pane(TABS.index("stats") + 2)
        self._start_stats()
        self._refresh_panes()

    def action_toggle_arm(self) -> None:
        if len(self.session.roles) < 2:
            self.notify("only one arm in this session", markup=False)
            return
        self.role = "baseline" if self.role == "candidate" else "candidate"
        self.rebuild_list(self.filters)
        self.choices = {}

    def watch_role(self) -> None:
        self._refresh_panes()

    # -- actions: filter and search ------------------------------------------

    def action_toggle_reversal(self) -> None:
        f = self.filters
        self.rebuild_list(Filters(f.where, f.segment, f.step, f.verdict, not f.reversal))

    def action_filter_bar(self) -> None:
        bar = self.query_one("#filterbar", Input)
        bar.value = self.filters.where
        bar.display = True
        bar.focus()

    def action_search(self) -> None:
        box = self.query_one("#search", Input)
        box.value = self.search_text
        box.display = True
        box.focus()

    def action_close_bars(self) -> None:
        for wid in ("#search", "#filterbar", "#filter-error"):
            self.query_one(wid).display = False
        self.query_list.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        """Enter in the filter bar or the search box (the dialogs' inputs submit on their own screens)."""
        if event.input.id == "filterbar":
            self._filter_submitted(event)
        elif event.input.id == "search":
            self._search_submitted(event)

    def _filter_submitted(self, event: Input.Submitted) -> None:
        # the bar closes when the predicate is valid, and stays open under its error otherwise
        f = self.filters
        self.rebuild_list(Filters(event.value, f.segment, f.step, f.verdict, f.reversal))

    def _search_submitted(self, event: Input.Submitted) -> None:
        event.input.display = False
        self.query_list.focus()
        self.search_text = event.value.strip()
        if not self.search_text:
            self.matches = []
            self.query_list.matches = set()
            return
        self.query_one(QueriesPanel).search(self.role, self.search_text)

    def on_search_done(self, m: msg.SearchDone) -> None:
        self.matches = m.matches
        ql = self.query_list
        ql.matches = set(m.matches)
        ql.invalidate()
        if not m.matches:
            self.notify(f"no question matches {safe(m.text)!r}", markup=False)
            return
        self.action_search_next(1, include_current=True)

    def action_search_next(self, direction: int, include_current: bool = False) -> None:
        if self.matches:
            self._move_to(next_match(self.matches, self.query_list.cursor, direction, include_current))

    # -- actions: dialogs ----------------------------------------------------

    def action_quick_filters(self) -> None:
        dialogs.quick_filters(self)

    def action_export(self) -> None:
        dialogs.export(self)

    def action_rerun(self) -> None:
        dialogs.rerun(self)

    def on_rerun_done(self, m: msg.RerunDone) -> None:
        dialogs.rerun_done(self, m)
