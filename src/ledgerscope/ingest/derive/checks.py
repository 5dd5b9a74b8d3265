"""Checks across files, over the traces as DuckDB tables (however they were read).

Every chunk id a trace names must be in the chunk store, every question in the
fixtures, and every chunk a trace names must lie somewhere in its source; what
the ingest needs to know about the traces (configs, phases, recorded stages)
is read from the same tables.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pyarrow as pa

from ledgerscope.common.errors import Problem
from ledgerscope.ingest.derive.resolve import Resolution
from ledgerscope.ingest.derive.tables import STR, create_table
from ledgerscope.ingest.read.hints import document_hint
from ledgerscope.ingest.read.lines import MAX_PROBLEMS
from ledgerscope.trace.spec import STAGE_ORDER

_ORDER = "coalesce(list_position([" + ", ".join(f"'{s}'" for s in STAGE_ORDER) + "], s.stage), 99)"


def unknown_ids(con, store: Iterable[str]) -> list[Problem]:
    """The first chunk id of each trace that the store does not hold."""
    create_table(con, "_ig_store_ids", pa.table({"chunk_id": pa.array(sorted(set(store)), STR)}))
    rows = con.execute(f"""
        WITH miss AS (
            SELECT s.tid, s.stage, s."rank", s.chunk_id,
                   row_number() OVER (PARTITION BY s.tid ORDER BY {_ORDER}, s.stage, s."rank") AS k
            FROM _ig_stage s ANTI JOIN _ig_store_ids USING (chunk_id))
        SELECT t.trace_path, t.trace_line, m.stage, m."rank", m.chunk_id, t.fused_from, t.qid, t.arm
        FROM miss m JOIN _ig_trace t USING (tid) WHERE m.k = 1
        ORDER BY t.tid LIMIT {MAX_PROBLEMS}""").fetchall()
    out = []
    for path, line, stage, rank, chunk, fused_from, qid, arm in rows:
        where = {"fused": fused_from, "packed": "context_ids"}.get(stage) or f"stages.{stage}.ids"
        request = "" if line is not None else f" (the request of {qid[:60]!r}, config {arm!r})"
        out.append(
            Problem(
                path, line, f"{where}[{rank - 1}]", f"chunk {chunk[:80]!r}{request} is not in the chunk store"
            )
        )
    return out


def unknown_qids(con, known: Iterable[str], fixtures_path: Path) -> list[Problem]:
    """Each question the traces name that the fixtures do not hold (at its first trace)."""
    create_table(con, "_ig_known_qids", pa.table({"qid": pa.array(sorted(set(known)), STR)}))
    rows = con.execute(f"""
        SELECT trace_path, trace_line, qid FROM (
            SELECT *, row_number() OVER (PARTITION BY qid ORDER BY tid) AS k
            FROM _ig_trace ANTI JOIN _ig_known_qids USING (qid))
        WHERE k = 1 ORDER BY tid LIMIT {MAX_PROBLEMS}""").fetchall()
    return [
        Problem(p, line, "qid", f"{qid[:80]!r} is not in the fixtures ({fixtures_path})")
        for p, line, qid in rows
    ]


def unresolved_named(
    con, resolutions: list[Resolution], path: str, corpus_ids: Iterable[str] = ()
) -> list[Problem]:
    """A chunk a trace names that lies nowhere: the ingest stops (never a guessed interval)."""
    bad = {r.chunk.chunk_id: r for r in resolutions if not r.resolved}
    if not bad:
        return []
    named = {row[0] for row in con.execute("SELECT DISTINCT chunk_id FROM _ig_stage").fetchall()}
    out = []
    for cid, r in bad.items():
        if cid not in named:
            continue
        hint = document_hint(r.chunk.doc_id, corpus_ids) if r.status == "document-missing" else None
        out.append(
            Problem(
                path,
                r.chunk.line,
                "doc_id" if hint else "text",
                f"chunk {cid[:80]!r} ({r.status}): {r.note}" + (f"; {hint}" if hint else ""),
            )
        )
        if len(out) >= MAX_PROBLEMS:
            break
    return out


def unlocated_share(report, limit: float, path: str, corpus_ids: Iterable[str] = ()) -> None:
    """Stop (an input problem) when more than ``limit`` of the store's chunks lie nowhere: the corpus
    is then probably not the one the index was built from, or the ids are not corpus-relative (the
    message then says which corpus id a missing document id probably meant)."""
    from ledgerscope.common.errors import InputError

    n, total = report.n_unlocated, report.total
    if total and n / total > limit:
        docs = sorted(report.unlocated_per_document().items(), key=lambda kv: -kv[1]["unlocated"])[:3]
        where = "; ".join(
            f"{d}: {v['unlocated']}" + (f" (e.g. {v['examples'][0][:160]})" if v["examples"] else "")
            for d, v in docs
        )
        ids = list(corpus_ids)
        hint = next((h for d, _ in docs if (h := document_hint(d, ids))), None)
        raise InputError(
            Problem(
                path,
                None,
                "chunks",
                f"{n} of {total} chunks ({n / total:.1%}) could not "
                f"be placed in the corpus, more than --max-unlocated {limit:g}: is it the "
                f"corpus this index was built from? {where}" + (f"; {hint}" if hint else ""),
            )
        )


def arms(con) -> dict[str, list[str]]:
    """Each config and its phase labels, sorted."""
    return {
        a: sorted(ps)
        for a, ps in con.execute(
            "SELECT arm, list(DISTINCT phase) FROM _ig_trace GROUP BY arm ORDER BY arm"
        ).fetchall()
    }


def recorded(con) -> dict[str, list[str]]:
    """Per config, the lists its traces record (in cascade order; declared ones after)."""
    order = {s: i for i, s in enumerate(STAGE_ORDER)}
    rows = con.execute(
        "SELECT arm, list(DISTINCT r) FROM (SELECT arm, unnest(recorded) AS r FROM _ig_trace) "
        "GROUP BY arm ORDER BY arm"
    ).fetchall()
    return {a: sorted(rs, key=lambda n: (order.get(n, 99), n)) for a, rs in rows}


def count(con) -> int:
    return con.execute("SELECT count(*) FROM _ig_trace").fetchall()[0][0]


def questions(con) -> set[str]:
    return {r[0] for r in con.execute("SELECT DISTINCT qid FROM _ig_trace").fetchall()}


def failed(con) -> dict[str, int]:
    """Per config, the requests that failed (a trace with an ``error``: an infrastructure failure)."""
    return dict(
        con.execute(
            "SELECT arm, count(*) FROM _ig_trace WHERE error IS NOT NULL GROUP BY arm ORDER BY arm"
        ).fetchall()
    )
