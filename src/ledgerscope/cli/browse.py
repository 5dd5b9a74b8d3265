"""The TUI, in the terminal (``open``) or in a browser (``serve``).

The command bodies live here to keep :mod:`.main` short; :mod:`.main` registers them on the app.
Textual is imported only once the ledger and the rule have been checked, so a bad input fails
fast and ``--help`` never loads it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ledgerscope.analysis.stats import DEFAULT_N_RESAMPLES, DEFAULT_SEED
from ledgerscope.cli.shared.options import BaselineLedgerOption, ResamplesOption, SeedOption
from ledgerscope.cli.shared.output import fail
from ledgerscope.cli.shared.vocabulary import arm_vocabulary, rule_settings
from ledgerscope.common.errors import LedgerscopeError

_OPEN_BASELINE_HELP = (
    "Baseline arm (default: 'baseline', else the next arm). A ledger directory here is "
    "read as --baseline-ledger (deprecated spelling)."
)
StatsRuleOption = Annotated[
    Path | None, typer.Option("--rule", help="Release rule (TOML) for the Stats pane.")
]


def open_ledger(
    ledger: Annotated[Path, typer.Argument(help="Ledger directory.")],
    baseline: Annotated[str | None, typer.Option("--baseline", help=_OPEN_BASELINE_HELP)] = None,
    candidate: Annotated[
        str | None,
        typer.Option(
            "--candidate", help="Candidate arm (default: the arm named 'candidate', else the first)."
        ),
    ] = None,
    baseline_ledger: BaselineLedgerOption = None,
    baseline_arm: Annotated[
        str | None, typer.Option("--baseline-arm", help="Deprecated spelling of --baseline ARM.")
    ] = None,
    rule: StatsRuleOption = None,
    theme: Annotated[
        str | None,
        typer.Option(
            "--theme",
            help="ledgerscope-dark, ledgerscope-light, ledgerscope-high-contrast, ledgerscope-ansi, "
            "any Textual theme, or the path of a theme file (a copy of one in themes/; also "
            "LEDGERSCOPE_THEME).",
        ),
    ] = None,
    n_resamples: ResamplesOption = None,
    seed: SeedOption = None,
) -> None:
    """Browse a ledger in the terminal: questions, phases, sources, contexts, answers, diagnosis, stats.
    The Stats pane's bootstrap uses compare's settings (the same --n-resamples and --seed)."""
    from ledgerscope.tui.data import LedgerSession

    baseline, baseline_ledger = arm_vocabulary(baseline, baseline_arm, baseline_ledger)
    try:
        session = LedgerSession(ledger, baseline_ledger, candidate, baseline)
        session.start_open()  # DuckDB opens the ledger while Textual is imported
        if rule is not None:  # a broken rule, or settings that disagree with it, fail before the screen
            rule_settings(rule, n_resamples, seed)
    except LedgerscopeError as exc:
        fail(exc)
        return
    from ledgerscope.tui.app import LedgerscopeApp

    LedgerscopeApp(
        session,
        rule=rule,
        theme=theme,
        n_resamples=DEFAULT_N_RESAMPLES if n_resamples is None else n_resamples,
        seed=DEFAULT_SEED if seed is None else seed,
    ).run()


def serve(
    ledger: Annotated[Path, typer.Argument(help="Ledger directory.")],
    host: Annotated[
        str, typer.Option("--host", help="Address to bind (default loopback only).")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port to listen on.")] = 8000,
    allow_remote: Annotated[
        bool,
        typer.Option(
            "--allow-remote",
            help="Allow a non-loopback --host. The app has no authentication: prefer SSH port forwarding.",
        ),
    ] = False,
    candidate: Annotated[str | None, typer.Option("--candidate", help="Candidate arm (as for open).")] = None,
    baseline: Annotated[str | None, typer.Option("--baseline", help="Baseline arm (as for open).")] = None,
    baseline_ledger: BaselineLedgerOption = None,
    rule: StatsRuleOption = None,
    theme: Annotated[str | None, typer.Option("--theme", help="Theme (as for open).")] = None,
    n_resamples: ResamplesOption = None,
    seed: SeedOption = None,
) -> None:
    """The TUI in a browser (textual-serve): one `ledgerscope open` per browser tab, loopback by default."""
    from ledgerscope.cli.serve import check_host
    from ledgerscope.cli.serve import serve as run_server
    from ledgerscope.ledger.verify import load_manifest

    options: list[str] = []
    for flag, value in (
        ("--candidate", candidate),
        ("--baseline", baseline),
        ("--rule", rule),
        ("--baseline-ledger", baseline_ledger),
        ("--theme", theme),
        ("--n-resamples", n_resamples),
        ("--seed", seed),
    ):
        if value is not None:
            options += [flag, str(Path(value).resolve()) if isinstance(value, Path) else str(value)]
    try:
        check_host(host, allow_remote)
        load_manifest(ledger)  # not a ledger: say so here, not in every browser tab
        if rule is not None:
            rule_settings(rule, n_resamples, seed)
    except LedgerscopeError as exc:
        fail(exc)
        return
    run_server(ledger, host, port, options, allow_remote)
