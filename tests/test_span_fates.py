"""A support set explained as a set: each span's own fate, its document, and the record's step as the
set's first loss (:mod:`ledgerscope.analysis.diagnosis.span_fates`), in the pure tree and in
``diagnose --json`` alike (``tests/test_diagnose_sql.py`` holds the two together record for record)."""

from __future__ import annotations

import json

from ledgerscope.analysis.diagnosis import STEP_NAMES
from ledgerscope.analysis.diagnosis.span_fates import (
    by_document,
    document_title,
    explain_set,
    fate_of,
    fate_table,
)

SAMPLE = "sample_ledgers/quillstack/ledger"


def test_a_span_is_kept_to_its_last_covering_stage_and_lost_at_the_next():
    assert fate_of("KKKKKKK") == {"kept_to": "packed", "lost_at": None, "regained": []}
    assert fate_of("KKKKLLL") == {"kept_to": "union", "lost_at": 6, "regained": []}
    assert fate_of("LLLLLLL") == {"kept_to": None, "lost_at": 2, "regained": []}
    # lost by exact search, found again by ANN: lost for good only at packing
    assert fate_of("KLKKKKL") == {"kept_to": "reranked", "lost_at": 8, "regained": [3]}
    # stages not recorded are skipped: the loss is the next recorded stage
    assert fate_of("KNNNKNL") == {"kept_to": "fused", "lost_at": 8, "regained": []}
    assert len(fate_table()) == 3**7


def test_titles_are_markdown_headings_else_ids():
    assert document_title("wiki/ef7f67d7d8", "# Sergio Pérez\n\nSergio Pérez drove…") == "Sergio Pérez"
    assert document_title("wiki/ef7f67d7d8", "Sergio Pérez drove for Force India.") == "wiki/ef7f67d7d8"
    assert document_title("d", None) == "d" and document_title("d", "#\nx") == "d"


def test_the_set_in_words_groups_spans_by_document_and_names_every_loss():
    fates = [
        {"span": "s0", "doc_id": "wiki/a", "title": "Sergio Pérez", **fate_of("KKKKKKK")},
        {"span": "s1", "doc_id": "wiki/a", "title": "Sergio Pérez", **fate_of("KKKKKKK")},
        {"span": "s2", "doc_id": "wiki/b", "title": "Force India", **fate_of("KLLLLLL")},
    ]
    assert [d[1] for d in by_document(fates)] == ["Sergio Pérez", "Force India"]
    lines = explain_set(fates, 3, STEP_NAMES, 0)
    assert lines[0] == "set 0 of 3 spans in 2 documents; first loss: step 3 (exact retrievers miss)"
    assert lines[1] == "Sergio Pérez (wiki/a): s0 kept to packed; s1 kept to packed"
    assert lines[2].startswith("Force India (wiki/b): s2 lost at step 3 (exact retrievers miss)")
    assert lines[2].endswith("← first loss")


def test_diagnose_json_carries_each_span_fate():
    """On the sample, a record whose two documents lose their spans at different steps."""
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-m", "ledgerscope.cli.main", "diagnose", SAMPLE, "--json", "--arm", "baseline"],
        capture_output=True,
        check=True,
    ).stdout
    rows = [json.loads(line) for line in out.decode().splitlines()]
    row = next(r for r in rows if r["qid"] == "cr-audit-deleted-workspace" and r["phase"] == "0")
    fates = {f["span"]: f for f in row["evidence"]["span_fates"]}
    assert row["step"] == 6
    assert fates["dpa74"]["title"] == "Data Processing Addendum (DPA)" and fates["dpa74"]["lost_at"] == 6
    assert fates["local"]["doc_id"] == "security/audit-log.md" and fates["local"]["lost_at"] == 8
    assert all("span_fates" in r["evidence"] for r in rows if 2 <= r["step"] <= 8)
