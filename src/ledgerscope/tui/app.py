"""``ledgerscope open``: browse a ledger by question, phase and arm (Textual app).

All DuckDB work runs in thread workers (:mod:`.data`), results come back as
messages (:mod:`.messages`); the panes render ``rich.text.Text`` built by
:mod:`.render`. Keys have stable binding ids that a keymap file can remap
(:mod:`.keymap`); every action is also in the command palette.
"""

from __future__ import annotations

import gc
import io
import os
import threading
import time
from collections.abc import Iterable
from functools import partial
from pathlib import Path

from rich.text import Text
from textual import on, work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Input, Static, TabbedContent, TabPane
from textual.worker import get_current_worker

from ..errors import LedgerscopeError
from ..safe_text import safe
from . import messages as msg
from .data import Filters, LedgerSession
from .render import (
    SOURCE_STAGES,
    answer_text,
    compare_texts,
    context_text,
    diagnosis_text,
    grid_caption,
    make_palette,
    source_text,
    stats_text,
)
from .widgets.phase_grid import PhaseGrid
from .widgets.query_list import PAGE_SIZE, QueryList

_PROCESS_T0 = time.perf_counter()
NARROW_WIDTH = 100
TABS = ("grid", "source", "context", "answer", "diagnosis", "stats")


def process_start() -> float:
    """perf_counter() value of the process start: ``LEDGERSCOPE_T0`` (epoch seconds) if set."""
    env = os.environ.get("LEDGERSCOPE_T0")
    if env:
        try:
            return time.perf_counter() - (time.time() - float(env))
        except ValueError:
            pass
    return _PROCESS_T0


class TextPane(VerticalScroll):
    """A scrolling pane holding one Static (rich Text, never markup)."""

    def compose(self) -> ComposeResult:
        yield Static(Text(""), classes="pane-body")

    def show(self, renderable) -> None:
        self.renderable = renderable
        self.query_one(Static).update(renderable)

    @property
    def text(self) -> str:
        """What the pane shows, as plain text (tests, screen readers)."""
        renderable = getattr(self, "renderable", None)
        if renderable is None:
            return ""
        if isinstance(renderable, Text):
            return renderable.plain
        from rich.console import Console

        console = Console(width=max(40, self.size.width or 100), color_system=None, file=io.StringIO(),
                          legacy_windows=False)
        with console.capture() as capture:
            console.print(renderable)
        return capture.get()


