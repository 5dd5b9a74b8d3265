"""The actions of ``ledgerscope open`` (what the keys and the command palette do).

A mixin of :class:`ledgerscope.tui.app.LedgerscopeApp`; every action has a
binding with a stable id in ``LedgerscopeApp.BINDINGS`` and a command-palette
entry (:meth:`ActionsMixin.get_system_commands`).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from functools import partial
from pathlib import Path

from textual import work
from textual.app import SystemCommand
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Input, TabbedContent

from ledgerscope.common.safe_text import safe
from ledgerscope.tui import messages as msg
from ledgerscope.tui.model import Filters
from ledgerscope.tui.panes import TABS
from ledgerscope.tui.render_source import SOURCE_STAGES
from ledgerscope.tui.widgets.query_list import QueryList

NARROW_WIDTH = 100


class ActionsMixin:
    """Key and palette actions; search, quick filters, export and re-run dialogs."""

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
        ql.invalidate()
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

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "filterbar":
            # the bar closes when the predicate is valid, and stays open under its error otherwise
            f = self.filters
            self._rebuild_list(Filters(event.value, f.segment, f.step, f.verdict, f.reversal))
        elif event.input.id == "search":
            self._search_submitted(event)

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
        ql.invalidate()
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
        from ledgerscope.tui.screens.filters import FilterScreen

        def apply(result: Filters | None) -> None:
            if result is not None:
                self._rebuild_list(result)

        self.push_screen(FilterScreen(self.filters, self.choices or {}), apply)

    def action_help(self) -> None:
        from ledgerscope.tui.screens.help import HelpScreen

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
        from ledgerscope.tui.screens.export import ExportScreen

        arm = self.session.arms[self.role]
        self.push_screen(ExportScreen(self.session, self.role, arm.ledger, self.predicate))

    def action_rerun(self) -> None:
        from ledgerscope.tui.screens.rerun import RerunScreen

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

    @work(group="rerun")
    async def _rerun_worker(self, ledger: Path, key: tuple[str, str, str]) -> None:
        # In a child process, not a thread: importing and loading the model holds the GIL for
        # up to half a second at a time, which would freeze the UI (scripts/bench_tui_load.py).
        import asyncio
        import json
        import sys

        from ledgerscope.pipeline.rerun import RerunDiff

        arm, qid, phase = key
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "ledgerscope.cli.main", "rerun", str(ledger),
            f"--arm={arm}", f"--qid={qid}", f"--phase={phase}", "--json",
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        try:
            out, err = await proc.communicate()
        except asyncio.CancelledError:  # the app quits: do not leave the child running
            proc.kill()
            raise
        text = out.decode("utf-8", "replace")
        start = 0 if text.startswith("{") else text.rfind("\n{") + 1
        try:
            data = json.loads(text[start:])
            diff = RerunDiff(arm, qid, phase, differences=data["differences"])
        except (ValueError, KeyError, TypeError):  # shown in the dialog; the ledger is only read
            lines = err.decode("utf-8", "replace").strip().splitlines()
            error = "\n".join(lines[-5:]) or f"re-run exited with status {proc.returncode}"
            self.post_message(msg.RerunDone(key, [], None, error))
            return
        self.post_message(msg.RerunDone(key, diff.lines(), diff.identical))

    def on_rerun_done(self, m: msg.RerunDone) -> None:
        self._set_busy("rerun", False)
        self.reruns[m.key] = m
        self._show_rerun(m)
        state = "failed" if m.error else ("identical" if m.identical else "differs")
        self.notify(f"re-run {safe(' / '.join(m.key))}: {state}", markup=False)

    def _show_rerun(self, m: msg.RerunDone) -> None:
        from ledgerscope.tui.screens.rerun import RerunScreen

        for screen in self.screen_stack:
            if isinstance(screen, RerunScreen) and screen.key == m.key:
                screen.show_result(m, self.palette)

    # -- command palette -----------------------------------------------------

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)  # type: ignore[misc]
        keymap = getattr(self, "_keymap", {}) or {}
        for b in self.BINDINGS:
            if isinstance(b, Binding) and b.id and b.action not in ("quit", "command_palette"):
                keys = keymap.get(b.id, b.key)
                yield SystemCommand(
                    b.description, f"{b.id} · keys: {keys}", partial(self.run_action, b.action)
                )
