"""The ledger's ``sources`` table from a :class:`~ledgerscope.inputs.sources.Corpus` and back into
one, every digest re-checked (a ledger's sources are the only copy its readers trust)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ledgerscope.common.errors import InputError, Problem

if TYPE_CHECKING:
    from ledgerscope.inputs.sources import Corpus


def source_rows(corpus: Corpus) -> list[dict[str, Any]]:
    """The corpus as rows of the ledger's ``sources`` table (:data:`ledgerscope.ledger.schema.SOURCES`)."""
    return [
        {
            "doc_id": s.doc_id,
            "version": s.version,
            "text": s.text,
            "observed": s.observed,
            "access": list(s.access),
        }
        for s in corpus
    ]


def sources_corpus(path: Path, rows: Iterable[Sequence[Any]]) -> Corpus:
    """The ledger's sources (rows of ``doc_id, version, text, observed, access``), digests re-checked.

    Rows are numbered from 1 in the message of any problem.
    """
    from ledgerscope.common.errors import DigestMismatch
    from ledgerscope.inputs.sources import Corpus, make_source

    corpus, problems = Corpus(), []
    for i, (doc_id, version, text, observed, access) in enumerate(rows, start=1):
        if not isinstance(doc_id, str) or not isinstance(text, str):
            problems.append(
                Problem(
                    str(path),
                    None,
                    "doc_id" if not isinstance(doc_id, str) else "text",
                    f"row {i}: missing (null)",
                )
            )
            continue
        try:
            corpus.add(make_source(doc_id, text, version, observed, tuple(access or ())))
        except DigestMismatch as exc:
            problems.append(Problem(str(path), None, "version", f"row {i}: {exc}"))
        except InputError as exc:
            problems.extend(Problem(str(path), None, p.field, f"row {i}: {p.reason}") for p in exc.problems)
    if problems:
        raise InputError(problems)
    return corpus
