"""``ledgerscope gate``: the release gate a CI job runs, and the artefacts ``compare --rule`` shares.

Sweep what is missing (:mod:`.gate_sweep`), compare, decide with the preregistered rule, write the
HTML report, JUnit XML and a Markdown summary (appended to ``$GITHUB_STEP_SUMMARY`` when set), and
exit with the decision's status (:mod:`.decision_exit`). docs/ci.md has the workflows.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from ledgerscope.cli.release.decision_exit import FailOnOption, check_fail_on, decision_exit
from ledgerscope.cli.shared.options import BaselineLedgerOption, RepeatsOption
from ledgerscope.cli.shared.output import console, fail, reading, say
from ledgerscope.common.errors import InputError, LedgerscopeError, Problem
from ledgerscope.common.paths import shown_path


def gate_outcome(
    con,
    base_con,
    ledger: Path,
    baseline_ledger: Path | None,
    candidate: str,
    baseline: str,
    rule: Path,
    comparison: dict,
    decision: dict,
    fail_on: str,
    report: Path | None = None,
):
    """The decided comparison with its flips, as the artefacts show it (relative paths); the caller
    sets ``exit_code`` (:func:`decision_exit` warns when it lets an outcome pass)."""
    from ledgerscope.analysis.flips import find_flips
    from ledgerscope.ledger.fixtures import load_ledger_fixtures
    from ledgerscope.report.gate_inputs import GateOutcome

    fixtures, _texts = load_ledger_fixtures(con, ledger)
    flips = find_flips(con, candidate, baseline, base_con, fixtures)
    if comparison.get("noise"):  # --repeats: noisy questions flagged, listed after the steady flips
        from ledgerscope.analysis.stats.repeat_noise import mark_noisy

        flips = mark_noisy(flips, comparison["noise"])
    return GateOutcome(
        candidate,
        baseline,
        shown_path(ledger),
        shown_path(baseline_ledger) if baseline_ledger else None,
        shown_path(rule),
        comparison,
        decision,
        flips,
        shown_path(report) if report else None,
        0,
        fail_on,
    )


def write_artefacts(gate, junit: Path | None, summary: Path | None) -> list[str]:
    """JUnit XML and the Markdown summary, each replaced whole; the summary also appended to
    ``$GITHUB_STEP_SUMMARY`` when that is set. Returns what was written, for the log."""
    from ledgerscope.cli.shared.machine import writing
    from ledgerscope.common.atomic import atomic_path
    from ledgerscope.export._common import publish_mode
    from ledgerscope.report.junit import junit_xml
    from ledgerscope.report.markdown import markdown_summary

    written = []
    text = markdown_summary(gate)
    for path, body in ((junit, junit_xml(gate) if junit else ""), (summary, text)):
        if path is not None:
            with writing(path):
                path.parent.mkdir(parents=True, exist_ok=True)
                with atomic_path(path) as tmp:
                    tmp.write_text(body, encoding="utf-8")
                    publish_mode(tmp)
            written.append(shown_path(path))
    step_summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if step_summary:
        with writing(Path(step_summary)), open(step_summary, "a", encoding="utf-8") as fh:
            fh.write(text + "\n")
        written.append("$GITHUB_STEP_SUMMARY")
    return written


def _arm(path: Path | None):
    from ledgerscope.pipeline.arm.config import load_arm

    return load_arm(path) if path is not None else None


def _name(cfg, given: str | None, declared: str | None, which: str) -> str:
    name = cfg.name if cfg is not None else given or declared
    if name is None:
        raise InputError(
            Problem(
                f"--{which}",
                None,
                which,
                f"no {which} arm: give --{which}-arm ARM.toml, --{which} NAME or name it in the rule",
            )
        )
    return name


def _sweep(ledger, cand_cfg, base_cfg, baseline_ledger, fixtures, corpus, quiet, repeats=1) -> list[str]:
    """Plan and run the sweeps (fixtures and arm configs given), else check the ledger exists."""
    from ledgerscope.cli.release.gate_sweep import plan_sweeps, run_sweeps

    if fixtures is None or cand_cfg is None:
        if not (ledger / "manifest.json").is_file():
            raise InputError(
                Problem(
                    str(ledger),
                    None,
                    "ledger",
                    "no ledger here: give --fixtures and --candidate-arm to sweep one",
                )
            )
        return []
    from ledgerscope.inputs.fixtures import load_fixtures
    from ledgerscope.inputs.sources import load_corpus

    fixture_list, merged = load_fixtures(fixtures, load_corpus(corpus) if corpus else None)
    plan = plan_sweeps(ledger, cand_cfg, base_cfg, baseline_ledger, fixture_list, merged, repeats)
    return plan.notes + run_sweeps(plan, fixture_list, merged, quiet)


def gate(
    rule: Annotated[Path, typer.Option("--rule", help="Preregistered release rule (TOML).")],
    ledger: Annotated[
        Path,
        typer.Option(
            "--ledger",
            help="Ledger of the candidate (swept if missing or incomplete; left alone when complete).",
        ),
    ],
    out: Annotated[Path, typer.Option("--out", help="Directory for report.html, junit.xml, summary.md.")],
    fixtures: Annotated[Path | None, typer.Option("--fixtures", help="Fixtures file (to sweep).")] = None,
    corpus: Annotated[Path | None, typer.Option("--corpus", help="Corpus directory or JSONL.")] = None,
    candidate_arm: Annotated[Path | None, typer.Option("--candidate-arm", help="Candidate arm TOML.")] = None,
    baseline_arm: Annotated[Path | None, typer.Option("--baseline-arm", help="Baseline arm TOML.")] = None,
    baseline_ledger: BaselineLedgerOption = None,
    candidate: Annotated[
        str | None,
        typer.Option(
            "--candidate", help="Candidate arm name (default: the candidate arm's, else the rule's)."
        ),
    ] = None,
    baseline: Annotated[
        str | None,
        typer.Option("--baseline", help="Baseline arm name (default: the baseline arm's, else the rule's)."),
    ] = None,
    fail_on: FailOnOption = "collect-more-evidence",
    quiet: Annotated[bool, typer.Option("--quiet", help="No progress bars, no comparison tables.")] = False,
    repeats: RepeatsOption = 1,
) -> None:
    """The release gate for CI: sweep what is missing, compare, decide with the rule, write the HTML
    report, JUnit XML and a Markdown summary (also to $GITHUB_STEP_SUMMARY), exit with the decision.
    Exit status: 0 accept, 3 reject, 4 collect-more-evidence (see --fail-on); 1, 2, 70, 74 as everywhere."""
    check_fail_on(fail_on)
    try:
        from ledgerscope.cli.shared.vocabulary import rule_settings
        from ledgerscope.pipeline.run.repeats import check_repeats

        check_repeats(repeats)
        loaded = rule_settings(rule, None, None)
        cand_cfg, base_cfg = _arm(candidate_arm), _arm(baseline_arm)
        cand_name = _name(cand_cfg, candidate, loaded.candidate, "candidate")
        base_name = _name(base_cfg, baseline, loaded.baseline, "baseline")
        for line in _sweep(ledger, cand_cfg, base_cfg, baseline_ledger, fixtures, corpus, quiet, repeats):
            say(console(), line)
        gate_run = _decide_and_write(
            ledger, baseline_ledger, cand_name, base_name, rule, loaded, out, fail_on
        )
    except LedgerscopeError as exc:
        fail(exc)
        return
    _print(gate_run, quiet)
    raise typer.Exit(gate_run.exit_code)


def _decide_and_write(ledger, baseline_ledger, cand_name, base_name, rule, loaded, out, fail_on):
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    from ledgerscope.cli.shared.machine import writing
    from ledgerscope.common.atomic import atomic_path
    from ledgerscope.export._common import publish_mode
    from ledgerscope.ledger.read import connect
    from ledgerscope.report.figures import Settings, gather
    from ledgerscope.report.html import render

    report = out / "report.html"
    with reading(ledger):
        data = gather(
            ledger,
            cand_name,
            base_name,
            baseline_ledger=baseline_ledger,
            rule_path=rule,
            settings=Settings(loaded.n_resamples, loaded.seed, loaded.confidence),
        )
        con = connect(ledger)
        base_con = connect(baseline_ledger) if baseline_ledger else None
        result = gate_outcome(
            con,
            base_con,
            ledger,
            baseline_ledger,
            cand_name,
            base_name,
            rule,
            data.comparison,
            data.decision,
            fail_on,
            report,
        )
    result.exit_code = decision_exit(data.decision["outcome"], fail_on)
    with writing(report):
        out.mkdir(parents=True, exist_ok=True)
        with atomic_path(report) as tmp:
            tmp.write_text(render(data), encoding="utf-8")
            publish_mode(tmp)
    result.written = [shown_path(report), *write_artefacts(result, out / "junit.xml", out / "summary.md")]
    return result


def _print(result, quiet: bool) -> None:
    out = console()
    if not quiet:
        from ledgerscope.report.terminal import comparison_report

        for renderable in comparison_report(result.comparison, result.decision):
            out.print(renderable)
    else:
        say(out, f"release decision: {result.decision['outcome'].upper()}")
    say(
        out,
        f"gate: wrote {', '.join(result.written)}; {len(result.flips)} question(s) flipped from correct "
        f"to wrong; exit {result.exit_code}",
    )
