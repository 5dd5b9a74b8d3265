"""``r``: re-execute the selected record (a model loads: seconds) and show how it differs.

The work runs in a child process (``ledgerscope rerun --json``; in a thread the
model's loading would hold the GIL and stall frames), so the UI stays responsive
and the dialog may be closed while it runs (a notification reports the outcome).
The ledger is only read.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.dom import DOMNode
from textual.screen import ModalScreen
from textual.widgets import LoadingIndicator, Static

from ledgerscope.common.safe_text import safe
from ledgerscope.tui.messages import RerunDone


def start_rerun(node: DOMNode, ledger: Path, key: tuple[str, str, str]) -> None:
    """Re-run ``key`` (arm, qid, phase) in a child process (an async worker of ``node``, so it outlives
    the dialog); :class:`~ledgerscope.tui.messages.RerunDone` is posted to ``node``."""

    async def run() -> None:
        node.post_message(RerunDone(key, *await rerun_in_child(ledger, key)))

    node.run_worker(run(), group="rerun")


def show_rerun(app: App, result: RerunDone, palette) -> None:
    """Show ``result`` in the dialogs open for its key."""
    for screen in app.screen_stack:
        if isinstance(screen, RerunScreen) and screen.key == result.key:
            screen.show_result(result, palette)


async def rerun_in_child(
    ledger: Path, key: tuple[str, str, str]
) -> tuple[list[str], bool | None, str | None]:
    """``ledgerscope rerun --json`` for ``key`` (arm, qid, phase) in a child process:
    (the differences as lines, identical?, error)."""
    # In a child process, not a thread: importing and loading the model holds the GIL for
    # up to half a second at a time, which would freeze the UI (scripts/bench_tui_load.py).
    import asyncio
    import json
    import sys

    from ledgerscope.pipeline.run.rerun import RerunDiff

    arm, qid, phase = key
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "ledgerscope.cli.main", "rerun", str(ledger),
        f"--arm={arm}", f"--qid={qid}", f"--phase={phase}", "--json",
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        out, err = await proc.communicate()
    except asyncio.CancelledError:  # the app quits: do not leave the child running
        proc.kill()
        raise
    text = out.decode("utf-8", "replace")
    start = 0 if text.startswith("{") else text.rfind("\n{") + 1
    try:
        data = json.loads(text[start:])
        diff = RerunDiff(arm, qid, phase, differences=data["differences"])
    except (ValueError, KeyError, TypeError):  # shown in the dialog; the ledger is only read
        lines = err.decode("utf-8", "replace").strip().splitlines()
        return [], None, "\n".join(lines[-5:]) or f"re-run exited with status {proc.returncode}"
    return diff.lines(), diff.identical, None


class RerunScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q,r", "close", "Close", id="rerun-close")]

    def __init__(self, key: tuple[str, str, str]) -> None:
        super().__init__()
        self.key = key
        self.result = None

    def compose(self) -> ComposeResult:
        arm, qid, phase = self.key
        with Vertical(classes="dialog"):
            yield Static(
                Text(f"Re-run {safe(arm)} / phase {safe(phase)} / {safe(qid)}"), classes="dialog-title"
            )
            yield Static(
                Text(
                    "re-executing from the ledger's manifest (loading the model)… "
                    "escape closes this dialog; the re-run continues"
                ),
                id="rerun-status",
            )
            yield LoadingIndicator(id="rerun-loading")
            with VerticalScroll(classes="dialog-result"):
                yield Static(Text(""), id="rerun-result")

    def show_result(self, m, palette) -> None:
        self.result = m
        self.query_one("#rerun-loading").display = False
        status = self.query_one("#rerun-status", Static)
        body = Text()
        if m.error:
            status.update(Text("✗ re-run failed", style=palette.get("fail")))
            body.append(safe(m.error))
        elif m.identical:
            status.update(Text("✓ identical to the recorded record", style=palette.get("pass")))
        else:
            status.update(Text("≠ the re-run differs from the recorded record", style=palette.get("diff")))
        for line in m.lines:
            body.append(safe(line) + "\n")
        body.append("\nthe ledger was only read; nothing was written", style="dim")
        self.query_one("#rerun-result", Static).update(body)

    def action_close(self) -> None:
        self.dismiss(None)
