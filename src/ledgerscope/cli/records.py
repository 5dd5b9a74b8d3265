"""A ledger's records moved or re-made: ``convert``, ``export`` and ``rerun``.

The command bodies live here to keep :mod:`.main` short; :mod:`.main` registers them on the app.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ledgerscope.cli.shared.machine import writing
from ledgerscope.cli.shared.output import console, fail, reading, say
from ledgerscope.common.errors import InputError, LedgerscopeError, Problem
from ledgerscope.common.safe_text import json_text


def convert(
    source: Annotated[Path, typer.Argument(help="A ledger directory, or a JSONL interchange directory.")],
    to: Annotated[
        str,
        typer.Option(
            "--to",
            help="jsonl (ledger -> interchange) or parquet (interchange -> ledger; an older "
            "Parquet ledger -> the current format).",
        ),
    ],
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            help="Directory to write (renamed into place whole); the ledger itself upgrades it in place.",
        ),
    ],
) -> None:
    """Convert a ledger to JSONL interchange (one file per table), build a ledger from one, or
    upgrade an older Parquet ledger to the current format."""
    from ledgerscope.ledger.interchange import from_jsonl, to_jsonl
    from ledgerscope.ledger.layout import is_interchange
    from ledgerscope.ledger.upgrade import upgrade

    if to not in ("jsonl", "parquet"):
        raise typer.BadParameter("--to must be jsonl or parquet")
    try:
        with reading(source), writing(out):
            if to == "jsonl":
                counts = to_jsonl(source, out)
            elif is_interchange(source):
                counts = from_jsonl(source, out)
            else:
                counts = upgrade(source, out)
    except LedgerscopeError as exc:
        fail(exc)
        return
    say(console(), f"{out}: " + ", ".join(f"{k} {v:,}" for k, v in counts.items()))


def rerun(
    ledger: Annotated[Path, typer.Argument(help="Ledger directory.")],
    arm: Annotated[str, typer.Option("--arm", help="Arm name.")],
    qid: Annotated[str, typer.Option("--qid", help="Question id.")],
    phase: Annotated[str, typer.Option("--phase", help="Phase label.")],
    json_out: Annotated[bool, typer.Option("--json", help="Print the differences as JSON.")] = False,
    runner: Annotated[
        str | None,
        typer.Option(
            "--runner",
            help="For an ingested ledger: package.module:function that answers one question "
            "(keyword arguments question, qid, config, phase) and returns its seed-002 "
            "record.",
        ),
    ] = None,
) -> None:
    """Re-execute one record from the ledger's manifest and print how it differs from the recorded one."""
    from ledgerscope.ingest.rerun import is_ingested, rerun_ingested
    from ledgerscope.ledger.layout import is_interchange
    from ledgerscope.pipeline.run.rerun import rerun_record

    if is_interchange(ledger):
        fail(
            InputError(
                Problem(
                    str(ledger),
                    None,
                    "rerun",
                    "a JSONL interchange directory: rerun re-executes from a Parquet ledger; "
                    f"run `ledgerscope convert {ledger} --to parquet --out LEDGER` and rerun "
                    "on LEDGER",
                )
            )
        )
    try:
        if not is_ingested(ledger):  # re-running the cascade needs its models
            from ledgerscope.cli.shared.extras import require_extra

            require_extra("sweep", "ledgerscope rerun")
        with reading(ledger):
            diff = (
                rerun_ingested(ledger, arm, qid, phase, runner)
                if is_ingested(ledger)
                else rerun_record(ledger, arm, qid, phase)
            )
    except LedgerscopeError as exc:
        fail(exc)
        return
    if json_out:
        print(json_text(diff.to_json(), indent=2))
    else:
        out = console()
        for line in diff.lines():
            say(out, line)
    raise typer.Exit(0 if diff.identical else 1)


def export(
    ledger: Annotated[Path, typer.Argument(help="Ledger directory (only read).")],
    out: Annotated[Path, typer.Option("--out", help="Output file (a directory for trec).")],
    fmt: Annotated[
        str,
        typer.Option(
            "--format", help="fixtures | label-studio | label-studio-tasks (re-annotation) | trec | jsonl."
        ),
    ] = "jsonl",
    where: Annotated[
        str,
        typer.Option(
            "--where",
            help="DuckDB boolean expression over record_view's columns (records plus step, "
            "step_name, label, flags, reversal), e.g. \"step = 7 AND arm = 'candidate'\"; "
            "empty: every record.",
        ),
    ] = "",
    include_restricted: Annotated[
        bool,
        typer.Option(
            "--include-restricted",
            help="Include the text of restricted documents (access labels); by default "
            "only their ids, offsets and digests leave.",
        ),
    ] = False,
) -> None:
    """Export the records a filter selects: fixtures to re-annotate, Label Studio, TREC run/qrels, JSONL."""
    from ledgerscope.export import export as run_export
    from ledgerscope.export.redaction import summary_line

    try:
        with reading(ledger), writing(out):
            result = run_export(ledger, where, fmt, out, include_restricted=include_restricted)
    except LedgerscopeError as exc:
        fail(exc)
        return
    shown = console()
    say(shown, f"exported {result.count} record(s) ({result.questions} question(s)) to {out}")
    if (line := summary_line(result.redacted)) is not None:
        say(shown, line)
