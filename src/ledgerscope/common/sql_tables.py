"""Small DuckDB temp tables from Python lists.

Registering an Arrow table (``con.register``) makes DuckDB's Python client import
pandas, about 0.2 s on every command that does it; a selection's keys or a few
thousand gold spans go in as list parameters instead.
"""

from __future__ import annotations

from collections.abc import Mapping


def columns_table(con, name: str, cols: Mapping[str, tuple[str, list]]) -> None:
    """Temp table ``name`` from ``{column: (SQL type, values)}`` (all lists one length)."""
    if not next(iter(cols.values()))[1]:
        select = ", ".join(f"CAST(NULL AS {typ}) AS {col}" for col, (typ, _) in cols.items())
        con.execute(f"CREATE OR REPLACE TEMP TABLE {name} AS SELECT {select} WHERE false")
        return
    select = ", ".join(
        f"CAST(unnest(${i + 1}) AS {typ}) AS {col}" for i, (col, (typ, _)) in enumerate(cols.items())
    )
    values = [vals for _, vals in cols.values()]
    con.execute(f"CREATE OR REPLACE TEMP TABLE {name} AS SELECT {select}", values)


def drop_tables(con, *names: str) -> None:
    for name in names:
        con.execute(f"DROP TABLE IF EXISTS {name}")
