"""The main screen of ``ledgerscope open``: the questions list, the detail panes, the bars.

Its reactives are the browsing state, all of it and nowhere else: the arm and
phase shown, the filter and its validated predicate, the record pair on
screen, search matches, what is running. Watchers redraw what depends on them
(the status line binds to them). The data comes from
:class:`~ledgerscope.tui.data.LedgerSession` in thread workers and comes back
as messages (:mod:`ledgerscope.tui.messages`); the actions are the browsing
keys of :mod:`ledgerscope.tui.bindings` (:mod:`.actions`), dialogs are modal screens, and the
panes draw in :mod:`.pane_drawing`.
"""

from __future__ import annotations

import gc
import time
from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Horizontal
from textual.reactive import var
from textual.screen import Screen
from textual.widgets import Input, Static, TabbedContent

from ledgerscope.analysis.stats import DEFAULT_N_RESAMPLES, DEFAULT_SEED
from ledgerscope.common.safe_text import safe
from ledgerscope.tui import messages as msg
from ledgerscope.tui.bindings import BROWSE_BINDINGS
from ledgerscope.tui.data import LedgerSession
from ledgerscope.tui.filter_errors import caret_lines
from ledgerscope.tui.loading import MoveTimer, RecordFeed, neighbour_keys
from ledgerscope.tui.model import Detail, Filters, StatsState
from ledgerscope.tui.panes import DetailPanes, follow_grid, load_summaries
from ledgerscope.tui.render import Palette
from ledgerscope.tui.render_summary import title_text
from ledgerscope.tui.screens.actions import NARROW_WIDTH, BrowseActions
from ledgerscope.tui.screens.integrity import CHECKS_BUSY, UNTRUSTED_NOTE, IntegrityScreen, start_checks
from ledgerscope.tui.screens.pane_drawing import PaneDrawing
from ledgerscope.tui.widgets.footer import KeysFooter
from ledgerscope.tui.widgets.phase_grid import PhaseGrid
from ledgerscope.tui.widgets.queries_panel import QueriesPanel
from ledgerscope.tui.widgets.query_list import QueryList
from ledgerscope.tui.widgets.question_line import QuestionLine
from ledgerscope.tui.widgets.status_line import StatusLine


