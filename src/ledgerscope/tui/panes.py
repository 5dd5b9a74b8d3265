"""The detail panes of ``ledgerscope open``: which pane shows what, rendered on demand.

A mixin of :class:`ledgerscope.tui.app.LedgerscopeApp` (split out to keep one
idea per file): only the active pane is redrawn when the record changes; the
others are drawn when they are shown. Survival counts and the paired
comparison are computed in thread workers the first time they are needed.
"""

from __future__ import annotations

import io

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static, TabbedContent

from ledgerscope.tui import messages as msg
from ledgerscope.tui.render import answer_text, compare_texts, diagnosis_text
from ledgerscope.tui.render_source import context_text, source_text
from ledgerscope.tui.render_summary import grid_caption, stats_text
from ledgerscope.tui.widgets.phase_grid import PhaseGrid
from ledgerscope.tui.widgets.query_list import QueryList

TABS = ("grid", "source", "context", "answer", "diagnosis", "stats")


class TextPane(VerticalScroll):
    """A scrolling pane holding one Static (rich Text, never markup)."""

    def compose(self) -> ComposeResult:
        yield Static(Text(""), classes="pane-body")

    def show(self, renderable, anchor: str | None = None) -> None:
        """Show ``renderable``; with ``anchor``, scroll so its first line holding it is in view."""
        self.renderable = renderable
        self.query_one(Static).update(renderable)
        if anchor is not None:
            self.call_after_refresh(self._scroll_to_anchor, anchor)

    def _scroll_to_anchor(self, anchor: str) -> None:
        renderable = getattr(self, "renderable", None)
        if not isinstance(renderable, Text):
            return
        from rich.console import Console

        width = self.scrollable_content_region.width or self.size.width or 80
        lines = renderable.wrap(Console(width=width, file=io.StringIO()), width)
        for i, line in enumerate(lines):
            plain = line.plain
            if anchor in plain and "⟪span⟫" not in plain:  # the legend names the marker too
                self.scroll_to(y=max(0, i - 2), animate=False)
                return

    @property
    def text(self) -> str:
        """What the pane shows, as plain text (tests, screen readers)."""
        renderable = getattr(self, "renderable", None)
        if renderable is None:
            return ""
        if isinstance(renderable, Text):
            return renderable.plain
        from rich.console import Console

        console = Console(
            width=max(40, self.size.width or 100), color_system=None, file=io.StringIO(), legacy_windows=False
        )
        with console.capture() as capture:
            console.print(renderable)
        return capture.get()


class PanesMixin:
    """Pane rendering and the workers behind the Diagnosis and Stats panes."""

    def _active_tab(self) -> str:
        return self.query_one(TabbedContent).active or "grid"

    def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
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
        tabs = [*TABS, "compare"] if all_panes else [self._active_tab()]
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
                stats_text(
                    self.summaries,
                    arms,
                    self.session.phases,
                    self.comparison,
                    self.decision,
                    self.stats_status,
                    p,
                )
            )
        elif tab == "compare":
            if self.detail is None:
                return
            texts = compare_texts(self.detail.arms, p)
            for role in ("candidate", "baseline"):
                self.query_one(f"#compare-{role}", TextPane).show(
                    texts.get(role, Text("no baseline arm", style=p.get("muted")))
                )
        elif rd is None:
            return
        elif tab == "source":
            # open at the first gold span: the cut between a rule and its qualifier is what one looks for
            self.query_one("#source-view", TextPane).show(source_text(rd, self.source_stage, p), anchor="⟪")
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
        settings = {
            "phases": self.session.phases,
            "phase": self.phase,
            "role": self.role,
            "roles": roles,
            "compare": self.compare,
            "worst_columns": worst,
            "palette": self.palette,
        }
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


def _worst_column(summary: dict) -> str | None:
    vals = [(r["correct"], p) for p, r in summary.items() if r.get("correct") is not None]
    if not vals:
        return None
    low = min(v for v, _ in vals)
    if low == max(v for v, _ in vals):
        return None
    return next(p for v, p in vals if v == low)
