"""The command line: the Typer app (`main`), progress display. Heavy imports stay inside commands."""
