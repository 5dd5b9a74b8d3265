"""One vocabulary for every command: arm names, the second ledger, the rule's settings, the version.

``--candidate``/``--baseline`` name arms everywhere and ``--baseline-ledger`` a second ledger;
the older spellings of ``open`` keep working with a deprecation note on stderr.
"""

from __future__ import annotations

import sys
from pathlib import Path

from ledgerscope.common.errors import InputError, Problem
from ledgerscope.common.safe_text import safe_line


def version_lines() -> list[str]:
    """The package version and the ledger formats this build reads and writes (from the schema)."""
    from importlib.metadata import PackageNotFoundError, version

    from ledgerscope import __version__
    from ledgerscope.ledger import schema

    try:
        installed = version("ledgerscope")
    except PackageNotFoundError:  # run from a source tree
        installed = __version__
    reads = schema.READABLE_FORMATS
    return [f"ledgerscope {installed}", f"ledger format: writes {schema.FORMAT}; reads {', '.join(reads)}"]


def check_arms(con, ledger: Path, arms: list[str], option: str) -> None:
    """An arm the ledger does not hold is an error naming the arms it does."""
    present = [r[0] for r in con.execute("SELECT DISTINCT arm FROM records ORDER BY arm").fetchall()]
    for arm in arms:
        if arm not in present:
            raise InputError(
                Problem(
                    str(ledger),
                    None,
                    option,
                    f"no arm {arm!r} in this ledger; arms present: {', '.join(present) or 'none'}",
                )
            )


def rule_settings(rule_path: Path, n_resamples: int | None, seed: int | None):
    """The rule and the bootstrap settings it declares; a --n-resamples or --seed that disagrees
    with the rule is an error (the decision is only valid with the rule's own settings)."""
    from ledgerscope.analysis.stats.release import load_rule

    release_rule = load_rule(rule_path)
    problems = [
        Problem(
            str(rule_path),
            None,
            option,
            f"{option} {given} disagrees with the rule's {key} = {declared}; the decision "
            f"is made with the rule's settings (omit {option}, or change the rule before "
            "seeing results)",
        )
        for option, key, given, declared in (
            ("--n-resamples", "n_resamples", n_resamples, release_rule.n_resamples),
            ("--seed", "seed", seed, release_rule.seed),
        )
        if given is not None and given != declared
    ]
    if problems:
        raise InputError(problems)
    return release_rule


def is_ledger_dir(value: str | None) -> bool:
    return value is not None and (Path(value) / "manifest.json").is_file()


def arm_vocabulary(
    baseline: str | None, baseline_arm: str | None, baseline_ledger: Path | None
) -> tuple[str | None, Path | None]:
    """``--baseline`` is an arm everywhere; the older spellings keep working, with a deprecation note:
    ``--baseline LEDGER_DIR`` (a second ledger, now ``--baseline-ledger``) and ``--baseline-arm``."""
    if baseline is not None and baseline_ledger is None and is_ledger_dir(baseline):
        print(
            f"ledgerscope: --baseline {safe_line(baseline)} names a ledger directory: read as "
            "--baseline-ledger (deprecated spelling; --baseline is an arm name)",
            file=sys.stderr,
        )
        baseline, baseline_ledger = None, Path(baseline)
    if baseline_arm is not None:
        print("ledgerscope: --baseline-arm is deprecated; use --baseline ARM", file=sys.stderr)
        baseline = baseline if baseline is not None else baseline_arm
    return baseline, baseline_ledger
