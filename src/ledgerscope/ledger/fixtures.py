"""A ledger's fixtures: re-resolved against the ledger's own sources, and their gold spans as columns.

Every reader of a ledger's diagnosis, survival or exports starts here: the fixtures the sweep
resolved (``fixtures.jsonl``) and the sources it recorded (``sources.parquet``), both checked
again, so damage to either is reported as damage (never diagnosed as step 1).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ledgerscope.common.errors import InputError, Problem
from ledgerscope.inputs.fixtures import Fixture, read_fixtures, resolve
from ledgerscope.ledger.sources import sources_corpus

if TYPE_CHECKING:
    from duckdb import DuckDBPyConnection


def load_ledger_fixtures(
    con: DuckDBPyConnection, ledger: str | Path
) -> tuple[dict[str, Fixture], dict[str, str]]:
    """The ledger's fixtures by qid (re-resolved against its sources) and the source texts.

    ``con``: a connection from :func:`ledgerscope.ledger.read.connect` on ``ledger``.
    """
    from ledgerscope.ledger.layout import ledger_layout

    corpus = sources_corpus(
        ledger_layout(ledger).sources_path(ledger),
        con.execute("SELECT doc_id, version, text, observed, access FROM sources").fetchall(),
    )
    texts = {s.doc_id: s.text for s in corpus}
    path = Path(ledger) / "fixtures.jsonl"
    if not path.is_file():
        raise InputError(Problem(str(path), None, "fixtures", "missing: the ledger's resolved fixtures"))
    fset, problems = read_fixtures(path)
    resolved, _, more = resolve(fset, corpus)
    if problems or more:
        raise InputError(problems + more)
    return {f.qid: f for f in resolved}, texts


def gold_span_columns(
    fixtures: Mapping[str, Fixture], answerable_only: bool = False
) -> dict[str, tuple[str, list[Any]]]:
    """Every gold span as columns (qid, doc_id, start, end) with their SQL types, for
    :func:`ledgerscope.common.sql_tables.columns_table`."""
    cols: dict[str, tuple[str, list[Any]]] = {
        "qid": ("VARCHAR", []),
        "doc_id": ("VARCHAR", []),
        "start": ("BIGINT", []),
        "end": ("BIGINT", []),
    }
    for qid, fx in fixtures.items():
        if answerable_only and not fx.answerable:
            continue
        for s in fx.spans:
            for col, value in zip(cols, (qid, s.doc_id, s.start, s.end), strict=True):
                cols[col][1].append(value)
    return cols


def gold_spans_table(fixtures: Mapping[str, Fixture], answerable_only: bool = False) -> Any:
    """:func:`gold_span_columns` as an Arrow table, for joins against candidates."""
    import pyarrow as pa

    types = {"VARCHAR": pa.string(), "BIGINT": pa.int64()}
    cols = gold_span_columns(fixtures, answerable_only)
    return pa.table({k: pa.array(v, types[t]) for k, (t, v) in cols.items()})
