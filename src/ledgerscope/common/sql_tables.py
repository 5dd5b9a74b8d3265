"""SQL text from Python values (literals), and small DuckDB temp tables from Python lists.

Every module that writes a value into SQL text quotes it here, once.

Registering an Arrow table (``con.register``) makes DuckDB's Python client import
pandas, about 0.2 s on every command that does it; a selection's keys or a few
thousand gold spans go in as list parameters instead.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping


def sql_literal(value: object) -> str:
    """A SQL literal for a Python value: NULL, true/false, an integer, else a string (quotes doubled)."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    return "'" + str(value).replace("'", "''") + "'"


def sql_in(values: Iterable[object]) -> str:
    """A parenthesised list of literals, for ``x IN (...)``."""
    return "(" + ", ".join(sql_literal(v) for v in values) + ")"


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
