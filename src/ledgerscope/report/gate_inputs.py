"""What a release gate's artefacts (JUnit XML, Markdown summary) are written from, in one value."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class GateOutcome:
    """A decided comparison and its flips; paths as the user gave them, relative (never absolute)."""

    candidate: str
    baseline: str
    ledger: str
    baseline_ledger: str | None
    rule: str
    comparison: dict[str, Any]
    decision: dict[str, Any]
    flips: list[dict[str, Any]] = field(default_factory=list)
    report: str | None = None  # the HTML report's path, when one was written
    exit_code: int = 0
    fail_on: str = "collect-more-evidence"
    written: list[str] = field(default_factory=list)  # the artefacts, as the log names them
