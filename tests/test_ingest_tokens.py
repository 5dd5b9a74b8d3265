"""Prompt token counts by distinct lines equal whole encodings (ingest/tokens.py)."""

from __future__ import annotations

from ledgerscope.ingest.build import count_tokens
from ledgerscope.ingest.derive.tokens import additive_at_line_breaks, count_texts
from ledgerscope.pipeline.embedding.encoder import BUNDLED_MINILM, TokenCounter

CHUNKS = [
    "Audit logs are kept for 400 days.",
    'The "legal hold" keeps files.\n\nIt is set by an owner.',
    "Héllo\u00a0wörld Ünïcode \x1c tab\there 中文字",
    "a\x00b",
    "x" * 300,
    "don't  stop\r\n\tnow",
]


def test_counts_by_distinct_lines_equal_whole_encodings():
    tokenizer = TokenCounter(BUNDLED_MINILM).tokenizer
    assert additive_at_line_breaks(tokenizer)
    prompts = [
        f"Sources:\n{a}\n\n{b}\n\nQuestion: what about {i}?  \n"
        for i, (a, b) in enumerate((a, b) for a in CHUNKS for b in CHUNKS)
    ] * 3
    calls = []

    def whole(texts):
        calls.append(len(texts))
        return count_tokens(tokenizer, texts)

    assert count_texts(tokenizer, prompts, whole) == count_tokens(tokenizer, prompts)
    assert calls[0] < len(prompts)  # the distinct lines, not every prompt


def test_a_tokenizer_that_is_not_additive_encodes_every_text_whole():
    class Other:
        def to_str(self):
            return '{"model": {"type": "BPE"}, "pre_tokenizer": {"type": "ByteLevel"}}'

    assert not additive_at_line_breaks(Other())
    assert count_texts(Other(), ["a\nb", "c"], lambda texts: [len(t) for t in texts]) == [3, 1]
