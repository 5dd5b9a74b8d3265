"""A filter's error shown against what the user typed: the reason, the typed text, a caret under the
place. No Textual.

The predicate is validated on its own (never wrapped in the arm and quick filters first), so a
position DuckDB gives is one in the typed text. Where no position is given, the caret goes under
the first quoted name of the message found in the text (``unknown column 'stepp'``, ``Could not
convert string 'seven'``); a syntax error without one is under the last word (the predicate
ended too soon after it).
"""

from __future__ import annotations

import re

_AT = re.compile(r"\s*\(at character (\d+)\)")
_QUOTED = re.compile(r"""'([^']+)'|"([^"]+)\"""")
_PREFIX = re.compile(r"^(filter: )?(where: )?")


def error_place(typed: str, reason: str) -> tuple[str, int | None]:
    """(the reason without its position, the caret's column in ``typed`` or None)."""
    text = typed.strip()
    reason = _PREFIX.sub("", reason.strip())
    m = _AT.search(reason)
    if m:
        return _AT.sub("", reason), min(max(int(m.group(1)) - 1, 0), len(text))
    for q in _QUOTED.finditer(reason):
        word = q.group(1) or q.group(2)
        i = text.find(word)
        if i >= 0:
            return reason, i
    if "syntax error" in reason and text:
        return reason, len(text) - len(text.split()[-1])  # the last word, after which it broke off
    return reason, None


def caret_lines(typed: str, reason: str, width: int = 78) -> list[str]:
    """The lines to show: ``✗ reason``, then the typed text and a caret under the place, both cut to a
    window of ``width`` columns around it (escape the text before showing it)."""
    reason, at = error_place(typed, reason)
    lines = [f"✗ {reason}"]
    if at is None:
        return lines
    text = typed.strip()
    room = max(10, width - 2)
    start = max(0, min(at - room // 2, len(text) + 1 - room))
    lines.append("  " + text[start : start + room])
    lines.append("  " + " " * (at - start) + "^")
    return lines
