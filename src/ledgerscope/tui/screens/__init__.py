"""Modal screens: help, quick filters, export, re-run."""