class LedgerscopeApp(App):
    CSS_PATH = "app.tcss"
    TITLE = "ledgerscope"
    ENABLE_COMMAND_PALETTE = True
    AUTO_FOCUS = "#queries"
    BINDINGS = [
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

    def __init__(self, session: LedgerSession, *, rule: str | Path | None = None, theme: str | None = None,
                 n_resamples: int = 2000, tune_gc: bool = True) -> None:
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
        from .themes import DEFAULT_THEME, load_themes

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
        yield Input(id="filterbar", placeholder="DuckDB predicate, as export --where: step = 8 AND NOT support_packed")
        yield Static(id="filter-error")
        yield Static(id="status")
        yield Footer()

    def on_mount(self) -> None:
        from .keymap import load_keymap

        keymap, problems = load_keymap(self.binding_ids())
        if keymap:
            self.set_keymap(keymap)
        for p in problems + self._theme_problems:
            self.notify(safe(p), severity="warning", timeout=8, markup=False)
        self.theme_changed_signal.subscribe(self, lambda _theme: self._on_theme_changed())
        self._on_theme_changed()
        ql = self.query_one(QueryList)
        ql.phases = self.session.phases
        ql.phase = self.phase
        ql.role = self.role
        ql.loading = True
        ql.focus()
        self._update_title()
        self._apply_layout()
        self._set_busy("open", True)
        self._open_worker()

    def binding_ids(self) -> list[str]:
        return [b.id for b in self.BINDINGS if isinstance(b, Binding) and b.id]

    def _on_theme_changed(self) -> None:
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
        ql.refresh()
        self._refresh_panes(all_panes=True)

    def on_resize(self) -> None:
        self._apply_layout()

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
        except LedgerscopeError as exc:
            self.post_message(msg.ListFailed(str(exc), opening=True))
            return
        self._build_list_worker_body(self.filters, None)
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
        ql.loading = False
        ql.role = m.role
        first_page = (m.cursor // PAGE_SIZE)
        ql.reset(m.count, self._gen, m.rows if first_page == 0 else [], m.cursor)
        if first_page:
            ql.set_page(first_page, m.rows, self._gen)
        self.query_one("#filter-error").display = False
        self._set_busy("open", False)
        self._set_busy("list", False)
        self._update_list_header()
        if self.timings["first_list"] is None:
            self.call_after_refresh(self._mark_first_list)
        if self.focused is None:
            ql.focus()
        self._request_detail()

    def _mark_first_list(self) -> None:
        if self.timings["first_list"] is None:
            self.timings["first_list"] = time.perf_counter() - self._t0
            if self.tune_gc:
                # the ledger's long-lived objects leave the collector's view: no 50 ms pauses while moving
                gc.collect()
                gc.freeze()

    def on_list_failed(self, m: msg.ListFailed) -> None:
        self._set_busy("open", False)
        self._set_busy("list", False)
        self.query_one(QueryList).loading = False
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

    # -- panes ---------------------------------------------------------------

    def _active_tab(self) -> str:
        return self.query_one(TabbedContent).active or "grid"

    @on(TabbedContent.TabActivated)
    def _tab_activated(self, event: TabbedContent.TabActivated) -> None:
        tab = event.pane.id or ""
        if tab != "compare":
            self._previous_tab = tab
        self.compare = tab == "compare" or (self.compare and tab == "grid")
        if tab == "stats":
            self._start_stats()
        self._refresh_panes()
        self._update_status()

    def _refresh_panes(self, all_panes: bool = False) -> None:
        if not self.is_mounted:
            return
        tabs = list(TABS) + ["compare"] if all_panes else [self._active_tab()]
        for tab in tabs:
            self._render_pane(tab)

    def _render_pane(self, tab: str) -> None:
        p = self.palette
        rd = self.detail.arms.get(self.role) if self.detail is not None else None
        if tab == "grid":
            self._configure_grid()
        elif tab == "stats":
            arms = {r: self.session.arms[r].name for r in self.session.roles}
            self.query_one("#stats-view", TextPane).show(
                stats_text(self.summaries, arms, self.session.phases, self.comparison, self.decision,
                           self.stats_status, p))
        elif tab == "compare":
            if self.detail is None:
                return
            texts = compare_texts(self.detail.arms, p)
            for role in ("candidate", "baseline"):
                self.query_one(f"#compare-{role}", TextPane).show(
                    texts.get(role, Text("no baseline arm", style=p.get("muted"))))
        elif rd is None:
            return
        elif tab == "source":
            self.query_one("#source-view", TextPane).show(source_text(rd, self.source_stage, p))
        elif tab == "context":
            self.query_one("#context-view", TextPane).show(context_text(rd, p))
        elif tab == "answer":
            self.query_one("#answer-view", TextPane).show(answer_text(rd, p))
        elif tab == "diagnosis":
            surv = self.survival_rows.get(self.role)
            if surv is None:
                self._survival_worker(self.role)
            row = (surv or {}).get(self.phase)
            self.query_one("#diagnosis-view", TextPane).show(diagnosis_text(rd, row, p))

    def _configure_grid(self) -> None:
        roles = self.session.roles
        worst = {r: _worst_column(self.summaries.get(r, {})) for r in roles}
        arms = {r: self.session.arms[r].name for r in roles}
        settings = {"phases": self.session.phases, "phase": self.phase, "role": self.role, "roles": roles,
                    "compare": self.compare, "worst_columns": worst, "palette": self.palette}
        grid = self.query_one(PhaseGrid)
        grid.list = self.query_one(QueryList)
        if any(getattr(grid, k) != v for k, v in settings.items()):
            grid.configure(**settings)
            self.query_one("#grid-caption", Static).update(grid_caption(self.role, arms, self.compare, worst))
        self._follow_grid()

    def _follow_grid(self) -> None:
        ql = self.query_one(QueryList)
        self.query_one(PhaseGrid).follow(round(ql.scroll_y), ql.cursor)

    @work(thread=True, exclusive=True, group="survival")
    def _survival_worker(self, role: str) -> None:
        self.post_message(msg.SurvivalLoaded(role, self.session.survival(role)))

    def on_survival_loaded(self, m: msg.SurvivalLoaded) -> None:
        self.survival_rows[m.role] = m.rows
        if self._active_tab() == "diagnosis":
            self._refresh_panes()

    def _start_stats(self) -> None:
        if self.comparison is not None or self.stats_running:
            return
        if "baseline" not in self.session.arms:
            self.stats_status = "paired comparison: no baseline arm (open with --baseline or --baseline-arm)"
            return
        self.stats_running = True
        n = "the rule's" if self.rule else str(self.n_resamples)
        self.stats_status = f"⟳ computing the paired bootstrap ({n} resamples)…"
        self._set_busy("stats", True)
        self._stats_worker()

    @work(thread=True, exclusive=True, group="stats")
    def _stats_worker(self) -> None:
        try:
            comparison, decision = self.session.compare(self.n_resamples, 0, self.rule)
        except Exception as exc:  # a rule problem or a mismatch between arms: shown in the pane
            self.post_message(msg.StatsLoaded(None, None, f"{type(exc).__name__}: {exc}"))
            return
        self.post_message(msg.StatsLoaded(comparison, decision))

    def on_stats_loaded(self, m: msg.StatsLoaded) -> None:
        self.stats_running = False
        self._set_busy("stats", False)
        self.comparison, self.decision = m.comparison, m.decision
        if m.error:
            self.stats_status = "✗ " + m.error
        self._refresh_panes()

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
        t = Text(f"{self.count} of {self.total} questions · {safe(arm)}", no_wrap=True, overflow="ellipsis")
        t.append("\n  qid / phases ", style="dim")
        t.append(" ".join(safe(p) for p in self.session.phases), style="dim")
        self.query_one("#list-header", Static).update(t)

    def _update_status(self) -> None:
        if not self.is_mounted:
            return
        phases = self.session.phases
        i = phases.index(self.phase) + 1 if self.phase in phases else 0
        t = Text(no_wrap=True, overflow="ellipsis")
        if self._busy:
            t.append("⟳ " + ", ".join(sorted(self._busy)) + "… ", style="bold")
        t.append(f"phase {safe(self.phase)} ({i}/{len(phases)}) · arm {safe(self.session.arms[self.role].name)}")
        if self.compare:
            t.append(" · compare")
        if self.search_text:
            t.append(f" · /{safe(self.search_text)}: {len(self.matches)} match(es)")
        desc = self.filters.describe()
        t.append(f" · filter: {safe(desc)}" if desc else " · no filter")
        self.query_one("#status", Static).update(t, layout=False)

    # -- actions -------------------------------------------------------------

    def _start_move(self, kind: str) -> None:
        """Time this move until the panes show its record (``timings[kind]``); a no-op move is not timed."""
        self._move = (kind, time.perf_counter())
        if kind == "question":
            self.call_later(self._check_move, self.query_one(QueryList).cursor)

    def action_move(self, delta: int) -> None:
        self._start_move("question")
        self.query_one(QueryList).move(delta)

    def _check_move(self, before: int) -> None:
        if self.query_one(QueryList).cursor == before:
            self._move = None  # nothing moved: nothing to time

    def action_go_top(self) -> None:
        self._start_move("question")
        self.query_one(QueryList).move_to(0)

    def action_go_bottom(self) -> None:
        self._start_move("question")
        ql = self.query_one(QueryList)
        ql.move_to(ql.total - 1)

    def action_page(self, direction: int) -> None:
        self._start_move("question")
        ql = self.query_one(QueryList)
        ql.move(direction * ql.page_height)

    def action_phase(self, delta: int) -> None:
        phases = self.session.phases
        if not phases:
            return
        i = phases.index(self.phase) if self.phase in phases else 0
        self.phase = phases[(i + delta) % len(phases)]
        self._start_move("phase")
        ql = self.query_one(QueryList)
        ql.phase = self.phase
        ql.refresh()
        self._update_status()
        self._request_detail()
        if self._active_tab() == "grid":
            self._refresh_panes()

    def action_pane(self, number: int) -> None:
        if number == 1:
            self._show_list = True
            self._apply_layout()
            self.query_one(QueryList).focus()
            return
        self._show_list = False
        self._apply_layout()
        self.query_one(TabbedContent).active = TABS[number - 2]

    def action_toggle_compare(self) -> None:
        tabs = self.query_one(TabbedContent)
        if tabs.active == "compare":
            self.compare = False
            tabs.active = self._previous_tab if self._previous_tab != "compare" else "grid"
        else:
            self.compare = True
            tabs.active = "compare"
        if self.size.width < NARROW_WIDTH:
            self._show_list = False
            self._apply_layout()
        self._update_status()

    def action_source_stage(self) -> None:
        i = SOURCE_STAGES.index(self.source_stage)
        self.source_stage = SOURCE_STAGES[(i + 1) % len(SOURCE_STAGES)]
        if self._active_tab() != "source":
            self.query_one(TabbedContent).active = "source"
        self._refresh_panes()

    def action_stats(self) -> None:
        self.action_pane(TABS.index("stats") + 2)
        self._start_stats()
        self._refresh_panes()

    def action_toggle_arm(self) -> None:
        if len(self.session.roles) < 2:
            self.notify("only one arm in this session", markup=False)
            return
        self.role = "baseline" if self.role == "candidate" else "candidate"
        self._rebuild_list(self.filters)
        self.choices = {}
        self._refresh_panes()

    def action_toggle_reversal(self) -> None:
        f = self.filters
        self._rebuild_list(Filters(f.where, f.segment, f.step, f.verdict, not f.reversal))

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
        self.query_one(QueryList).focus()

    @on(Input.Submitted, "#filterbar")
    def _filter_submitted(self, event: Input.Submitted) -> None:
        f = self.filters
        self._rebuild_list(Filters(event.value, f.segment, f.step, f.verdict, f.reversal))
        event.input.display = False
        self.query_one(QueryList).focus()

    @on(Input.Submitted, "#search")
    def _search_submitted(self, event: Input.Submitted) -> None:
        event.input.display = False
        self.query_one(QueryList).focus()
        self.search_text = event.value.strip()
        if not self.search_text:
            self.matches = []
            self.query_one(QueryList).matches = set()
            self._update_status()
            return
        self._search_worker(self.search_text)

    @work(thread=True, exclusive=True, group="search")
    def _search_worker(self, text: str) -> None:
        self.post_message(msg.SearchDone(text, self.session.search(self.role, text)))

    def on_search_done(self, m: msg.SearchDone) -> None:
        self.matches = m.matches
        ql = self.query_one(QueryList)
        ql.matches = set(m.matches)
        ql.refresh()
        self._update_status()
        if not m.matches:
            self.notify(f"no question matches {safe(m.text)!r}", markup=False)
            return
        self.action_search_next(1, include_current=True)

    def action_search_next(self, direction: int, include_current: bool = False) -> None:
        if not self.matches:
            return
        ql = self.query_one(QueryList)
        cur = ql.cursor
        if direction > 0:
            after = [i for i in self.matches if i > cur or (include_current and i == cur)]
            target = after[0] if after else self.matches[0]
        else:
            before = [i for i in self.matches if i < cur]
            target = before[-1] if before else self.matches[-1]
        self._start_move("question")
        ql.move_to(target)

    def action_quick_filters(self) -> None:
        from .screens.filters import FilterScreen

        def apply(result: Filters | None) -> None:
            if result is not None:
                self._rebuild_list(result)

        self.push_screen(FilterScreen(self.filters, self.choices or {}), apply)

    def action_help(self) -> None:
        from .screens.help import HelpScreen

        self.push_screen(HelpScreen(self.binding_rows(), self.palette))

    def binding_rows(self) -> list[tuple[str, str, str]]:
        """(binding id, keys in effect, description) for every binding."""
        rows = []
        keymap = getattr(self, "_keymap", {}) or {}
        for b in self.BINDINGS:
            if isinstance(b, Binding) and b.id:
                rows.append((b.id, keymap.get(b.id, b.key), b.description))
        return rows

    def action_export(self) -> None:
        from .screens.export import ExportScreen

        arm = self.session.arms[self.role]
        self.push_screen(ExportScreen(self.session, self.role, arm.ledger, self.predicate))

    def action_rerun(self) -> None:
        from .screens.rerun import RerunScreen

        row = self.query_one(QueryList).current
        if row is None:
            return
        arm = self.session.arms[self.role]
        key = (arm.name, row.qid, self.phase)
        self.push_screen(RerunScreen(key))
        if key in self.reruns:
            self.call_after_refresh(self._show_rerun, self.reruns[key])
            return
        self._set_busy("rerun", True)
        self._rerun_worker(arm.ledger, key)

    @work(thread=True, group="rerun")
    def _rerun_worker(self, ledger: Path, key: tuple[str, str, str]) -> None:
        from ..pipeline.rerun import rerun_record

        try:
            diff = rerun_record(ledger, *key)
        except Exception as exc:  # shown in the dialog; the ledger is only read
            self.post_message(msg.RerunDone(key, [], None, f"{type(exc).__name__}: {exc}"))
            return
        self.post_message(msg.RerunDone(key, diff.lines(), diff.identical))

    def on_rerun_done(self, m: msg.RerunDone) -> None:
        self._set_busy("rerun", False)
        self.reruns[m.key] = m
        self._show_rerun(m)
        state = "failed" if m.error else ("identical" if m.identical else "differs")
        self.notify(f"re-run {safe(' / '.join(m.key))}: {state}", markup=False)

    def _show_rerun(self, m: msg.RerunDone) -> None:
        from .screens.rerun import RerunScreen

        for screen in self.screen_stack:
            if isinstance(screen, RerunScreen) and screen.key == m.key:
                screen.show_result(m, self.palette)

    # -- command palette -----------------------------------------------------

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        keymap = getattr(self, "_keymap", {}) or {}
        for b in self.BINDINGS:
            if isinstance(b, Binding) and b.id and b.action not in ("quit", "command_palette"):
                keys = keymap.get(b.id, b.key)
                yield SystemCommand(b.description, f"{b.id} · keys: {keys}", partial(self.run_action, b.action))


def _worst_column(summary: dict) -> str | None:
    vals = [(r["correct"], p) for p, r in summary.items() if r.get("correct") is not None]
    if not vals:
        return None
    low = min(v for v, _ in vals)
    if low == max(v for v, _ in vals):
        return None
    return next(p for v, p in vals if v == low)
