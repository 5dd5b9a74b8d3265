"""``ledgerscope open``: browse a ledger by question, phase and arm (Textual app).

All DuckDB work runs in thread workers (:mod:`.data`), results come back as
messages (:mod:`.messages`); the panes render ``rich.text.Text`` built by
:mod:`.render`. Keys have stable binding ids that a keymap file can remap
(:mod:`.keymap`); every action is also in the command palette.
"""

from __future__ import annotations

import gc
import os
import threading
import time
from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.widgets import Footer, Input, Static, TabbedContent, TabPane
from textual.worker import get_current_worker

from ledgerscope.common.errors import LedgerscopeError
from ledgerscope.common.safe_text import safe
from ledgerscope.tui import messages as msg
from ledgerscope.tui.actions import NARROW_WIDTH, ActionsMixin
from ledgerscope.tui.data import LedgerSession
from ledgerscope.tui.model import Filters
from ledgerscope.tui.panes import TABS, PanesMixin, TextPane
from ledgerscope.tui.render import make_palette
from ledgerscope.tui.widgets.phase_grid import PhaseGrid
from ledgerscope.tui.widgets.query_list import PAGE_SIZE, QueryList

_PROCESS_T0 = time.perf_counter()


def process_start() -> float:
    """perf_counter() value of the process start: ``LEDGERSCOPE_T0`` (epoch seconds) if set."""
    env = os.environ.get("LEDGERSCOPE_T0")
    if env:
        try:
            return time.perf_counter() - (time.time() - float(env))
        except ValueError:
            pass
    return _PROCESS_T0


