"""The status line: what runs, the phase and arm, compare mode, the search and the filter."""

from __future__ import annotations

from collections.abc import Mapping

from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from ledgerscope.tui.model import Filters
from ledgerscope.tui.render_summary import status_text


class StatusLine(Widget):
    """Redrawn whenever one of its reactives changes (the main screen binds them to its own)."""

    busy: reactive[frozenset[str]] = reactive(frozenset())
    phase: reactive[str] = reactive("")
    role: reactive[str] = reactive("candidate")
    compare: reactive[bool] = reactive(False)
    search_text: reactive[str] = reactive("")
    matches: reactive[list[int]] = reactive(list)
    filters: reactive[Filters] = reactive(Filters)

    def __init__(self, phases: tuple[str, ...], arms: Mapping[str, str], *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.phases = phases
        self.arms = dict(arms)  # role -> arm name

    def render(self) -> Text:
        return status_text(
            sorted(self.busy),
            self.phase,
            self.phases,
            self.arms[self.role],
            self.compare,
            self.search_text,
            len(self.matches),
            self.filters.describe(),
            self.content_size.width,
        )
