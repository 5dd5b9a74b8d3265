"""The re-annotation loop's commands: ``import label-studio``, ``fixtures diff``, ``rejudge``.

Bodies only; :mod:`.main` registers them (``import label-studio`` on the import group, ``fixtures``
as a group, ``rejudge`` as a command). docs/reannotation.md walks the loop.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from ledgerscope.cli.shared.machine import writing
from ledgerscope.cli.shared.output import console, fail, say
from ledgerscope.common.errors import InputError, LedgerscopeError, Problem
from ledgerscope.common.safe_text import json_text

_SHOWN = 40  # changed records listed in the text summary
fixtures_app = typer.Typer(help="Fixture versions: what changed between two.", no_args_is_help=True)

CorpusOption = Annotated[
    Path | None,
    typer.Option(
        "--corpus", help="Corpus directory or JSONL, or a ledger (its sources), for documents no task holds."
    ),
]


def load_corpus_or_ledger(path: Path | None):
    """A corpus from a corpus path, or a ledger's sources when ``path`` is a ledger."""
    if path is None:
        return None
    from ledgerscope.ledger.layout import ledger_layout

    if (path / "manifest.json").is_file() and ledger_layout(path).sources_path(path).is_file():
        from ledgerscope.ledger.read import connect
        from ledgerscope.ledger.sources import sources_corpus

        con = connect(path)
        try:
            return sources_corpus(
                ledger_layout(path).sources_path(path),
                con.execute("SELECT doc_id, version, text, observed, access FROM sources").fetchall(),
            )
        finally:
            con.close()
    from ledgerscope.inputs.sources import load_corpus

    return load_corpus(path)


def _users(path: Path | None) -> dict[str, str]:
    """``GET /api/users`` saved to a file: user id to email (the API export names annotators by id)."""
    if path is None:
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(Problem(str(path), None, "users", f"cannot be read as JSON: {exc}")) from None
    data = data.get("results", data) if isinstance(data, dict) else data
    if not isinstance(data, list):
        raise InputError(Problem(str(path), None, "users", "expected a list of {id, email}"))
    return {str(u.get("id")): str(u.get("email")) for u in data if isinstance(u, dict) and u.get("email")}


def import_label_studio_cmd(
    export: Annotated[
        Path,
        typer.Argument(
            help="A Label Studio export (JSON, the API's export, or JSON lines) of label-studio-tasks."
        ),
    ],
    out: Annotated[Path, typer.Option("--out", help="The new fixture version (canonical JSONL) to write.")],
    fixtures: Annotated[
        Path | None,
        typer.Option(
            "--fixtures", help="The previous fixture version (omit for a first version from trace tasks)."
        ),
    ] = None,
    corpus: CorpusOption = None,
    adjudicator: Annotated[
        str | None,
        typer.Option("--adjudicator", help="Email of the annotator whose version decides a disputed task."),
    ] = None,
    users: Annotated[
        Path | None,
        typer.Option(
            "--users", help="JSON of GET /api/users (id, email): names annotators of an API export."
        ),
    ] = None,
    json_out: Annotated[
        bool, typer.Option("--json", help="The summary and the diff as one JSON object.")
    ] = False,
) -> None:
    """Annotators' work back into a new fixture version: spans, sets, unanswerable marks, provenance.
    (Long by its Typer options; the work is
    :func:`ledgerscope.inputs.importers.reannotate.import_label_studio`.)"""
    from ledgerscope.inputs.fixtures.diff import diff_fixtures, diff_lines
    from ledgerscope.inputs.importers.reannotate import import_label_studio

    try:
        with writing(out):
            result = import_label_studio(
                export, out, fixtures, load_corpus_or_ledger(corpus), adjudicator, _users(users)
            )
    except LedgerscopeError as exc:
        fail(exc)
        return
    diffs = diff_fixtures(result.previous, result.fixtures)
    if json_out:
        print(
            json_text(
                {
                    "out": str(out),
                    "tasks": result.tasks,
                    "decided": result.decisions,
                    "disputed": result.disputed,
                    "diff": [d.to_json() for d in diffs],
                }
            )
        )
        return
    shown = console()
    rules = ", ".join(f"{n} {k}" for k, n in sorted(result.decisions.items())) or "none annotated"
    say(shown, f"{result.tasks} task(s), {result.annotated} annotated: {rules}")
    for line in diff_lines(diffs):
        say(shown, line)
    if result.disputed:
        say(
            shown,
            "disputed (previous gold kept; decide with --adjudicator EMAIL): " + ", ".join(result.disputed),
        )
    say(shown, f"fixtures: {out}")


