"""The embedded default generator: an extractive reader that answers from support.

It reads the packed context block by block, splits each block into sentences
(:func:`~ledgerscope.common.sentences.split_sentences`) and scores every
sentence against the question:

    score = 0.5 * coverage + 0.5 * similarity

* coverage: the share of the question's content words (stopwords removed,
  casefolded) that occur in the sentence, two words matching when they are
  equal or share their first five letters ("retention" / "retained" do not,
  "temporary" / "temporarily" do);
* similarity: MaxSim of the question's token vectors against the sentence's
  token vectors (the same model forward pass the retriever and reranker used);
* a question that asks for a quantity ("how many", "how long", "what ...
  limit/size/rate/percentage ...", "when") halves the score of every sentence
  that states no number: such a sentence cannot hold the answer.

What it answers with is :func:`~ledgerscope.pipeline.generation.reading.answer_plan`'s choice (the
rules are in that module): yes/no and comparison questions abstain with the reason recorded
(``yes-no question``); otherwise the smallest set of sentences that covers the question's words,
greedily, across units and documents (joint evidence: every unit quoted is cited), with the answer
span first when the question asks for a date, quantity or name. An oracle prompt (:func:`is_oracle`:
every block a gold span) is sufficient by construction: it is answered unless nothing in it relates
to the question (the threshold), the answer follows names to the next hop and cites every unit that
relates. On retrieved context the reader also abstains when the context is only **topical**:

* ``abstain_threshold``: the best sentence scores below it (nothing in the context is about the
  question), or
* ``abstain_margin``: the answer's sentences stand out from the next best by less than this
  (several sentences are about the question about equally well and none answers it better than the
  rest: the context is on topic, the answer is not in it). Sentences that repeat an answer sentence,
  or are a fragment of one (a unit boundary cut it, an overlap repeated it), are not "the next
  best"; a context with no other sentence has no competitor (the margin is the best score).

Sufficient support usually holds one sentence that carries the answer and
stands out; a context retrieved for its topic holds many that merely resemble
the question. ``scripts/bench_reader.py`` measures the trade-off (oracle
correct rate against false assertions on unanswerable controls) and
``docs/benchmarks.md`` records the curve the defaults were chosen from.

It is deterministic, and it still fails exactly as the project needs: with the
exception cut away, the default rule is the sentence that stands out, and it
quotes it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from ledgerscope.common.pair_memo import ArrayMemo, PairMemo
from ledgerscope.common.sentences import split_sentences
from ledgerscope.pipeline.arm.schema import default_of
from ledgerscope.pipeline.contracts.prompt import (
    ABSTAIN_TEXT,
    DEFAULT_TEMPLATE,
    ContextBlock,
    GenerationResult,
    PromptTemplate,
)
from ledgerscope.pipeline.embedding.encoder import Encoded
from ledgerscope.pipeline.generation.reading import answer_plan, answer_text, lead, question_kind
from ledgerscope.pipeline.ranking.lexical import analyze
from ledgerscope.pipeline.ranking.rerank import column_means
from ledgerscope.rules.answer_match import extract_quantities

#: the defaults, defined with every other arm setting (chosen from the curve in docs/benchmarks.md)
DEFAULT_ABSTAIN_THRESHOLD = default_of("generator.abstain_threshold")
DEFAULT_ABSTAIN_MARGIN = default_of("generator.abstain_margin")
#: letters two words must share to match (a stemmer that can be explained in one line)
STEM_LETTERS = 5
#: score factor for a sentence without a number when the question asks for a quantity
NO_QUANTITY_FACTOR = 0.5
_QUANTITY_QUESTION = re.compile(
    r"\bhow (?:many|much|long|often|large|big|old|far|high|fast|soon|frequently)\b"
    r"|\b(?:what|which)\b(?:\s+\w+){0,3}?\s+(?:percentage|proportion|number|amount|size|length|"
    r"duration|rate|limit|price|cost|fee|period|fraction|ratio|year|age|dose|count|total|maximum|"
    r"minimum|quota|cap|threshold|retention)s?\b"
    r"|\bwhen\b",
    re.IGNORECASE,
)


def _stems(words) -> frozenset[str]:
    return frozenset(w[:STEM_LETTERS] for w in words)


def asks_for_quantity(question: str) -> bool:
    """Whether the question asks for a number (its answer sentence must state one)."""
    return bool(_QUANTITY_QUESTION.search(question))


@dataclass(frozen=True)
class _Sentences:
    """A text's sentences, their stemmed content words, numbers and token ranges (cached per text)."""

    spans: list[tuple[int, int]]
    stems: list[frozenset[str]]
    has_number: list[bool]
    token_ranges: np.ndarray  # (n_sentences, 2) token index ranges into the text's token vectors


