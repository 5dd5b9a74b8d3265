"""Widgets of the TUI: the Line-API questions list and phase grid, the panel around the list, the
text panes, the status, question and key lines."""
