"""Fixture validation: every problem located, nothing written."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from ledgerscope.common.errors import InputError, Problem
from ledgerscope.inputs.fixtures import Fixture, read_fixtures, resolve
from ledgerscope.inputs.sources import Corpus, load_corpus


def validate_fixtures(
    fixtures_path: str | Path, corpus_path: str | Path | None = None
) -> tuple[list[Fixture], Corpus, list[Problem]]:
    """Read, resolve and check fixtures; return (fixtures, merged corpus, problems)."""
    problems: list[Problem] = []
    corpus = None
    if corpus_path is not None:
        try:
            corpus = load_corpus(corpus_path)
        except InputError as exc:
            problems.extend(exc.problems)
    fset, read_problems = read_fixtures(fixtures_path)
    problems.extend(read_problems)
    fixtures, merged, resolve_problems = resolve(fset, corpus)
    problems.extend(resolve_problems)
    return fixtures, merged, problems


def summarise(fixtures: list[Fixture], corpus: Corpus, title: str):
    """A Rich table: questions, spans and sets per segment."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    from ledgerscope.common.safe_text import safe

    table = Table(
        title=Text(f"{safe(title)}: {len(fixtures)} fixture(s) valid"),
        title_justify="left",
        box=box.SIMPLE_HEAD,
    )
    table.add_column("segment", no_wrap=True)
    for name in ("questions", "spans", "sets", "qualifiers", "support-only"):
        table.add_column(name, justify="right")
    by_segment: dict[str, list[Fixture]] = {}
    for fx in fixtures:
        by_segment.setdefault(fx.segment, []).append(fx)
    for segment in sorted(by_segment):
        group = by_segment[segment]
        table.add_row(
            segment,
            str(len(group)),
            str(sum(len(f.spans) for f in group)),
            str(sum(len(f.sufficient_sets) for f in group)),
            str(sum(1 for f in group for s in f.spans if s.is_qualifier)),
            str(sum(1 for f in group if f.support_only)),
        )
    docs = {d for f in fixtures for d in f.doc_ids}
    states = Counter(f.adjudication.get("state") for f in fixtures)
    table.caption = (
        f"{len(docs)} documents referenced of {len(corpus)} in the corpus; adjudication: "
        + ", ".join(f"{k} {v}" for k, v in sorted(states.items()))
    )
    return table
