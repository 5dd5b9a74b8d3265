"""A scrolling pane that shows one renderable (rich ``Text``, never markup).

Each pane remembers which record it shows: a new record opens it at its top (or at its anchor), a
redraw of the same record (a theme change, data arriving) keeps where the reader scrolled to.
Focused (Tab, or its pane key), its scroll keys act on it and its left edge is marked.
"""

from __future__ import annotations

import io
from collections.abc import Hashable

from rich.console import RenderableType
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static


class TextPane(VerticalScroll):
    """A scrolling pane holding one Static (rich Text, never markup)."""

    DEFAULT_CSS = """
    TextPane { border-left: blank; }
    TextPane:focus { border-left: thick $accent; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.renderable: RenderableType | None = None
        self.shown_key: Hashable = None  # the record shown (a new one opens the pane at its top)
        self._heading: tuple[int, int] | None = None  # the heading line last jumped to, the scroll then
        self._body = Static(Text(""), classes="pane-body")  # here already: shown before it is mounted

    def compose(self) -> ComposeResult:
        yield self._body

    def show(self, renderable, anchor: str | None = None, key: Hashable = None) -> None:
        """Show ``renderable`` (also before the pane is mounted). A ``key`` other than the one shown
        (a new record) scrolls to the top, or with ``anchor`` so its first line holding it is in view."""
        self.renderable = renderable
        self._body.update(renderable)
        if key != self.shown_key:
            self.shown_key = key
            self.scroll_to(y=0, animate=False, immediate=True)
            if anchor is not None:
                self.call_after_refresh(self._scroll_to_anchor, anchor)

    def _wrapped(self) -> list[str]:
        """The renderable's lines as wrapped at the pane's width (Text only)."""
        renderable = self.renderable
        if not isinstance(renderable, Text):
            return []
        from rich.console import Console

        width = self.scrollable_content_region.width or self.size.width or 80
        return [line.plain for line in renderable.wrap(Console(width=width, file=io.StringIO()), width)]

    def _scroll_to_anchor(self, anchor: str) -> None:
        for i, plain in enumerate(self._wrapped()):
            if anchor in plain and "⟪span⟫" not in plain:  # the legend names the marker too
                self.scroll_to(y=max(0, i - 2), animate=False)
                return

    def scroll_to_heading(self, prefix: str, direction: int) -> bool:
        """Scroll so the next (``direction`` > 0) or previous line starting with ``prefix`` is at the
        top, wrapping around; False when there is none."""
        heads = [i for i, plain in enumerate(self._wrapped()) if plain.startswith(prefix)]
        if not heads:
            return False
        y = round(self.scroll_y)
        last = self._heading
        if last is not None and last[1] == y:  # not scrolled since: from that heading (the end clamps)
            y = last[0]
        if direction > 0:
            target = next((i for i in heads if i > y), heads[0])
        else:
            target = next((i for i in reversed(heads) if i < y), heads[-1])
        self.scroll_to(y=target, animate=False, immediate=True)
        self._heading = (target, round(self.scroll_y))
        return True

    @property
    def text(self) -> str:
        """What the pane shows, as plain text (tests, screen readers)."""
        renderable = self.renderable
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
