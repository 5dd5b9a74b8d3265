"""From checked traces to ledger rows: candidates, units, boundaries, support flags, records.

Runs in DuckDB over the tables of :mod:`.tables`; what Python decides (answer
and citation verdicts by :mod:`ledgerscope.rules.judge`, token counts by a
named tokenizer, producer claims compared) is decided once per distinct input
(:mod:`.verdicts`) and joined back. Declared rules:

* a trace's ``retrieved_ids`` (or ``stages.retrieved``) is the ``fused`` list:
  what the reranker reads; ``context_ids`` is ``packed``; every list is what
  its stage handed on, so no cutoff is applied to it (``rerank_depth`` and
  ``selection_depth`` are left NULL);
* a ``support_*`` flag is derived only from recorded stages
  (:func:`ledgerscope.trace.spec.virtual_recorded`); a stage the trace does not record leaves
  its flag NULL: *not recorded*. ``support_chunked`` is the chunk store (the
  pipeline's index) when it is complete for the config (every chunk resolved,
  and the store not declared partial);
* ``support_cited`` and the citation verdict come from the cited chunks: a
  citation is a context chunk's id, or a label ``n`` naming the n-th context
  chunk; anything else points nowhere (``unresolvable``). A trace without
  ``citations`` records none: the verdict is ``not-recorded``;
* answerable means the fixture is answerable with a sufficient set (as in the
  cascade); other records have NULL flags and are scored by abstention.
"""

from __future__ import annotations

from ledgerscope.common.sql_tables import sql_literal
from ledgerscope.ingest.derive import coverage

#: the tree's stages and the condition on a trace's ``recorded`` list under which each is derived
_VSTAGES = {
    "bm25": "list_contains(recorded, 'bm25')",
    "dense_exact": "list_contains(recorded, 'dense_exact')",
    "exact": "list_contains(recorded, 'dense_exact')",
    "dense_ann": "list_contains(recorded, 'dense_ann')",
    "production": "(list_contains(recorded, 'bm25') OR list_contains(recorded, 'dense_ann'))",
    "union": "list_contains(recorded, 'union')",
    "fused": "list_contains(recorded, 'fused')",
    "reranked": "list_contains(recorded, 'reranked')",
    "selected": "list_contains(recorded, 'selected')",
    "packed": "true",
    "cited": "citations IS NOT NULL",
}
#: lists whose rows make up a tree stage other than the list of the same name
_MEMBERS = {"exact": ("bm25", "dense_exact"), "production": ("bm25", "dense_ann")}


#: the ledger's candidate rows of one (arm, phase) ($1, $2) whose traces are numbered $3 to $4: stage
#: rows with their chunks' intervals (never materialised whole: a hundred thousand traces of fifty ids
#: are five million rows). The range is given as constants, so DuckDB reads only the row groups that
#: hold it (files written in request order keep a partition's traces together)
CANDIDATES_OF = """
    SELECT t.arm, t.phase, t.qid, s.stage, s."rank", s.chunk_id AS unit_id, s.score,
           c.doc_id, c."start", c."end", CAST([] AS VARCHAR[]) AS lineage
    FROM (SELECT * FROM _ig_stage WHERE tid BETWEEN $3 AND $4) s
    JOIN (SELECT tid, arm, phase, qid FROM _ig_trace
          WHERE tid BETWEEN $3 AND $4 AND arm = $1 AND phase = $2) t USING (tid)
    JOIN _ig_chunk c USING (chunk_id)"""


def candidates(con) -> None:
    """``_ig_packed``: the context's rows with their intervals; ``_ig_cs``: each chunk that overlaps a
    gold span of a question, per question (only those rows can keep support)."""
    con.execute("""CREATE OR REPLACE TABLE _ig_packed AS
        SELECT s.tid, s."rank", s.chunk_id AS unit_id, c.doc_id, c."start", c."end"
        FROM _ig_stage s JOIN _ig_chunk c USING (chunk_id) WHERE s.stage = 'packed'""")
    con.execute("""CREATE OR REPLACE TABLE _ig_cs AS
        SELECT DISTINCT c.chunk_id, sp.qid, c.doc_id, c."start", c."end"
        FROM _ig_chunk c JOIN _ig_span sp ON sp.doc_id = c.doc_id AND c."start" < sp.e AND c."end" > sp.s""")


