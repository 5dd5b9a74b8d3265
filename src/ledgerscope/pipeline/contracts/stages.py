"""The cascade's seams: what each stage takes and what it returns, as plain dataclasses.

Modelled on Haystack's components: a stage declares its inputs and outputs, and the
orchestration (:mod:`ledgerscope.pipeline.run.cascade`) only wires outputs to inputs. Four seams hold
replaceable
components, chosen per arm by configuration kind (:mod:`ledgerscope.pipeline.run.runtime`); each is a
Protocol, so any object with these methods fits:

    Chunker    one source, its tokenizer offsets, a phase offset -> units and the cuts made
    Retriever  a phase's units -> a RetrieverIndex;  questions -> one Ranked list per question
    Reranker   a question and candidate units (with their fused scores) -> one score per unit
    Generator  a question and labelled context blocks -> GenerationResult (answer text,
               abstention, cited block labels), plus the token count the budget is measured in

Stages from outside ledgerscope (``kind = "python"`` with ``callable``, or a plugin's entry point,
:mod:`ledgerscope.pipeline.arm.plugins`) come in one of two shapes. A *class* is instantiated once per arm
with the
table's ``options`` and implements the protocol above (``describe`` and ``count_tokens`` may be
left out). A *function* is called with one request dataclass and returns plain data:

    retriever  RetrievalRequest  -> list[ScoredUnit] (or (index, score) pairs), best first
    reranker   RerankRequest     -> one float per candidate, higher is better
    generator  GenerationRequest -> GenerationResult (answer text, abstained, cited labels),
                                    or the answer text alone (citations and abstention parsed)

Any stage, built in or not, that cannot do its work for reasons outside the pipeline (a server
down, a timeout, an answer of the wrong shape) raises :class:`StageFailure`: the records it
affects are recorded as ``infrastructure-failure`` with the stage and the message, never filled
with a guess. Any other exception is a bug and stops the sweep.

The rest of this module names the outputs of the fixed stages between them (union, fusion,
rerank order, selection, the two packed views, generation, verdicts) and the support flags
computed over them, so that the ledger rows are assembled from one typed trace per question
(:mod:`ledgerscope.pipeline.run.record`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np

from ledgerscope.inputs.fixtures import Fixture
from ledgerscope.inputs.sources import Source
from ledgerscope.pipeline.contracts.prompt import ContextBlock, GenerationResult
from ledgerscope.pipeline.contracts.units import Boundaries, Phase, Unit

__all__ = [
    "Chunker",
    "ContextBlock",
    "Embedder",
    "Fused",
    "Generated",
    "GenerationRequest",
    "GenerationResult",
    "Generator",
    "Merged",
    "PhaseIndex",
    "QuestionTrace",
    "Ranked",
    "RerankRequest",
    "Reranked",
    "Reranker",
    "RetrievalRequest",
    "Retrieved",
    "Retriever",
    "RetrieverIndex",
    "ScoredUnit",
    "Selected",
    "StageFailure",
    "Support",
    "Verdicts",
    "Views",
]


# --- plain data crossing the replaceable seams ----------------------------------------------


class StageFailure(Exception):
    """A stage could not do its work for a reason outside the pipeline (an infrastructure failure).

    ``stage`` names it in the record (``embedding``, ``retrieval``, ``rerank``, ``generation``);
    ``attempts`` holds every failed attempt's message, oldest first.
    """

    def __init__(self, stage: str, message: str, attempts: Sequence[str] = ()):
        super().__init__(f"{stage}: {message}")
        self.stage, self.message, self.attempts = stage, message, list(attempts)

    def describe(self) -> dict:
        return {"stage": self.stage, "error": self.message, "attempts": self.attempts}


@dataclass
class Packed:
    """What selection hands the generator: the blocks in prompt order, their units, the tokens they
    cost, and what was left out (over budget, withheld by access labels)."""

    blocks: list[ContextBlock]
    units: list[Unit]
    evidence_tokens: int
    overflow: list[dict] = field(default_factory=list)
    dropped_access: list[dict] = field(default_factory=list)
    considered: list[Unit] = field(default_factory=list)


@dataclass(frozen=True)
class Ranked:
    """One retriever's answer to one question, best first.

    ``indices`` are positions in the unit list the index was built over (so equal-scored
    units keep a deterministic order); ``scores`` align with them, higher is better.
    ``failure`` is set (and the lists empty) when the retriever could not answer
    (:class:`StageFailure`).
    """

    indices: list[int]
    scores: list[float]
    failure: dict | None = None

    def pairs(self) -> list[tuple[int, float]]:
        return list(zip(self.indices, self.scores, strict=True))

    def __len__(self) -> int:
        return len(self.indices)


@dataclass(frozen=True)
class ScoredUnit:
    """A plugin retriever's hit: ``index`` is the unit's position in ``RetrievalRequest.units``."""

    index: int
    score: float


@dataclass(frozen=True)
class RetrievalRequest:
    """What a plugin retriever function gets, once per question: every unit of the phase."""

    question: str
    units: Sequence[Unit]
    top_n: int
    options: dict = field(default_factory=dict)


@dataclass(frozen=True)
class RerankRequest:
    """What a plugin reranker function gets: the fused head, best first, with its fused scores."""

    question: str
    documents: list[str]
    candidates: Sequence[Unit]
    fused_scores: list[float]
    options: dict = field(default_factory=dict)


@dataclass(frozen=True)
class GenerationRequest:
    """What a plugin generator function gets: the packed blocks and the prompt rendered from them
    by the arm's template (``prompt`` is what the budget and ``prompt_tokens`` count)."""

    question: str
    blocks: list[ContextBlock]
    system: str
    user: str
    prompt: str
    options: dict = field(default_factory=dict)


