"""Token counts by distinct lines (in DuckDB) equal whole encodings (ingest/derive/tokens.py)."""

from __future__ import annotations

import duckdb
import pyarrow as pa

from ledgerscope.ingest.build import count_tokens
from ledgerscope.ingest.derive import tokens
from ledgerscope.ingest.derive.tables import STR, STRS, create_table
from ledgerscope.pipeline.embedding.encoder import BUNDLED_MINILM, TokenCounter

CHUNKS = [
    "Audit logs are kept for 400 days.",
    'The "legal hold" keeps files.\n\nIt is set by an owner.',
    "Héllo\u00a0wörld Ünïcode \x1c tab\there 中文字",
    "a\x00b",
    "x" * 300,
    "don't  stop\r\n\tnow",
    " \n \r\n\t",
    "",
    "line\u2028separator\x0bvertical\x0cfeed\n\n\nend \n",
]


def _traces(con) -> None:
    """``_ig_trace`` with every shape a trace's texts take: items (a list), one text, a prompt or none."""
    items, texts, prompts = [], [], []
    for i, (a, b) in enumerate((a, b) for a in CHUNKS for b in CHUNKS):
        listed = i % 3 != 0
        items.append([a, b] if listed else None)
        texts.append(None if listed else f"{a}\n\n{b}")
        prompts.append(None if i % 5 == 0 else f"Sources:\n{a}\n\n{b}\n\nQuestion: what about {i}?  \n")
    items.append([])  # a trace whose context is empty
    texts.append(None)
    prompts.append("")
    create_table(
        con,
        "_ig_trace",
        pa.table(
            {
                "tid": pa.array(range(len(items)), pa.int64()),
                "context_items": pa.array(items, STRS),
                "context_text": pa.array(texts, STR),
                "prompt": pa.array(prompts, STR),
            }
        ),
    )


def _tokens(con) -> list[tuple]:
    return con.execute("SELECT * FROM _ig_tokens ORDER BY tid").fetchall()


def test_counts_by_distinct_lines_equal_whole_encodings():
    tokenizer = TokenCounter(BUNDLED_MINILM).tokenizer
    assert tokens.additive_at_line_breaks(tokenizer)
    con = duckdb.connect()
    _traces(con)
    calls = []

    def whole(texts):
        calls.append(len(texts))
        return count_tokens(tokenizer, texts)

    tokens.by_text(con, whole)
    reference = _tokens(con)
    n_texts = calls[0]
    assert tokens.by_lines(con, whole)
    assert _tokens(con) == reference
    assert calls[1] < n_texts  # the distinct lines, not every text
    assert reference[-1] == (len(reference) - 1, 0, 0)  # empty context, empty prompt
    assert any(p is None for _, _, p in reference) and all(e >= 0 for _, e, _ in reference)


def test_a_count_that_is_not_additive_falls_back_to_whole_texts():
    con = duckdb.connect()
    _traces(con)
    chars = lambda texts: [len(t) for t in texts]  # noqa: E731 - counts whitespace: not additive
    tokens.by_text(con, chars)
    reference = _tokens(con)
    assert not tokens.by_lines(con, chars)
    tokens.token_table(con, chars, additive=True)  # the sample disagrees: the definition is used
    assert _tokens(con) == reference


def test_a_tokenizer_that_is_not_additive_is_recognised():
    class Other:
        def to_str(self):
            return '{"model": {"type": "BPE"}, "pre_tokenizer": {"type": "ByteLevel"}}'

    assert not tokens.additive_at_line_breaks(Other())
