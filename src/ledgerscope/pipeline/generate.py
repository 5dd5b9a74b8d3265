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

from .encoder import Encoded
from .lexical import analyze
from .prompt import ABSTAIN_TEXT, ContextBlock, GenerationResult, render_prompt
from .rerank import maxsim
from .sentences import split_sentences


class ExtractiveReader:
    kind = "extractive"

    def __init__(self, encode: Callable[[str], Encoded], count_tokens: Callable[[str], int],
                 abstain_threshold: float = 0.5):
        self.encode = encode
        self.count_tokens = count_tokens
        self.abstain_threshold = abstain_threshold

    def describe(self) -> dict:
        return {"kind": self.kind, "abstain_threshold": self.abstain_threshold,
                "scoring": "0.5*lexical coverage + 0.5*MaxSim", "tokenizer": "embedding model"}

    def score_sentences(self, question: str, blocks: list[ContextBlock]) -> list[dict]:
        q_terms = set(analyze(question))
        q = self.encode(question)
        scored = []
        for b_index, block in enumerate(blocks):
            enc = self.encode(block.text)
            for s, e in split_sentences(block.text):
                sentence = block.text[s:e]
                terms = set(analyze(sentence))
                lex = len(q_terms & terms) / len(q_terms) if q_terms else 0.0
                if len(enc.offsets):
                    inside = (enc.offsets[:, 0] >= s) & (enc.offsets[:, 1] <= e)
                    sem = maxsim(q.tokens, enc.tokens[inside])
                else:
                    sem = 0.0
                scored.append({
                    "label": block.label, "block": b_index, "start": s, "end": e,
                    "sentence": sentence, "lexical": round(lex, 6), "similarity": round(sem, 6),
                    "score": round(0.5 * lex + 0.5 * sem, 6),
                })
        scored.sort(key=lambda x: (-x["score"], x["block"], x["start"]))
        return scored

    def generate(self, question: str, blocks: list[ContextBlock]) -> GenerationResult:
        prompt_tokens = self.count_tokens(render_prompt(question, blocks))
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