@runtime_checkable
class Chunker(Protocol):
    """Cuts one source into units at one phase (code-point intervals with their token ranges)."""

    def chunk(
        self, source: Source, offsets: Sequence[tuple[int, int]], phase_offset: int
    ) -> tuple[list[Unit], Boundaries]: ...


@runtime_checkable
class Embedder(Protocol):
    """Text to L2-normalised vectors, one row per text (the dense retrievers' model)."""

    def vectors(self, texts: list[str]) -> np.ndarray: ...


@runtime_checkable
class RetrieverIndex(Protocol):
    """A retriever's index over one phase's units."""

    def search(self, questions: Sequence[str]) -> list[Ranked]: ...


@runtime_checkable
class Retriever(Protocol):
    """Builds a fresh index for every phase (the units move with the boundaries)."""

    def build_index(self, units: Sequence[Unit]) -> RetrieverIndex: ...


@runtime_checkable
class Reranker(Protocol):
    """Scores a candidate list against the question; the cascade sorts by these scores."""

    def score_candidates(
        self, question: str, candidates: Sequence[Unit], fused_scores: Sequence[float]
    ) -> Sequence[float]: ...

    def describe(self) -> dict: ...


@runtime_checkable
class Generator(Protocol):
    """Answers from labelled blocks; ``count_tokens`` is the tokenizer the evidence budget uses."""

    def generate(self, question: str, blocks: list[ContextBlock]) -> GenerationResult: ...

    def count_tokens(self, text: str) -> int: ...

    def describe(self) -> dict: ...


@dataclass(frozen=True)
class FailedIndex:
    """A retriever's index that could not be built (:class:`StageFailure`): every search answers
    with no units and the failure, so each record of the phase is an infrastructure failure."""

    failure: dict

    def search(self, questions: Sequence[str]) -> list[Ranked]:
        return [Ranked([], [], self.failure) for _ in questions]