@fixtures_app.command("diff")
def fixtures_diff(
    old: Annotated[Path, typer.Argument(help="The previous fixture version.")],
    new: Annotated[Path, typer.Argument(help="The new fixture version.")],
    corpus: CorpusOption = None,
    json_out: Annotated[
        bool, typer.Option("--json", help="One JSON line per question that changed.")
    ] = False,
) -> None:
    """Per question: spans added, moved, removed, relabelled; sets changed; disputes."""
    from ledgerscope.inputs.fixtures.diff import diff_fixtures, diff_lines

    try:
        before, after = _diffable(old, corpus), _diffable(new, corpus)
    except LedgerscopeError as exc:
        fail(exc)
        return
    diffs = diff_fixtures(before, after)
    if json_out:
        for d in diffs:
            print(json_text(d.to_json()))
        return
    shown = console()
    for line in diff_lines(diffs):
        say(shown, line)
    say(shown, f"{len(diffs)} question(s) changed")


def _diffable(path: Path, corpus: Path | None):
    """A version's fixtures, resolved where their sources are at hand (quote selectors get offsets)."""
    from ledgerscope.inputs.fixtures import read_fixtures, resolve

    fset, problems = read_fixtures(path)
    if problems:
        raise InputError(problems)
    resolved, _, more = resolve(fset, load_corpus_or_ledger(corpus))
    return resolved if not more else fset.fixtures


def rejudge_cmd(
    ledger: Annotated[Path, typer.Argument(help="Ledger directory (only read).")],
    fixtures: Annotated[Path, typer.Option("--fixtures", help="The new fixture version.")],
    out: Annotated[Path, typer.Option("--out", help="The rejudged ledger to write (must not exist).")],
    no_oracle: Annotated[
        bool,
        typer.Option(
            "--no-oracle",
            help="Do not re-run the oracle for questions whose support changed; name them stale.",
        ),
    ] = False,
    json_out: Annotated[bool, typer.Option("--json", help="The summary as one JSON object.")] = False,
) -> None:
    """Judge a ledger's recorded lists and answers against a new fixture version, without re-sweeping."""
    from ledgerscope.pipeline.run.rejudge import rejudge

    try:
        with writing(out):
            r = rejudge(ledger, fixtures, out, no_oracle=no_oracle)
    except LedgerscopeError as exc:
        fail(exc)
        return
    summary = {
        "out": str(out),
        "records": r.records,
        "changed_records": r.changed_records,
        "changed_questions": r.changed_questions,
        "oracle_rerun": r.oracle_rerun,
        "oracle_stale": r.oracle_stale,
        "seconds": round(r.seconds, 2),
        "changes": r.changes,
    }
    if r.repeats:  # a --repeats K ledger: every repeat's answer judged again too
        summary.update(repeats=r.repeats, changed_repeats=r.changed_repeats)
    if json_out:
        print(json_text(summary))
        return
    shown = console()
    say(
        shown,
        f"rejudged {r.records} record(s) in {r.seconds:.1f} s: {r.changed_records} changed "
        f"(verdict or packed support), {len(r.changed_questions)} question(s) with new support",
    )
    for c in r.changes[:_SHOWN]:
        fields = "; ".join(f"{k} {v[0]} -> {v[1]}" for k, v in c.items() if k not in ("arm", "phase", "qid"))
        say(shown, f"  {c['arm']}@{c['phase']} {c['qid']}: {fields}")
    if len(r.changes) > _SHOWN:
        say(shown, f"  ... {len(r.changes) - _SHOWN} more (--json lists them all)")
    if r.repeats:
        say(shown, f"repeats: {r.repeats} answer(s) judged again, {r.changed_repeats} changed a verdict")
    if r.oracle_rerun:
        say(shown, f"oracle re-run: {', '.join(r.oracle_rerun)}")
    if r.oracle_stale:
        say(shown, f"oracle stale (--no-oracle or arm not runnable here): {', '.join(r.oracle_stale)}")
    say(shown, f"ledger: {out}  (compare it with --baseline-ledger {ledger})")
