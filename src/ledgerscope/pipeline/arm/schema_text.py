"""The schema as text: the default arm (``ledgerscope config default``) and the key table of
docs/config.md, both rendered from :mod:`.schema` so neither can drift from the code.

In the default arm every key that is not optional is written with its default and a comment saying
what it does; optional keys (absent unless set) are comments an arm can uncomment.
"""

from __future__ import annotations

import json
import re
import textwrap
import typing
from typing import Any

from pydantic import BaseModel

from ledgerscope.pipeline.arm import schema

#: the top-level keys users type most, printed first, in this order
COMMON = ("capacity", "overlap", "phases", "edge_policy", "budget_tokens", "top_k", "rerank_depth")
_WIDTH = 110
_COLUMN = 25


def toml_value(value: Any) -> str:
    """``value`` written as TOML (strings as basic strings, tables inline)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        inner = ", ".join(f"{_key(k)} = {toml_value(v)}" for k, v in value.items())
        return "{ " + inner + " }" if inner else "{}"
    raise TypeError(f"no TOML form for {type(value).__name__}")


def _key(name: str) -> str:
    return name if re.fullmatch(r"[A-Za-z0-9_-]+", name) else json.dumps(name)


def _line(assignment: str, doc: str, prefix: str = "") -> list[str]:
    """``assignment`` with ``doc`` as its comment, wrapped under the comment's column."""
    head = prefix + assignment
    column = max(_COLUMN, len(head) + 2)
    width = max(30, _WIDTH - column - 2)
    parts = textwrap.wrap(doc, width) or [""]
    out = [f"{head.ljust(column)}# {parts[0]}"]
    out.extend(f"{prefix.ljust(column)}# {part}" for part in parts[1:])
    return out


def _comment(text: str) -> list[str]:
    return ["# " + part for part in textwrap.wrap(_plain(text), _WIDTH - 2)]


def _plain(text: str) -> str:
    """A docstring as one line of Markdown (reST's double backquotes as single ones)."""
    return " ".join(text.split()).replace("``", "`")


def _value_of(info: Any) -> Any:
    sub = schema.submodel(info)
    if sub is not None:
        return schema.defaults(sub)
    extra = schema.meta(info)
    return extra["example"] if extra.get("optional") and "example" in extra else info.default


def _keys(model: type[BaseModel], names: list[str]) -> list[str]:
    """The ``key = value  # doc`` lines of ``names`` (optional ones as comments)."""
    out = []
    optional = [n for n in names if schema.meta(model.model_fields[n]).get("optional")]
    for name in names:
        if name not in optional:
            info = model.model_fields[name]
            out.extend(_line(f"{_key(name)} = {toml_value(_value_of(info))}", info.description or ""))
    if optional:
        out.append("# optional (absent unless set; an arm that does not set them keeps its digest):")
        for name in optional:
            info = model.model_fields[name]
            out.extend(_line(f"{_key(name)} = {toml_value(_value_of(info))}", info.description or "", "# "))
    return out


def _table(model: type[BaseModel], path: str, commented: bool = False) -> list[str]:
    """One ``[table]`` section and its sub-tables (an optional sub-table is written as comments)."""
    plain, subs = [], []
    for name, info in model.model_fields.items():
        sub = schema.submodel(info)
        (plain if sub is None or schema.meta(info).get("inline") else subs).append(name)
    out = ["", f"[{path}]", *_comment(model.__doc__ or "")]
    if commented:
        out = ["", f"# [{path}]", *_comment(model.__doc__ or "")]
        for name in plain:
            info = model.model_fields[name]
            out.extend(_line(f"{_key(name)} = {toml_value(_value_of(info))}", info.description or "", "# "))
        return out
    out.extend(_keys(model, plain))
    for name in subs:
        info = model.model_fields[name]
        out.extend(_table(schema.submodel(info), f"{path}.{name}", bool(schema.meta(info).get("optional"))))
    return out


def default_toml() -> str:
    """The documented default arm: every key with its default and what it does."""
    arm = schema.Arm
    top = [n for n, info in arm.model_fields.items() if schema.submodel(info) is None]
    rest = [n for n in top if n not in COMMON and n != "name"]
    out = [
        "# ledgerscope arm configuration. One file per arm; `name` labels the arm in the ledger.",
        "# Every key with its default (docs/config.md explains each one); commented keys are optional.",
        *_keys(arm, ["name"]),
        "",
        "# --- the keys you will type most " + "-" * 43,
        *_keys(arm, list(COMMON)),
    ]
    if rest:
        out += ["", *_keys(arm, rest)]
    for name, info in arm.model_fields.items():
        sub = schema.submodel(info)
        if sub is not None:
            out.extend(_table(sub, name))
    return "\n".join(out) + "\n"


