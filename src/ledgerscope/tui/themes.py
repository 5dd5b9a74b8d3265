"""Themes: TOML files loaded as Textual ``Theme`` objects.

Searched in order (a later file with the same ``name`` wins): the themes
built into this module (copies of the repository's ``themes/*.toml``, so an
installed wheel has them too), the repository's ``themes/`` directory, then
``$XDG_CONFIG_HOME/ledgerscope/themes/*.toml`` and ``LEDGERSCOPE_THEMES``
(a directory). A file holds the ``Theme`` fields (``name``, ``primary``,
``dark``, ``ansi``...) and an optional ``[variables]`` table (``ls-gold``,
``ls-retrieved`` colour the gold spans and retrieved units).
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import fields
from pathlib import Path

from textual.theme import Theme

DEFAULT_THEME = "ledgerscope-dark"
REPO_THEMES = Path(__file__).resolve().parents[3] / "themes"

BUILTIN: dict[str, dict] = {
    "ledgerscope-dark": {
        "dark": True,
        "primary": "#4C9BE8",
        "secondary": "#2F6DB5",
        "accent": "#3FC1C9",
        "warning": "#E8C547",
        "error": "#F25F5C",
        "success": "#5CCB7A",
        "foreground": "#E4E4E4",
        "background": "#15181C",
        "surface": "#1E2227",
        "panel": "#283038",
        "variables": {"ls-gold": "#F2C14E", "ls-retrieved": "#86B8F0"},
    },
    "ledgerscope-light": {
        "dark": False,
        "primary": "#1F5FA8",
        "secondary": "#3B6EA5",
        "accent": "#00767D",
        "warning": "#8A5A00",
        "error": "#B3261E",
        "success": "#1B7A35",
        "foreground": "#1A1A1A",
        "background": "#FAFAF7",
        "surface": "#F0F0EB",
        "panel": "#E2E4E0",
        "variables": {"ls-gold": "#7A4E00", "ls-retrieved": "#1F5FA8"},
    },
    "ledgerscope-high-contrast": {
        "dark": True,
        "primary": "#FFFFFF",
        "secondary": "#FFFF00",
        "accent": "#00FFFF",
        "warning": "#FFFF00",
        "error": "#FF5555",
        "success": "#55FF55",
        "foreground": "#FFFFFF",
        "background": "#000000",
        "surface": "#000000",
        "panel": "#1C1C1C",
        "luminosity_spread": 0.3,
        "text_alpha": 1.0,
        "variables": {"ls-gold": "#FFFF00", "ls-retrieved": "#00FFFF"},
    },
}
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


def theme_dirs() -> list[Path]:
    dirs = [REPO_THEMES]
    base = (
        Path(os.environ["XDG_CONFIG_HOME"]) if os.environ.get("XDG_CONFIG_HOME") else Path.home() / ".config"
    )
    dirs.append(base / "ledgerscope" / "themes")
    if os.environ.get("LEDGERSCOPE_THEMES"):
        dirs.append(Path(os.environ["LEDGERSCOPE_THEMES"]).expanduser())
    return dirs


def load_themes(dirs: list[Path] | None = None) -> tuple[list[Theme], list[str]]:
    """Every theme (built-in, then files), and the problems found in files."""
    themes: dict[str, Theme] = {
        name: theme_from_dict({"name": name, **spec}) for name, spec in BUILTIN.items()
    }
    problems: list[str] = []
    for d in theme_dirs() if dirs is None else dirs:
        if not d.is_dir():
            continue
        for path in sorted(d.glob("*.toml")):
            try:
                theme = theme_from_dict(tomllib.loads(path.read_text(encoding="utf-8")), str(path))
            except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, ValueError, TypeError) as exc:
                problems.append(str(exc) if isinstance(exc, ValueError) else f"{path}: {exc}")
                continue
            themes[theme.name] = theme
    return list(themes.values()), problems
