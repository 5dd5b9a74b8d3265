"""``o``: quick filters (segment, step, verdict, reversals) combined with the filter-bar predicate."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Checkbox, Input, Select, Static

from ledgerscope.analysis.diagnosis import STEP_NAMES
from ledgerscope.common.safe_text import safe
from ledgerscope.tui.model import Filters, verdict_glyph


class FilterScreen(ModalScreen[Filters | None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel", id="filters-cancel")]

    def __init__(self, filters: Filters, choices: dict) -> None:
        super().__init__()
        self.filters = filters
        self.choices = choices

    def compose(self) -> ComposeResult:
        f = self.filters
        segments = self.choices.get("segment") or []
        verdicts = self.choices.get("verdict") or []
        steps = self.choices.get("step") or sorted(STEP_NAMES)
        with Vertical(classes="dialog"):
            yield Static(
                Text("Quick filters (a question is listed when any of its records matches)"),
                classes="dialog-title",
            )
            yield Select(
                [(safe(s), s) for s in segments],
                prompt="any segment",
                id="f-segment",
                value=f.segment if f.segment in segments else Select.NULL,
            )
            yield Select(
                [(f"{s} {STEP_NAMES.get(s, '')}", s) for s in steps],
                prompt="any step",
                id="f-step",
                value=f.step if f.step in steps else Select.NULL,
            )
            yield Select(
                [(f"{verdict_glyph(v)} {safe(v)}", v) for v in verdicts],
                prompt="any verdict",
                id="f-verdict",
                value=f.verdict if f.verdict in verdicts else Select.NULL,
            )
            yield Checkbox("reversals only", value=f.reversal, id="f-reversal")
            yield Input(value=f.where, placeholder="predicate (as export --where)", id="f-where")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Apply", variant="primary", id="f-apply")
                yield Button("Clear", id="f-clear")
                yield Button("Cancel", id="f-cancel")

    def _value(self, wid: str):
        v = self.query_one(wid, Select).value
        return None if v is Select.NULL else v

    @on(Button.Pressed, "#f-apply")
    @on(Input.Submitted, "#f-where")
    def apply(self) -> None:
        self.dismiss(
            Filters(
                self.query_one("#f-where", Input).value,
                self._value("#f-segment"),
                self._value("#f-step"),
                self._value("#f-verdict"),
                self.query_one("#f-reversal", Checkbox).value,
            )
        )

    @on(Button.Pressed, "#f-clear")
    def clear(self) -> None:
        self.dismiss(Filters())

    @on(Button.Pressed, "#f-cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)