class MainScreen(BrowseActions, PaneDrawing, Screen):
    """The browsing state and its data's arrival; the keys are :class:`BrowseActions`, the panes'
    drawing :class:`PaneDrawing`."""

    AUTO_FOCUS = "#queries"
    BINDINGS: ClassVar[list[BindingType]] = list(BROWSE_BINDINGS)

    role: var[str] = var("candidate", init=False)
    phase: var[str] = var("", init=False)
    compare: var[bool] = var(False, init=False)
    filters: var[Filters] = var(Filters, init=False)
    predicate: var[str] = var("", init=False)  # the list's filter, validated
    count: var[int] = var(0, init=False)  # questions listed
    total: var[int] = var(0, init=False)  # questions of the arm
    detail: var[Detail | None] = var(None, init=False, always_update=True)  # the record pair shown
    source_stage: var[str] = var("packed", init=False)
    summaries: var[dict] = var(dict, init=False)  # role -> phase -> rates (SQL, at start)
    choices: var[dict] = var(dict, init=False)  # the quick filters' values
    survival: var[dict] = var(dict, init=False)  # role -> phase -> stage survival counts
    stats: var[StatsState] = var(StatsState, init=False)
    search_text: var[str] = var("", init=False)
    matches: var[list[int]] = var(list, init=False)
    busy: var[frozenset[str]] = var(frozenset(), init=False)
    show_list: var[bool] = var(True, init=False)  # narrow terminals: the list, or a detail pane
    previous_tab: var[str] = var("grid", init=False)  # where ``c`` returns to
    trust: var[str] = var("checking", init=False)  # the ledger's checks: checking, verified, failed

    def __init__(
        self,
        session: LedgerSession,
        *,
        rule: str | Path | None = None,
        n_resamples: int = DEFAULT_N_RESAMPLES,
        seed: int = DEFAULT_SEED,
        tune_gc: bool = True,
        started: float | None = None,
    ) -> None:
        super().__init__()
        self.session = session
        self.rule = rule
        self.n_resamples, self.seed = n_resamples, seed
        self.tune_gc = tune_gc
        self.set_reactive(MainScreen.phase, session.phases[0] if session.phases else "")
        self.reruns: dict[tuple[str, str, str], msg.RerunDone] = {}  # results, kept for the session
        self._t0 = time.perf_counter() if started is None else started
        self._timer = MoveTimer()
        self._last_move = "question"  # what the prefetch loads first: the next question, or phases
        self._records = RecordFeed(self, session)
        self._pending_detail = False  # a record is wanted once its list page arrives
        self._stats_waiting = False  # the stats pane was asked for before the checks passed
        self._checks_started = False
        self._settled = False  # the work after the first screen was started

    # -- layout --------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Static(id="title")
        with Horizontal(id="main"):
            yield QueriesPanel(self.session, id="left")
            yield DetailPanes(id="detail")  # built right after the first paint
        yield Static(Text(UNTRUSTED_NOTE), id="untrusted")
        yield QuestionLine(id="question")
        yield Input(id="search", placeholder="search qid or question text (enter: find; n/N: next/previous)")
        yield Input(
            id="filterbar", placeholder="DuckDB predicate, as export --where: step = 8 AND NOT support_packed"
        )
        yield Static(id="filter-error")
        arms = {r: self.session.arms[r].name for r in self.session.roles}
        yield StatusLine(self.session.phases, arms, id="status").data_bind(
            MainScreen.busy,
            MainScreen.phase,
            MainScreen.role,
            MainScreen.compare,
            MainScreen.search_text,
            MainScreen.matches,
            MainScreen.filters,
        )
        # the Footer (a widget per key, rebuilt on every focus change) mounts after the first paint

    @property
    def palette(self) -> Palette:
        """The theme's styles (the App's)."""
        return self.app.palette

    @property
    def query_list(self) -> QueryList:
        return self.query_one(QueryList)

    @property
    def detail_loading(self) -> bool:
        """A record is being loaded (tests wait for it)."""
        return self._records.loading

    def on_mount(self) -> None:
        self.query_one(QueriesPanel).set_view(self.role, self.phase, self.palette)
        self.query_list.focus()
        self.watch(self.app, "palette", self._palette_changed, init=False)
        self.query_one("#title", Static).update(title_text(self.session))
        self._apply_layout()
        self.set_busy("open", True)
        self.query_one(QueriesPanel).load(self.role, self.filters, opening=True)

    # -- the ledger's integrity checks ---------------------------------------

    def _start_checks(self) -> None:
        """Once: the checks in a worker (``ChecksDone`` comes back)."""
        if self._checks_started:
            return
        self._checks_started = True
        self.set_busy(CHECKS_BUSY, True)
        start_checks(self, self.session)

    def on_checks_done(self, m: msg.ChecksDone) -> None:
        """Passed: the ledger is verified (a stats pane asked for meanwhile starts). Failed: what was
        painted is hidden, every browsing action refused, and the blocking screen shown."""
        self.set_busy(CHECKS_BUSY, False)
        self.timings["checks"] = time.perf_counter() - self._t0
        if m.problems:
            self.trust = "failed"
            self.add_class("-untrusted")
            self.detail = None  # the record read before the checks failed is dropped too
            self.app.push_screen(IntegrityScreen(str(self.session.ledger), m.problems))
            return
        self.trust = "verified"
        if self._stats_waiting:
            self._stats_waiting = False
            self._start_stats()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """A ledger that failed its checks: nothing to browse, no key or command does anything here."""
        return self.trust != "failed"

    def _palette_changed(self, palette: Palette) -> None:
        self.query_list.palette = palette
        self.query_list.invalidate()
        self._refresh_panes(all_panes=True)

    def on_resize(self) -> None:
        self._apply_layout()
        self.call_after_refresh(self.query_one(QueriesPanel).show_header)

    def watch_show_list(self) -> None:
        self._apply_layout()

    def _apply_layout(self) -> None:
        narrow = self.size.width < NARROW_WIDTH
        self.set_class(narrow, "-narrow")
        self.set_class(narrow and self.show_list, "-show-list")
        self.set_class(narrow and not self.show_list, "-show-detail")

    def set_busy(self, what: str, on: bool) -> None:
        self.busy = self.busy | {what} if on else self.busy - {what}

    # -- the list ------------------------------------------------------------

    def rebuild_list(self, filters: Filters) -> None:
        self.set_busy("list", True)
        current = self.query_list.current
        self.query_one(QueriesPanel).load(self.role, filters, current.qid if current else None)

    def on_list_ready(self, m: msg.ListReady) -> None:
        """The panel shows the new list (it handled the message first); the state follows it."""
        self.count, self.total, self.predicate = m.count, m.total, m.predicate
        if m.filters is not None:
            self.filters = m.filters
        ql = self.query_list
        self.query_one("#filter-error").display = False
        bar = self.query_one("#filterbar", Input)
        if bar.display:
            bar.display = False
            ql.focus()
        self.busy = self.busy - {"open", "list"}
        if self.focused is None:
            ql.focus()
        self._show_question()
        if self.timings["first_list"] is None:
            # the first screen paints before anything else competes for the CPU
            self.call_after_refresh(self._mark_first_list)
        else:
            self._request_detail()

    def _mark_first_list(self) -> None:
        """The first frame (the list) is painted: now the rest of the screen."""
        if self.timings["first_list"] is None:
            self.timings["first_list"] = time.perf_counter() - self._t0
            if self.query_one(DetailPanes).built:  # a key asked for a pane before the list came
                self._after_first_screen()
            else:
                self.call_later(self._build_panes)

    async def _build_panes(self) -> TabbedContent:
        """The detail panes and the Footer (a widget per key, rebuilt on each focus change): what the
        first frame goes without, so that it shows the list sooner; built once."""
        panes = self.query_one(DetailPanes)
        if panes.built:
            return await panes.build()
        await self.mount(KeysFooter())
        self.refresh_bindings()  # a Footer mounted after the focus settled waits for this to show the keys
        tabs = await panes.build()
        self.call_after_refresh(self._panes_painted)
        return tabs

    def _panes_painted(self) -> None:
        self.timings["panes"] = time.perf_counter() - self._t0
        if self.timings["first_list"] is not None:
            self._after_first_screen()

    def _after_first_screen(self) -> None:
        """What waits for the whole first screen, once: the record under the cursor (the grid shown
        first needs none), the integrity checks (nothing is trusted until they pass), the phase
        summaries, and the collector frozen."""
        if self._settled:
            return
        self._settled = True
        self._request_detail()
        self._start_checks()
        load_summaries(self, self.session, self.role)
        if self.tune_gc:
            # the ledger's long-lived objects leave the collector's view: no 50 ms pauses while moving
            gc.collect()
            gc.freeze()

    def on_list_failed(self, m: msg.ListFailed) -> None:
        self.busy = self.busy - {"open", "list"}
        err = self.query_one("#filter-error", Static)
        if m.typed.strip():  # the predicate's error: quoted as typed, a caret under the place
            lines = caret_lines(m.typed, m.error, max(20, self.size.width - 2))
            err.update(Text("\n".join(safe(line) for line in lines), style=self.palette.get("error")))
        else:
            err.update(Text("✗ " + safe(m.error), style=self.palette.get("error")))
        err.display = True
        if m.opening:
            self.notify(safe(m.error), severity="error", markup=False)
            self._start_checks()  # a ledger that does not open: its checks say where and why
            self.call_later(self._build_panes)

    def on_summary_loaded(self, m: msg.SummaryLoaded) -> None:
        self.choices = m.choices
        self.summaries = m.summaries

    def watch_summaries(self) -> None:
        self._refresh_panes()

    def on_page_loaded(self) -> None:
        """The panel put the page in the list (it handled the message first)."""
        if self._pending_detail:
            self._request_detail()
        self._show_question()
        for grid in self.query(PhaseGrid):
            grid.refresh()

    @on(QueryList.Scrolled)
    def _list_scrolled(self) -> None:
        if self._active_tab() == "grid":
            follow_grid(self)

    # -- the selected record -------------------------------------------------

    @on(QueryList.CursorMoved)
    def _cursor_moved(self, m: QueryList.CursorMoved) -> None:
        self._show_question()
        self._request_detail()
        if self._active_tab() == "grid":
            follow_grid(self)

    def _show_question(self) -> None:
        """The selected question's id and text on the line under the panes (what was asked, at a glance)."""
        row = self.query_list.current
        self.query_one(QuestionLine).row = (row.qid, row.question) if row is not None else None

    def _request_detail(self) -> None:
        row = self.query_list.current
        if row is None:
            self._pending_detail = self.count > 0
            return
        self._pending_detail = False
        key = (row.qid, self.phase)
        shown = self.detail is not None and (self.detail.qid, self.detail.phase) == key
        if shown and self._records.wanted == key:
            self._timer.finish()
        elif self._records.request(key):
            self.set_busy("detail", True)

    def on_detail_loaded(self, m: msg.DetailLoaded) -> None:
        if m.key != self._records.wanted or self.trust == "failed":
            return
        self.set_busy("detail", False)
        if m.error:
            self.notify(safe(m.error), severity="error", markup=False)
            return
        self.detail = m.detail
        self.call_after_refresh(self._timer.finish)
        self.call_after_refresh(self._prefetch)

    def watch_detail(self) -> None:
        if self._active_tab() != "grid":
            self._refresh_panes()

    def _prefetch(self) -> None:
        """Load the neighbours (next/previous question, next/previous phase) before they are asked for."""
        ql = self.query_list
        rows = [ql.row(ql.cursor + delta) for delta in (1, -1)]
        shown = self.detail.qid if self.detail is not None else None
        qids = [r.qid if r else None for r in rows]
        phases_first = self._last_move == "phase"
        self._records.prefetch(neighbour_keys(qids, self.phase, self.session.phases, shown, phases_first))

    def _start_move(self, kind: str) -> None:
        """Time this move until the panes show its record; a question move that moves nothing is not."""
        self._last_move = kind
        self._timer.start(kind)
        if kind == "question":
            self.call_later(self._check_move, self.query_list.cursor)

    def _check_move(self, before: int) -> None:
        if self.query_list.cursor == before:
            self._timer.cancel()

    @property
    def timings(self) -> dict:
        """Seconds to the first list painted, and per move kind its durations (scripts/bench_tui.py)."""
        return self._timer.timings
