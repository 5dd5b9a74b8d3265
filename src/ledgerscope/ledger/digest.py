"""Content digests of a ledger's tables, stable across rebuilds.

File bytes are not (manifests and partition markers carry timestamps), so a
rebuilt ledger is compared by what it records: every row of every table,
canonically ordered and serialised, scores rounded to 6 decimals (a forward
pass in a different thread schedule may move the last float bits).
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any

from ledgerscope.ledger.read import connect

#: table -> ORDER BY that makes its row order canonical
ORDER = {
    "units": 'arm, phase, doc_id, start, "end"',
    "boundaries": "arm, phase, doc_id",
    "candidates": "arm, phase, qid, stage, rank",
    "records": "arm, phase, qid",
    "repairs": "arm, phase, doc_id, position",
    "oracle": "arm, qid",
    "sources": "doc_id",
}


def _canon(value: Any) -> Any:
    if isinstance(value, float):
        return None if math.isnan(value) else round(value, 6)
    if isinstance(value, list):
        return [_canon(v) for v in value]
    if isinstance(value, dict):
        return {k: _canon(v) for k, v in value.items()}
    return value


def table_digests(ledger: str | Path) -> dict[str, dict[str, Any]]:
    """{table: {"rows": n, "sha256": digest}} for every ledger table."""
    con = connect(ledger)
    out = {}
    for table, order in ORDER.items():
        h = hashlib.sha256()
        n = 0
        reader = con.sql(f"SELECT * FROM {table} ORDER BY {order}").to_arrow_reader(batch_size=50_000)
        for batch in reader:
            for row in batch.to_pylist():
                if table == "records":  # generator details hold rounded floats already; keep as is
                    row = dict(row)
                h.update(json.dumps(_canon(row), sort_keys=True, ensure_ascii=False).encode())
                h.update(b"\n")
                n += 1
        out[table] = {"rows": n, "sha256": h.hexdigest()}
    return out
