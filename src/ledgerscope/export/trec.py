"""The ``trec`` export: per (arm, phase), a run file and a qrels file for trec_eval and its kin.

A directory with, per (arm, phase) in the selection, a run file
``run.<arm>.<phase>.txt`` (``qid Q0 docno rank score runtag``) and a qrels
file ``qrels.<arm>.<phase>.txt`` (``qid 0 docno rel``); characters other than
letters, digits, ``.``, ``_`` and ``-`` in arm or phase names become ``_``.
The run is the reranked stage, whole, with ``docno`` = unit id and
``runtag`` = ``ledgerscope-<arm>-<phase>``. trec_eval ranks by score, not by
the rank column, so the score written is the ledger's score minus
``rank * 1e-9`` (ties then keep the ledger's order; strictly decreasing
scores stay in order), and it is lowered further where needed to keep the
written scores strictly decreasing down the list (a list not sorted by
score, or a missing score). Relevance: a unit of that arm and phase's
chunking (the ``units`` table) is relevant (``rel`` 1) to a question when
its interval overlaps any gold span of the question; only relevant units are
listed, so unanswerable controls have no qrels. Ids holding whitespace
cannot be written in TREC format and are refused.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ledgerscope.common.errors import InputError, Problem
from ledgerscope.export._common import atomic_dir, count_questions, stream_candidates

if TYPE_CHECKING:
    from duckdb import DuckDBPyConnection

    from ledgerscope.export._common import ExportRequest

TIE_EPSILON = 1e-9
TREC_FILE_NAME = re.compile(r"^(run|qrels)\..+\.txt$")  # what a trec export directory may hold
_UNSAFE_IN_FILE_NAME = re.compile(r"[^A-Za-z0-9._-]")


def _safe_name(value: str) -> str:
    """``value`` with every character unsafe in a file name (or a runtag) replaced by ``_``."""
    return _UNSAFE_IN_FILE_NAME.sub("_", value)


def _trec_id(value: Any, what: str) -> str:
    """``value`` as a TREC id, or :class:`InputError`: TREC files are whitespace-separated."""
    text = str(value)
    if not text or any(ch.isspace() for ch in text):
        raise InputError(
            Problem(
                "trec",
                None,
                what,
                f"{text!r} is empty or holds whitespace, which TREC files cannot represent",
            )
        )
    return text


def trec_scores(cands: list[dict[str, Any]]) -> list[float]:
    """Scores to write for a rank-ordered list: strictly decreasing, so trec_eval's order is the rank order.

    ``score - rank * 1e-9``; where that is not below the previous written score
    (ties beyond the epsilon, a list not sorted by score, a missing or NaN
    score) it is set just below the previous one.
    """
    out: list[float] = []
    for c in cands:
        score = c.get("score")
        value = float(score) - int(c["rank"]) * TIE_EPSILON if score is not None else -float(c["rank"])
        if out and not value < out[-1]:
            value = out[-1] - max(TIE_EPSILON, abs(out[-1]) * 1e-12)
        out.append(value)
    return out


def export_trec(req: ExportRequest) -> tuple[list[Path], int]:
    """Build the run and qrels files in a temporary directory swapped in for ``out``; (paths, questions).

    TREC files hold ids, ranks and scores only: no source text to withhold (``redactor`` unused)."""
    con, rows, out, loaded = req.con, req.rows, req.out, req.loaded
    from ledgerscope.ledger.fixtures import gold_span_columns

    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["arm"], r["phase"]), []).append(r)
    names: dict[str, tuple[str, str]] = {}
    for arm, phase in groups:
        name = f"{_safe_name(arm)}.{_safe_name(phase)}"
        if name in names:
            raise InputError(
                Problem(
                    "trec",
                    None,
                    "arm/phase",
                    f"{(arm, phase)} and {names[name]} map to the same file name {name}",
                )
            )
        names[name] = (arm, phase)
    fixtures, _ = loaded  # load_ledger_fixtures, read once by export()
    by_ord = {r["_ord"]: r for r in rows}
    with atomic_dir(out) as tmp:
        handles: dict[tuple[str, str], Any] = {}
        try:
            for arm, phase in groups:
                handles[(arm, phase)] = (tmp / f"run.{_safe_name(arm)}.{_safe_name(phase)}.txt").open(
                    "w", encoding="utf-8"
                )
            for ord_, cands in stream_candidates(con, rows, ("reranked",)):
                rec = by_ord[ord_]
                tag = _safe_name(f"ledgerscope-{rec['arm']}-{rec['phase']}")
                handles[(rec["arm"], rec["phase"])].writelines(_run_lines(rec["qid"], cands, tag))
        finally:
            for fh in handles.values():
                fh.close()
        for (arm, phase), recs in groups.items():
            qrels = _qrels(con, arm, phase, recs, gold_span_columns(fixtures, answerable_only=True))
            (tmp / f"qrels.{_safe_name(arm)}.{_safe_name(phase)}.txt").write_text(
                "".join(_qrels_lines(qrels)), encoding="utf-8"
            )
    paths = sorted(out.iterdir())
    return paths, count_questions(rows)


def _run_lines(qid: str, cands: list[dict[str, Any]], tag: str) -> Iterator[str]:
    """The run file lines of one question's reranked list, in rank order."""
    cands = sorted(cands, key=lambda c: c["rank"])
    q = _trec_id(qid, "qid")
    for c, score in zip(cands, trec_scores(cands), strict=True):
        yield f"{q} Q0 {_trec_id(c['unit_id'], 'unit_id')} {int(c['rank'])} {score!r} {tag}\n"


def _qrels(
    con: DuckDBPyConnection,
    arm: str,
    phase: str,
    recs: list[dict[str, Any]],
    spans: dict[str, tuple[str, list[Any]]],
) -> list[tuple[str, str]]:
    """(qid, unit_id) of this arm and phase's units that overlap a gold span of a selected question."""
    from ledgerscope.common.sql_tables import columns_table, drop_tables

    qids = sorted({r["qid"] for r in recs})
    columns_table(con, "_ls_qrels_spans", spans)
    columns_table(con, "_ls_qrels_qids", {"qid": ("VARCHAR", qids)})
    try:
        return con.execute(
            "SELECT DISTINCT s.qid, u.unit_id FROM units u JOIN _ls_qrels_spans s "
            'ON u.doc_id = s.doc_id AND u."start" < s."end" AND u."end" > s."start" '
            "JOIN _ls_qrels_qids q ON q.qid = s.qid "
            "WHERE u.arm = ? AND CAST(u.phase AS VARCHAR) = ? ORDER BY s.qid, u.unit_id",
            [arm, phase],
        ).fetchall()
    finally:
        drop_tables(con, "_ls_qrels_spans", "_ls_qrels_qids")


def _qrels_lines(qrels: list[tuple[str, str]]) -> Iterator[str]:
    """The qrels file lines: every listed unit is relevant (``rel`` 1)."""
    for qid, unit_id in qrels:
        yield f"{_trec_id(qid, 'qid')} 0 {_trec_id(unit_id, 'unit_id')} 1\n"
