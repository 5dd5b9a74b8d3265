"""What each detail pane shows, drawn from an explicit snapshot of the main screen's state,
and the workers that load what the panes show beyond the record.

Only the active pane is drawn when the record changes; the others are drawn
when they are shown (:meth:`ledgerscope.tui.screens.pane_drawing.PaneDrawing._refresh_panes`).
The text itself is built by :mod:`.render`, :mod:`.render_source` and
:mod:`.render_summary`; here it is put into the pane widgets.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Container, Horizontal
from textual.dom import DOMNode
from textual.widget import Widget
from textual.widgets import Static, TabbedContent, TabPane, Tabs

from ledgerscope.tui import messages as msg
from ledgerscope.tui.data import LedgerSession
from ledgerscope.tui.model import Detail, StatsState, worst_column
from ledgerscope.tui.render import Palette, answer_text, compare_texts, diagnosis_text
from ledgerscope.tui.render_source import context_text, source_text
from ledgerscope.tui.render_summary import grid_caption, question_noise_text, stats_text
from ledgerscope.tui.widgets.phase_grid import PhaseGrid
from ledgerscope.tui.widgets.query_list import QueryList
from ledgerscope.tui.widgets.text_pane import TextPane

#: the detail panes, keys 2-7 (1 is the questions list); ``c`` shows the compare pane
TABS = ("grid", "source", "context", "answer", "diagnosis", "stats")


class DetailPanes(Container):
    """``#detail``: the tabs 2-7 and the compare tab, composed by :meth:`build`, which the main screen
    calls right after it painted the questions list: the first frame is the list, the panes follow
    in the next (a key that needs them before then builds them first)."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.built = False
        self._ready = asyncio.Event()

    def compose(self) -> ComposeResult:
        if self.built:
            yield from compose_detail_panes()

    async def build(self) -> TabbedContent:
        """The panes, composed once (a second caller waits for the first); returns their TabbedContent."""
        if not self.built:
            self.built = True
            await self.recompose()
            # Tab moves between the list and the pane shown, not through the tab strip (1-7 pick tabs)
            self.query_one(Tabs).can_focus = False
            self._ready.set()
        await self._ready.wait()
        return self.query_one(TabbedContent)

    @property
    def tabs(self) -> TabbedContent | None:
        """The panes' TabbedContent once built (and mounted), else None."""
        found = self.query(TabbedContent)
        return found.first() if found else None


def compose_detail_panes() -> ComposeResult:
    """The tabs 2-7 and the compare tab. The grid, which the first screen shows, is composed here;
    every other pane's widgets are mounted when it is first drawn (:func:`mount_pane`), so the
    screen builds and styles only what it shows."""
    with TabbedContent(id="detail-tabs", initial="grid"):
        for i, name in enumerate(TABS, start=2):
            with TabPane(f"{i} {name.title()}", id=name):
                if name == "grid":  # Line API, aligned with the list: a move redraws two lines
                    yield Static(Text(""), id="grid-caption")
                    yield PhaseGrid(id="grid-view")
        yield TabPane("c Compare", id="compare")


def mount_pane(root: Widget, tab: str) -> None:
    """Mount pane ``tab``'s widgets unless they are there: ``#<tab>-view``, or for compare
    ``#compare-candidate`` and ``#compare-baseline``; each stable id is queryable at once."""
    pane = root.query_one(f"#{tab}", TabPane)
    if tab == "grid" or pane.children:
        return
    if tab == "compare":
        row = Horizontal(id="compare-row")
        pane.mount(row)  # in the DOM at once: its panes mount into it here, queryable at once too
        row.mount(TextPane(id="compare-candidate"), TextPane(id="compare-baseline"))
    else:
        pane.mount(TextPane(id=f"{tab}-view"))


@dataclass(frozen=True)
class PaneView:
    """The state the panes draw from (the main screen's reactives at one moment)."""

    session: LedgerSession
    detail: Detail | None
    role: str
    phase: str
    compare: bool
    palette: Palette
    summaries: dict
    survival: dict
    stats: StatsState
    source_stage: str


def with_unlocated(text, session: LedgerSession):
    """``text`` after the table of chunks the ingest could not place, per document with examples, when
    the ledger has any (its manifest says so; :mod:`ledgerscope.report.unlocated`)."""
    from rich.console import Group

    from ledgerscope.common.errors import LedgerscopeError
    from ledgerscope.ledger.verify import load_manifest
    from ledgerscope.report.unlocated import unlocated_table

    ref = session.arms.get("candidate")
    try:
        table = unlocated_table(load_manifest(ref.ledger)) if ref is not None else None
    except LedgerscopeError:
        table = None
    return text if table is None else Group(table, text)


