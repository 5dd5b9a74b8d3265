"""scripts/constraints.txt pins the whole tree the suite installs, not only the direct dependencies.

With only a few pins, pip's resolver backtracked through the ranges of Phoenix, LangChain,
LlamaIndex and Ray on a fresh machine for 40 minutes and gave up (``resolution-too-deep``): CI failed
before a test ran. This walks the installed requirements of ``ledgerscope[test]`` and fails when a
package is added without regenerating the pins (the command is at the top of the file).
"""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

CONSTRAINTS = Path(__file__).resolve().parents[1] / "scripts" / "constraints.txt"


def _pins() -> dict[str, str]:
    pins = {}
    for line in CONSTRAINTS.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version, f"constraints.txt: {line!r} is not an exact pin"
            pins[canonicalize_name(name)] = version
    return pins


def _installed_tree(root: str, extras: set[str]) -> set[str]:
    """Every distribution that ``root[extras]`` requires here, transitively (markers evaluated)."""
    seen: set[tuple[str, frozenset[str]]] = set()
    names: set[str] = set()
    todo = [(root, frozenset(extras))]
    while todo:
        name, wanted = todo.pop()
        if (name, wanted) in seen:
            continue
        seen.add((name, wanted))
        names.add(name)
        for text in metadata.requires(name) or []:
            req = Requirement(text)
            envs = [{"extra": e} for e in wanted] or [{"extra": ""}]
            if req.marker is None or any(req.marker.evaluate(env) for env in envs):
                todo.append((canonicalize_name(req.name), frozenset(req.extras)))
    return names


def test_every_package_of_the_test_install_is_pinned_at_its_installed_version():
    pins = _pins()
    tree = _installed_tree("ledgerscope", {"test"}) - {"ledgerscope"}
    assert len(tree) > 100  # the walk followed the extras (Phoenix, Ray, LangChain ...)
    unpinned = sorted(name for name in tree if name not in pins)
    assert not unpinned, f"not in scripts/constraints.txt (regenerate it): {unpinned}"
    drifted = {
        name: (pins[name], metadata.version(name))
        for name in tree
        if metadata.version(name).split("+")[0] != pins[name]
    }
    assert not drifted, f"installed versions differ from the pins: {drifted}"
