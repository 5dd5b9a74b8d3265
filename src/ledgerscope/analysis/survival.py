"""Stage survival per (arm, phase): how much support each cascade stage keeps.

Declared definitions (seed 001, sections 7, 10.9 and 14):

* **survival** at a stage: answerable records (those with a sufficient set,
  i.e. a non-null ``support_packed``) whose stage keeps support, from the
  record's flags: chunked, exact (BM25 + exact dense), production (BM25 +
  ANN), union, fused (cut at rerank depth), reranked (cut at selection depth),
  selected, packed, cited. Rates divide by the answerable count; a stage that
  no record of the (arm, phase) records (NULL flags: an ingested trace) has no
  rate, not zero.
* **recall@k** at a ranked stage (bm25, dense_exact, dense_ann, union, fused,
  reranked): the share of answerable records whose stage list *cut at k*
  keeps support (some sufficient set covered by the first k units together).
  Reported for k in :data:`KS` up to the longest list the stage holds in that
  (arm, phase); computed from the candidate rows that overlap a gold span.
* **reranker regret**: records with ``support_fused`` and not
  ``support_reranked`` (support in the reranker's input, lost below the
  selection cutoff); the rate divides by the ``support_fused`` count.
* **ANN recall** against exact: per record ``|ANN_k ∩ Exact_k| / k`` with
  ``k = min(len(dense_ann), len(dense_exact))``, by unit id, averaged over
  records with ``k > 0``.
* **duplicate ratio**: per record ``1 - |union| / (|bm25| + |dense_ann|)``,
  averaged over records with a non-empty production list.
* mean prompt tokens, evidence tokens and repeated source tokens over all
  records of the (arm, phase) (nulls, e.g. infrastructure failures, skipped).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

# re-exported (``X as X``): callers import these from here too
from ledgerscope.analysis.support_ranks import KS as KS
from ledgerscope.analysis.support_ranks import RANKED_STAGES as RANKED_STAGES
from ledgerscope.analysis.support_ranks import recall_at_k as recall_at_k
from ledgerscope.analysis.support_ranks import span_rank as span_rank
from ledgerscope.analysis.support_ranks import support_rank as support_rank
from ledgerscope.analysis.support_ranks import support_ranks as support_ranks
from ledgerscope.analysis.support_ranks import support_ranks_sql as support_ranks_sql
from ledgerscope.inputs.fixtures import Fixture, GoldSpan

if TYPE_CHECKING:
    from duckdb import DuckDBPyConnection

SURVIVAL_STAGES = (
    "chunked",
    "exact",
    "production",
    "union",
    "fused",
    "reranked",
    "selected",
    "packed",
    "cited",
)


# ---------------------------------------------------------------------------
# SQL parts (each one query over the views; arm filter optional)


def _where(arm: str | None, prefix: str = "WHERE") -> tuple[str, list[Any]]:
    return (f"{prefix} arm = ?", [arm]) if arm is not None else ("", [])


def survival_counts(con: DuckDBPyConnection, arm: str | None = None) -> list[dict[str, Any]]:
    """Per (arm, phase): record counts, survival counts, regret and mean token counts."""
    where, params = _where(arm)
    surv = ", ".join(
        f"count(*) FILTER (WHERE support_{s}) AS {s}, count(support_{s}) AS {s}_recorded"
        for s in SURVIVAL_STAGES
    )
    sql = f"""
        SELECT arm, CAST(phase AS VARCHAR) AS phase, min(phase_offset) AS phase_offset,
               count(*) AS n_records,
               count(*) FILTER (WHERE answerable AND support_packed IS NOT NULL) AS n_answerable,
               {surv},
               count(*) FILTER (WHERE support_fused AND NOT support_reranked) AS reranker_regret,
               avg(prompt_tokens) AS mean_prompt_tokens,
               avg(evidence_tokens) AS mean_evidence_tokens,
               avg(repeated_source_tokens) AS mean_repeated_source_tokens
        FROM records {where}
        GROUP BY arm, CAST(phase AS VARCHAR)
        ORDER BY arm, phase_offset, phase"""
    return con.sql(sql, params=params).to_arrow_table().to_pylist()


def ann_recall(con: DuckDBPyConnection, arm: str | None = None) -> dict[tuple[str, str], float | None]:
    """(arm, phase) -> mean over records of |ANN_k ∩ Exact_k| / k, k = the shorter list's length."""
    where, params = _where(arm, "AND")
    sql = f"""
        WITH c AS (
            SELECT arm, CAST(phase AS VARCHAR) AS phase, qid, stage, unit_id, "rank" FROM candidates
            WHERE stage IN ('dense_exact', 'dense_ann') {where}),
        k AS (
            SELECT arm, phase, qid,
                   least(count(*) FILTER (WHERE stage = 'dense_exact'),
                         count(*) FILTER (WHERE stage = 'dense_ann')) AS k
            FROM c GROUP BY arm, phase, qid),
        hits AS (
            SELECT e.arm, e.phase, e.qid, count(DISTINCT e.unit_id) AS h
            FROM c e JOIN c a ON e.arm = a.arm AND e.phase = a.phase AND e.qid = a.qid
                              AND e.unit_id = a.unit_id
            JOIN k ON k.arm = e.arm AND k.phase = e.phase AND k.qid = e.qid
            WHERE e.stage = 'dense_exact' AND a.stage = 'dense_ann' AND e."rank" <= k.k AND a."rank" <= k.k
            GROUP BY e.arm, e.phase, e.qid)
        SELECT k.arm, k.phase, avg(coalesce(hits.h, 0) / k.k) AS ann_recall
        FROM k LEFT JOIN hits ON hits.arm = k.arm AND hits.phase = k.phase AND hits.qid = k.qid
        WHERE k.k > 0 GROUP BY k.arm, k.phase"""
    return {(a, p): v for a, p, v in con.sql(sql, params=params).fetchall()}


