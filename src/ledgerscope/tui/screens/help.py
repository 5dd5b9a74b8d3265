"""``?``: every binding (id, keys in effect, what it does) and the glyph legend."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from ledgerscope.tui.render_summary import legend_text


class HelpScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,question_mark,f1", "dismiss_help", "Close", id="help-close"),
        Binding("j,down", "scroll(1)", "Scroll down", show=False),
        Binding("k,up", "scroll(-1)", "Scroll up", show=False),
    ]

    def __init__(self, rows: list[tuple[str, str, str]], palette) -> None:
        super().__init__()
        self.rows = rows
        self.palette = palette

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(
                Text(
                    "ledgerscope · keys (remap by id in ~/.config/ledgerscope/keymap.toml "
                    "or $LEDGERSCOPE_KEYMAP)"
                ),
                classes="dialog-title",
            )
            with VerticalScroll(id="help-body"):
                yield Static(self.body(), id="help-text")

    def body(self) -> Text:
        t = Text()
        t.append(f"{'binding id':<18}{'keys':<28}action\n", style="bold")
        for binding_id, keys, description in self.rows:
            t.append(f"{binding_id:<18}{keys:<28}{description}\n")
        t.append(
            "\nctrl+p or : opens the command palette (every action is there too). "
            "Escape closes bars and dialogs.\n\n"
        )
        t.append_text(legend_text(self.palette))
        t.append(
            "\nPanes: 1 questions · 2 phase grid · 3 source · 4 context · 5 answer · 6 diagnosis · "
            "7 stats · c compare. A pane's number (or tab / shift+tab) focuses it, its left edge marked: "
            "then ↑ ↓ pageup pagedown home end scroll it, while j/k still move between questions; "
            "a new question or phase opens every pane at its top. In the Source pane d/D jump to the "
            "next/previous gold document. Filter bar (f) takes the predicate of "
            "`ledgerscope export --where` (F shows the whole filter the status line cuts); "
            "o opens quick filters (segment, step, verdict, reversals).\n"
        )
        return t

    def action_dismiss_help(self) -> None:
        self.dismiss(None)

    def action_scroll(self, delta: int) -> None:
        self.query_one("#help-body", VerticalScroll).scroll_relative(y=delta, animate=False)
