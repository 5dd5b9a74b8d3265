"""Sharing a ledger connection with its cursors (the TUI reads from worker threads).

:func:`ledgerscope.ledger.read.connect` answers a table with no files with a view over an empty
Arrow table registered on the connection; a registration is the connection's own, so a cursor
cannot read that view. :func:`materialise_empty_views` makes those views real (in-memory) tables.
"""

from __future__ import annotations


def materialise_empty_views(con) -> None:
    """Views over connection-local registered (empty) tables become real tables, visible to cursors."""
    rows = con.execute("SELECT view_name, sql FROM duckdb_views() WHERE NOT internal").fetchall()
    for name, sql in rows:
        marker = f"_{name}_empty"
        if marker in (sql or ""):
            con.execute(f"CREATE OR REPLACE TABLE {marker}_t AS SELECT * FROM {marker}")
            con.execute(f"CREATE OR REPLACE VIEW {name} AS SELECT * FROM {marker}_t")
