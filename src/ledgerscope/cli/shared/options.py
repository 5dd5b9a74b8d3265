"""Options several commands share, written once (the same spelling and help everywhere)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ledgerscope.analysis.stats import DEFAULT_N_RESAMPLES, DEFAULT_SEED

BaselineLedgerOption = Annotated[
    Path | None, typer.Option("--baseline-ledger", help="A second ledger holding the baseline arm.")
]
RepeatsOption = Annotated[
    int,
    typer.Option(
        "--repeats",
        help="Ask the generator K times per record and keep every answer (a sampling endpoint's "
        "run-to-run noise: flip rates, noisy questions, a bootstrap over repeats; docs/repeats.md). "
        "K >= 1; default 1.",
    ),
]
ResamplesOption = Annotated[
    int | None,
    typer.Option(
        "--n-resamples",
        help=f"Bootstrap replicates (default {DEFAULT_N_RESAMPLES}; with --rule, the rule's, "
        "and a different value is an error).",
    ),
]
SeedOption = Annotated[
    int | None,
    typer.Option(
        "--seed",
        help=f"Bootstrap seed (default {DEFAULT_SEED}; with --rule, the rule's, and a different value "
        "is an error).",
    ),
]
RuleOption = Annotated[Path | None, typer.Option("--rule", help="Preregistered release rule (TOML).")]
PricesOption = Annotated[
    Path | None,
    typer.Option(
        "--prices",
        help="Price table (TOML, docs/prices.example.toml): indexing cost, cost per 1,000 queries "
        "and the sweep's cost from the recorded usage.",
    ),
]
