"""A small corpus where a chunk boundary can separate a rule from its exception.

Shared by the sweep, rerun, diagnosis and export tests. The rule and the
qualifier are the seed 000 example's two sentences, embedded in a policy page
among distractor documents.
"""

from __future__ import annotations

import json
from pathlib import Path

POLICY = (
    "# Request retention\n\n"
    "Support requests are stored in the regional data store of the workspace. "
    "Requests may be retained for 30 days. This limit is 7 days for requests marked temporary. "
    "After the retention period ends, the request body is deleted and only an audit entry remains.\n\n"
    "Attachments follow the same schedule as the request they belong to.\n"
)
DISTRACTORS = {
    "backups.md": "# Backups\n\nNightly backups are kept for 14 days in the primary region. Weekly snapshots "
    "are kept for 90 days.\nRestores are requested through the support portal and usually "
    "complete within four hours.\n",
    "sessions.md": "# Sessions\n\nInteractive sessions expire after 12 hours of inactivity. "
    "Service tokens do "
    "not expire but can be revoked at any time.\nRequests that carry an expired session token "
    "are rejected with status 401.\n",
    "exports.md": "# Exports\n\nExport files are retained for 48 hours after they are generated. Larger "
    "exports are split into parts of at most 2 GB.\nTemporary export links can be shared with "
    "people outside the workspace.\n",
}
FIXTURES = [
    {
        "format": "ledgerscope-fixture/1",
        "qid": "temp-retention",
        "question": "How long may requests be retained when they are marked temporary?",
        "segment": "rule-exception",
        "answer": {"expected": "7 days", "default": "30 days", "missing_condition": "abstain"},
        "spans": [
            {
                "id": "rule",
                "doc_id": "policy/retention.md",
                "quote": "Requests may be retained for 30 days.",
                "dependency": "primary",
            },
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
        "qid": "backup-weekly",
        "question": "How long are weekly snapshots kept?",
        "segment": "number-scope",
        "answer": {"expected": "90 days", "default": "14 days"},
        "spans": [
            {
                "id": "s",
                "doc_id": "backups.md",
                "quote": "Weekly snapshots are kept for 90 days.",
                "dependency": "primary",
            }
        ],
        "sufficient_sets": [["s"]],
    },
    {
        "format": "ledgerscope-fixture/1",
        "qid": "no-such-thing",
        "question": "What is the maximum number of seats on the Enterprise plan?",
        "segment": "unanswerable",
        "answerable": False,
        "answer": {"expected": None},
        "spans": [],
        "sufficient_sets": [],
    },
]


def write_inputs(
    root: Path,
    capacity: int = 16,
    overlap: int = 0,
    phases: str = "[0, 1, 2, 5, 9]",
    extra: str = "",
) -> dict[str, Path]:
    corpus = root / "corpus"
    (corpus / "policy").mkdir(parents=True, exist_ok=True)
    (corpus / "policy" / "retention.md").write_text(POLICY, encoding="utf-8")
    for name, text in DISTRACTORS.items():
        (corpus / name).write_text(text, encoding="utf-8")
    fixtures = root / "fixtures.jsonl"
    fixtures.write_text("\n".join(json.dumps(f) for f in FIXTURES) + "\n", encoding="utf-8")
    arms = {}
    # the baseline's stride is 8: the same phase labels, mapped onto its own stride (label mod 8)
    baseline_phases = '{ "0" = 0, "1" = 1, "2" = 2, "5" = 5, "9" = 1 }'
    for name, ov, ph in (("candidate", overlap, phases), ("baseline", 8, baseline_phases)):
        path = root / f"{name}.toml"
        path.write_text(
            f'name = "{name}"\ncapacity = {capacity}\noverlap = {ov}\nphases = {ph}\n'
            f"budget_tokens = 40\ntop_k = 1\n{extra}\n[generator]\nabstain_threshold = 0.3\n"
            "abstain_margin = 0.06\n",
            encoding="utf-8",
        )
        arms[name] = path
    return {"corpus": corpus, "fixtures": fixtures, **arms}
