"""The layering holds: import-linter's contracts (pyproject.toml [tool.importlinter]), no cycle between
modules, and no module that loads torch when it is imported.

A broken contract is a wrong-way import: fix the import (move what it needs down a layer), do not
widen the contract.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


@pytest.mark.skipif(not LINT_IMPORTS.exists(), reason="import-linter is in the test extra")
def test_import_contracts_are_kept(tmp_path: Path) -> None:
    done = subprocess.run(
        [str(LINT_IMPORTS), "--no-logo", "--no-cache", str(ROOT / "pyproject.toml")],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout, done.stdout


@pytest.mark.skipif(not LINT_IMPORTS.exists(), reason="import-linter is in the test extra")
def test_a_wrong_way_import_breaks_the_layers_contract(tmp_path: Path) -> None:
    """The contract can fail: a copy of the package with one import from common up to cli breaks it."""
    import shutil

    copy = tmp_path / "src"
    shutil.copytree(
        SRC / "ledgerscope", copy / "ledgerscope", ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
    )
    with (copy / "ledgerscope" / "common" / "errors.py").open("a") as f:
        f.write("\n\ndef _upward():\n    from ledgerscope.cli import main  # noqa: F401\n")
    env = _env()
    env["PYTHONPATH"] = str(copy)
    done = subprocess.run(
        [str(LINT_IMPORTS), "--no-logo", "--no-cache", "--contract", "layers", str(ROOT / "pyproject.toml")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode != 0, done.stdout
    assert "ledgerscope.common.errors -> ledgerscope.cli.main" in done.stdout, done.stdout


RUFF = Path(sys.executable).with_name("ruff")


@pytest.mark.skipif(not RUFF.exists(), reason="ruff is in the test extra")
@pytest.mark.parametrize("command", [["check"], ["format", "--check"]], ids=["lint", "format"])
def test_ruff_is_clean(command: list[str]) -> None:
    """The linter and the formatter ([tool.ruff] in pyproject.toml) have nothing to say."""
    done = subprocess.run(
        [str(RUFF), *command, "src", "tests", "scripts"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr


MYPY = Path(sys.executable).with_name("mypy")


@pytest.mark.skipif(not MYPY.exists(), reason="mypy is in the test extra")
def test_the_typed_packages_type_check() -> None:
    """mypy, strict, over the packages pyproject.toml's [tool.mypy] names (rules/, ledger/, analysis/,
    export/, report/), in one run. Its incremental cache (.mypy_cache/, git-ignored) makes a rerun about a
    second; a fresh clone's first run builds it (a few seconds of CPU)."""
    done = subprocess.run(
        [str(MYPY), "--cache-dir", str(ROOT / ".mypy_cache")],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def _strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (scipy's), each sorted."""
    from scipy.sparse import coo_array
    from scipy.sparse.csgraph import connected_components

    names = sorted(set(graph) | {m for targets in graph.values() for m in targets})
    index = {m: i for i, m in enumerate(names)}
    edges = [(index[a], index[b]) for a, targets in graph.items() for b in targets]
    rows, cols = zip(*edges, strict=True) if edges else ((), ())
    adjacency = coo_array(([1] * len(edges), (rows, cols)), shape=(len(names), len(names)))
    _, labels = connected_components(adjacency, directed=True, connection="strong")
    members: dict[int, list[str]] = {}
    for name, label in zip(names, labels.tolist(), strict=True):
        members.setdefault(label, []).append(name)
    return sorted(group for group in members.values() if len(group) > 1)


def test_strongly_connected_finds_a_cycle() -> None:
    assert _strongly_connected({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _strongly_connected({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_between_modules() -> None:
    """Every import grimp sees (those inside functions too), module to module, including a package's
    ``__init__`` and its own children, which the acyclic_siblings contract does not compare."""
    grimp = pytest.importorskip("grimp")
    sys.path.insert(0, str(SRC))
    try:
        graph = grimp.build_graph("ledgerscope", cache_dir=None)
    finally:
        sys.path.remove(str(SRC))
    edges = {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    assert _strongly_connected(edges) == []


def test_importing_any_module_loads_no_torch() -> None:
    """Heavy model libraries load only inside the functions that embed, rerank or generate."""
    script = textwrap.dedent("""
        import importlib, pkgutil, sys
        import ledgerscope
        names = [m.name for m in pkgutil.walk_packages(ledgerscope.__path__, "ledgerscope.")
                 if not m.name.endswith("__main__")]
        for name in names:
            importlib.import_module(name)
        heavy = sorted(m for m in ("torch", "sentence_transformers", "transformers") if m in sys.modules)
        print(len(names), heavy)
        assert not heavy, heavy
        assert len(names) > 60, names
    """)
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 0, done.stdout + done.stderr


def _private_imports(tree) -> list[tuple[int, str, str]]:
    """(line, module, name) of every ``from ledgerscope... import _name`` in a parsed module."""
    import ast

    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("ledgerscope"):
            found.extend(
                (node.lineno, node.module, a.name)
                for a in node.names
                if a.name.startswith("_") and not a.name.startswith("__")
            )
    return found


def test_private_import_finder_finds_one() -> None:
    import ast

    tree = ast.parse("def f():\n    from ledgerscope.analysis.stats.metrics import _num, finite\n")
    assert _private_imports(tree) == [(2, "ledgerscope.analysis.stats.metrics", "_num")]


def test_no_module_imports_another_modules_private_names() -> None:
    """A name another module needs is public (or moves to where both can reach it)."""
    import ast

    found = [
        f"{path.relative_to(SRC)}:{line}: {module}.{name}"
        for path in sorted(SRC.rglob("*.py"))
        for line, module, name in _private_imports(ast.parse(path.read_text(encoding="utf-8")))
    ]
    assert found == []


# --- the house stays tidy: functions <= 60 lines, files <= 500 lines (CONTRIBUTING.md) ----------------

MAX_FUNCTION_LINES = 60
MAX_FILE_LINES = 500
#: modules (``__init__`` aside) in one package folder: a larger group becomes a subpackage named for its job
MAX_FOLDER_MODULES = 15
#: how a function over MAX_FUNCTION_LINES says why it stays whole: a docstring sentence "(Long by ...)"
#: or "(Long because ...)"
LONG_REASON = re.compile(r"\(Long (only )?(by|because)\b")
#: the files over MAX_FILE_LINES, each with why it stays one file (path under src/ledgerscope)
LONG_FILES: dict[str, str] = {
    "rules/answer_match.py": "a 100-line module docstring states the matching rules beside the code that "
    "applies them (about 360 lines of code)",
    "trace/langchain.py": "one LangChain callback handler (one method per hook) with its declared rules in "
    "the docstring; the trace package installs on its own, so it stays one module",
    "analysis/diagnosis/query.py": "the filter predicate's validation is one security boundary, read top "
    "to bottom: tokens, parse tree, binds, then the select that runs only a validated predicate",
}


#: long functions waiting for a split, each with why it waits (path:function -> why); empty when none
#: does. A branch that cannot split one now (another branch edits the same body) lists it here.
LONG_FUNCTIONS_PENDING: dict[str, str] = {}


def _long_functions(source: str) -> list[tuple[int, str, int, str]]:
    """(line, name, lines, docstring) of every function or method over MAX_FUNCTION_LINES, nested ones too."""
    import ast

    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            if lines > MAX_FUNCTION_LINES:
                found.append((node.lineno, node.name, lines, ast.get_docstring(node) or ""))
    return found


def test_the_length_finder_finds_a_long_function_and_its_reason() -> None:
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES))
    short = "def short():\n    return 1\n"
    found = _long_functions(short + f'def long():\n    """Why. (Long by its table.)"""\n{body}')
    assert [(name, lines) for _, name, lines, _ in found] == [("long", MAX_FUNCTION_LINES + 2)]
    assert LONG_REASON.search(found[0][3])
    assert not LONG_REASON.search("A long function.")


def _sources() -> list[Path]:
    return sorted((SRC / "ledgerscope").rglob("*.py"))


def test_a_function_over_60_lines_says_why_in_its_docstring() -> None:
    """Split a long function into named helpers; where it reads better whole (Typer options, one
    table), its docstring says so with "(Long by ...)" or "(Long because ...)"."""
    long = {
        f"{path.relative_to(SRC / 'ledgerscope')}:{name}": (line, lines, doc)
        for path in _sources()
        for line, name, lines, doc in _long_functions(path.read_text(encoding="utf-8"))
    }
    unexplained = [
        f"{key} (line {line}, {lines} lines)"
        for key, (line, lines, doc) in long.items()
        if not LONG_REASON.search(doc) and key not in LONG_FUNCTIONS_PENDING
    ]
    assert not unexplained, "functions over 60 lines with no reason in their docstring:\n" + "\n".join(
        unexplained
    )
    stale = sorted(set(LONG_FUNCTIONS_PENDING) - set(long))
    assert not stale, f"LONG_FUNCTIONS_PENDING entries no longer over {MAX_FUNCTION_LINES} lines: {stale}"


def test_a_file_over_500_lines_is_listed_with_its_reason() -> None:
    """Split a long module along a seam (re-export what callers import); one that must stay whole is
    listed in LONG_FILES with why. An entry for a file back under the limit goes too."""
    sizes = {
        str(path.relative_to(SRC / "ledgerscope")): len(path.read_text(encoding="utf-8").splitlines())
        for path in _sources()
    }
    over = {name: n for name, n in sizes.items() if n > MAX_FILE_LINES}
    assert set(over) <= set(LONG_FILES), f"files over {MAX_FILE_LINES} lines: {over}"
    stale = sorted(name for name in LONG_FILES if sizes.get(name, 0) <= MAX_FILE_LINES)
    assert not stale, f"LONG_FILES entries no longer over {MAX_FILE_LINES} lines: {stale}"
    assert all(reason.strip() for reason in LONG_FILES.values())


def test_no_package_folder_holds_more_than_15_modules() -> None:
    """A reader finds a module by its folder: past about 15 the listing is read top to bottom. Group
    what grows into a subpackage that says its job (as ``analysis/stats/release/``)."""
    from collections import Counter

    modules = [path for path in _sources() if path.name != "__init__.py"]
    counts = Counter(str(path.parent.relative_to(SRC / "ledgerscope")) for path in modules)
    crowded = {folder: n for folder, n in counts.items() if n > MAX_FOLDER_MODULES}
    assert not crowded, f"folders over {MAX_FOLDER_MODULES} modules: {crowded}"