def citations(con) -> None:
    """``_ig_cite``: each citation of each trace resolved to a context chunk (or NULLs: nowhere)."""
    con.execute("""CREATE OR REPLACE TABLE _ig_cite AS
        WITH c AS (
            SELECT tid, unnest(citations) AS label, unnest(range(len(citations))) AS i
            FROM _ig_trace WHERE citations IS NOT NULL),
        p AS (SELECT tid, "rank", unit_id, doc_id, "start", "end" FROM _ig_packed),
        hit AS (
            SELECT c.tid, c.i, c.label, coalesce(byid.unit_id, bylabel.unit_id) AS unit_id,
                   coalesce(byid.doc_id, bylabel.doc_id) AS doc_id,
                   coalesce(byid."start", bylabel."start") AS "start",
                   coalesce(byid."end", bylabel."end") AS "end"
            FROM c LEFT JOIN p byid ON byid.tid = c.tid AND byid.unit_id = c.label
            LEFT JOIN p bylabel ON bylabel.tid = c.tid
                 AND regexp_full_match(c.label, '[1-9][0-9]{0,8}')
                 AND bylabel."rank" = TRY_CAST(c.label AS INTEGER))
        SELECT * FROM hit""")


def support(con, chunked_arms: list[str]) -> None:
    """``_ig_kept`` (per trace and tree stage), ``_ig_chunked`` (per arm and question) and
    ``_ig_single`` (per trace): the support flags by :mod:`.coverage`."""
    need = " UNION ALL ".join(
        f"SELECT tid AS key, qid, '{v}' AS vstage FROM _ig_trace JOIN _ig_fx USING (qid) "
        f"WHERE walked AND {cond}"
        for v, cond in _VSTAGES.items()
    )
    custom = (
        "SELECT key, qid, vstage FROM (SELECT tid AS key, qid, unnest(declared) AS vstage, recorded "
        "FROM _ig_trace JOIN _ig_fx USING (qid) WHERE walked) WHERE list_contains(recorded, vstage)"
    )
    con.execute(f"CREATE OR REPLACE TABLE _ig_need AS {need} UNION ALL {custom}")
    # the stage rows over a gold span of their question: all that coverage reads
    con.execute("""CREATE OR REPLACE TABLE _ig_over AS
        SELECT s.tid, s.stage, cs.doc_id, cs."start", cs."end"
        FROM _ig_stage s JOIN (SELECT tid, qid FROM _ig_trace) t USING (tid)
        JOIN _ig_cs cs ON cs.chunk_id = s.chunk_id AND cs.qid = t.qid""")
    members = " UNION ALL ".join(
        f'SELECT tid AS key, \'{v}\' AS vstage, doc_id, "start" AS vs, "end" AS ve FROM _ig_over '
        f"WHERE stage IN ({', '.join(repr(m) for m in ms)})"
        for v, ms in _MEMBERS.items()
    )
    con.execute(f"""CREATE OR REPLACE TABLE _ig_iv AS
        SELECT tid AS key, stage AS vstage, doc_id, "start" AS vs, "end" AS ve FROM _ig_over
        UNION ALL {members}
        UNION ALL SELECT tid, 'cited', doc_id, "start", "end" FROM _ig_cite WHERE doc_id IS NOT NULL""")
    con.execute(coverage.kept_sql("_ig_kept"))
    con.execute(coverage.single_unit_sql())
    arms = ", ".join(sql_literal(a) for a in chunked_arms) or "NULL"
    con.execute(f"""CREATE OR REPLACE TABLE _ig_need_chunked AS
        SELECT row_number() OVER (ORDER BY arm, qid) AS key, arm, qid, 'chunked' AS vstage
        FROM (SELECT DISTINCT arm, qid FROM _ig_trace JOIN _ig_fx USING (qid)
              WHERE walked AND arm IN ({arms}))""")
    con.execute("""CREATE OR REPLACE TABLE _ig_iv_chunked AS
        SELECT n.key, 'chunked' AS vstage, c.doc_id, c."start" AS vs, c."end" AS ve
        FROM _ig_need_chunked n JOIN (SELECT DISTINCT qid, doc_id FROM _ig_span) sp ON sp.qid = n.qid
        JOIN _ig_chunk c ON c.doc_id = sp.doc_id
             AND (c.configs IS NULL OR list_contains(c.configs, n.arm))""")
    con.execute(coverage.kept_sql("_ig_chunked", "_ig_need_chunked", "_ig_iv_chunked"))


