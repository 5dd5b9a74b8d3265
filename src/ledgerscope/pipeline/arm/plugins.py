"""Stages from outside ledgerscope: a ``"package.module:function"`` named in the arm (``kind =
"python"``), or an installed distribution's entry point in the group ``ledgerscope.stages``.

Entry points. A distribution registers one stage per entry point, named ``SEAM:KIND``, where
SEAM is ``chunker``, ``retriever``, ``reranker`` or ``generator`` and KIND is what an arm writes
as that stage's ``kind``::

    [project.entry-points."ledgerscope.stages"]
    "generator:first-block" = "my_package.stages:FirstBlock"
    "chunker:fixed-codepoints" = "my_package.stages:FixedCodepoints"

The target is a *function* (called with the stage's request dataclass, :mod:`.plugin_stages`) or
a *class* (instantiated once per arm with the table's ``options`` as keyword arguments, and
implementing the stage's protocol, :mod:`ledgerscope.pipeline.contracts.stages`). Discovery reads the
installed metadata only:
nothing is imported until an arm uses the kind (then :func:`load_target` imports it, while the
arm is validated, before any model loads). A built-in kind is never shadowed: an entry point
that reuses one is listed as a problem and ignored, and so is a malformed name.
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import metadata

GROUP = "ledgerscope.stages"
SEAMS = ("chunker", "retriever", "reranker", "generator")
_DOTTED = r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*"
_TARGET = re.compile(f"{_DOTTED}:{_DOTTED}")
_KIND = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


class PluginImportError(ImportError):
    """A named callable that cannot be imported (the message says which and why)."""


@dataclass(frozen=True)
class PluginStage:
    """One registered stage: where it comes from, and what it names (not yet imported)."""

    seam: str
    kind: str
    target: str
    distribution: str
    version: str

    def describe(self) -> dict:
        return {
            "kind": self.kind,
            "target": self.target,
            "distribution": self.distribution,
            "version": self.version,
        }


def target_problem(target: object) -> str | None:
    """Why ``target`` is not a ``package.module:attribute`` name, or None."""
    if not isinstance(target, str) or not _TARGET.fullmatch(target):
        return "must name a callable as 'package.module:function'"
    return None


def load_target(target: str) -> object:
    """Import ``package.module:attribute`` (dotted attributes allowed) and return the object."""
    why = target_problem(target)
    if why:
        raise PluginImportError(f"{target!r} {why}")
    module_name, _, attr = target.partition(":")
    try:
        obj: object = importlib.import_module(module_name)
    except Exception as exc:  # the user's module: any error importing it is theirs to see
        raise PluginImportError(
            f"cannot import module {module_name!r}: {type(exc).__name__}: {exc}"
        ) from None
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise PluginImportError(f"module {module_name!r} has no attribute {attr!r}") from None
    if not callable(obj):
        raise PluginImportError(f"{target!r} is not callable (a function or a class)")
    return obj


@lru_cache(maxsize=1)
def discovered(builtins: tuple[tuple[str, tuple[str, ...]], ...] = ()) -> tuple[dict, tuple[str, ...]]:
    """({seam: {kind: PluginStage}}, problems) over every installed entry point of :data:`GROUP`.

    ``builtins`` are the built-in kinds per seam, which an entry point may not reuse.
    """
    reserved = dict(builtins)
    found: dict[str, dict[str, PluginStage]] = {seam: {} for seam in SEAMS}
    problems: list[str] = []
    for ep in sorted(metadata.entry_points(group=GROUP), key=lambda e: (e.name, e.value)):
        dist = getattr(ep, "dist", None)
        dist_name = dist.metadata["Name"] if dist is not None else "?"
        dist_version = dist.version if dist is not None else "?"
        seam, sep, kind = ep.name.partition(":")
        where = f"entry point {ep.name!r} of {dist_name} {dist_version}"
        if not sep or seam not in SEAMS or not _KIND.fullmatch(kind):
            problems.append(f"{where}: its name must be SEAM:KIND with SEAM one of {', '.join(SEAMS)}")
            continue
        if kind in reserved.get(seam, ()) or kind == "python":
            problems.append(f"{where}: {kind!r} is a built-in {seam} kind; ignored")
            continue
        if kind in found[seam]:
            problems.append(f"{where}: {seam} kind {kind!r} is registered twice; the first one is used")
            continue
        if target_problem(ep.value):
            problems.append(f"{where}: {ep.value!r} must be 'package.module:object'")
            continue
        found[seam][kind] = PluginStage(seam, kind, ep.value, dist_name, dist_version)
    return found, tuple(problems)


def refresh() -> None:
    """Forget what was discovered (after installing a distribution in the running process)."""
    discovered.cache_clear()
    importlib.invalidate_caches()
