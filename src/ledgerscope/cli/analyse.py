"""Reading a ledger's verdicts: ``diagnose``, ``compare``, ``report`` and the ``judge`` group.

The command bodies live here to keep :mod:`.main` short; :mod:`.main` registers them on the app.
Each imports its analysis inside the command, so ``--help`` loads neither DuckDB nor NumPy.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from ledgerscope.analysis.stats import DEFAULT_N_RESAMPLES, DEFAULT_SEED
from ledgerscope.cli.release.decision_exit import FailOnOption, check_fail_on, decision_exit
from ledgerscope.cli.shared.machine import writing
from ledgerscope.cli.shared.options import (
    BaselineLedgerOption,
    PricesOption,
    ResamplesOption,
    RuleOption,
    SeedOption,
)
from ledgerscope.cli.shared.output import console, fail, reading, say
from ledgerscope.cli.shared.vocabulary import check_arms, rule_settings
from ledgerscope.common.errors import LedgerscopeError
from ledgerscope.common.safe_text import json_text

judge_app = typer.Typer(
    help="The answer judge: what an LLM judge's verdicts are worth.", no_args_is_help=True
)


def _one_blas_thread() -> None:
    """Its matrix products are small, two run at a time: no BLAS thread pool (spinning at start-up)."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def diagnose(
    ledger: Annotated[Path, typer.Argument(help="Ledger directory.")],
    arm: Annotated[str | None, typer.Option("--arm", help="Only this arm.")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="JSON lines, one per record.")] = False,
    prices: PricesOption = None,
) -> None:
    """Place every record on the ten-step diagnosis tree (seed 001, section 15); then what each arm
    cost (index size, usage, latency per stage, money with --prices)."""
    from ledgerscope.analysis.diagnosis import ledger_heads, write_json_lines
    from ledgerscope.ledger.fixtures import load_ledger_fixtures
    from ledgerscope.ledger.read import connect

    try:
        with reading(ledger):
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
        fail(exc)
        return
    from ledgerscope.analysis.resources import ledger_resources
    from ledgerscope.analysis.reversals import find_reversals
    from ledgerscope.analysis.survival import survival
    from ledgerscope.analysis.validity import ledger_meter, validity_lines
    from ledgerscope.report.resources_view import diagnose_resources
    from ledgerscope.report.terminal import diagnosis_table, recall_table, reversals_table, survival_table

    try:
        with reading(ledger):
            funnel = survival(con, ledger, arm, fixtures=fixtures)
            reversals = find_reversals(con, arm)
            resources = ledger_resources(ledger, [arm] if arm else None, _prices(prices))
            validity = ledger_meter(con, [arm] if arm else None)
    except LedgerscopeError as exc:
        fail(exc)
        return
    from ledgerscope.ledger.verify import load_manifest
    from ledgerscope.report.unlocated import unlocated_table

    out = console()
    out.print(diagnosis_table(rows))
    out.print(survival_table(funnel))
    for extra in (
        recall_table(funnel),
        reversals_table(reversals),
        unlocated_table(load_manifest(ledger)),
        *diagnose_resources(resources),
    ):
        if extra is not None:
            out.print(extra)
    for line in validity_lines(validity):
        say(out, line)


def _prices(path: Path | None, rule=None):
    """The price table from --prices, else the rule's ``max_cost.prices``, else none."""
    from ledgerscope.analysis.resources import price_table

    return price_table(path, rule)


def compare(
    ledger: Annotated[Path, typer.Argument(help="Ledger directory (holds the candidate arm).")],
    candidate: Annotated[str, typer.Option("--candidate", help="Candidate arm name.")],
    baseline: Annotated[str, typer.Option("--baseline", help="Baseline arm name.")],
    baseline_ledger: BaselineLedgerOption = None,
    rule: RuleOption = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the comparison as JSON.")] = False,
    n_resamples: ResamplesOption = None,
    seed: SeedOption = None,
    clusters: Annotated[
        str,
        typer.Option(
            "--clusters",
            help="Bootstrap clusters: 'first-document' (each question's first document, the default) or "
            "'components' (connected components of the question-document graph). Both counts are "
            "reported.",
        ),
    ] = "first-document",
    prices: PricesOption = None,
    fail_on: FailOnOption = "collect-more-evidence",
    junit: Annotated[
        Path | None,
        typer.Option(
            "--junit",
            help="With --rule: write JUnit XML (a test case per rule check and per question "
            "flipped from correct to wrong).",
        ),
    ] = None,
    summary: Annotated[
        Path | None,
        typer.Option(
            "--summary",
            help="With --rule: write a Markdown summary (also appended to $GITHUB_STEP_SUMMARY when set).",
        ),
    ] = None,
) -> None:
    """Candidate minus baseline per phase, worst phase and segments, with a paired, clustered bootstrap.
    With --rule, the release decision; exit status 0 accept, 3 reject, 4 collect-more-evidence (see
    --fail-on), 1, 2, 70, 74 as everywhere. (Long by its Typer options and the wiring of the rule,
    the bootstrap, the resources and the three outputs; each piece is a call into analysis/ or report/.)"""
    from ledgerscope.analysis.stats.compare import CLUSTER_RULES

    if clusters not in CLUSTER_RULES:
        raise typer.BadParameter(f"--clusters must be one of {', '.join(CLUSTER_RULES)}")
    check_fail_on(fail_on)
    if rule is None and (junit or summary):
        raise typer.BadParameter("--junit and --summary need --rule (they report the release decision)")
    _one_blas_thread()
    from ledgerscope.analysis.stats.compare import compare_arms
    from ledgerscope.ledger.read import connect

    try:
        with reading(ledger):
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
            comparison = compare_arms(
                con,
                candidate,
                baseline,
                base_con,
                seed=seed,
                n_resamples=n_resamples,
                confidence=confidence,
                clusters=clusters,
                min_oracle_correct=release_rule.min_oracle_correct if rule else None,
            )
            from ledgerscope.analysis.resources import attach

            attach(
                comparison,
                ledger,
                candidate,
                baseline_ledger,
                baseline,
                _prices(prices, release_rule if rule is not None else None),
            )
            if rule is not None:
                decision = decide(release_rule, comparison).to_dict()
            code = decision_exit(decision["outcome"], fail_on) if decision else 0
            if junit or summary:
                from ledgerscope.cli.release.gate import gate_outcome, write_artefacts

                outcome = gate_outcome(
                    con,
                    base_con,
                    ledger,
                    baseline_ledger,
                    candidate,
                    baseline,
                    rule,
                    comparison,
                    decision,
                    fail_on,
                )
                outcome.exit_code = code
                write_artefacts(outcome, junit, summary)
    except LedgerscopeError as exc:
        fail(exc)
        return
    if json_out:
        print(json_text({"comparison": comparison, "decision": decision}))
        raise typer.Exit(code)
    from ledgerscope.report.resources_view import difference_lines
    from ledgerscope.report.terminal import comparison_report

    out = console()
    for renderable in comparison_report(comparison, decision):
        out.print(renderable)
    for line in difference_lines(comparison.get("resources")):
        say(out, line)
    raise typer.Exit(code)


