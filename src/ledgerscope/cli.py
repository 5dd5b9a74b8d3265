"""Command-line entry point. Heavy imports (torch, textual, duckdb) stay inside commands."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from .errors import LedgerscopeError

app = typer.Typer(
    name="ledgerscope",
    help="Boundary-phase sweeps for RAG: which answers broke, at which stage, because of which boundary.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
import_app = typer.Typer(help="Import public QA datasets as a corpus and canonical fixtures.",
                         no_args_is_help=True)
config_app = typer.Typer(help="Arm configuration files.", no_args_is_help=True)
app.add_typer(import_app, name="import")
app.add_typer(config_app, name="config")


def _fail(exc: LedgerscopeError, code: int = 2) -> None:
    """Print a user-facing error (one line per problem) and exit non-zero, no traceback."""
    for line in str(exc).splitlines() or [type(exc).__name__]:
        print(line, file=sys.stderr)
    raise typer.Exit(code)


def _console():
    from rich.console import Console

    return Console(highlight=False, markup=False, emoji=False)


@app.command()
def validate(
    fixtures: Annotated[Path, typer.Argument(help="Fixtures file: seed 000 JSON, seed 002 gold, or canonical JSONL.")],
    corpus: Annotated[Path | None, typer.Option(help="Corpus directory or JSONL.")] = None,
) -> None:
    """Check every fixture: sources resolve, digests match, spans slice to their quotes."""
    from .validate import summarise, validate_fixtures

    try:
        fixture_list, merged, problems = validate_fixtures(fixtures, corpus)
    except LedgerscopeError as exc:
        _fail(exc)
        return
    if problems:
        for p in problems:
            print(str(p), file=sys.stderr)
        print(f"{len(problems)} problem(s); nothing written.", file=sys.stderr)
        raise typer.Exit(2)
    _console().print(summarise(fixture_list, merged, str(fixtures)))


@import_app.command("squad")
def import_squad_cmd(
    file: Annotated[Path, typer.Argument(help="A SQuAD-format JSON file.")],
    out: Annotated[Path, typer.Option("--out", help="Output directory for corpus.jsonl and fixtures.jsonl.")],
    repair_offsets: Annotated[bool, typer.Option(
        "--repair-offsets",
        help="Repair answer offsets that are off by 1 to 3 characters; each change is written to repairs.jsonl.",
    )] = False,
) -> None:
    """Import a SQuAD-format file (for example COVID-QA)."""
    from .importers.squad import import_squad

    try:
        report = import_squad(file, out, repair=repair_offsets)
    except LedgerscopeError as exc:
        _fail(exc)
        return
    _print_import(report)


@import_app.command("contractnli")
def import_contractnli_cmd(
    file: Annotated[Path, typer.Argument(help="A ContractNLI split (for example dev.json).")],
    out: Annotated[Path, typer.Option("--out", help="Output directory for corpus.jsonl and fixtures.jsonl.")],
) -> None:
    """Import ContractNLI: hypotheses become support-only questions over evidence spans."""
    from .importers.contractnli import import_contractnli

    try:
        report = import_contractnli(file, out)
    except LedgerscopeError as exc:
        _fail(exc)
        return
    _print_import(report)


def _print_import(report) -> None:
    console = _console()
    for line in report.offset_mismatches:
        console.print(f"offset: {line}")
    for line in report.skipped:
        console.print(f"skipped: {line}")
    console.print(
        f"{report.dataset}: {report.documents} documents, {report.questions} questions, "
        f"{report.spans} spans, {len(report.offset_mismatches)} offset mismatches, "
        f"{report.repaired} repaired, {len(report.skipped)} skipped"
    )
    console.print(f"corpus:   {report.corpus_path}")
    console.print(f"fixtures: {report.fixtures_path}")
    if report.repairs_path:
        console.print(f"repairs:  {report.repairs_path}")


@app.command()
def diagnose(
    ledger: Annotated[Path, typer.Argument(help="Ledger directory.")],
    arm: Annotated[str | None, typer.Option("--arm", help="Only this arm.")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="JSON lines, one per record.")] = False,
) -> None:
    """Place every record on the ten-step diagnosis tree (seed 001, section 15)."""
    import json

    from .diagnose import diagnose_ledger
    from .ledger.read import connect

    try:
        con = connect(ledger)
        rows = diagnose_ledger(con, ledger, arm)
        if json_out:
            out = sys.stdout
            for row in rows:
                out.write(json.dumps(row, ensure_ascii=False, default=str) + "\n")
            return
        from .report import diagnosis_table

        _console().print(diagnosis_table(list(rows)))
    except LedgerscopeError as exc:
        _fail(exc)


@app.command()
def compare(
    ledger: Annotated[Path, typer.Argument(help="Ledger directory (holds the candidate arm).")],
    candidate: Annotated[str, typer.Option("--candidate", help="Candidate arm name.")],
    baseline: Annotated[str, typer.Option("--baseline", help="Baseline arm name.")],
    baseline_ledger: Annotated[Path | None, typer.Option(
        "--baseline-ledger", help="A second ledger holding the baseline arm.")] = None,
    rule: Annotated[Path | None, typer.Option("--rule", help="Preregistered release rule (TOML).")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the comparison as JSON.")] = False,
    n_resamples: Annotated[int, typer.Option(help="Bootstrap replicates (a rule's own setting wins).")] = 10_000,
    seed: Annotated[int, typer.Option(help="Bootstrap seed (a rule's own setting wins).")] = 0,
) -> None:
    """Candidate minus baseline per phase, worst phase and segments, with a paired, clustered bootstrap."""
    import json

    from .ledger.read import connect
    from .stats import compare_arms

    try:
        con = connect(ledger)
        base_con = connect(baseline_ledger) if baseline_ledger else None
        decision = None
        confidence = 0.95
        if rule is not None:
            from .release import decide, load_rule

            release_rule = load_rule(rule)
            n_resamples, seed, confidence = release_rule.n_resamples, release_rule.seed, release_rule.confidence
        comparison = compare_arms(con, candidate, baseline, base_con, seed=seed, n_resamples=n_resamples,
                                  confidence=confidence)
        if rule is not None:
            decision = decide(release_rule, comparison).to_dict()
    except LedgerscopeError as exc:
        _fail(exc)
        return
    if json_out:
        print(json.dumps({"comparison": comparison, "decision": decision}, ensure_ascii=False, default=str))
        return
    from .report import comparison_report

    console = _console()
    for renderable in comparison_report(comparison, decision):
        console.print(renderable)


@config_app.command("default")
def config_default() -> None:
    """Print the documented default arm configuration (TOML)."""
    from .pipeline.config import DEFAULT_TOML

    sys.stdout.write(DEFAULT_TOML)


@app.command()
def sweep(
    fixtures: Annotated[Path, typer.Option("--fixtures", help="Fixtures file (any accepted form).")],
    arm: Annotated[list[Path], typer.Option("--arm", help="Arm TOML; repeat for candidate and baseline.")],
    out: Annotated[Path, typer.Option("--out", help="Ledger directory (created; resumed if it exists).")],
    corpus: Annotated[Path | None, typer.Option(
        "--corpus", help="Corpus directory or JSONL; optional when fixtures carry their sources inline.")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", help="No progress bars.")] = False,
) -> None:
    """Run a boundary-phase sweep of every arm over its preregistered phases into a ledger."""
    from .fixtures import load_fixtures
    from .pipeline.config import load_arm
    from .sources import load_corpus

    try:
        arms = [load_arm(a) for a in arm]
        base = load_corpus(corpus) if corpus else None
        fixture_list, merged = load_fixtures(fixtures, base)
    except LedgerscopeError as exc:
        _fail(exc)
        return
    from .pipeline.sweep import sweep as run_sweep
    from .progress import RichSweepProgress

    try:
        if quiet:
            result = run_sweep(fixture_list, merged, arms, out)
        else:
            with RichSweepProgress() as progress:
                result = run_sweep(fixture_list, merged, arms, out, progress=progress)
    except LedgerscopeError as exc:
        _fail(exc)
        return
    console = _console()
    console.print(
        f"ledger {out}: {len(result.written)} partition(s) written, {len(result.skipped)} already done "
        f"(resumed), {len(fixture_list)} questions, {result.encoded_texts} texts encoded, "
        f"{result.seconds:.1f} s"
    )


@app.command()
def rerun(
    ledger: Annotated[Path, typer.Argument(help="Ledger directory.")],
    arm: Annotated[str, typer.Option("--arm", help="Arm name.")],
    qid: Annotated[str, typer.Option("--qid", help="Question id.")],
    phase: Annotated[str, typer.Option("--phase", help="Phase label.")],
    json_out: Annotated[bool, typer.Option("--json", help="Print the differences as JSON.")] = False,
) -> None:
    """Re-execute one record from the ledger's manifest and print how it differs from the recorded one."""
    import json

    from .pipeline.rerun import rerun_record

    try:
        diff = rerun_record(ledger, arm, qid, phase)
    except LedgerscopeError as exc:
        _fail(exc)
        return
    if json_out:
        print(json.dumps(diff.to_json(), ensure_ascii=False, indent=2))
    else:
        console = _console()
        for line in diff.lines():
            console.print(line)
    raise typer.Exit(0 if diff.identical else 1)


