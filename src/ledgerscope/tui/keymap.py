"""User keymaps: TOML files that rebind the TUI's keys by binding id. No Textual here.

Where: the file named by ``LEDGERSCOPE_KEYMAP``, else
``$XDG_CONFIG_HOME/ledgerscope/keymap.toml`` (``~/.config/ledgerscope/keymap.toml``).
Format: binding id = keys (a comma-separated string or a list of strings),
at the top level or under a ``[keymap]`` table::

    [keymap]
    go-down = "j,down"
    phase-next = ["right_square_bracket", "l"]
    export = "x"

Unknown ids and malformed values are reported (never fatal); the rest applies.
The ids are listed by ``?`` in the TUI and in :mod:`ledgerscope.tui.bindings`.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Iterable
from pathlib import Path

_KEY = re.compile(r"^[A-Za-z0-9_+\-]+$|^.$")


def keymap_path(env: dict[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    if env.get("LEDGERSCOPE_KEYMAP"):
        return Path(env["LEDGERSCOPE_KEYMAP"]).expanduser()
    base = (
        Path(env["XDG_CONFIG_HOME"]).expanduser() if env.get("XDG_CONFIG_HOME") else Path.home() / ".config"
    )
    return base / "ledgerscope" / "keymap.toml"


def parse_keymap(
    text: str, known_ids: Iterable[str], source: str = "keymap"
) -> tuple[dict[str, str], list[str]]:
    """(binding id -> comma-separated keys, problems) from TOML text."""
    problems: list[str] = []
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        return {}, [f"{source}: not valid TOML: {exc}"]
    table = data.get("keymap", data) if isinstance(data.get("keymap"), dict) else data
    known = set(known_ids)
    out: dict[str, str] = {}
    for binding_id, value in table.items():
        if binding_id == "keymap":
            continue
        if binding_id not in known:
            problems.append(f"{source}: unknown binding id {binding_id!r}")
            continue
        keys = [k.strip() for k in value.split(",")] if isinstance(value, str) else value
        if not isinstance(keys, list) or not keys or not all(isinstance(k, str) and k.strip() for k in keys):
            problems.append(f"{source}: {binding_id}: expected a key string or a list of key strings")
            continue
        bad = [k for k in keys if not _KEY.match(k.strip())]
        if bad:
            problems.append(f"{source}: {binding_id}: not a key name: {', '.join(map(repr, bad))}")
            continue
        out[binding_id] = ",".join(k.strip() for k in keys)
    return out, problems


def load_keymap(known_ids: Iterable[str], path: Path | None = None) -> tuple[dict[str, str], list[str]]:
    """The user's keymap (empty when there is no file) and any problems found in it."""
    path = path or keymap_path()
    if not path.is_file():
        if os.environ.get("LEDGERSCOPE_KEYMAP"):
            return {}, [f"{path}: keymap file not found"]
        return {}, []
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return {}, [f"{path}: cannot read: {exc}"]
    return parse_keymap(text, known_ids, str(path))
