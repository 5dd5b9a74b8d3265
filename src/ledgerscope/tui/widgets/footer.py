"""The key footer, with Help and Quit first: at 80 columns the keys that do not fit are cut from the
right, and those two must stay (``?`` lists the rest)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.widgets import Footer

from ledgerscope.tui.bindings import FOOTER_FIRST


class KeysFooter(Footer):
    """Textual's footer, compact, its keys reordered: the actions of :data:`FOOTER_FIRST` lead."""

    def __init__(self) -> None:
        super().__init__(compact=True)

    def compose(self) -> ComposeResult:
        keys = list(super().compose())
        first = [
            k
            for k in keys
            if getattr(k, "action", None) in FOOTER_FIRST and not k.has_class("-command-palette")
        ]
        first.sort(key=lambda k: FOOTER_FIRST.index(k.action))
        yield from first
        yield from (k for k in keys if k not in first)
