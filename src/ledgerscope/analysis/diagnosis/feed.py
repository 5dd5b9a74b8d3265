"""Diagnosing a whole ledger with the pure tree: read records once, fetch only the rows evidence needs.

The tree itself is the pure :func:`ledgerscope.analysis.diagnosis.tree.diagnose`; this module
feeds it from DuckDB without one query per record. It is the reference the
commands are checked against: ``diagnose``, ``export`` and the TUI's
``record_view`` use :mod:`ledgerscope.analysis.diagnosis.sql`, the same rows computed in
DuckDB, and the tests compare the two record for record. Both read the fixtures with
:func:`ledgerscope.ledger.fixtures.load_ledger_fixtures`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ledgerscope.analysis.diagnosis.evidence import EVIDENCE_STAGES, UNIT_WINDOW, depths_by_arm, row_rank
from ledgerscope.analysis.diagnosis.span_fates import FATE_LISTS
from ledgerscope.analysis.diagnosis.tree import diagnose, diagnosis_step
from ledgerscope.analysis.validity import unverified_arms
from ledgerscope.ledger.fixtures import gold_spans_table, load_ledger_fixtures
from ledgerscope.ledger.schema import SUPPORT_COLUMNS
from ledgerscope.ledger.verify import load_manifest

if TYPE_CHECKING:
    from duckdb import DuckDBPyConnection

_RECORD_COLUMNS = (
    "arm",
    "phase",
    "phase_offset",
    "qid",
    "segment",
    "answerable",
    "support_only",
    "gold_status",
    *(c for c in SUPPORT_COLUMNS if c != "support_topk"),  # the top-k view is not on the walk
    "covered_set",
    "single_unit_complete",
    "packed_unit_ids",
    "evidence_tokens",
    "budget_tokens",
    "rerank_depth",
    "selection_depth",
    "overflow_json",
    "expansion_dropped_json",
    "answer",
    "abstained",
    "citations_json",
    "answer_verdict",
    "answer_reason",
    "citation_verdict",
    "citation_reason",
    "generator_error",
    "oracle_verdict",
    "oracle_feasible",
    "unverifiable_stages",
)
_CAND_COLUMNS = (
    'c.arm, c.phase, c.qid, c.stage, c."rank", c.unit_id, c.score, c.doc_id, '
    'c."start", c."end", CASE WHEN c.stage = \'union\' THEN c.lineage END AS lineage'
)
_WHOLE = 1 << 30


def diagnose_ledger(
    con: DuckDBPyConnection, ledger: str | Path, arm: str | None = None
) -> Iterator[dict[str, Any]]:
    """One JSON-ready diagnosis row per record of the ledger (optionally one arm).

    Reads the records once, then, in one query, only the candidate rows the
    evidence needs: for each record, the rows of its step's stages that
    overlap one of its gold spans, plus the packed list (and for step 8 the
    reranked list down to the selection cutoff). Records at steps 0, 9 and 10
    need only their packed rows; no query runs per record.
    """
    fixtures, texts = load_ledger_fixtures(con, ledger)
    top_n = depths_by_arm(load_manifest(ledger))
    where, params = ("WHERE arm = ?", [arm]) if arm is not None else ("", [])
    cols = ", ".join(f'"{c}"' for c in _RECORD_COLUMNS)
    records = (
        con.sql(f"SELECT {cols} FROM records {where} ORDER BY arm, phase_offset, phase, qid", params=params)
        .to_arrow_table()
        .to_pylist()
    )
    oracle = {
        (r["arm"], r["qid"]): r
        for r in con.sql(f"SELECT arm, qid, answer_verdict, feasible FROM oracle {where}", params=params)
        .to_arrow_table()
        .to_pylist()
    }

    unverified = unverified_arms(con)
    for rec in records:
        prepare_record(rec, rec["arm"] in unverified, top_n.get(rec["arm"]))
    steps = [diagnosis_step(rec) for rec in records]
    need, unit_need = _needs(records, steps, fixtures)
    grouped = _fetch_candidates(con, need, gold_spans_table(fixtures))
    units_by = _fetch_units(con, unit_need)

    for rec, step in zip(records, steps, strict=True):
        fx = fixtures.get(rec["qid"])
        key = (rec["arm"], rec["phase"], rec["qid"])
        stages: dict[str, list[dict[str, Any]]] = dict(grouped.get(key, {}))
        for stage in _stages_read(step):
            if stage == "units" and fx is not None:
                stages["units"] = [
                    u for d in fx.doc_ids for u in units_by.get((rec["arm"], rec["phase"], d), [])
                ]
            else:
                stages.setdefault(stage, [])
        orow = oracle.get((rec["arm"], rec["qid"]))
        d = diagnose(rec, stages, fx, texts, orow)
        yield _row(rec, d, orow)


def prepare_record(rec: dict[str, Any], unverified: bool, top_n: Mapping[str, int] | None) -> None:
    """What the tree reads beside the record's columns: whether its arm's answer side is unverified,
    and the arm's configured list depths (``top_n``, when known). The one way a record is made ready
    for :func:`.tree.diagnose`, here and in :mod:`.record`."""
    rec["answer_unverified"] = bool(unverified)
    if top_n is not None:
        rec["top_n"] = dict(top_n)


def _needs(
    records: list[dict[str, Any]], steps: list[int], fixtures: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Which candidate lists (per record and stage) and which units (per gold span's window) the
    records' evidence reads: one query each fetches them all."""
    need: dict[str, list[Any]] = {"arm": [], "phase": [], "qid": [], "stage": [], "keep_rank": []}
    unit_need: dict[str, list[Any]] = {"arm": [], "phase": [], "doc_id": [], "lo": [], "hi": []}
    for rec, step in zip(records, steps, strict=True):
        fx = fixtures.get(rec["qid"])
        if fx is None or rec.get("answerable") is False:
            continue
        for stage in _stages_read(step):
            if stage == "units":
                for s in fx.spans:
                    for key, val in (
                        ("arm", rec["arm"]),
                        ("phase", rec["phase"]),
                        ("doc_id", s.doc_id),
                        ("lo", s.start - UNIT_WINDOW),
                        ("hi", s.end + UNIT_WINDOW),
                    ):
                        unit_need[key].append(val)
                continue
            # lists shown whole: the packed context; for step 8 the reranked list to the selection cut
            keep = (
                _WHOLE
                if stage == "packed"
                else int(rec.get("selection_depth") or 0)
                if stage == "reranked" and step == 8
                else 0
            )
            for key, val in (
                ("arm", rec["arm"]),
                ("phase", rec["phase"]),
                ("qid", rec["qid"]),
                ("stage", stage),
                ("keep_rank", keep),
            ):
                need[key].append(val)
    return need, unit_need