def build_index_or_failure(retriever: Retriever, units: Sequence[Unit]) -> RetrieverIndex:
    try:
        return retriever.build_index(units)
    except StageFailure as exc:
        return FailedIndex(exc.describe())


def generate_or_failure(generator: Generator, question: str, blocks: list[ContextBlock]) -> GenerationResult:
    """The generator's result; a :class:`StageFailure` it raises becomes the result's error."""
    try:
        return generator.generate(question, blocks)
    except StageFailure as exc:
        return failed_generation(exc.describe())


def failed_generation(failure: dict) -> GenerationResult:
    """The result of a record that an infrastructure failure stopped (the generator is not asked)."""
    return GenerationResult(
        "",
        error=f"{failure['stage']} failed: {failure['error']}",
        attempts=len(failure.get("attempts") or []),
        detail={"infrastructure": failure},
    )


# --- what the fixed stages hand on ----------------------------------------------------------


@dataclass
class PhaseIndex:
    """One arm at one phase, chunked and indexed: the input every question starts from."""

    arm: str
    phase: Phase
    units: list[Unit]
    boundaries: list[Boundaries]
    by_doc: dict[str, list[Unit]]
    bm25: RetrieverIndex
    dense_exact: RetrieverIndex
    dense_ann: RetrieverIndex
    config_digest: str = ""
    _all_intervals: dict | None = None

    @property
    def all_intervals(self) -> dict:
        """Every unit's interval grouped by document, computed once per phase."""
        if self._all_intervals is None:
            from ledgerscope.rules.support import intervals_by_doc

            self._all_intervals = intervals_by_doc(self.units)
        return self._all_intervals


@dataclass(frozen=True)
class Retrieved:
    """The three retrievers' lists for one question (all recorded; bm25 + ANN are production)."""

    bm25: Ranked
    dense_exact: Ranked
    dense_ann: Ranked

    @property
    def failure(self) -> dict | None:
        """The first retriever's infrastructure failure for this question, if any."""
        return next((r.failure for r in (self.bm25, self.dense_exact, self.dense_ann) if r.failure), None)


@dataclass(frozen=True)
class Merged:
    """Union of the production lists, one unit per source interval, with who found it."""

    units: list[Unit]
    lineage: list[list[str]]


@dataclass(frozen=True)
class Fused:
    """The whole fused list (recorded) and its head, the reranker's input."""

    ranked: list[tuple[int, float]]
    head: list[Unit]
    head_scores: list[float]


@dataclass(frozen=True)
class Reranked:
    """The head in reranked order (recorded whole) and the part kept for selection."""

    units: list[Unit]
    scores: list[float | None]
    kept: list[Unit]
    depth: int
    failure: dict | None = None


@dataclass(frozen=True)
class Selected:
    """Visible reranked units, expanded with neighbours when configured; what expansion dropped."""

    units: list[Unit]
    dropped: list[dict] = field(default_factory=list)


@dataclass(frozen=True)
class Views:
    """The primary packing (by the configured mode) and the secondary (the other mode)."""

    primary: Packed
    secondary: Packed


@dataclass(frozen=True)
class Generated:
    """The generator's result with its citation labels resolved to packed units."""

    result: GenerationResult
    citations: list[dict]
    cited: list[Unit]


@dataclass(frozen=True)
class Verdicts:
    answer: str
    answer_reason: str
    citation: str
    citation_reason: str


@dataclass(frozen=True)
class Support:
    """Per-stage support flags (None for unanswerable questions) and the packed set's coverage."""

    flags: dict[str, bool | None]
    covered_set: int | None
    single_unit_complete: bool | None
    gold_status: str


@dataclass(frozen=True)
class QuestionTrace:
    """Everything one question produced on its way down the cascade."""

    fixture: Fixture
    retrieved: Retrieved
    merged: Merged
    fused: Fused
    reranked: Reranked
    selected: Selected
    views: Views
    generated: Generated
    verdicts: Verdicts
