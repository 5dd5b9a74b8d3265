"""Evidence and prompt token counts per trace, each distinct line encoded once where that is exact.

Evidence tokens are the named tokenizer's count of a trace's ``context_text`` (or the sum over its
items when it is a list, one text per context chunk); prompt tokens the count of ``prompt`` where the
trace records it, otherwise NULL (the instructions around the context are not in a trace, and are
not guessed).

The definition (:func:`by_text`) encodes every distinct text whole. A framework's trace records the
literal prompt of every request: a hundred thousand prompts, each a template around a few chunks
from a store of a few thousand, so encoding each whole costs most of an ingest, and moving them
into Python costs more. For a tokenizer whose count is additive over a split at a line break
(BERT's WordPiece: the normaliser works per character, the pre-tokeniser splits at whitespace, and
whitespace makes no token), a text's count is the sum of its lines' counts, so :func:`by_lines`
splits the texts in DuckDB, encodes each distinct line once and sums the counts back in DuckDB.
Its result is checked on a sample of traces against whole encodings, and any difference falls back
to the definition (``tests/test_ingest_tokens.py`` holds the two equal).
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pyarrow as pa

from ledgerscope.common.sql_tables import sql_literal
from ledgerscope.ingest.derive.tables import STR, create_table

#: a break between lines, with the spaces around it (whitespace to BERT's pre-tokeniser: no token);
#: an RE2 pattern that reads as Python's ``re`` reads it (an ASCII class and a newline)
BREAK = r"[ \t\r]*\n[ \t\r\n]*"
#: traces whose whole encodings check :func:`by_lines`
SAMPLE = 32
#: per trace: (tid, evidence_tokens, prompt_tokens) from ``_ig_count`` (x, n) or ``_ig_line`` (x, n)
_TOKENS = """CREATE OR REPLACE TABLE _ig_tokens AS
    WITH items AS (SELECT tid, unnest(context_items) AS x FROM _ig_trace WHERE context_items IS NOT NULL),
    ev AS (
        SELECT i.tid, sum(c.n) AS n FROM items i JOIN _ig_count c USING (x) GROUP BY i.tid
        UNION ALL
        SELECT t.tid, c.n FROM _ig_trace t JOIN _ig_count c ON c.x = t.context_text)
    SELECT t.tid, coalesce(ev.n, 0) AS evidence_tokens, p.n AS prompt_tokens
    FROM _ig_trace t LEFT JOIN ev USING (tid) LEFT JOIN _ig_count p ON p.x = t.prompt"""


def additive_at_line_breaks(tokenizer) -> bool:
    """Whether the tokenizer's count of a text is the sum of its counts over a split at line breaks."""
    try:
        spec = json.loads(tokenizer.to_str())
    except (AttributeError, ValueError, TypeError):
        return False
    norm, pre, model = spec.get("normalizer"), spec.get("pre_tokenizer") or {}, spec.get("model") or {}
    return (
        model.get("type") == "WordPiece"
        and pre.get("type") == "BertPreTokenizer"
        and (norm is None or norm.get("type") == "BertNormalizer")
    )


def token_table(con, count_whole: Callable[[list[str]], list[int]], additive: bool) -> None:
    """``_ig_tokens`` (tid, evidence_tokens, prompt_tokens): by distinct lines where the tokenizer is
    ``additive`` at line breaks and a sample agrees, else by whole texts."""
    if not (additive and by_lines(con, count_whole)):
        by_text(con, count_whole)


def by_text(con, count_whole: Callable[[list[str]], list[int]]) -> None:
    """``_ig_tokens`` by the definition: every distinct text encoded whole (``_ig_count``: x, n)."""
    texts = [
        r[0]
        for r in con.execute("""
        SELECT DISTINCT x FROM (
            SELECT context_text AS x FROM _ig_trace WHERE context_text IS NOT NULL
            UNION ALL SELECT unnest(context_items) FROM _ig_trace WHERE context_items IS NOT NULL
            UNION ALL SELECT prompt FROM _ig_trace WHERE prompt IS NOT NULL)""").fetchall()
    ]
    counts = count_whole(texts) if texts else []
    create_table(con, "_ig_count", pa.table({"x": pa.array(texts, STR), "n": pa.array(counts, pa.int64())}))
    con.execute(_TOKENS)


