"""An arm's table checked against :mod:`.schema`, in the project's words (``field: reason``).

pydantic validates strictly (no coercion, unknown keys refused); this module turns its errors into
:class:`Problem` objects naming the dotted key, and adds the one rule every number obeys (finite,
within the int32 range the ledger stores). Rules that relate several keys (overlap below capacity,
an endpoint needs its URL, a kind must be registered) are :mod:`.config`'s.
"""

from __future__ import annotations

import math
import typing
from typing import Any

from pydantic import ValidationError

from ledgerscope.common.errors import Problem
from ledgerscope.pipeline.arm import schema

#: pydantic error types that say "wrong type" (they win over every other problem of the same key)
_TYPE_ERRORS = {
    "int_type": "an integer",
    "int_from_float": "an integer",
    "float_type": "a number",
    "bool_type": "a boolean",
    "string_type": "a string",
    "list_type": "a list",
    "dict_type": "a table",
    "model_type": "a table",
    "model_attributes_type": "a table",
}


def type_name(value: Any) -> str:
    return {
        bool: "a boolean",
        int: "an integer",
        float: "a number",
        str: "a string",
        list: "a list",
        dict: "a table",
    }.get(type(value), type(value).__name__)


def _number(bound: Any) -> Any:
    """1.0 -> 1 (pydantic turns a float field's bounds into floats; the message shows them as given)."""
    return int(bound) if isinstance(bound, float) and bound.is_integer() else bound


def _translate(error: dict) -> tuple[str, str, bool]:
    """(dotted key, reason, is a type error) of one pydantic error."""
    loc = error["loc"]
    path = tuple(str(p) for p in loc if not isinstance(p, int))
    item = any(isinstance(p, int) for p in loc)
    name, kind, value = ".".join(path), error["type"], error.get("input")
    info = schema.field_info(path)
    extra = schema.meta(info) if info is not None else {}
    ctx = error.get("ctx") or {}
    if kind == "extra_forbidden":
        return name, "unknown key", True
    if item:
        return name, extra.get("item_message") or f"must be a list of {_TYPE_ERRORS.get(kind, kind)}s", True
    if kind in _TYPE_ERRORS:
        reason = extra.get("type_message") or f"must be {_TYPE_ERRORS[kind]}, not {type_name(value)}"
        return name, reason, True
    if kind == "literal_error":
        if len(path) > 1 and not isinstance(value, str):  # inside a table: a string is what is missing
            return name, f"must be a string, not {type_name(value)}", True
        choices = typing.get_args(info.annotation) if info is not None else ()
        return name, f"must be one of {', '.join(map(str, choices))}", False
    if kind in ("greater_than_equal", "greater_than"):
        if extra.get("type_message") and isinstance(value, int) and value < 0:
            return name, extra["type_message"], False
        return name, f"must be at least {_number(ctx.get('ge', ctx.get('gt')))}", False
    if kind in ("less_than_equal", "less_than"):
        return name, f"must be at most {_number(ctx.get('le', ctx.get('lt')))}", False
    if kind == "value_error":
        return name, str(ctx.get("error", error["msg"])), False
    return name, error["msg"], False


def schema_problems(data: dict, where: str) -> tuple[list[Problem], list[Problem]]:
    """(type problems, value problems) of ``data`` against the schema; type problems are unknown keys
    and values of the wrong type, value problems ranges, choices and single-key rules."""
    try:
        schema.Arm.model_validate(data)
    except ValidationError as exc:
        kinds: tuple[list[Problem], list[Problem]] = ([], [])
        for error in exc.errors(include_url=False):
            name, reason, is_type = _translate(error)
            kinds[0 if is_type else 1].append(Problem(where, None, name, reason))
        return kinds
    return [], []


def number_problems(value: Any, name: str, where: str) -> list[Problem]:
    """Every number in ``value`` (tables walked, lists not) finite and within the int32 range."""
    if isinstance(value, dict):
        return [
            p for k, v in value.items() for p in number_problems(v, f"{name}.{k}" if name else str(k), where)
        ]
    if isinstance(value, bool) or not isinstance(value, int | float):
        return []
    if isinstance(value, float) and not math.isfinite(value):
        return [Problem(where, None, name, f"must be a finite number, not {value}")]
    if abs(value) > schema.MAX_INT:
        return [Problem(where, None, name, f"{value} is out of range (at most {schema.MAX_INT})")]
    return []
