"""Command-line entry point. Heavy imports (torch, textual, duckdb) stay inside commands."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Annotated

import typer

from ledgerscope.analysis.stats import DEFAULT_N_RESAMPLES, DEFAULT_SEED
from ledgerscope.cli.cache import cache_app
from ledgerscope.cli.machine import EXIT_IO, MachineError, machine_error, writing
from ledgerscope.cli.vocabulary import arm_vocabulary, check_arms, rule_settings, version_lines
from ledgerscope.common.errors import InputError, LedgerscopeError, Problem
from ledgerscope.common.safe_text import json_text, safe, safe_line

#: exit status for a bug (BSD sysexits EX_SOFTWARE): an exception no check anticipated
EXIT_INTERNAL = 70


class _App(typer.Typer):
    """The Typer app, with a last line of defence: no Python traceback ever reaches a user.

    Input problems are :class:`LedgerscopeError` and exit 2 with located messages
    (each command catches them; this catches any that slip through). Conditions of the
    machine (no space left, permission denied, a read-only file system) name the path and
    what to do, exit 74. Anything else is a bug: one line
    ``ledgerscope: internal error: <type>: <message> (please report)``, exit 70.
    """

    def __call__(self, *args, **kwargs):
        try:
            return super().__call__(*args, **kwargs)
        except MachineError as exc:
            _print_error(exc)
            sys.exit(EXIT_IO)
        except LedgerscopeError as exc:
            _print_error(exc)
            sys.exit(2)
        except BrokenPipeError:  # e.g. `ledgerscope diagnose --json | head`
            with contextlib.suppress(OSError):
                sys.stdout = open(__import__("os").devnull, "w")  # noqa: SIM115 - quiet exit flush
            sys.exit(1)
        except OSError as exc:
            err = machine_error(exc)
            if err is None:
                _internal(exc)
            _print_error(err)
            sys.exit(EXIT_IO)
        except Exception as exc:
            _internal(exc)


def _internal(exc: BaseException) -> None:
    """A bug: one line, exit 70."""
    print(f"ledgerscope: internal error: {type(exc).__name__}: {safe_line(str(exc), 500)} "
          "(please report)", file=sys.stderr)
    sys.exit(EXIT_INTERNAL)


app = _App(
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
judge_app = typer.Typer(help="The answer judge: what an LLM judge's verdicts are worth.",
                        no_args_is_help=True)
app.add_typer(import_app, name="import")
app.add_typer(config_app, name="config")
app.add_typer(judge_app, name="judge")
app.add_typer(cache_app, name="cache")


def _print_version(value: bool) -> None:
    if value:
        for line in version_lines():
            print(line)
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[bool, typer.Option(
        "--version", callback=_print_version, is_eager=True,
        help="Print the version and the ledger format versions read and written, then exit.")] = False,
) -> None:
    """Boundary-phase sweeps for RAG: which answers broke, at which stage, because of which boundary."""


def _print_error(exc: LedgerscopeError) -> None:
    """One line per problem on stderr, control and bidi characters escaped, each line capped."""
    lines = [str(p) for p in exc.problems] if isinstance(exc, InputError) else str(exc).splitlines()
    for line in lines or [type(exc).__name__]:
        print(safe_line(line), file=sys.stderr)


def _fail(exc: LedgerscopeError, code: int = 2) -> None:
    """Print a user-facing error (one line per problem) and exit non-zero, no traceback
    (:data:`EXIT_IO` for a condition of the machine)."""
    _print_error(exc)
    raise typer.Exit(EXIT_IO if isinstance(exc, MachineError) else code)


@contextlib.contextmanager
def _reading(ledger: Path | None):
    """Data a ledger's checks could not see (a corrupted data page) as an input error naming the ledger."""
    import duckdb
    import pyarrow as pa

    try:
        yield
    except (duckdb.IOException, duckdb.InvalidInputException, pa.ArrowException) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise InputError(Problem(str(ledger), None, "ledger", f"could not be read: {first}")) from None


