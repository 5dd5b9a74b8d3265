"""Command-line entry point: the app, its last line of defence, and ``sweep``.

The other commands live by group in :mod:`.inputs`, :mod:`.analyse`, :mod:`.records`,
:mod:`.browse` and :mod:`.ingest`; they are registered here in the order ``--help`` lists them.
Heavy imports (torch, textual, duckdb) stay inside commands."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Annotated

import typer

from ledgerscope.cli import analyse, browse, inputs, records
from ledgerscope.cli.cache import cache_app
from ledgerscope.cli.release import gate
from ledgerscope.cli.shared.file_urls import FileUrlGroup
from ledgerscope.cli.shared.locations import ledger_locations
from ledgerscope.cli.shared.machine import EXIT_IO, MachineError, machine_error, writing
from ledgerscope.cli.shared.options import RepeatsOption
from ledgerscope.cli.shared.output import console as _console
from ledgerscope.cli.shared.output import fail as _fail
from ledgerscope.cli.shared.output import print_error as _print_error
from ledgerscope.cli.shared.output import say as _say
from ledgerscope.cli.shared.vocabulary import version_lines
from ledgerscope.common.errors import LedgerscopeError
from ledgerscope.common.safe_text import safe_line

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
    print(
        f"ledgerscope: internal error: {type(exc).__name__}: {safe_line(str(exc), 500)} (please report)",
        file=sys.stderr,
    )
    sys.exit(EXIT_INTERNAL)


app = _App(
    cls=FileUrlGroup,
    name="ledgerscope",
    help="Boundary-phase sweeps for RAG: which answers broke, at which stage, because of which boundary.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
app.add_typer(inputs.import_app, name="import")
app.add_typer(inputs.config_app, name="config")
app.add_typer(analyse.judge_app, name="judge")
app.add_typer(cache_app, name="cache")


def _print_version(value: bool) -> None:
    if value:
        for line in version_lines():
            print(line)
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_print_version,
            is_eager=True,
            help="Print the version and the ledger format versions read and written, then exit.",
        ),
    ] = False,
) -> None:
    """Boundary-phase sweeps for RAG: which answers broke, at which stage, because of which boundary."""


# registered in the order --help lists them: these three before sweep, the rest after it
app.command()(inputs.validate)
app.command()(ledger_locations(read=("ledger",))(analyse.diagnose))
app.command()(ledger_locations(read=("ledger", "baseline_ledger"))(analyse.compare))


@app.command()
@ledger_locations(write=("out",))
def sweep(
    fixtures: Annotated[Path, typer.Option("--fixtures", help="Fixtures file (any accepted form).")],
    arm: Annotated[list[Path], typer.Option("--arm", help="Arm TOML; repeat for candidate and baseline.")],
    out: Annotated[Path, typer.Option("--out", help="Ledger directory (created; resumed if it exists).")],
    corpus: Annotated[
        Path | None,
        typer.Option(
            "--corpus", help="Corpus directory or JSONL; optional when fixtures carry their sources inline."
        ),
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", help="No progress bars.")] = False,
    executor: Annotated[
        str,
        typer.Option(
            "--executor", help="local (this process) or ray (needs the ray extra; docs/scaling.md)."
        ),
    ] = "local",
    ray_address: Annotated[
        str | None,
        typer.Option(
            "--ray-address",
            help="Ray cluster to join (--executor ray); without it a local one starts on 127.0.0.1.",
        ),
    ] = None,
    estimate: Annotated[
        bool,
        typer.Option(
            "--estimate",
            help="Print what the sweep would encode, send and cost, and how long it would take "
            "(a short calibration run; no endpoint is called), then exit.",
        ),
    ] = False,
    json_out: Annotated[bool, typer.Option("--json", help="With --estimate: one JSON object.")] = False,
    prices: Annotated[
        Path | None, typer.Option("--prices", help="Price table (TOML) for --estimate and --max-cost.")
    ] = None,
    max_cost: Annotated[
        float | None,
        typer.Option(
            "--max-cost",
            help="Stop before a partition that would take this run's cost over this amount "
            "(needs --prices); rerun to resume.",
        ),
    ] = None,
    max_requests: Annotated[
        int | None,
        typer.Option(
            "--max-requests",
            help="Stop before a partition that would take this run's endpoint requests "
            "(embedding, rerank, generation) over this number; rerun to resume.",
        ),
    ] = None,
    repeats: RepeatsOption = 1,
) -> None:
    """Run a boundary-phase sweep of every arm over its preregistered phases into a ledger. (Long by
    its Typer options; the work is :func:`ledgerscope.pipeline.run.sweep.sweep`.)"""
    from ledgerscope.cli.shared.extras import require_extra
    from ledgerscope.cli.sweep_costs import caps_from, print_estimate, print_stopped
    from ledgerscope.inputs.fixtures import load_fixtures
    from ledgerscope.inputs.sources import load_corpus
    from ledgerscope.pipeline.arm.config import load_arm, with_lines

    try:
        from ledgerscope.pipeline.run.repeats import check_repeats

        check_repeats(repeats)
        require_extra("sweep", "ledgerscope sweep")
        arms = [load_arm(a) for a in arm]
        base = load_corpus(corpus) if corpus else None
        fixture_list, merged = load_fixtures(fixtures, base)
        caps = caps_from(prices, max_cost, max_requests)
        if estimate:
            print_estimate(fixture_list, merged, arms, out, caps, json_out, repeats)
            return
    except LedgerscopeError as exc:
        _fail(exc)
        return
    try:
        run_on = _sweep_executor(executor, ray_address)
        with writing(out):
            result = _run_sweep(fixture_list, merged, arms, out, quiet, run_on, caps, repeats)
    except LedgerscopeError as exc:
        _fail(with_lines(exc, arms))  # a problem with an arm's key: the key's line in its file
        return
    _print_sweep(result, out, len(fixture_list))
    if result.stopped:
        print_stopped(result)
        raise typer.Exit(1)


def _run_sweep(fixture_list, merged, arms, out: Path, quiet: bool, executor, caps=None, repeats: int = 1):
    from ledgerscope.cli.shared.progress import RichSweepProgress
    from ledgerscope.pipeline.run.sweep import sweep as run_sweep

    if quiet:
        return run_sweep(fixture_list, merged, arms, out, executor=executor, caps=caps, repeats=repeats)
    with RichSweepProgress() as progress:
        return run_sweep(
            fixture_list, merged, arms, out, progress=progress, executor=executor, caps=caps, repeats=repeats
        )


def _print_sweep(result, out: Path, n_questions: int) -> None:
    """The summary line (partitions, texts from the embedding cache and encoded), then what the
    cache refused or could not write, then external chunkers' offsets."""
    console = _console()
    _say(
        console,
        f"ledger {out}: {len(result.written)} partition(s) written, {len(result.skipped)} already done "
        f"(resumed), {n_questions} questions, texts: {result.cached_texts} from the embedding cache, "
        f"{result.encoded_texts} encoded{_model_time(result)}, {result.seconds:.1f} s",
    )
    for line in result.cache_messages:
        _say(console, line)
    for arm_name, counts in result.offsets.items():
        if counts.get("checked"):
            _say(console, offsets_line(arm_name, counts))


