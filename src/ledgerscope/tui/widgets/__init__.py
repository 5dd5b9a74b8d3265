"""Widgets of the TUI (the Line-API questions list)."""
