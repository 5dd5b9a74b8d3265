"""contracts."""