#: the stages a record's ``unverifiable_stages`` may name, in tree order
UNVERIFIABLE_ORDER = ("chunked", "exact", "production", "union", "fused", "reranked", "packed", "cited")


def unverifiable(con, any_unplaced: bool = True) -> None:
    """``_ig_unver`` (tid, vstage): the tree stages of each trace whose verdict rests on an unplaced
    chunk: the stage does not keep support, and its list holds a chunk that could not be placed of a
    document holding a gold span of the question (``chunked``: the config's store holds one), so the
    support may lie in it; ``cited``: a cited chunk could not be placed. Only traces naming an
    unplaced chunk are touched (the join starts from the few unplaced chunks); with none
    (``any_unplaced`` false) the table is empty at no cost."""
    if not any_unplaced:
        con.execute("CREATE OR REPLACE TABLE _ig_unver (tid BIGINT, vstage VARCHAR)")
        return
    con.execute(
        "CREATE OR REPLACE TABLE _ig_unloc AS "
        "SELECT chunk_id, doc_id, configs FROM _ig_chunk WHERE NOT located"
    )
    members = " UNION ALL ".join(
        f"SELECT '{m}' AS stage, '{v}' AS vstage" for v, ms in _MEMBERS.items() for m in ms
    )
    con.execute(f"""CREATE OR REPLACE TABLE _ig_unver AS
        WITH hit AS (
            SELECT s.tid, s.stage, u.doc_id FROM _ig_stage s JOIN _ig_unloc u USING (chunk_id)),
        staged AS (
            SELECT tid, stage AS vstage, doc_id FROM hit
            UNION ALL SELECT h.tid, m.vstage, h.doc_id FROM hit h JOIN ({members}) m USING (stage)),
        gold AS (SELECT DISTINCT qid, doc_id FROM _ig_span),
        lists AS (
            SELECT DISTINCT st.tid, st.vstage FROM staged st JOIN _ig_trace t USING (tid)
            JOIN gold g ON g.qid = t.qid AND g.doc_id = st.doc_id
            JOIN _ig_kept k ON k.key = st.tid AND k.vstage = st.vstage AND NOT k.kept),
        chunked AS (
            SELECT DISTINCT t.tid, 'chunked' AS vstage
            FROM _ig_chunked k JOIN _ig_need_chunked n USING (key)
            JOIN gold g ON g.qid = n.qid
            JOIN _ig_unloc u ON u.doc_id = g.doc_id AND (u.configs IS NULL OR list_contains(u.configs, n.arm))
            JOIN _ig_trace t ON t.arm = n.arm AND t.qid = n.qid
            WHERE NOT k.kept),
        cited AS (
            SELECT DISTINCT c.tid, 'cited' AS vstage
            FROM _ig_cite c JOIN _ig_unloc u ON u.chunk_id = c.unit_id)
        SELECT * FROM lists UNION ALL SELECT * FROM chunked UNION ALL SELECT * FROM cited""")
    con.execute("DROP TABLE _ig_unloc")