def report(
    ledger: Annotated[Path, typer.Argument(help="Ledger directory (holds the candidate arm).")],
    candidate: Annotated[str, typer.Option("--candidate", help="Candidate arm name.")],
    baseline: Annotated[str, typer.Option("--baseline", help="Baseline arm name.")],
    out: Annotated[Path, typer.Option("--out", help="The HTML file to write (replaced whole).")],
    baseline_ledger: BaselineLedgerOption = None,
    rule: RuleOption = None,
    n_resamples: ResamplesOption = None,
    seed: SeedOption = None,
    include_restricted: Annotated[
        bool,
        typer.Option(
            "--include-restricted",
            help="Include the text of restricted documents (access labels); by default "
            "only their ids, offsets and digests.",
        ),
    ] = False,
    prices: PricesOption = None,
) -> None:
    """One self-contained HTML file: decision, phase curves, funnel, steps, segments, reversals and their
    boundaries. Opens offline, needs no JavaScript, prints. (Long by its Typer options; the work is
    :func:`ledgerscope.report.figures.gather` and :func:`ledgerscope.report.html.render`.)"""
    _one_blas_thread()
    from ledgerscope.common.atomic import atomic_path
    from ledgerscope.export._common import publish_mode
    from ledgerscope.report.figures import Settings, gather
    from ledgerscope.report.html import render

    try:
        with reading(ledger):
            settings = Settings(
                DEFAULT_N_RESAMPLES if n_resamples is None else n_resamples,
                DEFAULT_SEED if seed is None else seed,
            )
            if rule is not None:
                loaded = rule_settings(rule, n_resamples, seed)
                settings = Settings(loaded.n_resamples, loaded.seed, loaded.confidence)
            data = gather(
                ledger,
                candidate,
                baseline,
                baseline_ledger=baseline_ledger,
                rule_path=rule,
                settings=settings,
                include_restricted=include_restricted,
                prices_path=prices,
            )
        page = render(data)
        with writing(out), atomic_path(out) as tmp:
            tmp.write_text(page, encoding="utf-8")
            publish_mode(tmp)
    except LedgerscopeError as exc:
        fail(exc)
        return
    shown = console()
    outcome = (data.decision or {}).get("outcome", "no rule").upper()
    say(
        shown,
        f"report: {out} ({len(page.encode()) // 1024} KiB; decision {outcome}; "
        f"{len(data.reversals)} reversal(s))",
    )
    from ledgerscope.export.redaction import summary_line

    if data.redaction and (line := summary_line(data.redaction)) is not None:
        say(shown, line)


@judge_app.command("calibrate")
def judge_calibrate(
    ledger: Annotated[Path, typer.Argument(help="Ledger directory (only read).")],
    arm: Annotated[str, typer.Option("--arm", help="Arm whose answers are judged.")],
    base_url: Annotated[
        str | None,
        typer.Option(
            "--base-url",
            help="OpenAI-compatible endpoint of the LLM judge (default: the arm's [judge] "
            'table, when it was swept with kind = "endpoint").',
        ),
    ] = None,
    model: Annotated[str, typer.Option("--model", help="Model name at that endpoint.")] = "",
    api_key_env: Annotated[
        str,
        typer.Option("--api-key-env", help="NAME of the environment variable holding the endpoint's key."),
    ] = "",
    max_tokens: Annotated[int, typer.Option(help="Tokens the judge may reply with.")] = 16,
    limit: Annotated[int | None, typer.Option(help="Grade at most this many distinct answers.")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Agreement of the LLM judge with the deterministic judge: confusion matrix and Cohen's kappa."""
    from ledgerscope.analysis.judge_calibration import calibrate

    endpoint = None
    if base_url:
        endpoint = {
            "kind": "endpoint",
            "base_url": base_url,
            "model": model,
            "api_key_env": api_key_env,
            "max_tokens": max_tokens,
        }
    try:
        with reading(ledger):
            result = calibrate(ledger, arm, endpoint, limit)
    except LedgerscopeError as exc:
        fail(exc)
        return
    if json_out:
        print(json_text(result))
        return
    from ledgerscope.report.terminal import calibration_report

    out = console()
    for renderable in calibration_report(result):
        out.print(renderable)
