"""One small real ledger with hostile text and a restricted document (conftest.py's ``hostile_ledger``).

The corpus holds a policy page whose text carries HTML (``<script>``, an ``onerror=``
attribute), Rich markup and a bidi override, and a restricted document (access label
``restricted``) that is the best match for one question. Arm ``candidate`` holds the clearance
(its packed contexts and answers carry the restricted text); arm ``baseline`` does not. Phases 0,
5 and 11 of 16-token windows, so a boundary falls inside the gold spans at some phases.
"""

from __future__ import annotations

import json
from pathlib import Path

from .sweep_data import DISTRACTORS

SCRIPT = "<script>window.__pwned=1</script>"
ONERROR = '<img src=x onerror="window.__pwned=2">'
BIDI = "\u202eevil"
MARKUP = "[bold red]x[/]"
HOSTILE = f"{SCRIPT} {ONERROR} {MARKUP} {BIDI}"
MARKER = "RESTRICTED-7731"
RESTRICTED_DOC = "restricted/board-minutes.md"
RESTRICTED = (
    "# Board minutes\n\n"
    "Requests marked temporary may be retained for 7 days only, the board decided in "
    f"{MARKER}. Temporary requests are retained 7 days.\n"
)
POLICY = (
    "# Request retention\n\n"
    "Support requests are stored in the regional data store of the workspace. "
    "Requests may be retained for 30 days. This limit is 7 days for requests marked temporary. "
    f"Style note: {HOSTILE} is how the style guide writes it.\n\n"
    "Attachments follow the same schedule as the request they belong to.\n"
)
HOSTILE_QID = "hostile-<script>alert(1)</script>-\u202e"
FIXTURES = [
    {
        "format": "ledgerscope-fixture/1",
        "qid": "temp-retention",
        "question": "How long may requests marked temporary be retained?",
        "segment": "rule-exception",
        "answer": {"expected": "7 days", "default": "30 days", "missing_condition": "abstain"},
        "spans": [
            {"id": "rule", "doc_id": "policy/retention.md", "quote": "Requests may be retained for 30 days."},
            {
                "id": "qualifier",
                "doc_id": "policy/retention.md",
                "quote": "This limit is 7 days for requests marked temporary.",
                "dependency": "exception",
            },
        ],
        "sufficient_sets": [["rule", "qualifier"]],
    },
    {
        "format": "ledgerscope-fixture/1",
        "qid": "board-temporary",
        "question": "What did the board decide about temporary requests?",
        "segment": "definition-referent",
        "answer": {"expected": "7 days"},
        "spans": [
            {"id": "minutes", "doc_id": RESTRICTED_DOC, "quote": "Temporary requests are retained 7 days."}
        ],
        "sufficient_sets": [["minutes"]],
    },
    {
        "format": "ledgerscope-fixture/1",
        "qid": HOSTILE_QID,
        "question": f"What does the style note {HOSTILE} say?",
        "segment": "definition-referent",
        "answer": {"expected": MARKUP},
        "spans": [{"id": "note", "doc_id": "policy/retention.md", "quote": f"Style note: {HOSTILE} is how"}],
        "sufficient_sets": [["note"]],
    },
]


def _arm(name: str, clearance: list[str]) -> str:
    return (
        f'name = "{name}"\ncapacity = 16\noverlap = 0\nphases = [0, 5, 11]\nbudget_tokens = 60\n'
        "top_k = 2\n[generator]\nabstain_threshold = 0.3\n"
        f"[access]\nclearance = {json.dumps(clearance)}\n"
    )


def build_hostile_ledger(root: Path) -> dict[str, Path]:
    """Write the inputs under ``root`` and sweep them: {"ledger": ..., "corpus": ...}."""
    from ledgerscope.inputs.fixtures import load_fixtures
    from ledgerscope.inputs.sources import load_corpus
    from ledgerscope.pipeline.arm.config import load_arm
    from ledgerscope.pipeline.run.sweep import sweep

    rows = [
        {"doc_id": "policy/retention.md", "text": POLICY},
        {"doc_id": RESTRICTED_DOC, "text": RESTRICTED, "access": ["restricted"]},
    ]
    rows += [{"doc_id": k, "text": v} for k, v in sorted(DISTRACTORS.items())]
    corpus = root / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    fixtures = root / "fixtures.jsonl"
    fixtures.write_text("".join(json.dumps(f) + "\n" for f in FIXTURES), encoding="utf-8")
    arms = []
    for name, clearance in (("candidate", ["restricted"]), ("baseline", [])):
        path = root / f"{name}.toml"
        path.write_text(_arm(name, clearance), encoding="utf-8")
        arms.append(load_arm(path))
    fx, merged = load_fixtures(fixtures, load_corpus(corpus))
    ledger = root / "ledger"
    sweep(fx, merged, arms, ledger)
    return {"ledger": ledger, "corpus": corpus}