def duplicate_ratio(con: DuckDBPyConnection, arm: str | None = None) -> dict[tuple[str, str], float | None]:
    """(arm, phase) -> mean over records of 1 - |union| / (|bm25| + |dense_ann|)."""
    where, params = _where(arm, "AND")
    sql = f"""
        WITH n AS (
            SELECT arm, CAST(phase AS VARCHAR) AS phase, qid,
                   count(*) FILTER (WHERE stage = 'union') AS nu,
                   count(*) FILTER (WHERE stage IN ('bm25', 'dense_ann')) AS np
            FROM candidates WHERE stage IN ('bm25', 'dense_ann', 'union') {where}
            GROUP BY arm, CAST(phase AS VARCHAR), qid)
        SELECT arm, phase, avg(1 - nu / np) FROM n WHERE np > 0 GROUP BY arm, phase"""
    return {(a, p): v for a, p, v in con.sql(sql, params=params).fetchall()}


def list_depths(con: DuckDBPyConnection, arm: str | None = None) -> dict[tuple[str, str, str], int]:
    """(arm, phase, stage) -> the longest list the stage holds."""
    where, params = _where(arm, "AND")
    stages = ", ".join(f"'{s}'" for s in RANKED_STAGES)
    sql = (
        f'SELECT arm, CAST(phase AS VARCHAR), stage, max("rank") FROM candidates '
        f"WHERE stage IN ({stages}) {where} GROUP BY ALL"
    )
    return {(a, p, s): int(m) for a, p, s, m in con.sql(sql, params=params).fetchall()}


# ---------------------------------------------------------------------------
# the report