def _row(rec: dict[str, Any], d: Any, orow: dict[str, Any] | None) -> dict[str, Any]:
    """The JSON-ready diagnosis row of one record."""
    return {
        "qid": rec["qid"],
        "arm": rec["arm"],
        "phase": str(rec["phase"]),
        "phase_offset": rec["phase_offset"],
        "segment": rec["segment"],
        "step": d.step,
        "step_name": d.step_name,
        "label": d.label,
        "evidence": d.evidence,
        "flags": list(d.flags),
        "walk": d.walk,
        "answer_verdict": rec["answer_verdict"],
        "citation_verdict": rec["citation_verdict"],
        "support_packed": rec["support_packed"],
        "oracle_verdict": orow["answer_verdict"] if orow else rec["oracle_verdict"],
    }


def _fetch_candidates(
    con: DuckDBPyConnection, need: dict[str, list[Any]], spans: Any
) -> dict[tuple[Any, ...], dict[str, list[dict[str, Any]]]]:
    """Candidate rows per (arm, phase, qid) and stage, sorted by rank, in one query."""
    import pyarrow as pa

    grouped: dict[tuple[Any, ...], dict[str, list[dict[str, Any]]]] = {}
    if not need["arm"]:
        return grouped
    con.register("_ls_need", pa.table(need))
    con.register("_ls_spans", spans)
    try:
        rows = (
            con.sql(
                f"SELECT {_CAND_COLUMNS} FROM candidates c "
                "JOIN _ls_need n ON c.arm = n.arm AND c.phase = n.phase AND c.qid = n.qid "
                "AND c.stage = n.stage "
                "LEFT JOIN _ls_spans s ON s.qid = c.qid AND s.doc_id = c.doc_id "
                'AND c."start" < s."end" AND c."end" > s."start" '
                'WHERE s.qid IS NOT NULL OR c."rank" <= n.keep_rank'
            )
            .to_arrow_table()
            .to_pylist()
        )
    finally:
        con.unregister("_ls_need")
        con.unregister("_ls_spans")
    seen: set[tuple[Any, ...]] = set()
    for r in rows:  # a row overlapping two spans comes twice
        key = (r["arm"], r["phase"], r["qid"], r["stage"], r["rank"])
        if key in seen:
            continue
        seen.add(key)
        grouped.setdefault(key[:3], {}).setdefault(r["stage"], []).append(r)
    for by_stage in grouped.values():
        for lst in by_stage.values():
            lst.sort(key=row_rank)
    return grouped


def _fetch_units(
    con: DuckDBPyConnection, unit_need: dict[str, list[Any]]
) -> dict[tuple[Any, ...], list[dict[str, Any]]]:
    """Units near the gold spans of step-2/3 records, per (arm, phase, doc_id), by start."""
    import pyarrow as pa

    units_by: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    if not unit_need["arm"]:
        return units_by
    con.register("_ls_unit_need", pa.table(unit_need))
    try:
        urows = (
            con.sql(
                'SELECT DISTINCT u.arm, u.phase, u.unit_id, u.doc_id, u."start", u."end", u.ordinal '
                "FROM units u JOIN _ls_unit_need n ON u.arm = n.arm AND u.phase = n.phase "
                'AND u.doc_id = n.doc_id AND u."end" >= n.lo AND u."start" <= n.hi '
                'ORDER BY u.arm, u.phase, u.doc_id, u."start"'
            )
            .to_arrow_table()
            .to_pylist()
        )
    finally:
        con.unregister("_ls_unit_need")
    for u in urows:
        units_by.setdefault((u["arm"], u["phase"], u["doc_id"]), []).append(u)
    return units_by


def _stages_read(step: int) -> tuple[str, ...]:
    """The lists a record's diagnosis reads: its step's evidence, and at steps 2-8 every list the
    span fates walk through."""
    if 2 <= step <= 8:
        return tuple(dict.fromkeys((*EVIDENCE_STAGES[step], *FATE_LISTS)))
    return EVIDENCE_STAGES[step]
