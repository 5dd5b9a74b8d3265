"""How a value reads in a table cell, the same in the terminal report's tables and in the TUI: a float
to a fixed number of digits, anything else as its text, and a missing value as one glyph.
"""

from __future__ import annotations


def format_value(value: object, digits: int = 3, missing: str = "-") -> str:
    """``value`` for a cell; ``missing`` stands for None (the terminal report: ``-``, the TUI: ``–``)."""
    if value is None:
        return missing
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)
