"""The prompt contract shared by every generator: labelled context blocks, the template that
renders them, and the result.

Selection packs :class:`ContextBlock` objects; the literal text the generator sees is the arm's
:class:`PromptTemplate` applied to them (citation labels and separators included), so the
budget counts exactly what the model reads. The default template is the built-in prompt
(:func:`render_prompt`); ``[generator] system``, ``context_format`` and ``question_format``
replace its parts.
"""

from __future__ import annotations

import re
import string
from collections.abc import Mapping
from dataclasses import dataclass, field

from ledgerscope.rules.answer_match import ABSTAIN_TEXT

INSTRUCTIONS = (
    "Answer the question using only the numbered sources. Cite every source you use "
    "with its label, like [1]. If the sources do not contain the answer, reply exactly: " + ABSTAIN_TEXT
)
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


DEFAULT_CONTEXT_FORMAT = "[{label}] ({doc_id})\n{text}"
DEFAULT_QUESTION_FORMAT = "Sources:\n{context}\n\nQuestion: {question}\nAnswer:"
#: the fields each template may name (plain names only: no attribute or index access)
CONTEXT_FIELDS = ("label", "doc_id", "unit_id", "text")
QUESTION_FIELDS = ("context", "question")


def template_problems(template: str, allowed: tuple[str, ...]) -> str | None:
    """Why ``template`` is not a usable format string over ``allowed`` fields, or None."""
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as exc:
        return f"not a format string ({exc}); write a literal brace as {{{{ or }}}}"
    for _, name, spec, conversion in parsed:
        if name is None:
            continue
        if name not in allowed or spec or conversion:
            shown = "{" + name + ("!" + conversion if conversion else "") + (":" + spec if spec else "") + "}"
            return f"{shown} is not one of " + ", ".join("{" + a + "}" for a in allowed)
    return None


@dataclass(frozen=True)
class PromptTemplate:
    """How packed blocks and the question become the prompt: the budget counts its rendering.

    ``prompt`` (what ``prompt_tokens`` counts) is ``system``, a blank line, then the user turn;
    with ``system_message`` (the arm set ``[generator] system``) a chat endpoint receives the
    system text as its own message, otherwise one user message holding the whole prompt.
    """

    system: str = INSTRUCTIONS
    context_format: str = DEFAULT_CONTEXT_FORMAT
    question_format: str = DEFAULT_QUESTION_FORMAT
    system_message: bool = False

    def block(self, b: ContextBlock) -> str:
        return self.context_format.format(label=b.label, doc_id=b.doc_id, unit_id=b.unit_id, text=b.text)

    def context(self, blocks: list[ContextBlock]) -> str:
        return BLOCK_SEPARATOR.join(self.block(b) for b in blocks)

    def user(self, question: str, blocks: list[ContextBlock]) -> str:
        return self.question_format.format(context=self.context(blocks), question=question)

    def prompt(self, question: str, blocks: list[ContextBlock]) -> str:
        user = self.user(question, blocks)
        return f"{self.system}\n\n{user}" if self.system else user

    def messages(self, question: str, blocks: list[ContextBlock]) -> list[dict[str, str]]:
        """Chat messages: the system text apart when configured, else one user turn (the default)."""
        if self.system_message and self.system:
            return [
                {"role": "system", "content": self.system},
                {"role": "user", "content": self.user(question, blocks)},
            ]
        return [{"role": "user", "content": self.prompt(question, blocks)}]

    def describe(self) -> dict:
        return {
            "system": self.system,
            "context_format": self.context_format,
            "question_format": self.question_format,
            "system_message": self.system_message,
        }


DEFAULT_TEMPLATE = PromptTemplate()


def template_from_config(generator: Mapping) -> PromptTemplate:
    """The arm's template: each of ``system``, ``context_format``, ``question_format`` the arm sets
    replaces the built-in part; an arm that sets none gets exactly the built-in prompt."""
    return PromptTemplate(
        system=str(generator.get("system", INSTRUCTIONS)),
        context_format=str(generator.get("context_format", DEFAULT_CONTEXT_FORMAT)),
        question_format=str(generator.get("question_format", DEFAULT_QUESTION_FORMAT)),
        system_message="system" in generator,
    )


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