def _console():
    from rich.console import Console

    return Console(highlight=False, markup=False, emoji=False)


@app.command()
def validate(
    fixtures: Annotated[Path, typer.Argument(
        help="Fixtures file: seed 000 JSON, seed 002 gold, or canonical JSONL.")],
    corpus: Annotated[Path | None, typer.Option(help="Corpus directory or JSONL.")] = None,
) -> None:
    """Check every fixture: sources resolve, digests match, spans slice to their quotes."""
    from ledgerscope.inputs.validate import summarise, validate_fixtures

    try:
        fixture_list, merged, problems = validate_fixtures(fixtures, corpus)
    except LedgerscopeError as exc:
        _fail(exc)
        return
    if problems:
        for p in problems:
            print(safe_line(str(p)), file=sys.stderr)
        print(f"{len(problems)} problem(s); nothing written.", file=sys.stderr)
        raise typer.Exit(2)
    _console().print(summarise(fixture_list, merged, safe(str(fixtures))))


@import_app.command("squad")
def import_squad_cmd(
    file: Annotated[Path, typer.Argument(help="A SQuAD-format JSON file.")],
    out: Annotated[Path, typer.Option("--out", help="Output directory for corpus.jsonl and fixtures.jsonl.")],
    repair_offsets: Annotated[bool, typer.Option(
        "--repair-offsets",
        help="Repair answer offsets that are off by 1 to 3 characters; each change is written to "
             "repairs.jsonl.",
    )] = False,
    support: Annotated[str, typer.Option(
        "--support",
        help="What the support span is: 'sentence' (the sentence(s) containing the answer span, the "
             "default) or 'answer' (the answer span itself). Recorded per fixture.",
    )] = "sentence",
) -> None:
    """Import a SQuAD-format file (for example COVID-QA)."""
    from ledgerscope.inputs.importers.squad import import_squad

    try:
        with writing(out):
            report = import_squad(file, out, repair=repair_offsets, support=support)
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
    from ledgerscope.inputs.importers.contractnli import import_contractnli

    try:
        with writing(out):
            report = import_contractnli(file, out)
    except LedgerscopeError as exc:
        _fail(exc)
        return
    _print_import(report)


# Options several commands share, written once (the same spelling and help everywhere).
BaselineLedgerOption = Annotated[Path | None, typer.Option(
    "--baseline-ledger", help="A second ledger holding the baseline arm.")]
ResamplesOption = Annotated[int | None, typer.Option(
    "--n-resamples", help=f"Bootstrap replicates (default {DEFAULT_N_RESAMPLES}; with --rule, the rule's, "
                          "and a different value is an error).")]
SeedOption = Annotated[int | None, typer.Option(
    "--seed", help=f"Bootstrap seed (default {DEFAULT_SEED}; with --rule, the rule's, and a different value "
                   "is an error).")]


def _say(console, text: str) -> None:
    """Print untrusted text literally: escapes shown, never markup."""
    from rich.text import Text

    console.print(Text(safe_line(text)))


def _print_import(report) -> None:
    console = _console()
    for line in report.offset_mismatches:
        _say(console, f"offset: {line}")
    for line in report.skipped:
        _say(console, f"skipped: {line}")
    _say(console,
         f"{report.dataset}: {report.documents} documents, {report.questions} questions, "
         f"{report.spans} spans, {len(report.offset_mismatches)} offset mismatches, "
         f"{report.repaired} repaired, {len(report.skipped)} skipped")
    _say(console, f"corpus:   {report.corpus_path}")
    _say(console, f"fixtures: {report.fixtures_path}")
    if report.repairs_path:
        _say(console, f"repairs:  {report.repairs_path}")


