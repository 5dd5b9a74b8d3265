"""Themes a user can see: the shipped themes are plain files in the top-level ``themes/``, the
package's built-in ones are those files, and ``--theme PATH`` loads a copied, edited one."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledgerscope.tui.themes import BUILT_IN_THEMES, is_theme_path, load_themes, theme_from_file

ROOT = Path(__file__).resolve().parent.parent
THEMES = ROOT / "themes"


def test_top_level_themes_are_plain_files_and_the_built_in_ones():
    files = sorted(THEMES.glob("*.toml"))
    assert [p.name for p in files] == ["ansi.toml", "dark.toml", "high-contrast.toml", "light.toml"]
    assert not any(p.is_symlink() for p in files)
    for p in files:
        assert (BUILT_IN_THEMES / p.name).read_bytes() == p.read_bytes()
    themes, problems = load_themes([BUILT_IN_THEMES])
    assert not problems
    assert {t.name for t in themes} == {theme_from_file(p).name for p in files}


def test_a_copied_and_edited_theme_loads_by_path(tmp_path):
    copy = tmp_path / "mine.toml"
    copy.write_text(
        (THEMES / "dark.toml")
        .read_text(encoding="utf-8")
        .replace('name = "ledgerscope-dark"', 'name = "my-dark"'),
        encoding="utf-8",
    )
    theme = theme_from_file(copy)
    assert theme.name == "my-dark" and theme.dark
    assert is_theme_path(str(copy)) and is_theme_path("mine.toml") and not is_theme_path("ledgerscope-dark")
    copy.write_text('name = "x"\nprimary = "#000000"\ncolour = "red"\n', encoding="utf-8")
    with pytest.raises(ValueError, match="unknown theme field"):
        theme_from_file(copy)
    with pytest.raises(ValueError, match=r"nope\.toml"):
        theme_from_file(tmp_path / "nope.toml")


def test_open_theme_path_is_the_apps_theme(tmp_path, sample_ledger):
    from ledgerscope.tui.app import LedgerscopeApp
    from ledgerscope.tui.data import LedgerSession

    copy = tmp_path / "mine.toml"
    copy.write_text(
        (THEMES / "light.toml")
        .read_text(encoding="utf-8")
        .replace('name = "ledgerscope-light"', 'name = "my-light"'),
        encoding="utf-8",
    )
    app = LedgerscopeApp(LedgerSession(sample_ledger, None, "candidate", "baseline"), theme=str(copy))
    assert app.theme == "my-light" and not app._theme_problems
    broken = LedgerscopeApp(
        LedgerSession(sample_ledger, None, "candidate", "baseline"), theme=str(tmp_path / "missing.toml")
    )
    assert broken.theme == "ledgerscope-dark" and "missing.toml" in broken._theme_problems[0]
