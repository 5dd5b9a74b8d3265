"""Stages registered by entry point (see pyproject.toml): small, deterministic, model-free.

* ``FixedCodepoints`` (chunker, a class implementing ledgerscope's Chunker protocol): units of
  ``size`` code points; phase offset ``p`` puts the first cut at code point ``p`` (at ``size``
  when ``p = 0``), later cuts every ``size``.
* ``first_sentence`` (generator, a function of a GenerationRequest): the first block's first
  sentence, cited; abstains with no blocks.
* ``shortest_first`` (reranker, a function of a RerankRequest): shorter candidates score higher.
* ``word_overlap`` (retriever, a function of a RetrievalRequest): shared lowercase words.
"""

from __future__ import annotations

import bisect
import itertools
import re

from ledgerscope.pipeline.contracts.prompt import ABSTAIN_TEXT, GenerationResult
from ledgerscope.pipeline.contracts.stages import ScoredUnit
from ledgerscope.pipeline.contracts.units import Boundaries, Unit, unit_id_for


class FixedCodepoints:
    def __init__(self, size: int = 60):
        self.size = int(size)

    def describe(self) -> dict:
        return {"name": "fixed code points", "size": self.size}

    def chunk(self, source, offsets, phase_offset):
        text, n = source.text, len(source.text)
        first = phase_offset if 0 < phase_offset < self.size else self.size
        cuts = list(range(first, n, self.size))
        bounds = [0, *cuts, n]
        starts = [a for a, _ in offsets]
        units = []
        for ordinal, (a, b) in enumerate((a, b) for a, b in itertools.pairwise(bounds) if b > a):
            t0, t1 = bisect.bisect_left(starts, a), bisect.bisect_left(starts, b)
            units.append(
                Unit(
                    unit_id_for(source.doc_id, a, b),
                    source.doc_id,
                    source.version,
                    ordinal,
                    a,
                    b,
                    text[a:b],
                    t0,
                    t1,
                    a,
                    b,
                    tuple(source.access),
                )
            )
        cut_tokens = tuple(bisect.bisect_left(starts, c) for c in cuts)
        return units, Boundaries(source.doc_id, cut_tokens, tuple(cuts), len(offsets))


def first_sentence(request):
    if not request.blocks:
        return GenerationResult(ABSTAIN_TEXT, [], True)
    block = request.blocks[0]
    sentence = re.split(r"(?<=[.!?])\s", block.text.strip(), maxsplit=1)[0]
    return GenerationResult(
        f"{sentence} [{block.label}]",
        [block.label],
        False,
        completion_tokens=len(sentence.split()),
        detail={"plugin": "first-sentence", "prompt_chars": len(request.prompt)},
    )


def shortest_first(request):
    return [-float(len(d)) for d in request.documents]


def _words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.casefold()))


def word_overlap(request):
    q = _words(request.question)
    scored = [(len(q & _words(u.text)), i) for i, u in enumerate(request.units)]
    scored = [(s, i) for s, i in scored if s > 0]
    scored.sort(key=lambda x: (-x[0], x[1]))
    return [ScoredUnit(i, float(s)) for s, i in scored[: request.top_n]]