def units(con, arms: dict[str, list[str]]) -> None:
    """``_ig_units`` and ``_ig_bounds``: every config's chunks as its units in each of its phases
    (the store has no phase of its own), and the chunk starts as the cuts."""
    pairs = [(a, p) for a, phases in arms.items() for p in phases]
    values = ", ".join("(" + ", ".join(sql_literal(x) for x in pair) + ")" for pair in pairs)
    con.execute(f"""CREATE OR REPLACE TABLE _ig_units AS
        WITH ap(arm, phase) AS (VALUES {values})
        SELECT ap.arm, ap.phase, c.chunk_id AS unit_id, c.doc_id, c.version,
               CAST(row_number() OVER (PARTITION BY ap.arm, ap.phase, c.doc_id
                                       ORDER BY c."start", c."end", c.chunk_id) - 1 AS INTEGER) AS ordinal,
               c."start", c."end", c."start" AS core_start, c."end" AS core_end,
               CAST(NULL AS INTEGER) AS token_start, CAST(NULL AS INTEGER) AS token_end,
               CAST(NULL AS INTEGER) AS n_tokens, c.text, c.access, c.located, c.placement, c.placed_by,
               c.placement_note, c.context_json
        FROM ap JOIN _ig_chunk c ON c.configs IS NULL OR list_contains(c.configs, ap.arm)""")
    con.execute("""CREATE OR REPLACE TABLE _ig_bounds AS
        SELECT arm, phase, CAST(0 AS INTEGER) AS phase_offset, doc_id, any_value(version) AS version,
               CAST(NULL AS INTEGER) AS n_tokens, CAST([] AS INTEGER[]) AS cut_tokens,
               list_sort(list_distinct(list("start") FILTER (WHERE "start" > 0))) AS cut_chars
        FROM _ig_units WHERE located GROUP BY arm, phase, doc_id""")


def _flag(v: str) -> str:
    return f"bool_or(kept) FILTER (WHERE vstage = '{v}')"