#: every non-empty line of every text a trace holds, keyed by ``2 * tid`` (evidence) or ``2 * tid + 1``
#: (prompt)
_LINES = f"""SELECT k, line FROM (
    SELECT 2 * tid AS k, unnest(regexp_split_to_array(x, {sql_literal(BREAK)})) AS line
    FROM (SELECT tid, unnest(context_items) AS x FROM _ig_trace WHERE context_items IS NOT NULL)
    UNION ALL
    SELECT 2 * tid, unnest(regexp_split_to_array(context_text, {sql_literal(BREAK)}))
    FROM _ig_trace WHERE context_text IS NOT NULL
    UNION ALL
    SELECT 2 * tid + 1, unnest(regexp_split_to_array(prompt, {sql_literal(BREAK)}))
    FROM _ig_trace WHERE prompt IS NOT NULL) WHERE line <> ''"""


def by_lines(con, count_whole: Callable[[list[str]], list[int]]) -> bool:
    """``_ig_tokens`` as the sum of each text's lines' counts, every distinct line encoded once (one
    split of the texts, grouped by line); False (nothing made) when a sample of traces encoded whole
    disagrees."""
    con.execute(f"CREATE OR REPLACE TABLE _ig_lines AS SELECT line, list(k) AS ks FROM ({_LINES}) GROUP BY 1")
    lines = con.execute("SELECT rowid, line FROM _ig_lines").fetchall()
    counts = count_whole([line for _, line in lines]) if lines else []
    create_table(
        con,
        "_ig_line_n",
        pa.table({"i": pa.array([i for i, _ in lines], pa.int64()), "n": pa.array(counts, pa.int64())}),
    )
    con.execute("""CREATE OR REPLACE TABLE _ig_tokens AS
        WITH per AS (
            SELECT k, sum(n) AS n FROM (
                SELECT unnest(l.ks) AS k, c.n FROM _ig_lines l JOIN _ig_line_n c ON c.i = l.rowid)
            GROUP BY k)
        SELECT t.tid, CAST(coalesce(e.n, 0) AS BIGINT) AS evidence_tokens,
               CAST(CASE WHEN t.prompt IS NOT NULL THEN coalesce(p.n, 0) END AS BIGINT) AS prompt_tokens
        FROM _ig_trace t LEFT JOIN per e ON e.k = 2 * t.tid LEFT JOIN per p ON p.k = 2 * t.tid + 1""")
    con.execute("DROP TABLE _ig_lines")
    con.execute("DROP TABLE _ig_line_n")
    if _sample_agrees(con, count_whole):
        return True
    con.execute("DROP TABLE _ig_tokens")
    return False


def _sample_agrees(con, count_whole: Callable[[list[str]], list[int]]) -> bool:
    """Whether up to :data:`SAMPLE` traces, spread over all, get the same counts encoded whole."""
    n = con.execute("SELECT count(*) FROM _ig_trace").fetchall()[0][0]
    step = max(1, n // SAMPLE)
    rows = con.execute(
        f"""SELECT t.context_items, t.context_text, t.prompt, k.evidence_tokens, k.prompt_tokens
        FROM _ig_trace t JOIN _ig_tokens k USING (tid) WHERE t.tid % {step} = 0 ORDER BY t.tid
        LIMIT {SAMPLE}"""
    ).fetchall()
    texts = [  # each trace's evidence texts, then its prompt (one batch of encodings)
        [*(x for x in items or [] if x is not None), *([] if text is None else [text])]
        + ([] if prompt is None else [prompt])
        for items, text, prompt, _, _ in rows
    ]
    counts = iter(count_whole([t for ts in texts for t in ts]))
    for (_, _, prompt, evidence, prompt_tokens), ts in zip(rows, texts, strict=True):
        got = [next(counts) for _ in ts]
        whole_prompt = got.pop() if prompt is not None else None
        if sum(got) != evidence or whole_prompt != prompt_tokens:
            return False
    return True
