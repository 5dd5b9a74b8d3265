"""Building SQL text that builds JSON text: literals, values, objects, arrays, terminal escapes."""

from __future__ import annotations

import json
from typing import Any

from ledgerscope.common.sql_tables import sql_literal


def jlit(value: object) -> str:
    """A SQL literal holding the JSON text of a Python value."""
    return sql_literal(json.dumps(value, ensure_ascii=False))


def j(expr: str) -> str:
    """SQL for the JSON text of a value (``null`` for NULL)."""
    return f"coalesce(CAST(to_json({expr}) AS VARCHAR), 'null')"


def num(expr: str) -> str:
    """A score as JSON: non-finite values are ``null`` (NaN is not JSON)."""
    return j(f"CASE WHEN isfinite(CAST({expr} AS DOUBLE)) THEN CAST({expr} AS DOUBLE) END")


def obj_parts(*fields: tuple[Any, ...]) -> list[str]:
    """The pieces of a JSON object's text, for ``concat``, from ``(key, json_sql)`` or
    ``(key, json_sql, condition)``; a conditional field is left out where its condition is not true."""
    parts = ["'{'"]
    for i, field in enumerate(fields):
        key, expr = field[0], field[1]
        label = sql_literal(("" if i == 0 else ", ") + json.dumps(key) + ": ")
        if len(field) > 2:
            assert i > 0, "the first field of an object is unconditional"
            parts.append(f"CASE WHEN {field[2]} THEN concat({label}, {expr}) ELSE '' END")
        else:
            parts.extend((label, expr))
    parts.append("'}'")
    return parts


def obj(*fields: tuple[Any, ...]) -> str:
    """SQL for a JSON object's text (see :func:`obj_parts`): one ``concat``, where a chain of ``||``
    would copy every prefix."""
    return f"concat({', '.join(obj_parts(*fields))})"


def arr(item: str, order: str, where: str | None = None) -> str:
    """SQL aggregate for a JSON array of ``item`` texts in ``order`` over rows where ``where`` holds.

    Where no row qualifies the result is NULL (callers coalesce it to ``[]``).
    """
    agg = f"string_agg({item}, ', ' ORDER BY {order})" + (f" FILTER (WHERE {where})" if where else "")
    return f"CASE WHEN {agg} IS NOT NULL THEN concat('[', {agg}, ']') END"


def trunc(expr: str, n: int) -> str:
    """diagnosis_evidence._trunc in SQL: at most ``n`` characters, the last an ellipsis when cut."""
    return f"CASE WHEN length({expr}) <= {n} THEN {expr} ELSE substr({expr}, 1, {n - 1}) || '…' END"