def survival(
    con: DuckDBPyConnection,
    ledger: str | Path | None = None,
    arm: str | None = None,
    ks: Sequence[int] = KS,
    fixtures: tuple[dict[str, Fixture], dict[str, str]] | None = None,
) -> list[dict[str, Any]]:
    """One dict per (arm, phase); recall@k needs the ledger directory (for its fixtures), or
    ``fixtures`` as :func:`ledgerscope.ledger.fixtures.load_ledger_fixtures` returned them."""
    rows = survival_counts(con, arm)
    ann = ann_recall(con, arm)
    dup = duplicate_ratio(con, arm)
    ranks: dict[tuple[str, str, str], dict[str, int | None]] = {}
    depths: dict[tuple[str, str, str], int] = {}
    answerable_qids: dict[tuple[str, str], list[str]] = {}
    if ledger is not None:
        from ledgerscope.ledger.fixtures import load_ledger_fixtures

        by_qid, texts = fixtures if fixtures is not None else load_ledger_fixtures(con, ledger)
        ranks = support_ranks_sql(con, by_qid, texts, arm)
        depths = list_depths(con, arm)
        where, params = _where(arm, "AND")
        for a, p, q in con.sql(
            "SELECT arm, CAST(phase AS VARCHAR), qid FROM records "
            f"WHERE answerable AND support_packed IS NOT NULL {where}",
            params=params,
        ).fetchall():
            answerable_qids.setdefault((a, p), []).append(q)
    out = []
    for r in rows:
        a, p = r["arm"], r["phase"]
        entry = _survival_entry(r, ann, dup)
        if ledger is not None:
            qids = answerable_qids.get((a, p), [])
            found = [by_stage for q in qids if (by_stage := ranks.get((a, p, q)))]
            entry["recall_at_k"] = {  # a stage with no list in the (arm, phase): not recorded, no figure
                stage: recall_at_k(
                    [by_stage[stage] for by_stage in found], len(qids), ks, depths.get((a, p, stage))
                )
                if (a, p, stage) in depths
                else {}
                for stage in RANKED_STAGES
            }
        out.append(entry)
    return out


def _survival_entry(
    r: Mapping[str, Any], ann: Mapping[tuple[str, str], Any], dup: Mapping[tuple[str, str], Any]
) -> dict[str, Any]:
    """One (arm, phase)'s counts and rates, from its row of :func:`survival_counts`."""
    a, p, n = r["arm"], r["phase"], r["n_answerable"]
    return {
        "arm": a,
        "phase": p,
        "phase_offset": r["phase_offset"],
        "n_records": r["n_records"],
        "n_answerable": n,
        "survival": {s: r[s] for s in SURVIVAL_STAGES},
        # a stage no record of the (arm, phase) records (ingested traces) has no rate
        "survival_rate": {s: (r[s] / n if n and r[f"{s}_recorded"] else None) for s in SURVIVAL_STAGES},
        "reranker_regret": r["reranker_regret"],
        "reranker_regret_rate": (r["reranker_regret"] / r["fused"]) if r["fused"] else None,
        "ann_recall": ann.get((a, p)),
        "duplicate_ratio": dup.get((a, p)),
        "mean_prompt_tokens": r["mean_prompt_tokens"],
        "mean_evidence_tokens": r["mean_evidence_tokens"],
        "mean_repeated_source_tokens": r["mean_repeated_source_tokens"],
    }


def gold_in_context(
    context: str, spans: Iterable[GoldSpan], packed: Iterable[Mapping[str, Any]], texts: Mapping[str, str]
) -> list[tuple[int, int, str]]:
    """(start, end, span id) ranges of a packed ``context`` holding gold text a packed unit carried.

    ``packed``: the packed stage's rows (``doc_id``, ``start``, ``end``; an unlocated unit has no
    start). Each gold span's part inside a unit is searched for in the context, every occurrence,
    so the TUI's context pane and the report mark the same characters. Parts shorter than two
    characters (after stripping) are not searched: they would mark stray letters."""
    rows = list(packed)
    found: set[tuple[int, int, str]] = set()
    for span in spans:
        text = texts.get(span.doc_id)
        if text is None:
            continue
        for row in rows:
            if row.get("doc_id") != span.doc_id or row.get("start") is None:
                continue
            quote = text[max(span.start, int(row["start"])) : min(span.end, int(row["end"]))].strip()
            if len(quote) < 2:
                continue
            i = context.find(quote)
            while i >= 0:
                found.add((i, i + len(quote), span.span_id))
                i = context.find(quote, i + 1)
    return sorted(found)
