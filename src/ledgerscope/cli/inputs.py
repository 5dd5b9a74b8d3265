"""What goes into a sweep: ``validate`` fixtures, ``import`` public QA datasets, ``config`` arms.

The command bodies live here to keep :mod:`.main` short; :mod:`.main` registers them on the app
(``validate`` as a command, :data:`import_app` and :data:`config_app` as groups).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ledgerscope.cli.shared.machine import writing
from ledgerscope.cli.shared.output import console, fail, say
from ledgerscope.common.errors import LedgerscopeError
from ledgerscope.common.safe_text import json_text, safe, safe_line

if TYPE_CHECKING:
    from ledgerscope.inputs.importers import ImportReport

import_app = typer.Typer(
    help="Import public QA datasets as a corpus and canonical fixtures, or annotators' "
    "work from Label Studio as a new fixture version.",
    no_args_is_help=True,
)
config_app = typer.Typer(help="Arm configuration files.", no_args_is_help=True)

OutOption = Annotated[
    Path, typer.Option("--out", help="Output directory for corpus.jsonl and fixtures.jsonl.")
]


def validate(
    fixtures: Annotated[
        Path, typer.Argument(help="Fixtures file: seed 000 JSON, seed 002 gold, or canonical JSONL.")
    ],
    corpus: Annotated[Path | None, typer.Option(help="Corpus directory or JSONL.")] = None,
) -> None:
    """Check every fixture: sources resolve, digests match, spans slice to their quotes."""
    from ledgerscope.inputs.validate import summarise, validate_fixtures

    try:
        fixture_list, merged, problems = validate_fixtures(fixtures, corpus)
    except LedgerscopeError as exc:
        fail(exc)
        return
    if problems:
        for p in problems:
            print(safe_line(str(p)), file=sys.stderr)
        print(f"{len(problems)} problem(s); nothing written.", file=sys.stderr)
        raise typer.Exit(2)
    console().print(summarise(fixture_list, merged, safe(str(fixtures))))


@import_app.command("squad")
def import_squad_cmd(
    file: Annotated[Path, typer.Argument(help="A SQuAD-format JSON file.")],
    out: OutOption,
    repair_offsets: Annotated[
        bool,
        typer.Option(
            "--repair-offsets",
            help="Repair answer offsets that are off by 1 to 3 characters; each change is written to "
            "repairs.jsonl.",
        ),
    ] = False,
    support: Annotated[
        str,
        typer.Option(
            "--support",
            help="What the support span is: 'sentence' (the sentence(s) containing the answer span, the "
            "default) or 'answer' (the answer span itself). Recorded per fixture.",
        ),
    ] = "sentence",
) -> None:
    """Import a SQuAD-format file (for example COVID-QA)."""
    from ledgerscope.inputs.importers.squad import import_squad

    _run_import(out, lambda: import_squad(file, out, repair=repair_offsets, support=support))


@import_app.command("contractnli")
def import_contractnli_cmd(
    file: Annotated[Path, typer.Argument(help="A ContractNLI split (for example dev.json).")],
    out: OutOption,
) -> None:
    """Import ContractNLI: hypotheses become support-only questions over evidence spans."""
    from ledgerscope.inputs.importers.contractnli import import_contractnli

    _run_import(out, lambda: import_contractnli(file, out))


@import_app.command("musique")
def import_musique_cmd(
    file: Annotated[Path, typer.Argument(help="A MuSiQue file (JSONL, or a JSON list of questions).")],
    out: OutOption,
) -> None:
    """Import MuSiQue multi-hop questions: each hop's support sentence, all hops one joint sufficient set."""
    from ledgerscope.inputs.importers.musique import import_musique

    _run_import(out, lambda: import_musique(file, out))


@import_app.command("table")
def import_table_cmd(
    file: Annotated[Path, typer.Argument(help="A spreadsheet saved as CSV (or .tsv): one question a row.")],
    corpus: Annotated[Path, typer.Option("--corpus", help="Corpus directory or JSONL (the rows' doc_id).")],
    out: OutOption,
) -> None:
    """Import a sheet of questions (question, doc_id; answer, evidence quotes, ...) as canonical fixtures
    with quote selectors, validated (docs/fixtures.md)."""
    from ledgerscope.inputs.importers.table import import_table

    _run_import(out, lambda: import_table(file, corpus, out))


def _run_import(out: Path, run: Callable[[], ImportReport]) -> None:
    """Run an importer that writes ``out`` and print its report; an input problem is reported (exit 2),
    a machine condition while writing (a full disk) too (:func:`writing`)."""
    try:
        with writing(out):
            report = run()
    except LedgerscopeError as exc:
        fail(exc)
        return
    _print_import(report)


def _print_import(report: ImportReport) -> None:
    """The importer's report: each offset mismatch and skip, the counts, the files written."""
    out = console()
    for line in report.offset_mismatches:
        say(out, f"offset: {line}")
    for line in report.skipped:
        say(out, f"skipped: {line}")
    say(
        out,
        f"{report.dataset}: {report.documents} documents, {report.questions} questions, "
        f"{report.spans} spans, {len(report.offset_mismatches)} offset mismatches, "
        f"{report.repaired} repaired, {len(report.skipped)} skipped",
    )
    say(out, f"corpus:   {report.corpus_path}")
    say(out, f"fixtures: {report.fixtures_path}")
    if report.repairs_path:
        say(out, f"repairs:  {report.repairs_path}")


@config_app.command("default")
def config_default() -> None:
    """Print the documented default arm configuration (TOML)."""
    from ledgerscope.pipeline.arm.config import DEFAULT_TOML

    sys.stdout.write(DEFAULT_TOML)


@config_app.command("stages")
def config_stages(
    json_out: Annotated[
        bool, typer.Option("--json", help="One JSON object: kinds per seam, refused entry points.")
    ] = False,
) -> None:
    """List every stage kind an arm may name: built-in, and registered by installed plugins."""
    from ledgerscope.pipeline.arm.kinds import TABLES, installed

    plugins, refused = installed()
    rows = []
    for seam, table in TABLES.items():
        for kind in table:
            rows.append(
                {
                    "seam": seam,
                    "kind": kind,
                    "source": "built-in",
                    "target": 'callable = "package.module:function"' if kind == "python" else "",
                }
            )
        for kind, stage in plugins[seam].items():
            rows.append(
                {
                    "seam": seam,
                    "kind": kind,
                    "source": f"{stage.distribution} {stage.version}",
                    "target": stage.target,
                }
            )
    if json_out:
        print(json_text({"stages": rows, "refused": list(refused), "group": "ledgerscope.stages"}))
        return
    width = max(len(r["kind"]) for r in rows)
    for r in rows:
        print(
            safe_line(
                f"{r['seam']:<10} {r['kind']:<{width}}  {r['source']}"
                + (f"  {r['target']}" if r["target"] else "")
            )
        )
    for line in refused:
        print(safe_line(f"refused: {line}"))
