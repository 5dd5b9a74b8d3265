"""The left panel: the questions list with its header, and the workers that fill it.

The list is built in DuckDB (``tui_list``) by a thread worker and shown a page
at a time; the panel applies each result to its :class:`QueryList`, then lets
the message (:class:`~ledgerscope.tui.messages.ListReady`, ``ListFailed``,
``PageLoaded``) bubble up to the screen, which keeps the browsing state.
"""

from __future__ import annotations

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from ledgerscope.common.errors import LedgerscopeError
from ledgerscope.common.safe_text import safe
from ledgerscope.tui import messages as msg
from ledgerscope.tui.data import LedgerSession
from ledgerscope.tui.model import Filters
from ledgerscope.tui.render import Palette
from ledgerscope.tui.render_summary import list_header_text
from ledgerscope.tui.widgets.query_list import PAGE_SIZE, QueryList


class QueriesPanel(Vertical):
    """``#left``: the list header and the questions list; builds the list, loads its pages, searches it."""

    def __init__(self, session: LedgerSession, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.session = session
        self._generation = 0  # of the list: pages of an older list are dropped
        self._header = ("candidate", 0, 0)  # (role, listed, total) shown in the header

    def compose(self) -> ComposeResult:
        yield Static(id="list-header")
        yield QueryList(id="queries")

    def on_mount(self) -> None:
        ql = self.query_one(QueryList)
        ql.phases = self.session.phases
        ql.opening = True

    def set_view(self, role: str, phase: str, palette: Palette) -> None:
        """What every row depends on: the arm whose glyphs are shown, the phase marked, the colours."""
        ql = self.query_one(QueryList)
        ql.role, ql.phase, ql.palette = role, phase, palette

    # -- building the list -------------------------------------------------

    @work(thread=True, exclusive=True, group="list")
    def load(self, role: str, filters: Filters, keep_qid: str | None = None, opening: bool = False) -> None:
        """In a worker: (open the ledger, then) the list of ``role`` under ``filters``, and the first
        page shown (the one holding ``keep_qid``)."""
        s = self.session
        if opening:
            try:
                s.open()
            except Exception as exc:  # a damaged ledger: say why on screen (q still quits)
                text = str(exc) if isinstance(exc, LedgerscopeError) else f"{type(exc).__name__}: {exc}"
                self.post_message(msg.ListFailed(text, opening=True))
                return
        try:
            count, predicate = s.build_list(role, filters)
            total = s.total_questions(role)
            cursor = (s.locate(role, keep_qid) or 0) if keep_qid is not None else 0
            rows = s.page(role, (cursor // PAGE_SIZE) * PAGE_SIZE, PAGE_SIZE)
        except LedgerscopeError as exc:  # a filter that does not evaluate: shown under the bar
            msg.post_if_current(self, msg.ListFailed(str(exc), typed=filters.where))
            return
        msg.post_if_current(self, msg.ListReady(0, count, total, predicate, rows, cursor, role, filters))

    def on_list_ready(self, m: msg.ListReady) -> None:
        self._generation += 1
        ql = self.query_one(QueryList)
        ql.opening = False
        ql.role = m.role
        first_page = m.cursor // PAGE_SIZE
        ql.reset(m.count, self._generation, m.rows if first_page == 0 else [], m.cursor)
        if first_page:
            ql.set_page(first_page, m.rows, self._generation)
        self._header = (m.role, m.count, m.total)
        self.show_header()

    def on_list_failed(self) -> None:
        self.query_one(QueryList).opening = False

    def show_header(self) -> None:
        role, count, total = self._header
        ql = self.query_one(QueryList)
        width = ql.scrollable_content_region.width or ql.size.width
        arm = self.session.arms[role].name
        header: Text = list_header_text(count, total, arm, self.session.phases, width)
        self.query_one("#list-header", Static).update(header)

    @work(thread=True, exclusive=True, group="search")
    def search(self, role: str, text: str) -> None:
        """In a worker: the list positions whose qid or question holds ``text``; ``SearchDone`` bubbles up."""
        msg.post_if_current(self, msg.SearchDone(text, self.session.search(role, text)))

    # -- pages -------------------------------------------------------------

    @on(QueryList.NeedPage)
    def _need_page(self, m: QueryList.NeedPage) -> None:
        m.stop()
        self._page_worker(self.query_one(QueryList).role, m.page, m.generation)

    @work(thread=True, group="page")
    def _page_worker(self, role: str, page: int, generation: int) -> None:
        try:
            rows = self.session.page(role, page * PAGE_SIZE, PAGE_SIZE)
        except Exception as exc:  # a page failing to load leaves placeholders; say why
            self.app.call_from_thread(self.notify, safe(str(exc)), severity="error", markup=False)
            return
        self.post_message(msg.PageLoaded(generation, page, rows))

    def on_page_loaded(self, m: msg.PageLoaded) -> None:
        self.query_one(QueryList).set_page(m.page, m.rows, m.generation)
