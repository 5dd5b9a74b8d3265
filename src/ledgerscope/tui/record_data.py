"""One record through the ledger's views, and its full diagnosis. No Textual.

:func:`read_record_rows` and :func:`diagnose_record` are the single-record
counterpart of :func:`ledgerscope.analysis.diagnosis.feed.diagnose_ledger`
(which diagnoses a whole ledger in bulk): the rows come from the views of
:func:`ledgerscope.ledger.read.connect` (``records``, ``candidates``, ``units``,
``boundaries``, ``oracle``), never from partition paths, so the TUI reads any
ledger layout ``connect`` reads, with its checks. They belong beside
``diagnose_ledger`` and live here until the analysis layer offers them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: the ranked lists the tree walks; a stage without rows is an empty list, not a missing one
WALKED_STAGES = ("bm25", "dense_exact", "dense_ann", "union", "fused", "reranked", "selected", "packed")
_CANDIDATE_COLUMNS = 'stage, "rank", unit_id, score, doc_id, "start", "end", lineage'
_UNIT_COLUMNS = (
    'unit_id, doc_id, ordinal, "start", "end", core_start, core_end, n_tokens, located, '
    "placement, placement_note, context_json"
)


@dataclass
class RecordRows:
    """One (arm, phase, question) record and the rows its panes and its diagnosis need."""

    record: dict
    stages: dict[str, list[dict]]  # candidate rows by stage, by rank
    docs: list[str]  # the documents shown: the gold documents, else those of the packed context
    units: list[dict]  # the units of those documents, by document then start
    cuts: dict[str, list[int]]  # document -> chunk boundaries (character offsets)
    oracle: dict | None


def fetch_dicts(cur, sql: str, params: Sequence[Any] = ()) -> list[dict]:
    """Rows of a query as dicts (column name -> value)."""
    result = cur.execute(sql, list(params))
    names = [d[0] for d in result.description]
    return [dict(zip(names, row, strict=True)) for row in result.fetchall()]


def read_record_rows(
    cur, arms: Sequence[str], phase: str, qid: str, gold_docs: Sequence[str] | None
) -> dict[str, RecordRows]:
    """Per arm that holds the (phase, question) record: the record and its rows, from the ``records``,
    ``candidates``, ``units``, ``boundaries`` and ``oracle`` views of :func:`ledgerscope.ledger.read.connect`.

    One query per view for all ``arms`` (each query opens every partition's file, so
    asking for both arms at once halves the cost of a record pair).
    """
    recs: dict[str, dict] = {}
    for r in fetch_dicts(
        cur,
        f"SELECT * FROM records WHERE arm IN {_marks(arms)} AND phase = ? AND qid = ?",
        [*arms, phase, qid],
    ):
        recs.setdefault(r["arm"], r)  # one row per key: connect() rejects duplicates
    if not recs:
        return {}
    found = list(recs)
    _answer_side(cur, recs)
    key = [*found, phase, qid]
    stages: dict[str, dict[str, list[dict]]] = {a: {} for a in found}
    for c in fetch_dicts(
        cur,
        f"SELECT arm, {_CANDIDATE_COLUMNS} FROM candidates WHERE arm IN {_marks(found)} AND phase = ? "
        'AND qid = ? ORDER BY arm, stage, "rank"',
        key,
    ):
        stages[c.pop("arm")].setdefault(c["stage"], []).append(c)
    docs = {a: list(gold_docs or []) or _packed_docs(stages[a]) for a in found}
    wanted = sorted({d for ds in docs.values() for d in ds})
    units: dict[str, list[dict]] = {a: [] for a in found}
    cuts: dict[str, dict[str, list[int]]] = {a: {} for a in found}
    if wanted:
        in_docs = [*found, phase, wanted]
        for u in fetch_dicts(
            cur,
            f"SELECT arm, {_UNIT_COLUMNS} FROM units WHERE arm IN {_marks(found)} AND phase = ? "
            'AND list_contains(?, doc_id) ORDER BY arm, doc_id, "start"',
            in_docs,
        ):
            if u["doc_id"] in docs[u["arm"]]:
                units[u.pop("arm")].append(u)
        for b in fetch_dicts(
            cur,
            f"SELECT arm, doc_id, cut_chars FROM boundaries WHERE arm IN {_marks(found)} AND phase = ? "
            "AND list_contains(?, doc_id)",
            in_docs,
        ):
            if b["doc_id"] in docs[b["arm"]]:
                cuts[b["arm"]][b["doc_id"]] = list(b["cut_chars"] or [])
    oracle: dict[str, dict] = {}
    for o in fetch_dicts(
        cur, f"SELECT * FROM oracle WHERE arm IN {_marks(found)} AND qid = ?", [*found, qid]
    ):
        oracle.setdefault(o["arm"], o)
    out = {}
    for a, rec in recs.items():
        rec["phase"] = str(rec["phase"])
        out[a] = RecordRows(rec, stages[a], docs[a], units[a], cuts[a], oracle.get(a))
    return out


def _answer_side(cur, recs: dict[str, dict]) -> None:
    """Each record's ``answer_unverified`` from the validity table ``record_view`` built (else False)."""
    from ledgerscope.analysis.validity import TABLE

    have = cur.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = ?", [TABLE]).fetchall()[0][0]
    flags = (
        {}
        if not have
        else dict(
            cur.execute(
                f"SELECT arm, unverified FROM {TABLE} WHERE arm IN {_marks(list(recs))}", list(recs)
            ).fetchall()
        )
    )
    for arm, rec in recs.items():
        rec["answer_unverified"] = bool(flags.get(arm))


def _marks(values: Sequence[Any]) -> str:
    """``(?, ?, …)``: one placeholder per value, for ``IN`` (pushed down to the Parquet scans)."""
    return "(" + ", ".join("?" for _ in values) + ")"


def _packed_docs(stages: Mapping[str, list[dict]]) -> list[str]:
    return list(dict.fromkeys(r["doc_id"] for r in stages.get("packed", []) if r.get("doc_id")))


def diagnose_record(rows: RecordRows, fixture, texts: Mapping[str, str], top_n: Mapping[str, int]):
    """The full :class:`~ledgerscope.analysis.diagnosis.tree.Diagnosis` (walk and evidence) of one record.

    As ``diagnose_ledger`` feeds the tree: the arm's configured list depths on the record
    (``top_n``), every walked stage present, the units of the shown documents.
    """
    from ledgerscope.analysis.diagnosis import diagnose

    rows.record["top_n"] = dict(top_n)
    stages = {**rows.stages, "units": rows.units}
    for stage in WALKED_STAGES:
        stages.setdefault(stage, [])
    return diagnose(rows.record, stages, fixture, texts, rows.oracle)
