"""The selected question's text, on one line under the list and panes: what was asked, at a glance.

The questions list shows ids; this line shows the question the cursor is on (from the list's own
row, no query), escaped and cut to the width, in every layout (80 x 24 included).
"""

from __future__ import annotations

from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from ledgerscope.tui.render_summary import question_text


class QuestionLine(Widget):
    """``row``: (qid, question text) of the selected question, None when there is none."""

    DEFAULT_CSS = """
    QuestionLine { height: 1; padding: 0 1; }
    """

    row: reactive[tuple[str, str] | None] = reactive(None)

    def render(self) -> Text:
        qid, question = self.row if self.row is not None else (None, None)
        return question_text(qid, question, self.content_size.width)

    @property
    def text(self) -> str:
        """The line as shown (tests read it)."""
        return self.render().plain
