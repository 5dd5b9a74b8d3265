"""Token counts of many texts that share most of their lines (prompts that hold the same chunks).

A framework's trace records the literal prompt of every request: a hundred
thousand prompts, each a template around a few chunks from a store of a few
thousand. Encoding each prompt whole costs most of an ingest. For a tokenizer
whose count is additive over a split at a line break (BERT's WordPiece: the
normaliser works per character, the pre-tokeniser splits at whitespace, and
whitespace makes no token), a text's count is the sum of its lines' counts, so
each distinct line is encoded once. Any other tokenizer encodes every text
whole. Either way the result is checked on a sample of texts against whole
encodings, and any difference falls back to encoding every text whole.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable

#: a break between lines, with the spaces around it (whitespace to BERT's pre-tokeniser: no token)
_BREAK = re.compile(r"[ \t\r]*\n[ \t\r\n]*")
_SAMPLE = 32


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


def count_texts(tokenizer, texts: list[str], count_whole: Callable[[list[str]], list[int]]) -> list[int]:
    """Each text's token count: by distinct lines where that is exact (module docstring), else whole."""
    if not texts or not additive_at_line_breaks(tokenizer):
        return count_whole(texts)
    parts = [[p for p in _BREAK.split(t) if p] for t in texts]
    distinct = list(dict.fromkeys(p for ps in parts for p in ps))
    if len(distinct) >= sum(len(ps) for ps in parts) * 0.9:  # little shared: no gain
        return count_whole(texts)
    per = dict(zip(distinct, count_whole(distinct), strict=True))
    counts = [sum(per[p] for p in ps) for ps in parts]
    step = max(1, len(texts) // _SAMPLE)
    sample = list(range(0, len(texts), step))[:_SAMPLE]
    if count_whole([texts[i] for i in sample]) != [counts[i] for i in sample]:
        return count_whole(texts)
    return counts
