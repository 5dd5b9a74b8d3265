"""One question's records with every row, through the ledger's views, and their full diagnoses.

The single-question counterpart of :func:`.feed.diagnose_ledger`, which diagnoses a whole ledger
in bulk and reads only the candidate rows the evidence needs; here every row of the records is
read (the TUI's panes show them all), for several arms and phases in one query per view (each
query opens every partition's file, so asking for all of them at once costs little more than
asking for one). Both feed the pure tree the same way (:func:`.feed.prepare_record`); the tests
hold the two to the same diagnoses. The rows come from the views of
:func:`ledgerscope.ledger.read.connect` (``records``, ``candidates``, ``units``, ``boundaries``,
``oracle``), never from partition paths, so any ledger layout ``connect`` reads is read here.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ledgerscope.analysis.diagnosis.feed import prepare_record
from ledgerscope.analysis.diagnosis.query import fetch_dicts
from ledgerscope.analysis.diagnosis.tree import Diagnosis, diagnose

if TYPE_CHECKING:
    from duckdb import DuckDBPyConnection

Row = dict[str, Any]  # one row of a view, column -> value

#: the ranked lists the tree walks; a stage without rows is an empty list, not a missing one
WALKED_STAGES = ("bm25", "dense_exact", "dense_ann", "union", "fused", "reranked", "selected", "packed")
_CANDIDATE_COLUMNS = 'arm, phase, stage, "rank", unit_id, score, doc_id, "start", "end", lineage'
_UNIT_COLUMNS = (
    'arm, phase, unit_id, doc_id, ordinal, "start", "end", core_start, core_end, n_tokens, located, '
    "placement, placement_note, context_json"
)


class Cancelled(Exception):
    """The reader's ``cancelled`` said so between two queries: nothing was returned."""


@dataclass
class RecordRows:
    """One (arm, phase, question) record and the rows its panes and its diagnosis need."""

    record: Row
    stages: dict[str, list[Row]]  # candidate rows by stage, by rank
    docs: list[str]  # the documents shown: the gold documents, else those of the packed context
    units: list[Row]  # the units of those documents, by document then start
    cuts: dict[str, list[int]]  # document -> chunk boundaries (character offsets)
    oracle: Row | None


def read_record_rows(
    cur: DuckDBPyConnection,
    arms: Sequence[str],
    phases: Sequence[str],
    qid: str,
    gold_docs: Sequence[str] | None,
    *,
    unverified: Collection[str] = (),
    cancelled: Callable[[], bool] | None = None,
) -> dict[tuple[str, str], RecordRows]:
    """Per (arm, phase) that holds a record of question ``qid``: the record and its rows. One query
    per view for all ``arms`` and ``phases`` (filters pushed down to the Parquet scans).

    ``unverified``: the arms whose answer side is unverified (:func:`registered_unverified`).
    ``cancelled`` is asked between the queries; when it says so, :class:`Cancelled` is raised.
    """
    key_sql = f"arm IN {_marks(arms)} AND phase IN {_marks(phases)}"
    recs: dict[tuple[str, str], Row] = {}
    for r in _rows(cur, f"SELECT * FROM records WHERE {key_sql} AND qid = ?", [*arms, *phases, qid]):
        r["phase"] = str(r["phase"])
        r["answer_unverified"] = r["arm"] in unverified
        recs.setdefault((r["arm"], r["phase"]), r)  # one row per key: connect() rejects duplicates
    if not recs:
        return {}
    _check(cancelled)
    found_arms = sorted({a for a, _ in recs})
    found_phases = sorted({p for _, p in recs})
    found_sql = f"arm IN {_marks(found_arms)} AND phase IN {_marks(found_phases)}"
    found = [*found_arms, *found_phases]
    stages: dict[tuple[str, str], dict[str, list[Row]]] = {k: {} for k in recs}
    sql = (
        f"SELECT {_CANDIDATE_COLUMNS} FROM candidates WHERE {found_sql} AND qid = ? "
        'ORDER BY arm, phase, stage, "rank"'
    )
    for c in _rows(cur, sql, [*found, qid]):
        by_stage = stages.get((c.pop("arm"), str(c.pop("phase"))))
        if by_stage is not None:
            by_stage.setdefault(c["stage"], []).append(c)
    _check(cancelled)
    docs = {k: list(gold_docs or []) or _packed_docs(stages[k]) for k in recs}
    units, cuts = _units_and_cuts(cur, found_sql, found, docs, cancelled)
    _check(cancelled)
    oracle: dict[str, Row] = {}
    sql = f"SELECT * FROM oracle WHERE arm IN {_marks(found_arms)} AND qid = ?"
    for o in _rows(cur, sql, [*found_arms, qid]):
        oracle.setdefault(o["arm"], o)
    return {
        k: RecordRows(rec, stages[k], docs[k], units.get(k, []), cuts.get(k, {}), oracle.get(k[0]))
        for k, rec in recs.items()
    }


