"""``e``: export the current filter (any export format) with the count and paths confirmed."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Select, Static
from textual.worker import Worker

from ledgerscope.common.safe_text import safe
from ledgerscope.tui.messages import post_if_current

DEFAULT_NAMES = {
    "jsonl": "ledgerscope-export.jsonl",
    "fixtures": "ledgerscope-export.fixtures.jsonl",
    "label-studio": "ledgerscope-export.label-studio.json",
    "label-studio-tasks": "ledgerscope-export.label-studio-tasks.json",
    "trec": "ledgerscope-export-trec",
}


class ExportScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "close", "Close", id="export-close")]

    def __init__(
        self, session, role: str, ledger: Path, predicate: str, directory: Path | None = None
    ) -> None:
        super().__init__()
        self.session = session
        self.role = role
        self.ledger = Path(ledger)
        self.predicate = predicate
        self.directory = directory or Path.cwd()
        self.result = None
        self.count: tuple[int, int] | None = None
        self._exporting: Worker | None = None

    def compose(self) -> ComposeResult:
        from ledgerscope.export import FORMATS

        with Vertical(classes="dialog"):
            yield Static(Text("Export the current filter"), classes="dialog-title")
            yield Select([(f, f) for f in FORMATS], value="jsonl", allow_blank=False, id="x-format")
            yield Input(
                value=str(self.directory / DEFAULT_NAMES["jsonl"]),
                id="x-path",
                placeholder="output path (outside the ledger)",
            )
            yield Input(value=self.predicate, id="x-where", placeholder="predicate (empty: every record)")
            yield Static(Text("counting…"), id="x-count")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Export", variant="primary", id="x-go")
                yield Button("Close", id="x-close")
            yield Static(Text(""), id="x-result", classes="dialog-result")

    def on_mount(self) -> None:
        self._count(self.query_one("#x-where", Input).value)
        # the path is what one changes; Enter in it exports (Tab reaches the format and the filter)
        self.query_one("#x-path", Input).focus()

    @on(Select.Changed, "#x-format")
    def _format_changed(self, event: Select.Changed) -> None:
        path = self.query_one("#x-path", Input)
        if Path(path.value).name in DEFAULT_NAMES.values() and event.value in DEFAULT_NAMES:
            path.value = str(Path(path.value).parent / DEFAULT_NAMES[str(event.value)])

    @on(Input.Submitted, "#x-where")
    def _where_submitted(self, event: Input.Submitted) -> None:
        self._count(event.value)

    @dataclass
    class Counted(Message):
        count: tuple[int, int] | None
        error: str | None

    @dataclass
    class Exported(Message):
        result: Any
        error: str | None

    @work(thread=True, exclusive=True, group="export-count")
    def _count(self, where: str) -> None:
        try:
            count = self.session.count_records(self.role, where)
        except Exception as exc:  # an invalid predicate: say why, inline
            post_if_current(self, self.Counted(None, str(exc)))
            return
        post_if_current(self, self.Counted(count, None))  # a newer predicate's count supersedes it

    def on_export_screen_counted(self, m: Counted) -> None:
        count, error = m.count, m.error
        self.count = count
        widget = self.query_one("#x-count", Static)
        if error:
            widget.update(Text("✗ " + safe(error), style="bold"))
        else:
            widget.update(
                Text(f"{count[0]} record(s) of {count[1]} question(s) match; ledger {safe(str(self.ledger))}")
            )

    @on(Button.Pressed, "#x-go")
    @on(Input.Submitted, "#x-path")
    def _go(self) -> None:
        fmt = self.query_one("#x-format", Select).value
        out = self.query_one("#x-path", Input).value.strip()
        where = self.query_one("#x-where", Input).value
        if not out:
            self.query_one("#x-result", Static).update(Text("✗ give an output path"))
            return
        if self._exporting is not None and not self._exporting.is_finished:
            # a second export does not supersede the first (its files are being written): one at a time
            self.app.notify("an export is running: wait for its result", markup=False)
            return
        self.query_one("#x-result", Static).update(Text(f"⟳ exporting to {safe(out)}…"))
        self._exporting = self._export(str(fmt), Path(out).expanduser(), where)

    @work(thread=True, group="export")
    def _export(self, fmt: str, out: Path, where: str) -> None:
        from ledgerscope.export import export

        try:
            result = export(self.ledger, where, fmt, out)
        except Exception as exc:  # shown in the dialog
            self.post_message(self.Exported(None, f"{type(exc).__name__}: {exc}"))
            return
        self.post_message(self.Exported(result, None))

    def on_export_screen_exported(self, m: Exported) -> None:
        result, error = m.result, m.error
        self.result = result
        widget = self.query_one("#x-result", Static)
        if error:
            widget.update(Text("✗ export failed: " + safe(error)))
            return
        t = Text(f"✓ exported {result.count} record(s)")
        if getattr(result, "questions", None):
            t.append(f" ({result.questions} question(s))")
        t.append(f" as {safe(result.format or '')}:\n")
        for p in result.paths:
            t.append("  " + safe(str(p)) + "\n")
        widget.update(t)
        self.app.notify(
            f"exported {result.count} record(s) to {safe(str(result.paths[0]) if result.paths else '')}",
            markup=False,
        )

    @on(Button.Pressed, "#x-close")
    def action_close(self) -> None:
        self.dismiss(None)
