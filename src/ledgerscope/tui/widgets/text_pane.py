"""A scrolling pane that shows one renderable (rich ``Text``, never markup)."""

from __future__ import annotations

import io

from rich.console import RenderableType
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static


class TextPane(VerticalScroll):
    """A scrolling pane holding one Static (rich Text, never markup)."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.renderable: RenderableType | None = None
        self._body = Static(Text(""), classes="pane-body")  # here already: shown before it is mounted

    def compose(self) -> ComposeResult:
        yield self._body

    def show(self, renderable, anchor: str | None = None) -> None:
        """Show ``renderable`` (also before the pane is mounted); with ``anchor``, scroll so its first
        line holding it is in view."""
        self.renderable = renderable
        self._body.update(renderable)
        if anchor is not None:
            self.call_after_refresh(self._scroll_to_anchor, anchor)

    def _scroll_to_anchor(self, anchor: str) -> None:
        renderable = self.renderable
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