def records(con, digests: dict[str, str]) -> None:
    """``_ig_rec``: one record per trace, every column of the ledger's records table (order kept by
    the writer), with the flags NULL for stages not recorded."""
    flags = ", ".join(f"{_flag(v)} AS support_{v}" for v in _VSTAGES)
    # declared stages apart: only the traces that declare some pay for the ordered aggregate
    standard = ", ".join(repr(v) for v in _VSTAGES)
    custom = (
        "SELECT key AS tid, to_json(map_from_entries(list({'k': vstage, 'v': kept} ORDER BY vstage))) "
        f"AS declared_support FROM _ig_kept WHERE vstage NOT IN ({standard}) GROUP BY key"
    )
    cases = " ".join(f"WHEN '{a.replace(chr(39), chr(39) * 2)}' THEN '{d}'" for a, d in digests.items())
    order = "[" + ", ".join(f"'{v}'" for v in UNVERIFIABLE_ORDER) + "]"
    con.execute(f"""CREATE OR REPLACE TABLE _ig_rec AS
        WITH k AS (
            SELECT key AS tid, {flags}, max(first_set) FILTER (WHERE vstage = 'packed') AS covered_set
            FROM _ig_kept GROUP BY key),
        dk AS ({custom}),
        ch AS (SELECT n.arm, n.qid, c.kept FROM _ig_chunked c JOIN _ig_need_chunked n USING (key)),
        cj AS (
            SELECT tid, to_json(list({{'label': label, 'unit_id': unit_id, 'doc_id': doc_id,
                                      'start': "start", 'end': "end"}} ORDER BY i)) AS citations_json
            FROM _ig_cite GROUP BY tid),
        pk AS (SELECT tid, list(unit_id ORDER BY "rank") AS ids FROM _ig_packed GROUP BY tid),
        uv AS (SELECT tid, string_agg(vstage, ',' ORDER BY list_position({order}, vstage)) AS stages
               FROM _ig_unver WHERE list_contains({order}, vstage) GROUP BY tid)
        SELECT t.arm, t.phase, CAST(0 AS INTEGER) AS phase_offset, t.qid, f.question, f.segment,
               f.fx_answerable AS answerable, f.support_only, f.stress_set, f.doc_ids, f.gold_status,
               ch.kept AS support_chunked,
               k.support_bm25, k.support_dense_exact, k.support_exact, k.support_dense_ann,
               k.support_production, k.support_union, k.support_fused, k.support_reranked,
               k.support_selected, k.support_packed, k.support_cited, CAST(NULL AS BOOLEAN) AS support_topk,
               CAST(k.covered_set AS INTEGER) AS covered_set, si.single AS single_unit_complete,
               coalesce(pk.ids, CAST([] AS VARCHAR[])) AS packed_unit_ids,
               CAST(v.evidence_tokens AS INTEGER) AS evidence_tokens,
               CAST(v.prompt_tokens AS INTEGER) AS prompt_tokens, CAST(NULL AS INTEGER) AS budget_tokens,
               CAST(NULL AS INTEGER) AS rerank_depth, CAST(NULL AS INTEGER) AS selection_depth,
               CAST(NULL AS INTEGER) AS repeated_source_tokens, CAST(NULL AS INTEGER) AS topk_tokens,
               '[]' AS overflow_json, '[]' AS expansion_dropped_json,
               t.answer, coalesce(t.abstained, false) AS abstained,
               CASE WHEN t.citations IS NULL THEN '[]' ELSE coalesce(CAST(cj.citations_json AS VARCHAR), '[]')
                    END AS citations_json,
               v.answer_verdict, v.answer_reason, v.citation_verdict, v.citation_reason,
               t.error AS generator_error, CAST(NULL AS INTEGER) AS attempts,
               CAST(json_object('ingested', json_object(
                   'trace', coalesce(t.trace_file || ':' || t.trace_line, t.trace_file),
                   'recorded_stages', t.recorded,
                   'declared_support', dk.declared_support,
                   'context_text', CAST(v.context_check AS JSON),
                   'question_differs', t.trace_question IS NOT NULL AND t.trace_question <> f.question),
                   'producer_claims', CAST(t.claims_json AS JSON)) AS VARCHAR) AS generator_detail_json,
               CAST(o.answer_verdict AS VARCHAR) AS oracle_verdict,
               CAST(o.feasible AS BOOLEAN) AS oracle_feasible,
               CASE t.arm {cases} END AS config_digest, uv.stages AS unverifiable_stages,
               t.tid, t.claims_json
        FROM _ig_trace t JOIN _ig_fx f USING (qid)
        LEFT JOIN k USING (tid) LEFT JOIN dk USING (tid) LEFT JOIN ch ON ch.arm = t.arm AND ch.qid = t.qid
        LEFT JOIN _ig_single si ON si.key = t.tid LEFT JOIN cj USING (tid) LEFT JOIN pk USING (tid)
        LEFT JOIN _ig_verdict v USING (tid)
        LEFT JOIN _ig_oracle o ON o.arm = t.arm AND o.qid = t.qid LEFT JOIN uv USING (tid)""")


#: one (arm, phase)'s records ($1 to $4 as for :data:`CANDIDATES_OF`) as the ledger holds them: the
#: literal context taken from the trace and each producer claim compared in the detail, at writing
#: time (neither copied once more before)
RECORDS_OF = """
    SELECT r.* EXCLUDE (tid, claims_json) REPLACE (
               CASE WHEN c.compared IS NULL THEN r.generator_detail_json
                    ELSE CAST(json_merge_patch(r.generator_detail_json,
                         json_object('claims_compared', CAST(c.compared AS JSON))) AS VARCHAR)
               END AS generator_detail_json),
           coalesce(t.context_text, array_to_string(t.context_items, chr(10) || chr(10))) AS packed_context
    FROM (SELECT * FROM _ig_rec WHERE arm = $1 AND phase = $2) r
    JOIN (SELECT tid, context_text, context_items FROM _ig_trace WHERE tid BETWEEN $3 AND $4) t USING (tid)
    LEFT JOIN _ig_compared c USING (tid)
    ORDER BY r.qid"""


def drop(con, *names: str) -> None:
    """Intermediate tables no longer read (the ingest's memory is bounded)."""
    for name in names:
        con.execute(f"DROP TABLE IF EXISTS {name}")