def draw_pane(root: Widget, tab: str, view: PaneView) -> None:
    """Draw pane ``tab`` (found under ``root``) from ``view``."""
    p = view.palette
    rd = view.detail.arms.get(view.role) if view.detail is not None else None
    # the record a pane shows: a new one opens it at its top
    key = (view.detail.qid, view.detail.phase, view.role) if view.detail is not None else None
    mount_pane(root, tab)
    if tab == "grid":
        configure_grid(root, view)
    elif tab == "stats":
        arms = {r: view.session.arms[r].name for r in view.session.roles}
        st = view.stats
        text = stats_text(view.summaries, arms, view.session.phases, st.comparison, st.decision, st.status, p)
        root.query_one("#stats-view", TextPane).show(with_unlocated(text, view.session))
    elif tab == "compare":
        if view.detail is None:
            return
        texts = compare_texts(view.detail.arms, p)
        if noise := (view.stats.comparison or {}).get("noise"):  # --repeats: is this question noisy?
            for role, text in texts.items():
                text.append_text(question_noise_text(noise, role, view.detail.qid, p))
        for role in ("candidate", "baseline"):
            root.query_one(f"#compare-{role}", TextPane).show(
                texts.get(role, Text("no baseline arm", style=p.get("muted"))), key=key
            )
    elif rd is None:
        return
    elif tab == "source":
        # open at the first gold span: the cut between a rule and its qualifier is what one looks for
        root.query_one("#source-view", TextPane).show(
            source_text(rd, view.source_stage, p), anchor="⟪", key=(*key, view.source_stage)
        )
    elif tab == "context":
        root.query_one("#context-view", TextPane).show(context_text(rd, p), key=key)
    elif tab == "answer":
        root.query_one("#answer-view", TextPane).show(answer_text(rd, p), key=key)
    elif tab == "diagnosis":
        row = (view.survival.get(view.role) or {}).get(view.phase)
        root.query_one("#diagnosis-view", TextPane).show(diagnosis_text(rd, row, p), key=key)


def load_summaries(node: DOMNode, session: LedgerSession, role: str) -> None:
    """Per role and phase the rates the grid and Stats show, and the quick filters' choices for
    ``role``, in a thread worker; ``SummaryLoaded`` is posted to ``node``."""

    def load() -> None:
        summaries = {r: session.phase_summary(r) for r in session.roles}
        msg.post_if_current(node, msg.SummaryLoaded(summaries, session.choices(role)))

    node.run_worker(load, thread=True, exclusive=True, group="summary")


def load_survival(node: DOMNode, session: LedgerSession, role: str) -> None:
    """The role's stage survival counts, in a thread worker; ``SurvivalLoaded`` is posted to ``node``.
    One load per role at a time (a result is the role's, so one role's never supersedes another's)."""

    def load() -> None:
        msg.post_if_current(node, msg.SurvivalLoaded(role, session.survival(role)))

    node.run_worker(load, thread=True, exclusive=True, group=f"survival-{role}")


def load_comparison(
    node: DOMNode, session: LedgerSession, n_resamples: int, seed: int, rule: str | Path | None
) -> None:
    """The paired comparison (and with ``rule`` the release decision), in a thread worker;
    :class:`~.messages.StatsLoaded` to ``node``."""

    def load() -> None:
        try:
            comparison, decision = session.compare(n_resamples, seed, rule)
        except Exception as exc:  # a rule problem or a mismatch between arms: shown in the pane
            node.post_message(msg.StatsLoaded(None, None, f"{type(exc).__name__}: {exc}"))
            return
        node.post_message(msg.StatsLoaded(comparison, decision))

    node.run_worker(load, thread=True, exclusive=True, group="stats")


def configure_grid(root: Widget, view: PaneView) -> None:
    """Give the phase grid what its lines depend on (it redraws what changed), then follow the list."""
    roles = view.session.roles
    worst = {r: worst_column(view.summaries.get(r, {})) for r in roles}
    arms = {r: view.session.arms[r].name for r in roles}
    settings = {
        "phases": view.session.phases,
        "phase": view.phase,
        "role": view.role,
        "roles": roles,
        "compare": view.compare,
        "worst_columns": worst,
        "palette": view.palette,
    }
    grid = root.query_one(PhaseGrid)
    grid.list = root.query_one(QueryList)
    if grid.configure(**settings) - {"phase"}:  # the caption does not name the phase
        root.query_one("#grid-caption", Static).update(grid_caption(view.role, arms, view.compare, worst))
    follow_grid(root)


def follow_grid(root: Widget) -> None:
    """The grid shows the rows the list shows, with the same cursor (once the panes are built)."""
    ql = root.query_one(QueryList)
    for grid in root.query(PhaseGrid):
        grid.follow(round(ql.scroll_y), ql.cursor)
