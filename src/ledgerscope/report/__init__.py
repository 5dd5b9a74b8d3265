"""Presentations of analysis results shared by the CLI and the TUI (terminal tables)."""
