"""A tiny corpus, its fixtures and the truths a framework test checks a ledger against.

Four short documents (quotes, blank lines: what JSON escaping and splitters get
wrong), seven answerable questions with one gold sentence each and one
unanswerable control. :func:`support` decides, without ledgerscope, whether
a list of (document, start, end) intervals covers a question's gold sentence
(whitespace between intervals excused, as the support rule does), so a test
can compare a ledger's flag with what the pipeline really handed on.
"""

from __future__ import annotations

import json
from pathlib import Path

DOCS = {
    "docs/retention.md": (
        "# Retention\n\nAudit logs are kept for 400 days on the Enterprise plan. On the Team plan, audit "
        'logs are kept for 90 days.\n\nThe "legal hold" setting keeps deleted files until the hold is '
        "lifted. A hold can only be set by an owner.\n\nBackups run nightly at 02:00 UTC and are kept for "
        "35 days.\n"
    ),
    "docs/limits.md": (
        "# Limits\n\nEach uploaded file may be up to 250 MB. The limit is 20 MB per file for workspaces on "
        "the Free plan.\n\nThe API allows 60 requests per minute per token. Tokens of guest accounts are "
        "limited to 20 requests per minute.\n\nA workspace may hold up to 5,000 members.\n"
    ),
    "docs/security.md": (
        '# Security\n\nSingle sign-on is called "SSO" in the admin console. SSO is available on the '
        "Enterprise plan only.\n\nSessions expire after 12 hours of inactivity. Admins can shorten the "
        "session length to 1 hour.\n\nData is stored in the EU region when the owner selects "
        '"EU residency".\n'
    ),
    "docs/billing.md": (
        "# Billing\n\nInvoices are issued on the first day of each month. Refunds are available within 14 "
        "days of a charge.\n\nAnnual plans are billed once a year and save 20 percent.\n"
    ),
}

#: qid -> (question, expected answer, document, gold sentence); None: an unanswerable control
QUESTIONS: dict[str, tuple[str, str | None, str | None, str | None]] = {
    "q-audit": (
        "How long are audit logs kept on the Enterprise plan?",
        "400 days",
        "docs/retention.md",
        "Audit logs are kept for 400 days on the Enterprise plan.",
    ),
    "q-hold": (
        'What does the "legal hold" setting keep?',
        "deleted files",
        "docs/retention.md",
        'The "legal hold" setting keeps deleted files until the hold is lifted.',
    ),
    "q-upload": (
        "What is the per-file upload limit on the Free plan?",
        "20 MB",
        "docs/limits.md",
        "The limit is 20 MB per file for workspaces on the Free plan.",
    ),
    "q-guest": (
        "What rate limit applies to tokens of guest accounts?",
        "20 requests per minute",
        "docs/limits.md",
        "Tokens of guest accounts are limited to 20 requests per minute.",
    ),
    "q-sso": (
        'On which plan is "SSO" available?',
        "Enterprise",
        "docs/security.md",
        "SSO is available on the Enterprise plan only.",
    ),
    "q-session": (
        "After how long do sessions expire?",
        "12 hours",
        "docs/security.md",
        "Sessions expire after 12 hours of inactivity.",
    ),
    "q-refund": (
        "Within how many days are refunds available?",
        "14 days",
        "docs/billing.md",
        "Refunds are available within 14 days of a charge.",
    ),
    "q-none": ("Which payment processors are supported?", None, None, None),
}


def write(root: Path) -> tuple[Path, Path]:
    """The corpus directory and the fixtures file under ``root``."""
    corpus = root / "corpus"
    for doc_id, text in DOCS.items():
        (corpus / doc_id).parent.mkdir(parents=True, exist_ok=True)
        (corpus / doc_id).write_text(text, encoding="utf-8")
    fixtures = root / "fixtures.jsonl"
    lines = []
    for qid, (question, expected, doc, quote) in QUESTIONS.items():
        base = {"format": "ledgerscope-fixture/1", "qid": qid, "question": question, "support_only": False}
        if expected is None:
            lines.append(
                {
                    **base,
                    "segment": "unanswerable",
                    "answerable": False,
                    "answer": {"expected": None, "missing_condition": "abstain"},
                    "spans": [],
                    "sufficient_sets": [],
                }
            )
        else:
            lines.append(
                {
                    **base,
                    "segment": "number-scope",
                    "answerable": True,
                    "answer": {"expected": expected},
                    "spans": [{"id": "s", "doc_id": doc, "quote": quote, "dependency": "primary"}],
                    "sufficient_sets": [["s"]],
                }
            )
    fixtures.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return corpus, fixtures


def support(qid: str, intervals: list[tuple[str, int, int]]) -> bool | None:
    """Whether the intervals cover the question's gold sentence (None for the control)."""
    _, _, doc, quote = QUESTIONS[qid]
    if doc is None:
        return None
    text = DOCS[doc]
    s = text.index(quote)
    return all(
        text[i].isspace() or any(d == doc and a <= i < b for d, a, b in intervals)
        for i in range(s, s + len(quote))
    )


def sentence_reader(question: str, context: str) -> str:
    """The context sentence sharing most words with the question (an extractive reader), or an
    abstention when none shares two."""
    import re

    stop = {"the", "a", "of", "on", "for", "is", "what", "how", "to", "in", "are", "which", "does"}
    q = set(re.findall(r"[a-z0-9]+", question.lower())) - stop
    best, score = "I cannot answer from the provided sources.", 1
    for sent in re.split(r"(?<=[.!?])\s+", context):
        n = len(q & set(re.findall(r"[a-z0-9]+", sent.lower())))
        if n > score:
            best, score = sent.strip(), n
    return best
