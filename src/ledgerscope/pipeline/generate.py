"""The embedded default generator: an extractive reader that needs no server.

It reads the packed context block by block, splits each block into sentences
and scores every sentence against the question:

    score = 0.5 * lexical coverage + 0.5 * late-interaction similarity

* lexical coverage: the share of the question's content words (stopwords
  removed, casefolded) that occur in the sentence;
* similarity: MaxSim of the question's token vectors against the sentence's
  token vectors (the same model forward pass the retriever and reranker used).

It answers with the best sentence verbatim and cites the block it came from,
or abstains when the best score is below ``abstain_threshold``. It is
deterministic, and it fails exactly as the project needs: with the exception
cut away, it faithfully quotes the default rule.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ledgerscope.pipeline.encoder import Encoded
from ledgerscope.pipeline.lexical import analyze
from ledgerscope.pipeline.prompt import (
    ABSTAIN_TEXT,
    DEFAULT_TEMPLATE,
    ContextBlock,
    GenerationResult,
    PromptTemplate,
)
from ledgerscope.pipeline.sentences import split_sentences


@dataclass(frozen=True)
class _Sentences:
    """A text's sentences, their content words and token ranges (cached per text)."""

    spans: list[tuple[int, int]]
    terms: list[frozenset[str]]
    token_ranges: np.ndarray  # (n_sentences, 2) token index ranges into the text's token vectors


class ExtractiveReader:
    kind = "extractive"

    def __init__(self, encode: Callable[[str], Encoded], count_tokens: Callable[[str], int],
                 abstain_threshold: float = 0.5, template: PromptTemplate = DEFAULT_TEMPLATE,
                 prefetch: Callable[[list[str]], None] | None = None, reader_model: str | None = None):
        self.encode = encode
        self.count_tokens = count_tokens
        self.abstain_threshold = abstain_threshold
        self.template = template
        #: batch-encodes texts the reader will read (oracle quotes), when the model can
        self.prefetch = prefetch
        #: the reader's own model when it is not the arm's embedding model (endpoint embeddings)
        self.reader_model = reader_model
        self._sentences: dict[str, _Sentences] = {}

    def describe(self) -> dict:
        out = {"kind": self.kind, "abstain_threshold": self.abstain_threshold,
               "scoring": "0.5*lexical coverage + 0.5*MaxSim", "tokenizer": "embedding model"}
        if self.reader_model is not None:
            out.update(tokenizer="the arm's chunk tokenizer", reader_model=self.reader_model)
        if self.template != DEFAULT_TEMPLATE:
            out["prompt"] = self.template.describe()
        return out

    def forget(self, texts) -> None:
        """Drop cached sentence splits of these texts (the sweep bounds memory per partition)."""
        for t in texts:
            self._sentences.pop(t, None)

    def _split(self, text: str, enc: Encoded) -> _Sentences:
        hit = self._sentences.get(text)
        if hit is None:
            spans = split_sentences(text)
            starts = enc.offsets[:, 0] if len(enc.offsets) else np.zeros(0, dtype=np.int32)
            ends = enc.offsets[:, 1] if len(enc.offsets) else np.zeros(0, dtype=np.int32)
            ranges = np.array([(np.searchsorted(starts, s, "left"), np.searchsorted(ends, e, "right"))
                               for s, e in spans], dtype=np.int64).reshape(-1, 2)
            hit = _Sentences(spans, [frozenset(analyze(text[s:e])) for s, e in spans], ranges)
            self._sentences[text] = hit
        return hit

    def score_sentences(self, question: str, blocks: list[ContextBlock]) -> list[dict]:
        q_terms = frozenset(analyze(question))
        q = self.encode(question)
        q_tokens = q.tokens.astype(np.float32)
        scored = []
        for b_index, block in enumerate(blocks):
            enc = self.encode(block.text)
            info = self._split(block.text, enc)
            sem = np.zeros(len(info.spans))
            if len(enc.tokens) and len(q_tokens) and len(info.spans):
                sims = q_tokens @ enc.tokens.astype(np.float32).T  # (m, n tokens)
                for k, (a, b) in enumerate(info.token_ranges):
                    if b > a:
                        sem[k] = sims[:, a:b].max(axis=1).mean()
            for k, (s, e) in enumerate(info.spans):
                lex = len(q_terms & info.terms[k]) / len(q_terms) if q_terms else 0.0
                scored.append({
                    "label": block.label, "block": b_index, "start": s, "end": e,
                    "sentence": block.text[s:e], "lexical": round(lex, 6),
                    "similarity": round(float(sem[k]), 6),
                    "score": round(0.5 * lex + 0.5 * float(sem[k]), 6),
                })
        scored.sort(key=lambda x: (-x["score"], x["block"], x["start"]))
        return scored

    def generate(self, question: str, blocks: list[ContextBlock]) -> GenerationResult:
        prompt_tokens = self.count_tokens(self.template.prompt(question, blocks))
        scored = self.score_sentences(question, blocks)
        top = scored[:3]
        if not scored or scored[0]["score"] < self.abstain_threshold:
            return GenerationResult(ABSTAIN_TEXT, [], True, prompt_tokens,
                                    self.count_tokens(ABSTAIN_TEXT), detail={"top": top})
        best = scored[0]
        answer = f"{best['sentence']} [{best['label']}]"
        return GenerationResult(answer, [best["label"]], False, prompt_tokens,
                                self.count_tokens(answer), detail={"top": top})


def oracle_blocks(texts: list[tuple[str, str, str]]) -> list[ContextBlock]:
    """Blocks for an oracle prompt: (span id, doc id, text) in set order."""
    return [ContextBlock(str(i + 1), f"oracle:{sid}", doc, text) for i, (sid, doc, text) in enumerate(texts)]