def _units_and_cuts(
    cur: DuckDBPyConnection,
    found_sql: str,
    found: list[str],
    docs: Mapping[tuple[str, str], list[str]],
    cancelled: Callable[[], bool] | None,
) -> tuple[dict[tuple[str, str], list[Row]], dict[tuple[str, str], dict[str, list[int]]]]:
    """Per (arm, phase): the units of its shown documents (by document, then start) and their cuts."""
    units: dict[tuple[str, str], list[Row]] = {}
    cuts: dict[tuple[str, str], dict[str, list[int]]] = {}
    wanted = sorted({d for ds in docs.values() for d in ds})
    if not wanted:
        return units, cuts
    params = [*found, wanted]
    in_docs = f"{found_sql} AND list_contains(?, doc_id)"
    sql = f'SELECT {_UNIT_COLUMNS} FROM units WHERE {in_docs} ORDER BY doc_id, "start"'
    for u in _rows(cur, sql, params):
        key = (u.pop("arm"), str(u.pop("phase")))
        if u["doc_id"] in docs.get(key, ()):
            units.setdefault(key, []).append(u)
    _check(cancelled)
    sql = f"SELECT arm, phase, doc_id, cut_chars FROM boundaries WHERE {in_docs}"
    for b in _rows(cur, sql, params):
        key = (b["arm"], str(b["phase"]))
        if b["doc_id"] in docs.get(key, ()):
            cuts.setdefault(key, {})[b["doc_id"]] = list(b["cut_chars"] or [])
    return units, cuts


def registered_unverified(cur: DuckDBPyConnection) -> frozenset[str]:
    """The arms whose answer side is unverified, as the table
    :func:`ledgerscope.analysis.validity.register_answer_side` wrote (``build_record_view`` does)
    says; none when the connection has no such table."""
    from ledgerscope.analysis.validity import TABLE

    have = cur.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = ?", [TABLE]).fetchall()[0][0]
    if not have:
        return frozenset()
    return frozenset(a for a, flag in cur.execute(f"SELECT arm, unverified FROM {TABLE}").fetchall() if flag)


def diagnose_record(
    rows: RecordRows, fixture: Any, texts: Mapping[str, str], top_n: Mapping[str, int] | None
) -> Diagnosis:
    """The full :class:`~ledgerscope.analysis.diagnosis.tree.Diagnosis` (walk and evidence) of one
    record: fed as :func:`.feed.diagnose_ledger` feeds the tree (:func:`.feed.prepare_record`), with
    every walked stage present and the units of the shown documents."""
    prepare_record(rows.record, rows.record.get("answer_unverified", False), top_n)
    stages = {**rows.stages, "units": rows.units}
    for stage in WALKED_STAGES:
        stages.setdefault(stage, [])
    return diagnose(rows.record, stages, fixture, texts, rows.oracle)


def _rows(cur: DuckDBPyConnection, sql: str, params: Sequence[Any]) -> list[Row]:
    return fetch_dicts(cur.execute(sql, list(params)))


def _check(cancelled: Callable[[], bool] | None) -> None:
    if cancelled is not None and cancelled():
        raise Cancelled


def _marks(values: Sequence[Any]) -> str:
    """``(?, ?, …)``: one placeholder per value, for ``IN`` (pushed down to the Parquet scans)."""
    return "(" + ", ".join("?" for _ in values) + ")"


def _packed_docs(stages: Mapping[str, list[Row]]) -> list[str]:
    return list(dict.fromkeys(r["doc_id"] for r in stages.get("packed", []) if r.get("doc_id")))
