"""A release decision as an exit status, so a CI job can fail on it.

Accept exits 0. Reject and collect-more-evidence have their own codes, apart from the ones every
command already uses (1 a difference to rerun, 2 an input problem, 70 a bug, 74 a condition of
the machine). ``--fail-on`` chooses the least outcome that fails: ``collect-more-evidence`` (the
default: it and reject fail), ``reject`` (collect-more-evidence passes with a warning on stderr)
or ``never`` (every outcome exits 0 with the decision printed: a report-only job).
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

#: exit status of a REJECT (when --fail-on lets it fail)
EXIT_REJECT = 3
#: exit status of a COLLECT-MORE-EVIDENCE (when --fail-on lets it fail)
EXIT_COLLECT_MORE_EVIDENCE = 4
OUTCOME_EXIT = {"accept": 0, "reject": EXIT_REJECT, "collect-more-evidence": EXIT_COLLECT_MORE_EVIDENCE}
#: --fail-on value -> the outcomes that fail
FAIL_ON = {"collect-more-evidence": ("collect-more-evidence", "reject"), "reject": ("reject",), "never": ()}

EXIT_CODES_HELP = (
    f"Exit status with a rule: 0 accept, {EXIT_REJECT} reject, {EXIT_COLLECT_MORE_EVIDENCE} "
    "collect-more-evidence (1, 2, 70, 74 keep their meanings)."
)

FailOnOption = Annotated[
    str,
    typer.Option(
        "--fail-on",
        help="With a rule, the least outcome that exits non-zero: 'collect-more-evidence' (default: it exits "
        f"{EXIT_COLLECT_MORE_EVIDENCE}, reject {EXIT_REJECT}), 'reject' (collect-more-evidence passes "
        "with a warning) or 'never' (report only, exit 0).",
    ),
]


def check_fail_on(value: str) -> str:
    """The option's value, or a usage error naming the choices (exit 2)."""
    if value not in FAIL_ON:
        raise typer.BadParameter(f"--fail-on must be one of {', '.join(FAIL_ON)}, got {value!r}")
    return value


def decision_exit(outcome: str | None, fail_on: str) -> int:
    """The exit status for a decision under ``--fail-on``; a passing non-accept warns on stderr."""
    if outcome is None or outcome == "accept":
        return 0
    if outcome in FAIL_ON[fail_on]:
        return OUTCOME_EXIT[outcome]
    print(
        f"warning: release decision {outcome.upper()} passes because of --fail-on {fail_on} "
        f"(it would exit {OUTCOME_EXIT[outcome]})",
        file=sys.stderr,
    )
    return 0