@app.command()
def export(
    ledger: Annotated[Path, typer.Argument(help="Ledger directory (only read).")],
    out: Annotated[Path, typer.Option("--out", help="Output file (a directory for trec).")],
    fmt: Annotated[str, typer.Option(
        "--format", help="fixtures | label-studio | trec | jsonl.")] = "jsonl",
    where: Annotated[str, typer.Option(
        "--where", help="DuckDB boolean expression over record_view's columns (records plus step, "
                        "step_name, label, flags, reversal), e.g. \"step = 7 AND arm = 'candidate'\"; "
                        "empty: every record.")] = "",
) -> None:
    """Export the records a filter selects: fixtures to re-annotate, Label Studio, TREC run/qrels, JSONL."""
    from .export import export as run_export

    try:
        result = run_export(ledger, where, fmt, out)
    except LedgerscopeError as exc:
        _fail(exc)
        return
    _console().print(f"exported {result.count} record(s) ({result.questions} question(s)) to {out}")


@app.command("open")
def open_ledger(
    ledger: Annotated[Path, typer.Argument(help="Ledger directory.")],
    baseline: Annotated[Path | None, typer.Option(
        "--baseline", help="A second ledger holding the baseline arm.")] = None,
    candidate: Annotated[str | None, typer.Option(
        "--candidate", help="Candidate arm (default: the arm named 'candidate', else the first).")] = None,
    baseline_arm: Annotated[str | None, typer.Option(
        "--baseline-arm", help="Baseline arm (default: 'baseline', else the next arm).")] = None,
    rule: Annotated[Path | None, typer.Option("--rule", help="Release rule (TOML) for the Stats pane.")] = None,
    theme: Annotated[str | None, typer.Option(
        "--theme", help="ledgerscope-dark, ledgerscope-light, ledgerscope-high-contrast, ledgerscope-ansi, "
                        "or any Textual theme (also LEDGERSCOPE_THEME).")] = None,
) -> None:
    """Browse a ledger in the terminal: questions, phases, sources, contexts, answers, diagnosis, stats."""
    from .tui.data import LedgerSession

    try:
        session = LedgerSession(ledger, baseline, candidate, baseline_arm)
        if rule is not None:
            from .release import load_rule

            load_rule(rule)  # a broken rule fails here, before the screen opens
    except LedgerscopeError as exc:
        _fail(exc)
        return
    from .tui.app import LedgerscopeApp

    LedgerscopeApp(session, rule=rule, theme=theme).run()


def main() -> None:  # pragma: no cover - console script shim
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