def _model_time(result) -> str:
    """The summary's "(N s in the model)" when this process encoded anything (Ray's actors time
    their own)."""
    return f" ({result.encode_seconds:.1f} s in the model)" if result.encode_seconds > 0 else ""


def _sweep_executor(name: str, address: str | None):
    """None (the local executor) or the Ray executor; Ray is imported only when asked for."""
    from ledgerscope.common.errors import InputError, Problem

    if name == "local" and address is None:
        return None
    if name != "ray":
        raise InputError(
            Problem(
                "--executor", None, "executor", f"{name!r}: local or ray (--ray-address needs --executor ray)"
            )
        )
    import importlib.util

    if importlib.util.find_spec("ray") is None:
        raise InputError(
            Problem("--executor", None, "executor", "ray is not installed: pip install 'ledgerscope[ray]'")
        )
    from ledgerscope.pipeline.run.ray_executor import RayExecutor

    return RayExecutor(address)


def offsets_line(arm: str, counts) -> str:
    """One arm's external chunker offsets as the sweep checked them (the rows are in ``repairs``)."""
    from ledgerscope.pipeline.chunking.external import DROPPED

    placed = {k: v for k, v in sorted(counts.items()) if k != "checked" and k not in DROPPED}
    dropped = {k: v for k, v in sorted(counts.items()) if k in DROPPED}
    parts = [f"{v} {k}" for k, v in placed.items()]
    drop = (
        f"{sum(dropped.values())} dropped ({', '.join(f'{v} {k}' for k, v in dropped.items())})"
        if dropped
        else "0 dropped"
    )
    verified = counts["checked"] - sum(placed.values()) - sum(dropped.values())
    return (
        f"arm {arm}: chunk offsets of {counts['checked']} units: {verified} verified, "
        + "".join(f"{p}, " for p in parts)
        + f"{drop}; every one not verified is in the repairs table"
    )


app.command()(records.convert)
app.command()(records.rerun)
app.command()(ledger_locations(read=("ledger",), upload=("out",))(records.export))
app.command("open")(ledger_locations(read=("ledger", "baseline_ledger"))(browse.open_ledger))
app.command()(ledger_locations(read=("ledger", "baseline_ledger"), upload=("out",))(analyse.report))
app.command("gate")(gate.gate)
app.command()(ledger_locations(read=("ledger",))(browse.serve))

from ledgerscope.cli.ingest import ingest_command  # noqa: E402 - after the app it joins

app.command("ingest")(ledger_locations(write=("out",), new=True)(ingest_command))

from ledgerscope.cli import reannotate  # noqa: E402 - after the app it joins

inputs.import_app.command("label-studio")(reannotate.import_label_studio_cmd)
app.add_typer(reannotate.fixtures_app, name="fixtures")
app.command("rejudge")(reannotate.rejudge_cmd)


def main() -> None:  # pragma: no cover - console script shim
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
