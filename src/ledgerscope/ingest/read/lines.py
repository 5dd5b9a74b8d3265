"""Reading a JSON-lines file strictly, each problem located ``file:line: field: reason``.

Shared by the trace and chunk store parsers, through
:func:`ledgerscope.inputs.sources.json_lines`: a line longer than
:data:`~ledgerscope.trace.spec.MAX_LINE_BYTES`, bytes that are not UTF-8, text that is not one
JSON object, a key given twice in one object, ``NaN`` or ``Infinity`` are each
a problem of that line (the rest of the file is still read, so one run lists
every problem). Values are checked by the callers with the helpers below,
which say what was found instead of what was expected.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ledgerscope.common.errors import Problem
from ledgerscope.inputs.sources import json_lines
from ledgerscope.trace.spec import MAX_LINE_BYTES

#: problems listed per file before the rest are only counted
MAX_PROBLEMS = 200


def kind_of(value: Any) -> str:
    """A JSON value's kind in words."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    return {dict: "an object", list: "a list", str: "a string", type(None): "null"}.get(
        type(value), type(value).__name__
    )


def read_objects(path: Path, problems: list[Problem], what: str) -> Iterator[tuple[int, dict]]:
    """(line number, object) for every non-blank line; bad lines become problems."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        problems.append(Problem(str(path), None, what, f"cannot be read: {exc.strerror or exc}"))
        return
    yield from objects_of(raw, str(path), problems)


def objects_of(raw: bytes, file: str, problems: list[Problem]) -> Iterator[tuple[int, dict]]:
    """:func:`read_objects` over bytes already read (``file`` names them in problems)."""
    yield from json_lines(
        raw, file, problems, lambda obj: f"must be a JSON object, not {kind_of(obj)}", MAX_LINE_BYTES
    )


def has_lone_surrogate(text: str) -> bool:
    """Text with no UTF-8 form (a ``\\ud800`` escape decodes to a lone surrogate)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def string_problem(value: Any, *, empty_ok: bool = True) -> str | None:
    """Why ``value`` is not a usable string, or None."""
    if not isinstance(value, str):
        return f"must be a string, not {kind_of(value)}"
    if not empty_ok and not value:
        return "must not be empty"
    if not value.isascii() and has_lone_surrogate(value):
        return "holds a lone surrogate (an escape with no UTF-8 form)"
    return None


def ids_problem(value: Any) -> tuple[str, str] | None:
    """(sub-field, reason) for a list of chunk ids that is not one: strings, non-empty, no repeats."""
    if not isinstance(value, list):
        return "", f"must be a list of chunk ids, not {kind_of(value)}"
    if all(type(x) is str and x for x in value) and len(set(value)) == len(value):  # the common case, fast
        joined = "".join(value)
        if joined.isascii() or not has_lone_surrogate(joined):
            return None
    first: dict[str, int] = {}
    for i, item in enumerate(value):
        why = string_problem(item, empty_ok=False)
        if why is not None:
            return f"[{i}]", why
        if item in first:
            return f"[{i}]", f"duplicate id {item[:80]!r} (first at [{first[item]}])"
        first[item] = i
    return None


def scores_problem(value: Any, length: int, nulls: bool) -> tuple[str, str] | None:
    """(sub-field, reason) for scores that are not finite numbers aligned with ``length`` ids."""
    if not isinstance(value, list):
        return "", f"must be a list of numbers, not {kind_of(value)}"
    if len(value) != length:
        return "", f"holds {len(value)} score(s) for {length} id(s)"
    for i, x in enumerate(value):
        if x is None and nulls:
            continue
        if isinstance(x, bool) or not isinstance(x, int | float):
            return f"[{i}]", f"must be a number{' or null' if nulls else ''}, not {kind_of(x)}"
        try:
            finite = math.isfinite(float(x))
        except OverflowError:  # an integer beyond a double's range
            finite = False
        if not finite:
            return f"[{i}]", f"{str(x)[:40]} is not a finite number"
    return None
