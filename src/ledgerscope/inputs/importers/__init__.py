"""Importers for public QA datasets.

Each writes ``corpus.jsonl`` and ``fixtures.jsonl`` to a directory.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ledgerscope.common.errors import InputError, Problem
from ledgerscope.inputs.fixtures import AnswerContract, Fixture


@dataclass
class ImportReport:
    """What an import did, for the CLI summary and for tests."""

    dataset: str
    documents: int = 0
    questions: int = 0
    spans: int = 0
    #: upstream answers (SQuAD) or hypothesis annotations (ContractNLI) examined
    answers: int = 0
    #: upstream offsets that did not slice to their answer text (one line each)
    offset_mismatches: list[str] = field(default_factory=list)
    #: how many of those were repaired (only with an explicit repair option)
    repaired: int = 0
    #: items left out, with the reason (one line each)
    skipped: list[str] = field(default_factory=list)
    corpus_path: str = ""
    fixtures_path: str = ""
    repairs_path: str = ""
    #: licence line per document where the source states one ("not stated" otherwise)
    licenses: dict[str, str] = field(default_factory=dict)
    #: other facts a reader of the import should know (one line each)
    notes: list[str] = field(default_factory=list)


def read_json_file(file: Path) -> Any:
    """A dataset file's JSON, or :class:`InputError` saying why not (unreadable, not UTF-8, not JSON)."""
    try:
        data = json.loads(file.read_bytes().decode("utf-8"))
    except OSError as exc:
        raise InputError(Problem(str(file), None, "file", exc.strerror or str(exc))) from exc
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(
            Problem(str(file), getattr(exc, "lineno", None), "file", f"not valid JSON: {exc}")
        ) from exc
    return data


def unanswerable_fixture(
    base: dict[str, Any], annotations: dict[str, Any], expected: str | None = None
) -> Fixture:
    """An unanswerable control as every importer writes it: no spans and no sufficient set; ``expected``
    is the dataset's own label for "not answerable" where it has one (None otherwise)."""
    return Fixture(
        segment="unanswerable",
        spans=(),
        sufficient_sets=(),
        answerable=False,
        answer=AnswerContract(expected=expected),
        annotations=annotations,
        **base,
    )