def sentence_similarities(q_tokens: np.ndarray, tokens: np.ndarray, ranges: np.ndarray) -> np.ndarray:
    """MaxSim of the question against each sentence's token range (0 for an empty one), read-only.

    One product per block as before; the per-sentence max and mean run over all sentences at once
    (:func:`ledgerscope.pipeline.ranking.rerank.column_means` keeps ``.max(axis=1).mean()`` bit for bit).
    Ranges are
    non-decreasing, so the bounds ``a0, b0, a1, b1, ...`` cut every sentence at an even position."""
    sem = np.zeros(len(ranges))
    live = np.flatnonzero(ranges[:, 1] > ranges[:, 0]) if len(ranges) else ranges[:0, 0]
    if len(tokens) and len(q_tokens) and len(live):
        sims = q_tokens @ tokens.astype(np.float32).T  # (m, n tokens)
        bounds = ranges[live].ravel()
        if bounds[-1] >= sims.shape[1]:  # the last sentence runs to the end
            bounds = bounds[:-1]
        sem[live] = column_means(np.maximum.reduceat(sims, bounds, axis=1)[:, ::2])
    sem.setflags(write=False)
    return sem


class ExtractiveReader:
    kind = "extractive"

    def __init__(
        self,
        encode: Callable[[str], Encoded],
        count_tokens: Callable[[str], int],
        abstain_threshold: float = DEFAULT_ABSTAIN_THRESHOLD,
        abstain_margin: float = DEFAULT_ABSTAIN_MARGIN,
        template: PromptTemplate = DEFAULT_TEMPLATE,
        prefetch: Callable[[list[str]], None] | None = None,
        reader_model: str | None = None,
    ):
        self.encode = encode
        self.count_tokens = count_tokens
        self.abstain_threshold = abstain_threshold
        self.abstain_margin = abstain_margin
        self.template = template
        #: batch-encodes texts the reader will read (oracle quotes), when the model can
        self.prefetch = prefetch
        #: the reader's own model when it is not the arm's embedding model (endpoint embeddings)
        self.reader_model = reader_model
        #: sentence splits by unit text, while the text's token offsets are the encoder's
        self._sentences = ArrayMemo()
        #: sentence similarities by (question, block text): one hypothesis meets the same blocks again
        self._similarities = PairMemo()

    @classmethod
    def from_config(
        cls,
        encode: Callable[[str], Encoded],
        count_tokens: Callable[[str], int],
        generator: Mapping,
        **kwargs,
    ) -> ExtractiveReader:
        """A reader with an arm's ``[generator]`` settings (absent ones take the defaults); ``kwargs``
        are the template, prefetch and reader model."""
        return cls(
            encode,
            count_tokens,
            float(generator.get("abstain_threshold", DEFAULT_ABSTAIN_THRESHOLD)),
            float(generator.get("abstain_margin", DEFAULT_ABSTAIN_MARGIN)),
            **kwargs,
        )

    def describe(self) -> dict:
        out = {
            "kind": self.kind,
            "abstain_threshold": self.abstain_threshold,
            "abstain_margin": self.abstain_margin,
            "scoring": f"0.5*coverage (words sharing {STEM_LETTERS} letters) + 0.5*MaxSim; "
            f"x{NO_QUANTITY_FACTOR} without a number when a quantity is asked; "
            "abstain on yes/no and comparison questions, below the threshold, or (retrieved "
            "context) when the answer's sentences (a greedy cover of the question's words "
            "across units) lead the next (not a repeat or fragment of them) by less than the "
            "margin; an oracle prompt is answered unless below the threshold, following names "
            "to the next hop and citing every unit that relates; the answer span first where "
            "a date, quantity or name is asked",
            "tokenizer": "embedding model",
        }
        if self.reader_model is not None:
            out.update(tokenizer="the arm's chunk tokenizer", reader_model=self.reader_model)
        if self.template != DEFAULT_TEMPLATE:
            out["prompt"] = self.template.describe()
        return out

    def _split(self, text: str, enc: Encoded) -> _Sentences:
        hit = self._sentences.get(text, (enc.offsets,))
        if hit is None:
            spans = split_sentences(text)
            starts = enc.offsets[:, 0] if len(enc.offsets) else np.zeros(0, dtype=np.int32)
            ends = enc.offsets[:, 1] if len(enc.offsets) else np.zeros(0, dtype=np.int32)
            ranges = np.array(
                [(np.searchsorted(starts, s, "left"), np.searchsorted(ends, e, "right")) for s, e in spans],
                dtype=np.int64,
            ).reshape(-1, 2)
            hit = _Sentences(
                spans,
                [_stems(analyze(text[s:e])) for s, e in spans],
                [bool(extract_quantities(text[s:e])) for s, e in spans],
                ranges,
            )
            self._sentences.put(text, (enc.offsets,), hit)
        return hit

    def score_sentences(self, question: str, blocks: list[ContextBlock]) -> list[dict]:
        q_stems = _stems(analyze(question))
        wants_number = asks_for_quantity(question)
        q_enc = self.encode(question).tokens
        q_tokens = q_enc.astype(np.float32)
        scored = []
        for b_index, block in enumerate(blocks):
            enc = self.encode(block.text)
            info = self._split(block.text, enc)
            sem = self._similarities.get(question, block.text, q_enc, enc.tokens)
            if sem is None:
                sem = sentence_similarities(q_tokens, enc.tokens, info.token_ranges)
                self._similarities.put(question, block.text, q_enc, enc.tokens, sem)
            for k, (s, e) in enumerate(info.spans):
                cov = len(q_stems & info.stems[k]) / len(q_stems) if q_stems else 0.0
                score = 0.5 * cov + 0.5 * float(sem[k])
                if wants_number and not info.has_number[k]:
                    score *= NO_QUANTITY_FACTOR
                scored.append(
                    {
                        "label": block.label,
                        "block": b_index,
                        "start": s,
                        "end": e,
                        "sentence": block.text[s:e],
                        "coverage": round(cov, 6),
                        "similarity": round(float(sem[k]), 6),
                        "score": round(score, 6),
                    }
                )
        scored.sort(key=lambda x: (-x["score"], x["block"], x["start"]))
        return scored

    @staticmethod
    def runner_up(scored: list[dict]) -> dict | None:
        """The best sentence that is neither the best one repeated nor a fragment of it (or it of one)."""
        if not scored:
            return None
        best = " ".join(scored[0]["sentence"].split())
        for item in scored[1:]:
            text = " ".join(item["sentence"].split())
            if text not in best and best not in text:
                return item
        return None

    @classmethod
    def margin(cls, scored: list[dict]) -> float:
        """How far the best sentence leads its runner-up (its own score when it has none)."""
        if not scored:
            return 0.0
        second = cls.runner_up(scored)
        return scored[0]["score"] - (second["score"] if second else 0.0)

    @staticmethod
    def abstain_reason(scored: list[dict], margin: float, threshold: float, min_margin: float) -> str | None:
        """Why the reader abstains on this scoring ("below-threshold", "topical"), or None: it answers."""
        if not scored or scored[0]["score"] < threshold:
            return "below-threshold"
        if margin < min_margin:
            return "topical"
        return None

    def generate(self, question: str, blocks: list[ContextBlock]) -> GenerationResult:
        prompt_tokens = self.count_tokens(self.template.prompt(question, blocks))
        kind = question_kind(question)
        scored = [] if kind is not None else self.score_sentences(question, blocks)
        sufficient = is_oracle(blocks)
        chosen, reason = answer_plan(
            question, scored, self.abstain_threshold, self.abstain_margin, sufficient=sufficient
        )
        detail = {"top": scored[:3], "margin": round(lead(scored, chosen or scored[:1]), 6)}
        if sufficient:
            detail["context"] = "sufficient"
        if reason is None:
            answer = answer_text(question, chosen)
            labels = list(dict.fromkeys(c["label"] for c in chosen))
            if len(chosen) > 1:
                detail["also"] = chosen[1:]
            return GenerationResult(
                answer, labels, False, prompt_tokens, self.count_tokens(answer), detail=detail
            )
        detail["abstained_because"] = reason
        return GenerationResult(
            ABSTAIN_TEXT, [], True, prompt_tokens, self.count_tokens(ABSTAIN_TEXT), detail=detail
        )


ORACLE_UNIT = "oracle:"


def oracle_blocks(texts: list[tuple[str, str, str]]) -> list[ContextBlock]:
    """Blocks for an oracle prompt: (span id, doc id, text) in set order."""
    return [
        ContextBlock(str(i + 1), f"{ORACLE_UNIT}{sid}", doc, text) for i, (sid, doc, text) in enumerate(texts)
    ]


def is_oracle(blocks: list[ContextBlock]) -> bool:
    """Whether the context is an oracle prompt (every block a gold span): sufficient by construction."""
    return bool(blocks) and all(b.unit_id.startswith(ORACLE_UNIT) for b in blocks)
