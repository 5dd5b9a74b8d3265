"""The prompt contract shared by every generator: labelled context blocks and the result.

Selection packs :class:`ContextBlock` objects; the literal text the generator
sees is :func:`render_context` of them (citation labels and separators
included), so the budget counts exactly what the model reads.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

INSTRUCTIONS = (
    "Answer the question using only the numbered sources. Cite every source you use "
    "with its label, like [1]. If the sources do not contain the answer, reply exactly: "
    "I cannot answer from the provided sources."
)
ABSTAIN_TEXT = "I cannot answer from the provided sources."
BLOCK_SEPARATOR = "\n\n"


@dataclass(frozen=True)
class ContextBlock:
    """One packed unit as the generator sees it."""

    label: str  # citation label, e.g. "1"
    unit_id: str
    doc_id: str
    text: str

    def render(self) -> str:
        return f"[{self.label}] ({self.doc_id})\n{self.text}"


def render_context(blocks: list[ContextBlock]) -> str:
    return BLOCK_SEPARATOR.join(b.render() for b in blocks)


def render_prompt(question: str, blocks: list[ContextBlock]) -> str:
    """The whole user prompt: instructions, sources, question."""
    return f"{INSTRUCTIONS}\n\nSources:\n{render_context(blocks)}\n\nQuestion: {question}\nAnswer:"


def prompt_overhead(question: str) -> str:
    """The fixed part of the prompt (instructions + question), reserved before evidence."""
    return render_prompt(question, [])


_CITATION = re.compile(r"\[(\d{1,3})\]")


def parse_citations(answer: str) -> list[str]:
    """Citation labels in order of first appearance (``[2] ... [1]`` -> ["2", "1"])."""
    return list(dict.fromkeys(_CITATION.findall(answer or "")))


@dataclass
class GenerationResult:
    """What a generator returned. ``error`` set means an infrastructure failure."""

    answer: str
    citations: list[str] = field(default_factory=list)  # labels
    abstained: bool = False
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    error: str | None = None
    attempts: int = 1
    detail: dict = field(default_factory=dict)
