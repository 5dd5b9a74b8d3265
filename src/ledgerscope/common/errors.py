"""Errors that carry a location, so every message reads `file:line: field: reason`."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    """One thing wrong with an input, located as precisely as the input allows."""

    file: str
    line: int | None
    field: str
    reason: str

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        return f"{where}: {self.field}: {self.reason}"


class LedgerscopeError(Exception):
    """Base class: an error a user can act on (shown without a traceback)."""


class InputError(LedgerscopeError):
    """One or more problems in user input."""

    def __init__(self, problems: list[Problem] | Problem):
        self.problems = [problems] if isinstance(problems, Problem) else list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


class CoordinateError(LedgerscopeError, ValueError):
    """An offset that does not map exactly between coordinate systems."""


class DigestMismatch(LedgerscopeError, ValueError):
    """A declared source version does not match the bytes."""

    def __init__(self, doc_id: str, declared: str, actual: str):
        self.doc_id, self.declared, self.actual = doc_id, declared, actual
        super().__init__(
            f"source {doc_id!r}: declared version {declared} does not match the text's digest {actual}"
        )
