"""The ledger the TUI tests share: built once per test session (the sweep loads the model, ~6 s).

``tests/sweep_data.py``'s corpus plus a document holding Rich markup and an
escape sequence, with a question over it, so the panes can be checked for
literal rendering. Other TUI test modules call :func:`tui_ledger`.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from .sweep_data import write_inputs

MARKUP_DOC = "notes/markup.md"
MARKUP_TEXT = (
    "# Formatting notes\n\n"
    "Literal markup such as [bold red]x[/] must show as typed. "
    "A terminal escape \x1b[31m must not turn the screen red. "
    "Draft notes are kept for 5 days.\n"
)
MARKUP_FIXTURE = {
    "format": "ledgerscope-fixture/1",
    "qid": "markup-notes",
    "question": "How long are [bold]draft[/bold] notes kept?",
    "segment": "number-scope",
    "answer": {"expected": "5 days"},
    "spans": [
        {
            "id": "keep",
            "doc_id": MARKUP_DOC,
            "quote": "Draft notes are kept for 5 days.",
            "dependency": "primary",
        }
    ],
    "sufficient_sets": [["keep"]],
}

_LOCK = threading.Lock()
_BUILT: dict[str, Path] = {}


def tui_ledger(tmp_path_factory) -> Path:
    """The shared ledger (candidate and baseline arms, phases 0 1 2 5 9), built on first use."""
    with _LOCK:
        if "ledger" not in _BUILT:
            from ledgerscope.inputs.fixtures import load_fixtures
            from ledgerscope.inputs.sources import load_corpus
            from ledgerscope.pipeline.arm.config import load_arm
            from ledgerscope.pipeline.run.sweep import sweep

            root = tmp_path_factory.mktemp("tui")
            inputs = write_inputs(root / "inputs")
            (inputs["corpus"] / "notes").mkdir(exist_ok=True)
            (inputs["corpus"] / MARKUP_DOC).write_text(MARKUP_TEXT, encoding="utf-8")
            with inputs["fixtures"].open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(MARKUP_FIXTURE) + "\n")
            fixtures, corpus = load_fixtures(inputs["fixtures"], load_corpus(inputs["corpus"]))
            arms = [load_arm(inputs["candidate"]), load_arm(inputs["baseline"])]
            out = root / "ledger"
            sweep(fixtures, corpus, arms, out)
            _BUILT["ledger"] = out
        return _BUILT["ledger"]


@pytest.fixture(scope="module")
def ledger(tmp_path_factory) -> Path:
    return tui_ledger(tmp_path_factory)


@pytest.mark.slow
def test_the_shared_ledger_has_both_arms_and_the_markup_question(ledger):
    from ledgerscope.ledger.read import connect

    con = connect(ledger)
    rows = con.execute(
        "SELECT arm, count(DISTINCT qid), count(DISTINCT phase) FROM records GROUP BY arm ORDER BY arm"
    ).fetchall()
    assert rows == [("baseline", 4, 5), ("candidate", 4, 5)]
    text = con.execute("SELECT text FROM sources WHERE doc_id = ?", [MARKUP_DOC]).fetchall()[0][0]
    assert "[bold red]x[/]" in text and "\x1b[31m" in text
