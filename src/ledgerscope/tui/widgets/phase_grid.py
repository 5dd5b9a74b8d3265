"""The phase grid: questions × phases, a Line-API widget aligned with the questions list.

It shows the same rows the list shows (the list's scroll window), so a cursor
move redraws two lines, and rows are cached as strips until the arms shown,
the phases or the palette change. The phase shown is marked in the header
only: a phase move redraws one line.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

from rich.style import Style
from rich.text import Text
from textual.strip import Strip
from textual.widget import Widget

from ledgerscope.tui.model import REVERSAL_GLYPH, WORST_GLYPH, worst_phase
from ledgerscope.tui.render import cell_text, lit

QID_W = 26  # at most; narrower when the phases need the room


class PhaseGrid(Widget):
    """Header, rule, then a line per list row: ▶ ↕ qid, per phase the verdict glyph + step (▼ worst)."""

    DEFAULT_CSS = "PhaseGrid { height: 1fr; width: 1fr; padding: 0 1; }"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.list = None  # the QueryList whose rows are shown
        self.phases: tuple[str, ...] = ()
        self.phase: str | None = None
        self.role = "candidate"
        self.roles: tuple[str, ...] = ("candidate",)
        self.compare = False
        self.worst_columns: dict[str, str | None] = {}
        self.palette: dict[str, Style] = {}
        self._top = 0
        self._cursor = 0
        self._strips: OrderedDict[tuple, Strip] = OrderedDict()

    def configure(self, **settings) -> set[str]:
        """Change what the lines depend on (phase, arms, compare, palette...) and redraw what changed:
        the header alone when only the phase did (rows do not mark it), else every line. Returns the
        names of the settings that changed."""
        changed = {k for k, v in settings.items() if getattr(self, k) != v}
        for k in changed:
            setattr(self, k, settings[k])
        if changed == {"phase"}:
            self.refresh_line(0)  # the header's strip is keyed by the phase
        elif changed:
            self._strips.clear()
            self.refresh()
        return changed

    def follow(self, top: int, cursor: int) -> None:
        """Track the list's scroll position and cursor, the cursor's row always on screen (the grid
        shows fewer rows than the list, or the list is hidden); redraw only what changed."""
        top = grid_top(top, cursor, self.size.height - 2)
        if top != self._top:
            self._top, self._cursor = top, cursor
            self.refresh()
            return
        old, self._cursor = self._cursor, cursor
        for index in {old, cursor}:
            y = index - self._top + 2
            if 2 <= y < self.size.height:
                self.refresh_line(y)

    def on_resize(self) -> None:
        """A new height: the cursor's row stays on screen."""
        self.follow(self._top, self._cursor)
        self.refresh()

    def refresh_line(self, y: int) -> None:
        from textual.geometry import Region

        self.refresh(Region(0, y, self.size.width, 1))

    @property
    def shown(self) -> list[str]:
        return list(self.roles) if self.compare else [self.role]

    def _cell_width(self) -> int:
        n = len(self.shown)
        return 4 * n + (n - 1)

    def render_line(self, y: int) -> Strip:
        width = self.content_region.width or self.size.width
        if y == 0:
            return self._strip(self._header, width, ("header", width, self.phase))
        if y == 1:
            rule = Text("─" * width, style=self.palette.get("muted"))
            return self._strip(lambda: rule, width, ("rule", width))
        index = self._top + y - 2
        row = self.list.row(index) if self.list is not None else None
        if row is None:
            return Strip.blank(width, self.rich_style)
        current = index == self._cursor
        return self._strip(lambda: self._row(row, current), width, (index, row.qid, width, current))

    def _strip(self, text: Callable[[], Text], width: int, key: tuple) -> Strip:
        """The line kept under ``key``, else ``text()`` drawn (a scroll redraws every line: most are kept)."""
        cached = self._strips.get(key)
        if cached is not None:
            return cached
        strip = Strip(list(text().render(self.app.console))).crop_extend(0, width, self.rich_style)
        strip = strip.apply_style(self.rich_style)
        self._strips[key] = strip
        while len(self._strips) > 300:
            self._strips.popitem(last=False)
        return strip

    def _qid_width(self) -> int:
        width = self.content_region.width or self.size.width or 80
        return max(10, min(QID_W, width - 3 - (self._cell_width() + 1) * len(self.phases)))

    def _header(self) -> Text:
        cell_w = self._cell_width()
        out = Text(" " * (self._qid_width() + 3), no_wrap=True)
        for p in self.phases:
            label = f"[{p}]" if p == self.phase else p
            if any(self.worst_columns.get(r) == p for r in self.shown):
                label += WORST_GLYPH
            label = lit(label, cell_w)
            label = label.center(cell_w) if len(label) < cell_w else label[:cell_w]
            out.append(label + " ", style=self.palette.get("heading") if p == self.phase else None)
        return out

    def _row(self, row, current: bool) -> Text:
        p = self.palette
        out = Text(no_wrap=True)
        out.append("▶" if current else " ", style=p.get("heading"))
        out.append(REVERSAL_GLYPH if row.reversal.get(self.role) else " ")
        q, qid_w = lit(row.qid), self._qid_width()
        out.append(
            (q[: qid_w - 1] + "…" if len(q) > qid_w else q.ljust(qid_w)) + " ",
            style=p.get("heading") if current else None,
        )
        worst = {r: worst_phase(row.cells.get(r, {}), self.phases) for r in self.shown}
        for ph in self.phases:
            for i, r in enumerate(self.shown):
                if i:
                    out.append("│", style=p.get("muted"))
                out.append_text(cell_text(row.cells.get(r, {}).get(ph), p))
                out.append(WORST_GLYPH if worst[r] == ph else " ", style=p.get("fail"))
            out.append(" ")
        return out

    def text_lines(self) -> list[str]:
        """The grid as plain text lines (for tests and screen readers)."""
        return [self._header().plain] + [
            self._row(r, r.ord == self._cursor).plain
            for r in (self.list.row(i) for i in range(self._top, self._top + max(1, self.size.height - 2)))
            if r is not None
        ]


def grid_top(list_top: int, cursor: int, rows: int) -> int:
    """The first row the grid shows: the list's when the cursor's row fits under it in ``rows``
    lines, else the nearest that keeps the cursor's row on screen (``rows`` < 1: not laid out yet)."""
    if rows < 1 or list_top <= cursor < list_top + rows:
        return list_top
    return cursor if cursor < list_top else cursor - rows + 1
