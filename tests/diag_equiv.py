"""The SQL diagnosis (diagnose_sql) against the pure function fed from the same ledger."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from ledgerscope.analysis.diagnosis.feed import diagnose_ledger
from ledgerscope.analysis.diagnosis.sql import diagnosis_lines
from ledgerscope.common.safe_text import _UNSAFE, json_text


def assert_sql_matches_python(con, ledger: str | Path, arm: str | None = None) -> Counter:
    """Every record's JSON line from SQL equals the pure diagnosis's, key for key; returns steps seen."""
    lines = diagnosis_lines(con, ledger, arm)
    rows = list(diagnose_ledger(con, ledger, arm))
    assert len(lines) == len(rows)
    steps: Counter = Counter()
    for line, row in zip(lines, rows, strict=True):
        expected = json_text(row)
        assert json.loads(line) == json.loads(expected), (
            row["arm"],
            row["phase"],
            row["qid"],
            row["step"],
        )
        assert not _UNSAFE.search(line), line  # nothing a terminal would act on
        steps[row["step"]] += 1
    return steps