# --- the docs table ---------------------------------------------------------------------------------


def _type(info: Any) -> str:
    annotation = info.annotation
    if typing.get_origin(annotation) is typing.Literal:
        return "string"
    if schema.submodel(info) is not None:
        return "table"
    return {
        int: "integer",
        float: "number",
        bool: "boolean",
        str: "string",
        dict: "table",
        list[str]: "list of strings",
    }.get(annotation, "string, list or table")


def _allowed(info: Any) -> str:
    """The values a key accepts, in words (its choices, its range, its single-value check)."""
    extra = schema.meta(info)
    if typing.get_origin(info.annotation) is typing.Literal:
        return " | ".join(f"`{c}`" for c in typing.get_args(info.annotation))
    if extra.get("seam"):  # the built-in kinds (.kinds, the one place a kind is named) or a plugin's
        from ledgerscope.pipeline.arm.kinds import TABLES

        return " | ".join(f"`{c}`" for c in TABLES[extra["seam"]]) + " | a plugin's kind"
    if extra.get("allowed"):
        return extra["allowed"]
    found = [schema.ALLOWED[m] for m in info.metadata if m in schema.ALLOWED]
    low = next((m.ge for m in info.metadata if hasattr(m, "ge")), None)
    high = next((m.le for m in info.metadata if hasattr(m, "le")), None)
    if low is not None and high is not None:
        found.append(f"{low} to {high}")
    elif low is not None:
        found.append(f">= {low}")
    return ", ".join(found)


def _default_cell(info: Any) -> str:
    extra = schema.meta(info)
    if schema.submodel(info) is not None and not extra.get("inline"):
        return "(table)"
    value = info.default if extra.get("optional") else _value_of(info)
    shown = extra.get("shown") or (f"`{toml_value(value)}`" if value is not None else "")
    return f"unset ({shown})" if extra.get("optional") else shown


def _notes(info: Any) -> str:
    extra = schema.meta(info)
    notes = []
    if extra.get("kinds"):
        notes.append(f"read by kind {extra['kinds']}")
    if extra.get("later") is True:
        notes.append("left out of the digest at its default")
    elif extra.get("later"):
        notes.append(f"left out of the digest at {extra['later']}, its default when it was added")
    if extra.get("digest") is False:
        notes.append("never part of the digest")
    return (info.description or "") + (f" ({'; '.join(notes)})" if notes else "")


def _rows(model: type[BaseModel], prefix: str) -> list[str]:
    rows = []
    for name, info in model.model_fields.items():
        sub = schema.submodel(info)
        if sub is not None and not schema.meta(info).get("inline"):
            continue
        cells = [f"`{prefix}{name}`", _type(info), _default_cell(info), _allowed(info), _notes(info)]
        rows.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
        if sub is not None:  # an inline table: its keys too
            rows.extend(_rows(sub, f"{prefix}{name}."))
    return rows


def _sections(model: type[BaseModel], path: str, info: Any = None) -> list[str]:
    title = f"`[{path}]`" if path else "Top level"
    intro = _plain(model.__doc__ or "")
    if info is not None:
        extra = schema.meta(info)
        optional = "An optional table: absent unless the arm writes it."
        notes = [
            n
            for n, on in (
                (optional, extra.get("optional")),
                ("Left out of the digest while it holds its defaults.", extra.get("later")),
            )
            if on
        ]
        said = info.description.lower() in intro.lower()  # a table's own docstring usually says it
        lead = [] if said else [f"{info.description[:1].upper()}{info.description[1:]}."]
        intro = " ".join([*lead, intro, *notes])
    out = [
        f"### {title}",
        "",
        intro,
        "",
        "| key | type | default | allowed | what it does |",
        "| --- | --- | --- | --- | --- |",
        *_rows(model, f"{path}." if path else ""),
        "",
    ]
    for name, sub_info in model.model_fields.items():
        sub = schema.submodel(sub_info)
        if sub is not None and not schema.meta(sub_info).get("inline"):
            out.extend(_sections(sub, f"{path}.{name}" if path else name, sub_info))
    return out


def markdown_table() -> str:
    """Every key of an arm as Markdown: one table per ``[table]``, top level first."""
    return "\n".join(_sections(schema.Arm, "")).rstrip("\n") + "\n"
