"""``ledgerscope open``: browse a ledger by question, phase and arm (Textual app).

The App holds what is app-wide: the themes and the palette drawn from the
current one, the user's keymap, the help screen and the command palette. The
browsing itself (its state, keys and workers) is
:class:`~ledgerscope.tui.screens.main.MainScreen`, the default screen. DuckDB
work runs in thread workers (:mod:`.data`); the panes render ``rich.text.Text``
built by :mod:`.render`. Every key has a stable binding id that a keymap file
can remap (:mod:`.keymap`, :mod:`.bindings`); every action is also in the
command palette.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping
from functools import partial
from pathlib import Path
from typing import ClassVar

from textual.app import App, SystemCommand
from textual.binding import BindingType
from textual.color import Color
from textual.reactive import var
from textual.screen import Screen

from ledgerscope.analysis.stats import DEFAULT_N_RESAMPLES, DEFAULT_SEED
from ledgerscope.common.safe_text import safe
from ledgerscope.tui.bindings import (
    APP_BINDINGS,
    BROWSE_BINDINGS,
    NOT_IN_PALETTE,
    all_bindings,
    keys_in_effect,
)
from ledgerscope.tui.data import LedgerSession
from ledgerscope.tui.render import Palette, make_palette
from ledgerscope.tui.screens.main import MainScreen

_PROCESS_T0 = time.perf_counter()

#: the theme's CSS variables the palette takes its colours from
PALETTE_VARIABLES = (
    "success", "error", "warning", "accent", "primary", "text-muted", "ls-gold", "ls-retrieved",
)  # fmt: skip


def process_start() -> float:
    """perf_counter() value of the process start: ``LEDGERSCOPE_T0`` (epoch seconds) if set."""
    env = os.environ.get("LEDGERSCOPE_T0")
    if env:
        try:
            return time.perf_counter() - (time.time() - float(env))
        except ValueError:
            pass
    return _PROCESS_T0


def theme_palette(variables: Mapping[str, str]) -> Palette:
    """The rich styles of :func:`.render.make_palette`, coloured from a theme's CSS variables."""
    background = variables.get("background", "#000000")

    def rich_colour(value: str) -> str | None:
        if value.startswith("ansi_"):
            name = value[5:]
            return None if name == "default" else name
        try:
            c = Color.parse(value)
            if c.a < 1:
                c = Color.parse(background).blend(c.with_alpha(1.0), c.a)
            return c.hex6
        except Exception:
            return None

    return make_palette(
        {k: v for k in PALETTE_VARIABLES if k in variables and (v := rich_colour(variables[k]))}
    )


class LedgerscopeApp(App):
    CSS_PATH = "app.tcss"
    TITLE = "ledgerscope"
    ENABLE_COMMAND_PALETTE = True
    BINDINGS: ClassVar[list[BindingType]] = list(APP_BINDINGS)

    #: the current theme's styles; screens watch it (a theme change redraws them)
    palette: var[Palette] = var(make_palette, init=False, always_update=True)

    def __init__(
        self,
        session: LedgerSession,
        *,
        rule: str | Path | None = None,
        theme: str | None = None,
        n_resamples: int = DEFAULT_N_RESAMPLES,
        seed: int = DEFAULT_SEED,
        tune_gc: bool = True,
    ) -> None:
        super().__init__()
        self.main = MainScreen(
            session, rule=rule, n_resamples=n_resamples, seed=seed, tune_gc=tune_gc, started=process_start()
        )
        #: the user's keymap (binding id -> keys) as given to ``set_keymap``, for help and the palette
        self.keymap: dict[str, str] = {}
        from ledgerscope.tui.themes import DEFAULT_THEME, is_theme_path, load_themes, theme_from_file

        themes, self._theme_problems = load_themes()
        for t in themes:
            self.register_theme(t)
        wanted = theme or os.environ.get("LEDGERSCOPE_THEME") or DEFAULT_THEME
        if is_theme_path(wanted):  # --theme PATH: a copied and edited theme file
            try:
                from_file = theme_from_file(wanted)
                self.register_theme(from_file)
                wanted = from_file.name
            except ValueError as exc:
                self._theme_problems.append(str(exc))
        if wanted not in self.available_themes:
            self._theme_problems.append(f"unknown theme {wanted!r}; using {DEFAULT_THEME}")
            wanted = DEFAULT_THEME
        self.theme = wanted
        self.set_reactive(LedgerscopeApp.palette, theme_palette(self.get_css_variables()))

    def get_default_screen(self) -> Screen:
        return self.main

    def on_mount(self) -> None:
        from ledgerscope.tui.bindings import binding_ids
        from ledgerscope.tui.keymap import load_keymap

        keymap, problems = load_keymap(binding_ids())
        if keymap:
            self.keymap = keymap
            self.set_keymap(keymap)
        for p in problems + self._theme_problems:
            self.notify(safe(p), severity="warning", timeout=8, markup=False)
        self.theme_changed_signal.subscribe(self, self._theme_changed)

    def _theme_changed(self, _theme) -> None:
        self.palette = theme_palette(self.get_css_variables())

    # -- help and the command palette ----------------------------------------

    def binding_rows(self) -> list[tuple[str, str, str]]:
        """(binding id, keys in effect, description) for every binding."""
        return [(b.id, keys_in_effect(b, self.keymap), b.description) for b in all_bindings() if b.id]

    def action_help(self) -> None:
        from ledgerscope.tui.screens.help import HelpScreen

        self.push_screen(HelpScreen(self.binding_rows(), self.palette))

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        for bindings, target in ((BROWSE_BINDINGS, self.main), (APP_BINDINGS, self)):
            if target is self.main and self.main.trust == "failed":
                continue  # a ledger that failed its checks: nothing to browse (the main screen refuses)
            for b in bindings:
                if b.id and b.action not in NOT_IN_PALETTE:
                    yield SystemCommand(
                        b.description,
                        f"{b.id} · keys: {keys_in_effect(b, self.keymap)}",
                        partial(target.run_action, b.action),
                    )
