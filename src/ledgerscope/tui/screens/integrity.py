"""The ledger's integrity checks, run after the first screen, and the screen that blocks on a failure.

``ledgerscope open`` paints the questions list from the ledger's views before its checks (files:
footers, sizes, SHA-256 digests; rows: keys, duplicates, finite scores) have finished, so the list
does not wait for them. Until they pass the status line says the ledger is being verified; if they
fail, :class:`IntegrityScreen` covers everything and cannot be dismissed: the main screen hides what
it painted (its ``-untrusted`` class), refuses every browsing action, and the only way on is to quit.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.dom import DOMNode
from textual.screen import ModalScreen
from textual.widgets import Static

from ledgerscope.common.errors import InputError
from ledgerscope.common.safe_text import safe
from ledgerscope.tui import messages as msg
from ledgerscope.tui.data import LedgerSession

#: at most this many problems are listed on the screen (``ledgerscope diagnose`` lists them all)
SHOWN_PROBLEMS = 40
#: what the status line says while the checks run
CHECKS_BUSY = "verifying ledger"
#: in place of the list and panes once the checks failed
UNTRUSTED_NOTE = "✗ the ledger failed its integrity checks: nothing it holds is shown (q quits)"


def start_checks(node: DOMNode, session: LedgerSession) -> None:
    """Run :meth:`LedgerSession.check` in a thread worker; :class:`~ledgerscope.tui.messages.ChecksDone` to
    ``node``."""

    def check() -> None:
        try:
            session.check()
        except InputError as exc:
            node.post_message(msg.ChecksDone([str(p) for p in exc.problems]))
        except Exception as exc:  # an unreadable ledger fails its checks too: nothing is trusted
            node.post_message(msg.ChecksDone([f"{type(exc).__name__}: {exc}"]))
        else:
            node.post_message(msg.ChecksDone([]))

    node.run_worker(check, thread=True, exclusive=True, group="checks")


def problems_text(ledger: str, problems: list[str]) -> Text:
    """What failed, each problem escaped (file names and reasons may echo anything), and what to do."""
    t = Text()
    t.append("✗ This ledger failed its integrity checks. Nothing it holds is shown.\n", style="bold")
    t.append(
        "The questions list painted while the checks ran is hidden: no row read from this ledger is to "
        "be trusted.\n\n"
    )
    for problem in problems[:SHOWN_PROBLEMS]:
        t.append("  " + safe(problem) + "\n")
    if len(problems) > SHOWN_PROBLEMS:
        t.append(f"  … and {len(problems) - SHOWN_PROBLEMS} more\n")
    t.append(
        f"\nRestore the ledger from where it came, or sweep it again; `ledgerscope diagnose "
        f"{safe(ledger)}` prints the same problems. Press q to quit.\n"
    )
    return t


class IntegrityScreen(ModalScreen[None]):
    """Blocks the app on a ledger that failed its checks: no key dismisses it, ``q`` quits."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "app.quit", "Quit", id="integrity-quit"),
        Binding("j,down", "scroll(1)", "Scroll down", show=False),
        Binding("k,up", "scroll(-1)", "Scroll up", show=False),
    ]

    def __init__(self, ledger: str, problems: list[str]) -> None:
        super().__init__(id="integrity")
        self.ledger = ledger
        self.problems = problems

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(Text("ledgerscope · integrity checks failed"), classes="dialog-title")
            with VerticalScroll(id="integrity-body"):
                yield Static(problems_text(self.ledger, self.problems), id="integrity-text")

    def action_scroll(self, delta: int) -> None:
        self.query_one("#integrity-body", VerticalScroll).scroll_relative(y=delta, animate=False)
