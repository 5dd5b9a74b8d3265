#!/usr/bin/env python
"""Do pandas, pyarrow, polars and DuckDB read the same rows from every table of a format-3 ledger?

Each engine reads each table by its one-line call of docs/ledger.md; every result becomes an Arrow
table cast, column by column, to the types pyarrow.dataset reads (a lossy cast fails: a disagreement),
and its rows a sorted list of JSON lines whose SHA-256 is compared across the engines. Imports only
the four engines, so it runs in a virtual environment that has nothing else:

    python3 -m venv /tmp/engines && /tmp/engines/bin/pip install -c scripts/constraints.txt \\
        pandas pyarrow polars duckdb
    /tmp/engines/bin/python scripts/engines_agree.py sample_ledgers/quillstack/ledger
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import duckdb
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.dataset as ds

STRINGS = {"string", "large_string", "string_view"}
TABLES = ("units", "boundaries", "candidates", "records", "repairs", "repeats", "oracle", "sources")


def calls(root: Path) -> dict:
    return {
        "pandas": lambda t: pa.Table.from_pandas(
            pd.read_parquet(root / t, partitioning=None), preserve_index=False
        ),
        "pyarrow": lambda t: ds.dataset(root / t).to_table(),
        "polars": lambda t: pl.read_parquet(root / t).to_arrow(),
        "duckdb": lambda t: duckdb.sql(
            f"FROM read_parquet('{root / t}/**/*.parquet', hive_types_autocast = false)"
        ).to_arrow_table(),
    }


def digest(table: pa.Table, schema: pa.Schema) -> str:
    cols = [table.column(f.name).cast(f.type) for f in schema]
    rows = pa.Table.from_arrays(cols, schema=schema).to_pylist()
    lines = sorted(json.dumps(r, sort_keys=True, default=str) for r in rows)
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]


def main(ledger: str) -> int:
    root = Path(ledger)
    versions = f"pandas {pd.__version__}, pyarrow {pa.__version__}, polars {pl.__version__}"
    print(f"{versions}, duckdb {duckdb.__version__}; arm and phase read as strings by every engine")
    print("| table | rows | " + " | ".join(calls(root)) + " | agree |")
    print("|---|---|" + "---|" * (len(calls(root)) + 1))
    bad = 0
    for t in TABLES:
        if not (root / t).is_dir():
            continue
        reference = ds.dataset(root / t).schema
        out = {}
        for name, call in calls(root).items():
            try:
                got = call(t)
                keys = {str(got.schema.field(k).type) for k in ("arm", "phase") if k in got.column_names}
                if keys - STRINGS:  # a key read as a number would still cast back to equal strings
                    raise TypeError(f"arm/phase read as {sorted(keys)}")
                out[name] = (got.num_rows, digest(got, reference))
            except Exception as exc:  # a disagreement to report, not a crash
                out[name] = (None, f"{type(exc).__name__}: {str(exc).splitlines()[0][:60]}")
        agree = len({v for v in out.values()}) == 1
        bad += not agree
        rows = next(iter(out.values()))[0]
        cells = " | ".join(f"{v[0]:,} {v[1]}" if v[0] is not None else v[1] for v in out.values())
        print(f"| {t} | {rows:,} | {cells} | {'yes' if agree else 'NO'} |")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
