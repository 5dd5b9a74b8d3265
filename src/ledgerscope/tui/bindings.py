"""Every key of ``ledgerscope open``, each with the stable id a keymap file remaps it by.

The browsing keys are bound on :class:`~ledgerscope.tui.screens.main.MainScreen`
(their actions are its methods), the app-wide ones (help, command palette, quit)
on the App. The help screen and the command palette list both, in this order.
"""

from __future__ import annotations

from collections.abc import Mapping

from textual.binding import Binding

#: on the main screen
BROWSE_BINDINGS: list[Binding] = [
    Binding("j,down", "move(1)", "Next question", id="go-down", show=False),
    Binding("k,up", "move(-1)", "Previous question", id="go-up", show=False),
    Binding("g,home", "go_top", "First question", id="go-top", show=False),
    Binding("G,end", "go_bottom", "Last question", id="go-bottom", show=False),
    Binding("space,pagedown", "page(1)", "Page down", id="page-down", show=False),
    Binding("b,pageup", "page(-1)", "Page up", id="page-up", show=False),
    Binding("left_square_bracket,h", "phase(-1)", "Previous phase", id="phase-prev"),
    Binding("right_square_bracket,l", "phase(1)", "Next phase", id="phase-next"),
    Binding("slash", "search", "Search", id="search"),
    Binding("n", "search_next(1)", "Next match", id="search-next", show=False),
    Binding("N", "search_next(-1)", "Previous match", id="search-prev", show=False),
    Binding("f", "filter_bar", "Filter", id="filter"),
    Binding("o", "quick_filters", "Quick filters", id="quick-filters", show=False),
    Binding("x", "toggle_reversal", "Reversals only", id="reversal-only", show=False),
    Binding("a", "toggle_arm", "Switch arm", id="toggle-arm", show=False),
    Binding("c", "toggle_compare", "Compare", id="compare"),
    Binding("r", "rerun", "Re-run", id="rerun"),
    Binding("e", "export", "Export", id="export"),
    Binding("s", "stats", "Stats", id="stats"),
    Binding("t", "source_stage", "Source stage", id="source-stage", show=False),
    Binding("d", "source_doc(1)", "Next gold document (Source)", id="doc-next", show=False),
    Binding("D", "source_doc(-1)", "Previous gold document (Source)", id="doc-prev", show=False),
    Binding("F", "show_filter", "Show the whole filter", id="show-filter", show=False),
    Binding("1", "pane(1)", "Queries pane", id="pane-queries", show=False),
    Binding("2", "pane(2)", "Grid pane", id="pane-grid", show=False),
    Binding("3", "pane(3)", "Source pane", id="pane-source", show=False),
    Binding("4", "pane(4)", "Context pane", id="pane-context", show=False),
    Binding("5", "pane(5)", "Answer pane", id="pane-answer", show=False),
    Binding("6", "pane(6)", "Diagnosis pane", id="pane-diagnosis", show=False),
    Binding("7", "pane(7)", "Stats pane", id="pane-stats", show=False),
    Binding("escape", "close_bars", "Close bar", id="close", show=False),
    Binding("tab", "app.focus_next", "Focus the next of list and pane", id="focus-next", show=False),
    Binding(
        "shift+tab", "app.focus_previous", "Focus the previous of list and pane", id="focus-prev", show=False
    ),
]

#: the footer shows these first, so that a narrow terminal (80 columns) keeps them
FOOTER_FIRST = ("help", "quit")

#: on the App
APP_BINDINGS: list[Binding] = [
    Binding("question_mark,f1", "help", "Help", id="help"),
    Binding("colon", "command_palette", "Commands", id="command-palette", show=False),
    Binding("q", "quit", "Quit", id="quit"),
]

#: actions the command palette does not list (it is the palette; quitting has its own entry)
NOT_IN_PALETTE = ("quit", "command_palette")


def all_bindings() -> list[Binding]:
    return [*BROWSE_BINDINGS, *APP_BINDINGS]


def binding_ids() -> list[str]:
    return [b.id for b in all_bindings() if b.id]


def keys_in_effect(binding: Binding, keymap: Mapping[str, str]) -> str:
    """The keys that trigger ``binding`` under ``keymap`` (binding id -> keys), as the user wrote them."""
    return keymap.get(binding.id or "", binding.key)