@app.command()
def diagnose(
    ledger: Annotated[Path, typer.Argument(help="Ledger directory.")],
    arm: Annotated[str | None, typer.Option("--arm", help="Only this arm.")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="JSON lines, one per record.")] = False,
) -> None:
    """Place every record on the ten-step diagnosis tree (seed 001, section 15)."""
    from ledgerscope.analysis.diagnosis import ledger_heads, write_json_lines
    from ledgerscope.ledger.fixtures import load_ledger_fixtures
    from ledgerscope.ledger.read import connect

    try:
        with _reading(ledger):
            con = connect(ledger)
            if arm is not None:
                check_arms(con, ledger, [arm], "--arm")
            if json_out:  # built whole in DuckDB before the first byte is written: no partial output
                sys.stdout.flush()
                write_json_lines(con, ledger, sys.stdout.buffer, arm)
                sys.stdout.buffer.flush()
                return
            fixtures = load_ledger_fixtures(con, ledger)  # read once for steps and recall@k
            rows = ledger_heads(con, arm)  # the summary needs no evidence
    except LedgerscopeError as exc:
        _fail(exc)
        return
    from ledgerscope.analysis.reversals import find_reversals
    from ledgerscope.analysis.survival import survival
    from ledgerscope.report.terminal import diagnosis_table, recall_table, reversals_table, survival_table

    try:
        with _reading(ledger):
            funnel = survival(con, ledger, arm, fixtures=fixtures)
            reversals = find_reversals(con, arm)
    except LedgerscopeError as exc:
        _fail(exc)
        return
    console = _console()
    console.print(diagnosis_table(rows))
    console.print(survival_table(funnel))
    for extra in (recall_table(funnel), reversals_table(reversals)):
        if extra is not None:
            console.print(extra)


