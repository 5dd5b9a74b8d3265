"""Themes: TOML files loaded as Textual ``Theme`` objects.

The built-in themes are the plain files in the repository's top-level ``themes/`` (dark, light,
high-contrast, ansi) for a user to read, copy and edit; the ``*.toml`` beside this module are links
to them, so the wheel ships their content as package data. ``--theme`` takes a name or the path of
such a file (:func:`theme_from_file`). Searched
in order, a later file with the same ``name`` winning: the built-in files, then
``$XDG_CONFIG_HOME/ledgerscope/themes/*.toml`` (``~/.config/...``), then the
directory named by ``LEDGERSCOPE_THEMES``. A file holds the ``Theme`` fields
(``name``, ``primary``, ``dark``, ``ansi``...) and an optional ``[variables]``
table (``ls-gold``, ``ls-retrieved`` colour the gold spans and retrieved units).
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import fields
from pathlib import Path

from textual.theme import Theme

DEFAULT_THEME = "ledgerscope-dark"
BUILT_IN_THEMES = Path(__file__).resolve().parent
_FIELDS = {f.name for f in fields(Theme)}


def theme_from_dict(data: dict, source: str = "theme") -> Theme:
    """A Theme from a parsed TOML table; ValueError naming the problem."""
    unknown = sorted(set(data) - _FIELDS)
    if unknown:
        raise ValueError(f"{source}: unknown theme field(s) {', '.join(unknown)}")
    if not data.get("name") or not data.get("primary"):
        raise ValueError(f"{source}: a theme needs 'name' and 'primary'")
    variables = data.get("variables") or {}
    if not isinstance(variables, dict) or not all(isinstance(v, str) for v in variables.values()):
        raise ValueError(f"{source}: [variables] must map names to colour strings")
    return Theme(**{**data, "variables": dict(variables)})


def theme_from_file(path: str | Path) -> Theme:
    """A theme from one TOML file (``--theme PATH``); ValueError naming the file and the problem."""
    path = Path(path)
    try:
        return theme_from_dict(tomllib.loads(path.read_text(encoding="utf-8")), str(path))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, TypeError) as exc:
        raise ValueError(f"{path}: {exc}") from None


def is_theme_path(value: str) -> bool:
    """``--theme`` names a file (a ``.toml`` suffix or a path separator) rather than a theme."""
    return value.endswith(".toml") or os.sep in value or "/" in value


def theme_dirs(env: dict[str, str] | None = None) -> list[Path]:
    """The directories searched, in order: built-in, the user's config, ``LEDGERSCOPE_THEMES``."""
    env = os.environ if env is None else env
    base = Path(env["XDG_CONFIG_HOME"]) if env.get("XDG_CONFIG_HOME") else Path.home() / ".config"
    dirs = [BUILT_IN_THEMES, base / "ledgerscope" / "themes"]
    if env.get("LEDGERSCOPE_THEMES"):
        dirs.append(Path(env["LEDGERSCOPE_THEMES"]).expanduser())
    return dirs


def load_themes(dirs: list[Path] | None = None) -> tuple[list[Theme], list[str]]:
    """Every theme found in ``dirs`` (default :func:`theme_dirs`), and the problems found in files."""
    themes: dict[str, Theme] = {}
    problems: list[str] = []
    for d in theme_dirs() if dirs is None else dirs:
        if not d.is_dir():
            continue
        for path in sorted(d.glob("*.toml")):
            try:
                theme = theme_from_file(path)
            except ValueError as exc:
                problems.append(str(exc))
                continue
            themes[theme.name] = theme
    return list(themes.values()), problems
