"""The preregistered release rule and its decision.

- :mod:`.rule`: the rule file's dataclasses, :func:`rule_digest` and :func:`load_rule`;
- :mod:`.resource_limits`: its resource side (latency allowance, cost boundary);
- :mod:`.decision`: accept / reject / collect-more-evidence from a comparison (the file format is
  documented there).

The public names are importable from here (``from ledgerscope.analysis.stats.release import decide``).
"""

from __future__ import annotations

from ledgerscope.analysis.stats.release.decision import decide
from ledgerscope.analysis.stats.release.rule import (
    FORMAT,
    OUTCOMES,
    Check,
    Decision,
    DifferenceTolerance,
    Rule,
    SegmentLimit,
    TokenCeiling,
    load_rule,
    rule_digest,
)

__all__ = [
    "FORMAT",
    "OUTCOMES",
    "Check",
    "Decision",
    "DifferenceTolerance",
    "Rule",
    "SegmentLimit",
    "TokenCeiling",
    "decide",
    "load_rule",
    "rule_digest",
]