@app.command()
def compare(
    ledger: Annotated[Path, typer.Argument(help="Ledger directory (holds the candidate arm).")],
    candidate: Annotated[str, typer.Option("--candidate", help="Candidate arm name.")],
    baseline: Annotated[str, typer.Option("--baseline", help="Baseline arm name.")],
    baseline_ledger: BaselineLedgerOption = None,
    rule: Annotated[Path | None, typer.Option("--rule", help="Preregistered release rule (TOML).")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the comparison as JSON.")] = False,
    n_resamples: ResamplesOption = None,
    seed: SeedOption = None,
    clusters: Annotated[str, typer.Option(
        "--clusters",
        help="Bootstrap clusters: 'first-document' (each question's first document, the default) or "
             "'components' (connected components of the question-document graph). Both counts are "
             "reported.")] = "first-document",
) -> None:
    """Candidate minus baseline per phase, worst phase and segments, with a paired, clustered bootstrap."""
    from ledgerscope.analysis.stats.compare import CLUSTER_RULES

    if clusters not in CLUSTER_RULES:
        raise typer.BadParameter(f"--clusters must be one of {', '.join(CLUSTER_RULES)}")
    import os

    # its matrix products are small, two run at a time: no BLAS thread pool (spinning at start-up)
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    from ledgerscope.analysis.stats.compare import compare_arms
    from ledgerscope.ledger.read import connect

    try:
        with _reading(ledger):
            con = connect(ledger)
            base_con = connect(baseline_ledger) if baseline_ledger else None
            decision = None
            confidence = 0.95
            if rule is not None:
                from ledgerscope.analysis.stats.release import decide

                release_rule = rule_settings(rule, n_resamples, seed)
                n_resamples, seed = release_rule.n_resamples, release_rule.seed
                confidence = release_rule.confidence
            n_resamples = DEFAULT_N_RESAMPLES if n_resamples is None else n_resamples
            seed = DEFAULT_SEED if seed is None else seed
            comparison = compare_arms(con, candidate, baseline, base_con, seed=seed,
                                      n_resamples=n_resamples, confidence=confidence, clusters=clusters)
            if rule is not None:
                decision = decide(release_rule, comparison).to_dict()
    except LedgerscopeError as exc:
        _fail(exc)
        return
    if json_out:
        print(json_text({"comparison": comparison, "decision": decision}))
        return
    from ledgerscope.report.terminal import comparison_report

    console = _console()
    for renderable in comparison_report(comparison, decision):
        console.print(renderable)


@judge_app.command("calibrate")
def judge_calibrate(
    ledger: Annotated[Path, typer.Argument(help="Ledger directory (only read).")],
    arm: Annotated[str, typer.Option("--arm", help="Arm whose answers are judged.")],
    base_url: Annotated[str | None, typer.Option(
        "--base-url", help="OpenAI-compatible endpoint of the LLM judge (default: the arm's [judge] "
                           "table, when it was swept with kind = \"endpoint\").")] = None,
    model: Annotated[str, typer.Option("--model", help="Model name at that endpoint.")] = "",
    api_key_env: Annotated[str, typer.Option(
        "--api-key-env", help="NAME of the environment variable holding the endpoint's key.")] = "",
    max_tokens: Annotated[int, typer.Option(help="Tokens the judge may reply with.")] = 16,
    limit: Annotated[int | None, typer.Option(help="Grade at most this many distinct answers.")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Agreement of the LLM judge with the deterministic judge: confusion matrix and Cohen's kappa."""
    from ledgerscope.analysis.judge_calibration import calibrate

    endpoint = None
    if base_url:
        endpoint = {"kind": "endpoint", "base_url": base_url, "model": model, "api_key_env": api_key_env,
                    "max_tokens": max_tokens}
    try:
        with _reading(ledger):
            result = calibrate(ledger, arm, endpoint, limit)
    except LedgerscopeError as exc:
        _fail(exc)
        return
    if json_out:
        print(json_text(result))
        return
    from ledgerscope.report.terminal import calibration_report

    console = _console()
    for renderable in calibration_report(result):
        console.print(renderable)


@config_app.command("default")
def config_default() -> None:
    """Print the documented default arm configuration (TOML)."""
    from ledgerscope.pipeline.config import DEFAULT_TOML

    sys.stdout.write(DEFAULT_TOML)


@config_app.command("stages")
def config_stages(
    json_out: Annotated[bool, typer.Option(
        "--json", help="One JSON object: kinds per seam, refused entry points.")] = False,
) -> None:
    """List every stage kind an arm may name: built-in, and registered by installed plugins."""
    from ledgerscope.pipeline.kinds import TABLES, installed

    plugins, refused = installed()
    rows = []
    for seam, table in TABLES.items():
        for kind in table:
            rows.append({"seam": seam, "kind": kind, "source": "built-in",
                         "target": "callable = \"package.module:function\"" if kind == "python" else ""})
        for kind, stage in plugins[seam].items():
            rows.append({"seam": seam, "kind": kind, "source": f"{stage.distribution} {stage.version}",
                         "target": stage.target})
    if json_out:
        print(json_text({"stages": rows, "refused": list(refused), "group": "ledgerscope.stages"}))
        return
    width = max(len(r["kind"]) for r in rows)
    for r in rows:
        print(safe_line(f"{r['seam']:<10} {r['kind']:<{width}}  {r['source']}"
                        + (f"  {r['target']}" if r["target"] else "")))
    for line in refused:
        print(safe_line(f"refused: {line}"))


@app.command()
def sweep(
    fixtures: Annotated[Path, typer.Option("--fixtures", help="Fixtures file (any accepted form).")],
    arm: Annotated[list[Path], typer.Option("--arm", help="Arm TOML; repeat for candidate and baseline.")],
    out: Annotated[Path, typer.Option("--out", help="Ledger directory (created; resumed if it exists).")],
    corpus: Annotated[Path | None, typer.Option(
        "--corpus",
        help="Corpus directory or JSONL; optional when fixtures carry their sources inline.")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", help="No progress bars.")] = False,
) -> None:
    """Run a boundary-phase sweep of every arm over its preregistered phases into a ledger."""
    from ledgerscope.inputs.fixtures import load_fixtures
    from ledgerscope.inputs.sources import load_corpus
    from ledgerscope.pipeline.config import load_arm

    try:
        arms = [load_arm(a) for a in arm]
        base = load_corpus(corpus) if corpus else None
        fixture_list, merged = load_fixtures(fixtures, base)
    except LedgerscopeError as exc:
        _fail(exc)
        return
    try:
        with writing(out):
            result = _run_sweep(fixture_list, merged, arms, out, quiet)
    except LedgerscopeError as exc:
        _fail(exc)
        return
    _print_sweep(result, out, len(fixture_list))


def _run_sweep(fixture_list, merged, arms, out: Path, quiet: bool):
    from ledgerscope.cli.progress import RichSweepProgress
    from ledgerscope.pipeline.sweep import sweep as run_sweep

    if quiet:
        return run_sweep(fixture_list, merged, arms, out)
    with RichSweepProgress() as progress:
        return run_sweep(fixture_list, merged, arms, out, progress=progress)


def _print_sweep(result, out: Path, n_questions: int) -> None:
    """The summary line (partitions, texts from the embedding cache and encoded), then what the
    cache refused or could not write, then external chunkers' offsets."""
    console = _console()
    _say(console,
         f"ledger {out}: {len(result.written)} partition(s) written, {len(result.skipped)} already done "
         f"(resumed), {n_questions} questions, texts: {result.cached_texts} from the embedding cache, "
         f"{result.encoded_texts} encoded, {result.seconds:.1f} s")
    for line in result.cache_messages:
        _say(console, line)
    for arm_name, counts in result.offsets.items():
        if counts.get("checked"):
            _say(console, offsets_line(arm_name, counts))


def offsets_line(arm: str, counts) -> str:
    """One arm's external chunker offsets as the sweep checked them (the rows are in ``repairs``)."""
    from ledgerscope.pipeline.external import DROPPED

    placed = {k: v for k, v in sorted(counts.items()) if k != "checked" and k not in DROPPED}
    dropped = {k: v for k, v in sorted(counts.items()) if k in DROPPED}
    parts = [f"{v} {k}" for k, v in placed.items()]
    drop = f"{sum(dropped.values())} dropped ({', '.join(f'{v} {k}' for k, v in dropped.items())})" \
        if dropped else "0 dropped"
    verified = counts["checked"] - sum(placed.values()) - sum(dropped.values())
    return (f"arm {arm}: chunk offsets of {counts['checked']} units: {verified} verified, "
            + "".join(f"{p}, " for p in parts) + f"{drop}; every one not verified is in the repairs table")


@app.command()
def convert(
    source: Annotated[Path, typer.Argument(help="A ledger directory, or a JSONL interchange directory.")],
    to: Annotated[str, typer.Option("--to", help="jsonl (ledger -> interchange) or parquet (back).")],
    out: Annotated[Path, typer.Option("--out", help="Directory to write (renamed into place whole).")],
) -> None:
    """Convert a ledger to JSONL interchange (one file per table) or build a ledger from one."""
    from ledgerscope.ledger.interchange import from_jsonl, to_jsonl

    if to not in ("jsonl", "parquet"):
        raise typer.BadParameter("--to must be jsonl or parquet")
    try:
        with _reading(source), writing(out):
            counts = to_jsonl(source, out) if to == "jsonl" else from_jsonl(source, out)
    except LedgerscopeError as exc:
        _fail(exc)
        return
    _say(_console(), f"{out}: " + ", ".join(f"{k} {v:,}" for k, v in counts.items()))


@app.command()
def rerun(
    ledger: Annotated[Path, typer.Argument(help="Ledger directory.")],
    arm: Annotated[str, typer.Option("--arm", help="Arm name.")],
    qid: Annotated[str, typer.Option("--qid", help="Question id.")],
    phase: Annotated[str, typer.Option("--phase", help="Phase label.")],
    json_out: Annotated[bool, typer.Option("--json", help="Print the differences as JSON.")] = False,
    runner: Annotated[str | None, typer.Option(
        "--runner", help="For an ingested ledger: package.module:function that answers one question "
                         "(keyword arguments question, qid, config, phase) and returns its seed-002 "
                         "record.")] = None,
) -> None:
    """Re-execute one record from the ledger's manifest and print how it differs from the recorded one."""
    from ledgerscope.ingest.rerun import is_ingested, rerun_ingested
    from ledgerscope.ledger.layout import is_interchange
    from ledgerscope.pipeline.rerun import rerun_record

    if is_interchange(ledger):
        _fail(InputError(Problem(str(ledger), None, "rerun",
                                 "a JSONL interchange directory: rerun re-executes from a Parquet ledger; "
                                 f"run `ledgerscope convert {ledger} --to parquet --out LEDGER` and rerun "
                                 "on LEDGER")))
    try:
        with _reading(ledger):
            diff = (rerun_ingested(ledger, arm, qid, phase, runner) if is_ingested(ledger)
                    else rerun_record(ledger, arm, qid, phase))
    except LedgerscopeError as exc:
        _fail(exc)
        return
    if json_out:
        print(json_text(diff.to_json(), indent=2))
    else:
        console = _console()
        for line in diff.lines():
            _say(console, line)
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
    include_restricted: Annotated[bool, typer.Option(
        "--include-restricted", help="Include the text of restricted documents (access labels); by default "
                                     "only their ids, offsets and digests leave.")] = False,
) -> None:
    """Export the records a filter selects: fixtures to re-annotate, Label Studio, TREC run/qrels, JSONL."""
    from ledgerscope.export import export as run_export
    from ledgerscope.export.redaction import summary_line

    try:
        with _reading(ledger), writing(out):
            result = run_export(ledger, where, fmt, out, include_restricted=include_restricted)
    except LedgerscopeError as exc:
        _fail(exc)
        return
    console = _console()
    _say(console, f"exported {result.count} record(s) ({result.questions} question(s)) to {out}")
    if (line := summary_line(result.redacted)) is not None:
        _say(console, line)


_OPEN_BASELINE_HELP = ("Baseline arm (default: 'baseline', else the next arm). A ledger directory here is "
                       "read as --baseline-ledger (deprecated spelling).")


@app.command("open")
def open_ledger(
    ledger: Annotated[Path, typer.Argument(help="Ledger directory.")],
    baseline: Annotated[str | None, typer.Option("--baseline", help=_OPEN_BASELINE_HELP)] = None,
    candidate: Annotated[str | None, typer.Option(
        "--candidate", help="Candidate arm (default: the arm named 'candidate', else the first).")] = None,
    baseline_ledger: BaselineLedgerOption = None,
    baseline_arm: Annotated[str | None, typer.Option(
        "--baseline-arm", help="Deprecated spelling of --baseline ARM.")] = None,
    rule: Annotated[Path | None, typer.Option(
        "--rule", help="Release rule (TOML) for the Stats pane.")] = None,
    theme: Annotated[str | None, typer.Option(
        "--theme", help="ledgerscope-dark, ledgerscope-light, ledgerscope-high-contrast, ledgerscope-ansi, "
                        "or any Textual theme (also LEDGERSCOPE_THEME).")] = None,
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
        _fail(exc)
        return
    from ledgerscope.tui.app import LedgerscopeApp

    LedgerscopeApp(session, rule=rule, theme=theme,
                   n_resamples=DEFAULT_N_RESAMPLES if n_resamples is None else n_resamples,
                   seed=DEFAULT_SEED if seed is None else seed).run()


@app.command()
def report(
    ledger: Annotated[Path, typer.Argument(help="Ledger directory (holds the candidate arm).")],
    candidate: Annotated[str, typer.Option("--candidate", help="Candidate arm name.")],
    baseline: Annotated[str, typer.Option("--baseline", help="Baseline arm name.")],
    out: Annotated[Path, typer.Option("--out", help="The HTML file to write (replaced whole).")],
    baseline_ledger: BaselineLedgerOption = None,
    rule: Annotated[Path | None, typer.Option("--rule", help="Preregistered release rule (TOML).")] = None,
    n_resamples: ResamplesOption = None,
    seed: SeedOption = None,
    include_restricted: Annotated[bool, typer.Option(
        "--include-restricted", help="Include the text of restricted documents (access labels); by default "
                                     "only their ids, offsets and digests.")] = False,
) -> None:
    """One self-contained HTML file: decision, phase curves, funnel, steps, segments, reversals and their
    boundaries. Opens offline, needs no JavaScript, prints."""
    import os

    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    from ledgerscope.common.atomic import atomic_path
    from ledgerscope.export._common import publish_mode
    from ledgerscope.report.figures import Settings, gather
    from ledgerscope.report.html import render

    try:
        with _reading(ledger):
            settings = Settings(DEFAULT_N_RESAMPLES if n_resamples is None else n_resamples,
                                DEFAULT_SEED if seed is None else seed)
            if rule is not None:
                loaded = rule_settings(rule, n_resamples, seed)
                settings = Settings(loaded.n_resamples, loaded.seed, loaded.confidence)
            data = gather(ledger, candidate, baseline, baseline_ledger=baseline_ledger, rule_path=rule,
                          settings=settings, include_restricted=include_restricted)
        page = render(data)
        with writing(out), atomic_path(out) as tmp:
            tmp.write_text(page, encoding="utf-8")
            publish_mode(tmp)
    except LedgerscopeError as exc:
        _fail(exc)
        return
    console = _console()
    outcome = (data.decision or {}).get("outcome", "no rule").upper()
    _say(console, f"report: {out} ({len(page.encode()) // 1024} KiB; decision {outcome}; "
                  f"{len(data.reversals)} reversal(s))")
    from ledgerscope.export.redaction import summary_line

    if data.redaction and (line := summary_line(data.redaction)) is not None:
        _say(console, line)


@app.command()
def serve(
    ledger: Annotated[Path, typer.Argument(help="Ledger directory.")],
    host: Annotated[str, typer.Option(
        "--host", help="Address to bind (default loopback only).")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port to listen on.")] = 8000,
    allow_remote: Annotated[bool, typer.Option(
        "--allow-remote", help="Allow a non-loopback --host. The app has no authentication: prefer SSH port "
                               "forwarding.")] = False,
    candidate: Annotated[str | None, typer.Option("--candidate", help="Candidate arm (as for open).")] = None,
    baseline: Annotated[str | None, typer.Option("--baseline", help="Baseline arm (as for open).")] = None,
    baseline_ledger: BaselineLedgerOption = None,
    rule: Annotated[Path | None, typer.Option(
        "--rule", help="Release rule (TOML) for the Stats pane.")] = None,
    theme: Annotated[str | None, typer.Option("--theme", help="Theme (as for open).")] = None,
    n_resamples: ResamplesOption = None,
    seed: SeedOption = None,
) -> None:
    """The TUI in a browser (textual-serve): one `ledgerscope open` per browser tab, loopback by default."""
    from ledgerscope.cli.serve import check_host
    from ledgerscope.cli.serve import serve as run_server
    from ledgerscope.ledger.verify import load_manifest

    options: list[str] = []
    for flag, value in (("--candidate", candidate), ("--baseline", baseline), ("--rule", rule),
                        ("--baseline-ledger", baseline_ledger), ("--theme", theme),
                        ("--n-resamples", n_resamples), ("--seed", seed)):
        if value is not None:
            options += [flag, str(Path(value).resolve()) if isinstance(value, Path) else str(value)]
    try:
        check_host(host, allow_remote)
        load_manifest(ledger)  # not a ledger: say so here, not in every browser tab
        if rule is not None:
            rule_settings(rule, n_resamples, seed)
    except LedgerscopeError as exc:
        _fail(exc)
        return
    run_server(ledger, host, port, options, allow_remote)


from ledgerscope.cli.ingest import ingest_command  # noqa: E402 - after the app it joins

app.command("ingest")(ingest_command)


def main() -> None:  # pragma: no cover - console script shim
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
