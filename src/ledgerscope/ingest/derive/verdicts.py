"""What Python decides for the derivation, each once per distinct input: verdicts and claims.

* answer verdicts by :func:`ledgerscope.rules.judge.judge_answer` (a trace
  with an ``error`` is an ``infrastructure-failure``, never judged);
* citation verdicts by :func:`ledgerscope.rules.judge.judge_citations` over
  the cited chunks' intervals (``not-recorded`` when the trace has no
  ``citations``);
* evidence and prompt tokens: :mod:`.tokens`;
* the literal context checked against the chunk store: every context chunk's
  text occurs in ``context_text`` (or equals its item), exactly or after
  whitespace normalisation; chunks that do not are named in the record's detail;
* producer claims (``claims``) compared with what ledgerscope derived.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import pyarrow as pa

from ledgerscope.ingest.derive.tables import STR, create_table
from ledgerscope.inputs.fixtures import Fixture
from ledgerscope.rules import judge
from ledgerscope.trace import spec

NOT_RECORDED = "not-recorded"
#: a trace's answer verdict row (``t`` a trace, ``a`` an ``_ig_answer`` row)
_ANSWER_OF = (
    "a.qid = t.qid AND a.answer IS NOT DISTINCT FROM t.answer "
    "AND a.abstained = coalesce(t.abstained, false) AND a.error IS NOT DISTINCT FROM t.error"
)
#: a trace's cited intervals in citation order (``c`` its ``_ig_cite`` rows)
_CITED = (
    "list({'l': c.label, 'd': c.doc_id, 's': c.\"start\", 'e': c.\"end\"} ORDER BY c.i) "
    "FILTER (WHERE c.i IS NOT NULL)"
)


def answer_table(con, fixtures: Mapping[str, Fixture]) -> None:
    """``_ig_answer``: (qid, answer, abstained, failed) -> verdict and reason."""
    rows = con.execute(
        "SELECT DISTINCT qid, answer, coalesce(abstained, false), error FROM _ig_trace"
    ).fetchall()
    out: dict[str, list] = {k: [] for k in ("qid", "answer", "abstained", "error", "verdict", "reason")}
    for qid, answer, abstained, error in rows:
        if error is not None:
            verdict, reason = "infrastructure-failure", error
        else:
            aj = judge.judge_answer(answer, abstained, fixtures[qid])
            verdict, reason = aj.verdict, aj.reason
        for k, v in zip(out, (qid, answer, abstained, error, verdict, reason), strict=True):
            out[k].append(v)
    create_table(
        con,
        "_ig_answer",
        pa.table(
            {
                "qid": pa.array(out["qid"], STR),
                "answer": pa.array(out["answer"], STR),
                "abstained": pa.array(out["abstained"], pa.bool_()),
                "error": pa.array(out["error"], STR),
                "verdict": pa.array(out["verdict"], STR),
                "reason": pa.array(out["reason"], STR),
            }
        ),
    )


def citation_table(con, fixtures: Mapping[str, Fixture], texts: Mapping[str, str]) -> None:
    """``_ig_citation``: per trace, the citation verdict and reason; the judge runs once per distinct
    (question, answer verdict, cited intervals), and its verdicts are joined back in DuckDB."""
    con.execute(f"""CREATE OR REPLACE TABLE _ig_cited AS
        SELECT *, coalesce(CAST(to_json(cited) AS VARCHAR), '[]') AS k FROM (
            SELECT t.tid, t.qid, a.verdict, t.citations IS NULL AS absent, t.error IS NOT NULL AS failed,
                   {_CITED} AS cited
            FROM _ig_trace t JOIN _ig_answer a ON {_ANSWER_OF}
            LEFT JOIN _ig_cite c ON c.tid = t.tid
            GROUP BY t.tid, t.qid, a.verdict, t.citations IS NULL, t.error IS NOT NULL)""")
    rows = con.execute(
        "SELECT DISTINCT qid, verdict, k, cited FROM _ig_cited WHERE NOT failed AND NOT absent"
    ).fetchall()
    out: dict[str, list] = {"qid": [], "verdict": [], "k": [], "cv": [], "reason": []}
    source_texts = dict(texts)
    for qid, verdict, key, cited in rows:
        items = [(c["l"], c["d"], c["s"], c["e"]) for c in cited or []]
        cj = judge.judge_citations(items, fixtures[qid], source_texts, verdict)
        for col, value in zip(out, (qid, verdict, key, cj.verdict, cj.reason), strict=True):
            out[col].append(value)
    create_table(con, "_ig_cv", pa.table({col: pa.array(values, STR) for col, values in out.items()}))
    con.execute(f"""CREATE OR REPLACE TABLE _ig_citation AS
        SELECT d.tid,
               CASE WHEN d.failed THEN 'not-applicable' WHEN d.absent THEN '{NOT_RECORDED}' ELSE v.cv END
                   AS verdict,
               CASE WHEN d.failed THEN 'generator failed' WHEN d.absent THEN 'the trace records no citations'
                    ELSE v.reason END AS reason
        FROM _ig_cited d LEFT JOIN _ig_cv v ON NOT d.failed AND NOT d.absent AND v.qid = d.qid
             AND v.verdict = d.verdict AND v.k = d.k""")
    con.execute("DROP TABLE _ig_cited")
    con.execute("DROP TABLE _ig_cv")


def _norm(expr: str) -> str:
    """SQL: whitespace runs as one space, ends trimmed (as :func:`ledgerscope.inputs.locate.normalise`, near
    enough for
    a check that only names chunks)."""
    return f"regexp_replace(trim({expr}), '\\s+', ' ', 'g')"


def context_table(con) -> None:
    """``_ig_context``: per trace, the context chunks whose store text the literal context lacks."""
    con.execute(f"""CREATE OR REPLACE TABLE _ig_context AS
        WITH x AS (
            SELECT c.tid, c."rank", c.unit_id, t.context_items, t.context_text, ch.store_text, ch.text,
                   CASE WHEN t.context_items IS NOT NULL
                        THEN t.context_items[c."rank"] IN (ch.store_text, ch.text)
                        ELSE contains(t.context_text, ch.store_text) OR contains(t.context_text, ch.text)
                   END AS same
            FROM _ig_packed c JOIN _ig_trace t USING (tid) JOIN _ig_chunk ch ON ch.chunk_id = c.unit_id),
        y AS (
            SELECT tid, unit_id, "rank", same,
                   CASE WHEN same THEN true  -- CASE: the normalisation runs only where it is needed
                        WHEN context_items IS NOT NULL
                        THEN {_norm('context_items["rank"]')} = {_norm("store_text")}
                        ELSE contains({_norm("context_text")}, {_norm("store_text")}) END AS loose
            FROM x)
        SELECT tid, list(unit_id ORDER BY "rank") FILTER (WHERE NOT loose) AS missing,
               list(unit_id ORDER BY "rank") FILTER (WHERE loose AND NOT same) AS whitespace
        FROM y GROUP BY tid""")


def verdict_table(con) -> None:
    """``_ig_verdict``: everything above per trace, for the records."""
    con.execute(f"""CREATE OR REPLACE TABLE _ig_verdict AS
        SELECT t.tid, a.verdict AS answer_verdict, a.reason AS answer_reason,
               c.verdict AS citation_verdict, c.reason AS citation_reason,
               k.evidence_tokens, k.prompt_tokens,
               CASE WHEN x.missing IS NULL AND x.whitespace IS NULL THEN '"matches the chunk store"'
                    ELSE CAST(json_object('missing_from_context', coalesce(x.missing, []),
                                          'differs_in_whitespace', coalesce(x.whitespace, [])) AS VARCHAR)
               END AS context_check
        FROM _ig_trace t
        JOIN _ig_answer a ON {_ANSWER_OF}
        JOIN _ig_citation c USING (tid) JOIN _ig_tokens k USING (tid) LEFT JOIN _ig_context x USING (tid)""")


_COMPARED = (*spec.CLAIM_FLAGS, *spec.CLAIM_VERDICTS, "prompt_tokens", "evidence_tokens")


def compare_claims(con) -> None:
    """``_ig_compared``: per trace with claims, each claim beside ledgerscope's own value."""
    cols = ", ".join(f'r."{c}"' for c in _COMPARED)
    rows = con.execute(
        f"SELECT r.tid, r.claims_json, {cols} FROM _ig_rec r WHERE r.claims_json IS NOT NULL"
    ).fetchall()
    tids, compared = [], []
    for tid, claims_json, *derived in rows:
        mine = dict(zip(_COMPARED, derived, strict=True))
        out = {}
        for key, claimed in sorted(json.loads(claims_json).items()):
            if key in mine:
                out[key] = {"claimed": claimed, "derived": mine[key], "agrees": claimed == mine[key]}
            else:
                out[key] = {"claimed": claimed, "derived": None, "agrees": None}
        tids.append(tid)
        compared.append(json.dumps(out, sort_keys=True, ensure_ascii=False))
    create_table(
        con,
        "_ig_compared",
        pa.table({"tid": pa.array(tids, pa.int64()), "compared": pa.array(compared, STR)}),
    )