class LedgerscopeApp(ActionsMixin, PanesMixin, App):
    CSS_PATH = "app.tcss"
    TITLE = "ledgerscope"
    ENABLE_COMMAND_PALETTE = True
    AUTO_FOCUS = "#queries"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("j,down", "move(1)", "Next question", id="go-down", show=False),
        Binding("k,up", "move(-1)", "Previous question", id="go-up", show=False),
        Binding("g,home", "go_top", "First question", id="go-top", show=False),
        Binding("G,end", "go_bottom", "Last question", id="go-bottom", show=False),
        Binding("space,pagedown", "page(1)", "Page down", id="page-down", show=False),
        Binding("b,pageup", "page(-1)", "Page up", id="page-up", show=False),
        Binding("left_square_bracket,h", "phase(-1)", "Previous phase", id="phase-prev"),
        Binding("right_square_bracket,l", "phase(1)", "Next phase", id="phase-next"),
        Binding("slash", "search", "Search", id="search"),
        Binding("n", "search_next(1)", "Next match", id="search-next", show=False),
        Binding("N", "search_next(-1)", "Previous match", id="search-prev", show=False),
        Binding("f", "filter_bar", "Filter", id="filter"),
        Binding("o", "quick_filters", "Quick filters", id="quick-filters", show=False),
        Binding("x", "toggle_reversal", "Reversals only", id="reversal-only", show=False),
        Binding("a", "toggle_arm", "Switch arm", id="toggle-arm", show=False),
        Binding("c", "toggle_compare", "Compare", id="compare"),
        Binding("r", "rerun", "Re-run", id="rerun"),
        Binding("e", "export", "Export", id="export"),
        Binding("s", "stats", "Stats", id="stats"),
        Binding("t", "source_stage", "Source stage", id="source-stage", show=False),
        Binding("1", "pane(1)", "Queries pane", id="pane-queries", show=False),
        Binding("2", "pane(2)", "Grid pane", id="pane-grid", show=False),
        Binding("3", "pane(3)", "Source pane", id="pane-source", show=False),
        Binding("4", "pane(4)", "Context pane", id="pane-context", show=False),
        Binding("5", "pane(5)", "Answer pane", id="pane-answer", show=False),
        Binding("6", "pane(6)", "Diagnosis pane", id="pane-diagnosis", show=False),
        Binding("7", "pane(7)", "Stats pane", id="pane-stats", show=False),
        Binding("escape", "close_bars", "Close bar", id="close", show=False),
        Binding("question_mark,f1", "help", "Help", id="help"),
        Binding("colon", "command_palette", "Commands", id="command-palette", show=False),
        Binding("q", "quit", "Quit", id="quit"),
    ]

    def __init__(
        self,
        session: LedgerSession,
        *,
        rule: str | Path | None = None,
        theme: str | None = None,
        n_resamples: int = 2000,
        tune_gc: bool = True,
    ) -> None:
        super().__init__()
        self.tune_gc = tune_gc
        self.session = session
        self.rule = rule
        self.n_resamples = n_resamples
        self.role = "candidate"
        self.phase = session.phases[0] if session.phases else ""
        self.compare = False
        self.filters = Filters()
        self.predicate = ""
        self.count = 0
        self.total = 0
        self.detail = None
        self.source_stage = "packed"
        self.summaries: dict = {}
        self.choices: dict = {}
        self.survival_rows: dict = {}
        self.comparison = self.decision = None
        self.stats_status = "paired comparison: press s (or open this pane) to compute"
        self.stats_running = False
        self.search_text = ""
        self.matches: list[int] = []
        self.reruns: dict = {}
        self.timings: dict = {"first_list": None, "question": [], "phase": []}
        self._t0 = process_start()
        self._gen = 0
        self._want: tuple[str, str] | None = None
        self._detail_lock = threading.Lock()
        self._detail_running = False
        self._pending_detail = False
        self._move: tuple[str, float] | None = None
        self._busy: set[str] = set()
        self._previous_tab = "grid"
        self._show_list = True
        from ledgerscope.tui.themes import DEFAULT_THEME, load_themes

        themes, self._theme_problems = load_themes()
        for t in themes:
            self.register_theme(t)
        wanted = theme or os.environ.get("LEDGERSCOPE_THEME") or DEFAULT_THEME
        if wanted not in self.available_themes:
            self._theme_problems.append(f"unknown theme {wanted!r}; using {DEFAULT_THEME}")
            wanted = DEFAULT_THEME
        self.theme = wanted
        self.palette = make_palette()

    # -- layout --------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Static(id="title")
        with Horizontal(id="main"):
            with Vertical(id="left"):
                yield Static(id="list-header")
                yield QueryList(id="queries")
            with TabbedContent(id="detail", initial="grid"):
                for i, name in enumerate(TABS, start=2):
                    with TabPane(f"{i} {name.title()}", id=name):
                        if name == "grid":  # Line API, aligned with the list: a move redraws two lines
                            yield Static(Text(""), id="grid-caption")
                            yield PhaseGrid(id="grid-view")
                        else:
                            yield TextPane(id=f"{name}-view")
                with TabPane("c Compare", id="compare"), Horizontal(id="compare-row"):
                    yield TextPane(id="compare-candidate")
                    yield TextPane(id="compare-baseline")
        yield Input(id="search", placeholder="search qid or question text (enter: find; n/N: next/previous)")
        yield Input(
            id="filterbar", placeholder="DuckDB predicate, as export --where: step = 8 AND NOT support_packed"
        )
        yield Static(id="filter-error")
        yield Static(id="status")
        yield Footer()

    def on_mount(self) -> None:
        from ledgerscope.tui.keymap import load_keymap

        keymap, problems = load_keymap(self.binding_ids())
        if keymap:
            self.set_keymap(keymap)
        for p in problems + self._theme_problems:
            self.notify(safe(p), severity="warning", timeout=8, markup=False)
        self.theme_changed_signal.subscribe(self, lambda _theme: self._on_theme_changed())
        self._on_theme_changed(redraw=False)
        ql = self.query_one(QueryList)
        ql.phases = self.session.phases
        ql.phase = self.phase
        ql.role = self.role
        ql.opening = True
        ql.focus()
        self._update_title()
        self._apply_layout()
        self._set_busy("open", True)
        self._open_worker()

    def binding_ids(self) -> list[str]:
        return [b.id for b in self.BINDINGS if isinstance(b, Binding) and b.id]

    def _on_theme_changed(self, redraw: bool = True) -> None:
        from textual.color import Color

        variables = self.get_css_variables()
        background = variables.get("background", "#000000")

        def rich(value: str) -> str | None:
            if value.startswith("ansi_"):
                name = value[5:]
                return None if name == "default" else name
            try:
                c = Color.parse(value)
                if c.a < 1:
                    c = Color.parse(background).blend(c.with_alpha(1.0), c.a)
                return c.hex6
            except Exception:
                return None

        keys = ("success", "error", "warning", "accent", "primary", "text-muted", "ls-gold", "ls-retrieved")
        self.palette = make_palette({k: v for k in keys if k in variables and (v := rich(variables[k]))})
        ql = self.query_one(QueryList)
        ql.palette = self.palette
        if redraw:
            ql.invalidate()
            self._refresh_panes(all_panes=True)

    def on_resize(self) -> None:
        self._apply_layout()
        self.call_after_refresh(self._update_list_header)

    def _apply_layout(self) -> None:
        narrow = self.size.width < NARROW_WIDTH
        self.screen.set_class(narrow, "-narrow")
        self.screen.set_class(narrow and self._show_list, "-show-list")
        self.screen.set_class(narrow and not self._show_list, "-show-detail")

    # -- workers -------------------------------------------------------------

    def _set_busy(self, what: str, on: bool) -> None:
        (self._busy.add if on else self._busy.discard)(what)
        self._update_status()

    @work(thread=True, exclusive=True, group="list")
    def _open_worker(self) -> None:
        try:
            self.session.open()
        except Exception as exc:  # a damaged ledger: say why on screen (q still quits)
            text = str(exc) if isinstance(exc, LedgerscopeError) else f"{type(exc).__name__}: {exc}"
            self.post_message(msg.ListFailed(text, opening=True))
            return
        self._build_list_worker_body(self.filters, None)

    @work(thread=True, exclusive=True, group="summary")
    def _summary_worker(self) -> None:
        s = self.session
        summaries = {r: s.phase_summary(r) for r in s.roles}
        self.post_message(msg.SummaryLoaded(summaries, s.choices(self.role)))

    def _rebuild_list(self, filters: Filters) -> None:
        self._set_busy("list", True)
        current = self.query_one(QueryList).current
        self._list_worker(filters, current.qid if current else None)

    @work(thread=True, exclusive=True, group="list")
    def _list_worker(self, filters: Filters, keep_qid: str | None) -> None:
        self._build_list_worker_body(filters, keep_qid)

    def _build_list_worker_body(self, filters: Filters, keep_qid: str | None) -> None:
        role = self.role
        try:
            count, predicate = self.session.build_list(role, filters)
            total = self.session.total_questions(role)
            cursor = 0
            if keep_qid is not None:
                cursor = self.session.locate(role, keep_qid) or 0
            first = (cursor // PAGE_SIZE) * PAGE_SIZE
            rows = self.session.page(role, first, PAGE_SIZE)
        except LedgerscopeError as exc:
            self.post_message(msg.ListFailed(str(exc)))
            return
        if not get_current_worker().is_cancelled:
            self.post_message(msg.ListReady(0, count, total, predicate, rows, cursor, role, filters))

    def on_list_ready(self, m: msg.ListReady) -> None:
        self._gen += 1
        self.count, self.total, self.predicate = m.count, m.total, m.predicate
        if m.filters is not None:
            self.filters = m.filters
        ql = self.query_one(QueryList)
        ql.opening = False
        ql.role = m.role
        first_page = m.cursor // PAGE_SIZE
        ql.reset(m.count, self._gen, m.rows if first_page == 0 else [], m.cursor)
        if first_page:
            ql.set_page(first_page, m.rows, self._gen)
        self.query_one("#filter-error").display = False
        bar = self.query_one("#filterbar", Input)
        if bar.display:
            bar.display = False
            ql.focus()
        self._set_busy("open", False)
        self._set_busy("list", False)
        self._update_list_header()
        if self.focused is None:
            ql.focus()
        if self.timings["first_list"] is None:
            # the first screen paints before anything else competes for the CPU
            self.call_after_refresh(self._mark_first_list)
        else:
            self._request_detail()

    def _mark_first_list(self) -> None:
        if self.timings["first_list"] is None:
            self.timings["first_list"] = time.perf_counter() - self._t0
            self._request_detail()
            self._summary_worker()
            if self.tune_gc:
                # the ledger's long-lived objects leave the collector's view: no 50 ms pauses while moving
                gc.collect()
                gc.freeze()

    def on_list_failed(self, m: msg.ListFailed) -> None:
        self._set_busy("open", False)
        self._set_busy("list", False)
        self.query_one(QueryList).opening = False
        err = self.query_one("#filter-error", Static)
        err.update(Text("✗ " + safe(m.error), style=self.palette.get("error")))
        err.display = True
        if m.opening:
            self.notify(safe(m.error), severity="error", markup=False)

    def on_summary_loaded(self, m: msg.SummaryLoaded) -> None:
        self.summaries, self.choices = m.summaries, m.choices
        self._refresh_panes()

    @on(QueryList.NeedPage)
    def _need_page(self, m: QueryList.NeedPage) -> None:
        self._page_worker(m.page, m.generation)

    @work(thread=True, group="page")
    def _page_worker(self, page: int, generation: int) -> None:
        try:
            rows = self.session.page(self.role, page * PAGE_SIZE, PAGE_SIZE)
        except Exception as exc:  # a page failing to load leaves placeholders; say why
            self.call_from_thread(self.notify, safe(str(exc)), severity="error", markup=False)
            return
        self.post_message(msg.PageLoaded(generation, page, rows))

    def on_page_loaded(self, m: msg.PageLoaded) -> None:
        self.query_one(QueryList).set_page(m.page, m.rows, m.generation)
        if self._pending_detail:
            self._request_detail()
        self.query_one(PhaseGrid).refresh()

    @on(QueryList.Scrolled)
    def _list_scrolled(self) -> None:
        if self._active_tab() == "grid":
            self._follow_grid()

    # -- the selected record -------------------------------------------------

    @on(QueryList.CursorMoved)
    def _cursor_moved(self, m: QueryList.CursorMoved) -> None:
        self._request_detail()
        if self.query_one(TabbedContent).active == "grid":
            self._follow_grid()

    def _request_detail(self) -> None:
        row = self.query_one(QueryList).current
        if row is None:
            self._pending_detail = self.count > 0
            return
        self._pending_detail = False
        key = (row.qid, self.phase)
        if self.detail is not None and (self.detail.qid, self.detail.phase) == key and self._want == key:
            self._finish_move()
            return
        with self._detail_lock:
            self._want = key
            if not self._detail_running and self.session.cached(*key):  # a dict lookup: no worker needed
                self.post_message(msg.DetailLoaded(key, self.session.detail(*key)))
                return
            start = not self._detail_running
            if start:
                self._detail_running = True
        self._set_busy("detail", True)
        if start:
            self._detail_worker()

    @work(thread=True, group="detail")
    def _detail_worker(self) -> None:
        while True:
            with self._detail_lock:
                key = self._want
            try:
                detail, error = self.session.detail(*key), None
            except Exception as exc:  # shown in the status line; the UI keeps going
                detail, error = None, f"{type(exc).__name__}: {exc}"
            with self._detail_lock:
                if key == self._want:
                    self._detail_running = False
                    self.post_message(msg.DetailLoaded(key, detail, error))
                    return

    def on_detail_loaded(self, m: msg.DetailLoaded) -> None:
        if m.key != self._want:
            return
        self._set_busy("detail", False)
        if m.error:
            self.notify(safe(m.error), severity="error", markup=False)
            return
        self.detail = m.detail
        if self._active_tab() != "grid":
            self._refresh_panes()
        self.call_after_refresh(self._finish_move)
        self.call_after_refresh(self._prefetch)

    def _prefetch(self) -> None:
        """Load the neighbours (next/previous question, next/previous phase) before they are asked for."""
        ql = self.query_one(QueryList)
        phases = self.session.phases
        keys = []
        for delta in (1, -1):
            row = ql.row(ql.cursor + delta)
            if row is not None:
                keys.append((row.qid, self.phase))
        if self.detail is not None and self.phase in phases:
            i = phases.index(self.phase)
            for delta in (1, -1):
                keys.append((self.detail.qid, phases[(i + delta) % len(phases)]))
        keys = [k for k in keys if not self.session.cached(*k)]
        if keys:
            self._prefetch_worker(keys)

    @work(thread=True, exclusive=True, group="prefetch")
    def _prefetch_worker(self, keys: list[tuple[str, str]]) -> None:
        worker = get_current_worker()
        for key in keys:
            if worker.is_cancelled:
                return
            try:
                self.session.detail(*key)
            except Exception:  # a prefetch failure surfaces when the record is really asked for
                return

    def _finish_move(self) -> None:
        if self._move is not None:
            kind, t0 = self._move
            self._move = None
            self.timings[kind].append(time.perf_counter() - t0)

    # -- status --------------------------------------------------------------

    def _update_title(self) -> None:
        s = self.session
        t = Text("ledgerscope · ", style="bold")
        t.append(safe(s.ledger.name))
        t.append(f" · candidate arm {safe(s.arms['candidate'].name)!r}")
        if "baseline" in s.arms:
            t.append(f" vs baseline arm {safe(s.arms['baseline'].name)!r}")
            if s.baseline_ledger:
                t.append(f" ({safe(s.baseline_ledger.name)})")
        self.query_one("#title", Static).update(t)

    def _update_list_header(self) -> None:
        arm = self.session.arms[self.role].name
        t = Text(f" {self.count} of {self.total} questions · {safe(arm)}", no_wrap=True, overflow="ellipsis")
        phases = self.session.phases
        ql = self.query_one(QueryList)
        width = ql.scrollable_content_region.width or ql.size.width
        if phases and all(len(p) == 1 for p in phases) and width > len(phases) + 12:
            # the labels stand over their glyph columns (the strip ends 3 columns before the step)
            strip_at = width - 3 - len(phases)
            t.append("\n" + "  qid".ljust(strip_at) + "".join(safe(p) for p in phases) + " st", style="dim")
        else:
            t.append("\n  qid · phases " + " ".join(safe(p) for p in phases), style="dim")
        self.query_one("#list-header", Static).update(t)

    def _update_status(self) -> None:
        if not self.is_mounted:
            return
        phases = self.session.phases
        i = phases.index(self.phase) + 1 if self.phase in phases else 0
        t = Text(no_wrap=True, overflow="ellipsis")
        if self._busy:
            t.append("⟳ " + ", ".join(sorted(self._busy)) + "… ", style="bold")
        t.append(
            f"phase {safe(self.phase)} ({i}/{len(phases)}) · arm {safe(self.session.arms[self.role].name)}"
        )
        if self.compare:
            t.append(" · compare")
        if self.search_text:
            t.append(f" · /{safe(self.search_text)}: {len(self.matches)} match(es)")
        desc = self.filters.describe()
        t.append(f" · filter: {safe(desc)}" if desc else " · no filter")
        self.query_one("#status", Static).update(t, layout=False)
