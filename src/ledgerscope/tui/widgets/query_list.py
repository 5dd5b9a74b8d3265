"""The questions list: a Line-API ``ScrollView`` that renders only the visible rows.

Rows come in pages (:data:`PAGE_SIZE` questions) fetched from DuckDB by the
app in a worker; a row whose page is not here yet shows a placeholder and
asks for the page (:class:`QueryList.NeedPage`). Nothing here touches the
database, so the list paints the same whether the ledger has ten questions
or a million.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from ledgerscope.common.safe_text import safe, safe_line
from ledgerscope.tui.model import MISSING_GLYPH, ListRow, opaque_id, verdict_glyph
from ledgerscope.tui.render import VERDICT_STYLE, reversal_mark

PAGE_SIZE = 100
MAX_PAGES = 40
_DIM = Style(dim=True)
_REVERSE = Style(reverse=True)
#: rendered rows kept: a screen's rows at every phase of a large sweep
MAX_STRIPS = 1200


class QueryList(ScrollView, can_focus=True, inherit_bindings=False):
    """One line per question: cursor, reversal mark, qid, segment, per-phase glyphs, step."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "querylist--cursor",
        "querylist--match",
        "querylist--placeholder",
    }
    DEFAULT_CSS = """
    QueryList { background: $surface; }
    QueryList > .querylist--cursor { background: $primary 40%; text-style: bold; }
    QueryList:focus > .querylist--cursor { background: $primary 70%; text-style: bold; }
    QueryList > .querylist--match { text-style: bold underline; }
    QueryList > .querylist--placeholder { color: $text-muted; }
    """

    @dataclass
    class NeedPage(Message):
        page: int
        generation: int

    class Scrolled(Message):
        """The visible window moved (the phase grid follows it)."""

    @dataclass
    class CursorMoved(Message):
        index: int
        row: ListRow | None

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.total = 0
        self.cursor = 0
        self.generation = 0
        self.role = "candidate"
        self.phases: tuple[str, ...] = ()
        self.phase: str | None = None
        self.matches: set[int] = set()
        self.opening = False  # the ledger is being opened: say so on the first line
        self.palette: dict[str, Style] = {}
        self._pages: OrderedDict[int, list[ListRow]] = OrderedDict()
        self._requested: set[int] = set()
        self._strips: OrderedDict[tuple, Strip] = OrderedDict()

    # -- data --------------------------------------------------------------

    def reset(self, total: int, generation: int, first_page: list[ListRow], cursor: int = 0) -> None:
        self.total = total
        self.generation = generation
        self._pages.clear()
        self._requested.clear()
        self._pages[0] = first_page
        self.matches = set()
        self.virtual_size = Size(self.size.width, total)
        self.cursor = min(max(cursor, 0), max(total - 1, 0))
        self._scroll_to_cursor()
        self.invalidate()

    def set_page(self, page: int, rows: list[ListRow], generation: int) -> None:
        if generation != self.generation:
            return
        self._requested.discard(page)
        self._pages[page] = rows
        while len(self._pages) > MAX_PAGES:
            oldest = next(iter(self._pages))
            if oldest == self.cursor // PAGE_SIZE:
                self._pages.move_to_end(oldest)
                continue
            self._pages.popitem(last=False)
        self.invalidate()

    def row(self, index: int) -> ListRow | None:
        if not 0 <= index < self.total:
            return None
        page = self._pages.get(index // PAGE_SIZE)
        if page is None:
            self._request(index // PAGE_SIZE)
            return None
        i = index % PAGE_SIZE
        return page[i] if i < len(page) else None

    def _request(self, page: int) -> None:
        if page in self._requested:
            return
        self._requested.add(page)
        self.post_message(self.NeedPage(page, self.generation))

    @property
    def current(self) -> ListRow | None:
        return self.row(self.cursor) if self.total else None

    # -- movement ----------------------------------------------------------

    def move_to(self, index: int) -> None:
        if not self.total:
            return
        index = min(max(index, 0), self.total - 1)
        if index == self.cursor:
            return
        old, self.cursor = self.cursor, index
        y = round(self.scroll_y)
        self._scroll_to_cursor()
        if round(self.scroll_y) == y:  # only the two rows whose cursor mark changed
            self.refresh_line(old)
            self.refresh_line(index)
        else:
            self.refresh()
        self.post_message(self.CursorMoved(index, self.row(index)))

    def invalidate(self) -> None:
        """Forget the rendered rows (the arm, palette or matches changed) and redraw."""
        self._strips.clear()
        self.refresh()

    def show_phase(self, phase: str) -> None:
        """Mark ``phase`` in every row: rendered rows are kept per phase, so moving back and forth
        between phases redraws from them."""
        if phase != self.phase:
            self.phase = phase
            self.refresh()

    @property
    def page_height(self) -> int:
        return max(1, self.scrollable_content_region.height)

    def _scroll_to_cursor(self) -> None:
        height = self.page_height
        y = round(self.scroll_y)
        if self.cursor < y:
            self.scroll_to(y=self.cursor, animate=False, immediate=True)
        elif self.cursor >= y + height:
            self.scroll_to(y=self.cursor - height + 1, animate=False, immediate=True)

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        if round(old_value) != round(new_value):
            self.post_message(self.Scrolled())

    def on_resize(self, event: events.Resize) -> None:
        self.virtual_size = Size(event.size.width, self.total)
        self._scroll_to_cursor()

    def on_click(self, event: events.Click) -> None:
        self.move_to(round(self.scroll_y) + event.y)
        self.focus()

    # -- rendering ---------------------------------------------------------

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width or self.size.width
        index = round(self.scroll_y) + y
        if index >= self.total:
            if self.opening and y == 0:
                text = Text(
                    "  ⟳ opening the ledger…", style=self.get_component_rich_style("querylist--placeholder")
                )
                strip = Strip(list(text.render(self.app.console))).crop_extend(0, width, self.rich_style)
                return strip.apply_style(self.rich_style)
            return Strip.blank(width, self.rich_style)
        row = self.row(index)
        key = (index, width, index == self.cursor, index in self.matches, self.phase)
        if row is not None and key in self._strips:
            return self._strips[key]
        if row is None:
            placeholder = self.get_component_rich_style("querylist--placeholder")
            pieces: list[tuple[str, Style | None]] = [(f"  {MISSING_GLYPH} loading…", placeholder)]
        else:
            pieces = self.row_pieces(row, width)
        if index in self.matches:
            first, style = pieces[0]
            pieces[0] = (first[:1], (style or Style()) + self.get_component_rich_style("querylist--match"))
            if first[1:]:
                pieces.insert(1, (first[1:], style))
        base = self.rich_style
        if index == self.cursor:
            base = base + self.get_component_rich_style("querylist--cursor")
        strip = Strip([Segment(t, s) for t, s in pieces]).crop_extend(0, width, base).apply_style(base)
        if row is not None:
            self._strips[key] = strip
            while len(self._strips) > MAX_STRIPS:
                self._strips.popitem(last=False)
        return strip

    def row_text(self, row: ListRow, width: int) -> Text:
        """The row as it is drawn (without the cursor's and a match's highlight)."""
        return Text.assemble(*self.row_pieces(row, width), no_wrap=True, overflow="ellipsis")

    def row_pieces(self, row: ListRow, width: int) -> list[tuple[str, Style | None]]:
        """The row's text in styled pieces, drawn as segments (no rich ``Text`` to lay out: a phase move
        redraws every visible row)."""
        cells = row.cells.get(self.role, {})
        n = len(self.phases)
        fixed = 2 + 2 + n + 1 + 3  # marks, glyph strip, step
        # the segment shows when the qid keeps at least 16 columns
        seg_w = 14 if width - fixed - 15 >= 16 else (10 if width - fixed - 11 >= 16 else 0)
        qid_w = max(6, width - fixed - (seg_w + 1 if seg_w else 0))
        out: list[tuple[str, Style | None]] = [
            ("▶" if row.ord == self.cursor else " ", None),
            (reversal_mark(row, self.role) + " ", None),
        ]
        if opaque_id(row.qid) and row.question:  # an id that says nothing: the question's start beside it
            qid = safe(row.qid)
            out.append((qid[:qid_w], None))
            if len(qid) + 2 < qid_w:
                out.append((" " + _fit(safe_line(row.question), qid_w - len(qid) - 1), _DIM))
            else:
                out.append((" " * max(0, qid_w - len(qid)), None))
            out.append((" ", None))
        else:
            out.append((_fit(safe(row.qid), qid_w) + " ", None))
        if seg_w:
            out.append((_fit(safe(row.segment), seg_w) + " ", _DIM))
        for p in self.phases:
            cell = cells.get(p)
            glyph = verdict_glyph(cell.verdict if cell else None)
            style = self.palette.get(
                VERDICT_STYLE.get(cell.verdict if cell and cell.verdict else "", "v-muted")
            )
            if p == self.phase:
                style = (style or Style()) + _REVERSE
            out.append((glyph, style))
        cell = cells.get(self.phase) if self.phase is not None else None
        step = "" if cell is None or cell.step is None else str(cell.step)
        out.append((f" {step:>2}", None))
        return out


def _fit(s: str, width: int) -> str:
    if len(s) > width:
        return s[: max(0, width - 1)] + "…"
    return s.ljust(width)
