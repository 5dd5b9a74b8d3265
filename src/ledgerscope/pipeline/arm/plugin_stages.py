"""User stages made to fit the cascade: a function of a request dataclass, or a class implementing
the stage's protocol, from ``kind = "python"`` (``callable``) or a plugin's entry point.

The shapes are documented in :mod:`ledgerscope.pipeline.contracts.stages`. A function's answer is checked
here (one score per
candidate, indices in range, no unit twice); a wrong one is a bug in the plugin and stops the
sweep with a message naming the callable. A :class:`ledgerscope.pipeline.contracts.stages.StageFailure`
raised by a plugin is an
infrastructure failure of the records it touches, as for the built-in stages.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ledgerscope.common.errors import LedgerscopeError
from ledgerscope.pipeline.arm.plugins import PluginStage, load_target
from ledgerscope.pipeline.contracts.prompt import (
    DEFAULT_TEMPLATE,
    ContextBlock,
    GenerationResult,
    PromptTemplate,
    parse_citations,
    template_from_config,
)
from ledgerscope.pipeline.contracts.stages import (
    GenerationRequest,
    Ranked,
    RerankRequest,
    RetrievalRequest,
    ScoredUnit,
    StageFailure,
)
from ledgerscope.pipeline.contracts.units import Unit
from ledgerscope.rules.judge import is_abstention

if TYPE_CHECKING:
    from ledgerscope.pipeline.arm.config import ArmConfig

#: the methods a class-form plugin must have, per seam
PROTOCOL_METHODS = {
    "chunker": ("chunk",),
    "retriever": ("build_index",),
    "reranker": ("score_candidates",),
    "generator": ("generate",),
}
#: how a function-form plugin becomes a stage, per seam (the chunker's lives with the external chunkers)
FUNCTION_ADAPTERS: dict[str, Callable[..., object] | None] = {"chunker": None}


class PluginError(LedgerscopeError, RuntimeError):
    """A plugin stage answered in a shape the cascade cannot use (a bug in the plugin)."""


def _origin(target: str, kind: str) -> dict:
    return {"kind": kind, "callable": target}


def instantiate(seam: str, target: str, options: dict, origin: dict) -> tuple[str, object]:
    """("function", fn) or ("object", instance) for the named target."""
    obj = load_target(target)
    if inspect.isclass(obj):
        try:
            instance = obj(**options)
        except TypeError as exc:
            raise PluginError(f"{target}: cannot be built with options {sorted(options)}: {exc}") from None
        missing = [m for m in PROTOCOL_METHODS[seam] if not callable(getattr(instance, m, None))]
        if missing:
            raise PluginError(
                f"{target}: a {seam} class needs the method(s) {', '.join(missing)} "
                "(see ledgerscope.pipeline.contracts.stages)"
            )
        return "object", instance
    return "function", obj


def _describe(instance: object, origin: dict, options: dict) -> dict:
    own = getattr(instance, "describe", None)
    base = {**origin, "options": options}
    if callable(own):
        base["reported"] = own()
    return base


# --- retriever ------------------------------------------------------------------------------


@dataclass(frozen=True)
class FunctionRetriever:
    fn: Callable[[RetrievalRequest], Any]
    top_n: int
    options: dict
    origin: dict

    def build_index(self, units: Sequence[Unit]) -> FunctionIndex:
        return FunctionIndex(self, list(units))

    def describe(self) -> dict:
        return {**self.origin, "options": self.options, "top_n": self.top_n}


@dataclass(frozen=True)
class FunctionIndex:
    retriever: FunctionRetriever
    units: list[Unit]

    def search(self, questions: Sequence[str]) -> list[Ranked]:
        out = []
        for q in questions:
            r = self.retriever
            try:
                hits = r.fn(RetrievalRequest(q, self.units, r.top_n, dict(r.options)))
            except StageFailure as exc:
                out.append(Ranked([], [], exc.describe()))
                continue
            out.append(_ranked(hits, len(self.units), r.top_n, r.origin["callable"]))
        return out


def _ranked(hits: Any, n_units: int, top_n: int, name: str) -> Ranked:
    indices: list[int] = []
    scores: list[float] = []
    for pos, hit in enumerate(hits or []):
        index, score = (hit.index, hit.score) if isinstance(hit, ScoredUnit) else tuple(hit)
        if not isinstance(index, int | np.integer) or not 0 <= int(index) < n_units:
            raise PluginError(f"{name}: hit {pos} names unit {index!r}, not a position in 0..{n_units - 1}")
        if int(index) in indices:
            raise PluginError(f"{name}: hit {pos} names unit {index} a second time")
        if not isinstance(score, int | float | np.floating) or not math.isfinite(float(score)):
            raise PluginError(f"{name}: hit {pos} has score {score!r}, not a finite number")
        indices.append(int(index))
        scores.append(float(score))
    return Ranked(indices[:top_n], scores[:top_n])


def python_retriever(cfg: ArmConfig, encoder: object, counter: object, table: dict, top_n: int) -> object:
    return build_plugin("retriever", table["callable"], table.get("options", {}), "python", top_n=top_n)


# --- reranker -------------------------------------------------------------------------------


@dataclass(frozen=True)
class FunctionReranker:
    fn: Callable[[RerankRequest], Any]
    options: dict
    origin: dict

    def score_candidates(
        self, question: str, candidates: Sequence[Unit], fused_scores: Sequence[float]
    ) -> np.ndarray:
        request = RerankRequest(
            question,
            [u.text for u in candidates],
            list(candidates),
            [float(s) for s in fused_scores],
            dict(self.options),
        )
        return checked_scores(self.fn(request), len(candidates), self.origin["callable"])

    def describe(self) -> dict:
        return {**self.origin, "options": self.options}


def checked_scores(scores: Any, n: int, name: str) -> np.ndarray:
    try:
        out = np.asarray(list(scores), dtype=np.float64)
    except (TypeError, ValueError):
        raise PluginError(f"{name}: a reranker returns one number per candidate") from None
    if out.shape != (n,):
        raise PluginError(f"{name}: {out.size} score(s) for {n} candidate(s)")
    if not np.isfinite(out).all():
        raise PluginError(f"{name}: a score is NaN or infinite")
    return out


@dataclass(frozen=True)
class ObjectReranker:
    """A class-form reranker with its describe() filled in and its scores checked."""

    instance: Any
    options: dict
    origin: dict

    def score_candidates(self, question, candidates, fused_scores) -> np.ndarray:
        scores = self.instance.score_candidates(question, candidates, fused_scores)
        return checked_scores(scores, len(candidates), self.origin["callable"])

    def describe(self) -> dict:
        return _describe(self.instance, self.origin, self.options)


def python_reranker(cfg: ArmConfig, encoder: object, counter: object) -> object:
    return build_plugin("reranker", cfg.rerank["callable"], cfg.rerank.get("options", {}), "python")


# --- generator ------------------------------------------------------------------------------


@dataclass
class PluginGenerator:
    """A function or class generator: requests rendered by the arm's template, the budget counted by
    the arm's tokenizer (unless a class brings its own ``count_tokens``), failures recorded."""

    call: Callable[[str, list[ContextBlock]], Any]
    counter: Callable[[str], int]
    template: PromptTemplate
    origin: dict
    options: dict = field(default_factory=dict)
    instance: Any = None

    def count_tokens(self, text: str) -> int:
        return self.counter(text)

    def generate(self, question: str, blocks: list[ContextBlock]) -> GenerationResult:
        try:
            out = self.call(question, blocks)
        except StageFailure as exc:
            return GenerationResult(
                "",
                error=str(exc),
                attempts=max(1, len(exc.attempts)),
                detail={"infrastructure": exc.describe()},
            )
        if isinstance(out, str):
            out = GenerationResult(out.strip(), parse_citations(out), is_abstention(out))
        if not isinstance(out, GenerationResult):
            raise PluginError(
                f"{self.origin['callable']}: a generator returns a GenerationResult or the "
                f"answer text, not {type(out).__name__}"
            )
        if out.prompt_tokens is None and out.error is None:
            out.prompt_tokens = self.count_tokens(self.template.prompt(question, blocks))
        return out

    def describe(self) -> dict:
        out = {**self.origin, "options": self.options, "budget_tokenizer": "the arm's tokenizer"}
        if self.instance is not None:
            out = _describe(self.instance, self.origin, self.options)
            if callable(getattr(self.instance, "count_tokens", None)):
                out["budget_tokenizer"] = "the plugin's count_tokens"
        if self.template != DEFAULT_TEMPLATE:
            out["prompt"] = self.template.describe()
        return out


def _generator(
    kind: str,
    instance: object,
    counter: Callable[[str], int],
    template: PromptTemplate,
    origin: dict,
    options: dict,
) -> PluginGenerator:
    if kind == "function":
        fn = instance

        def call(question: str, blocks: list[ContextBlock]) -> Any:
            return fn(
                GenerationRequest(
                    question,
                    list(blocks),
                    template.system,
                    template.user(question, blocks),
                    template.prompt(question, blocks),
                    dict(options),
                )
            )

        return PluginGenerator(call, counter, template, origin, options)
    own_count = getattr(instance, "count_tokens", None)
    return PluginGenerator(
        instance.generate, own_count if callable(own_count) else counter, template, origin, options, instance
    )


def python_generator(cfg: ArmConfig, encoder: object, counter: Any) -> object:
    g = cfg.generator
    return build_plugin(
        "generator",
        g["callable"],
        g.get("options", {}),
        "python",
        counter=counter.count,
        template=template_from_config(g),
    )


# --- any seam -------------------------------------------------------------------------------


def build_plugin(
    seam: str,
    target: str,
    options: dict,
    kind: str,
    *,
    top_n: int = 50,
    counter: Callable[[str], int] | None = None,
    template: PromptTemplate = DEFAULT_TEMPLATE,
    plugin: PluginStage | None = None,
) -> object:
    """The stage a target names, in the shape the cascade calls."""
    origin = _origin(target, kind)
    if plugin is not None:
        origin["plugin"] = {"distribution": plugin.distribution, "version": plugin.version}
    form, obj = instantiate(seam, target, dict(options), origin)
    if seam == "generator":
        return _generator(form, obj, counter or (lambda text: len(text.split())), template, origin, options)
    if form == "object":
        if seam == "reranker":
            return ObjectReranker(obj, options, origin)
        return obj
    if seam == "retriever":
        return FunctionRetriever(obj, top_n, options, origin)
    if seam == "reranker":
        return FunctionReranker(obj, options, origin)
    adapter = FUNCTION_ADAPTERS.get(seam)
    if adapter is None:
        raise PluginError(
            f"{target}: a {seam} plugin must be a class implementing the {seam} protocol "
            "(ledgerscope.pipeline.contracts.stages)"
        )
    return adapter(obj, options, origin)


def entry_point_factory(stage: PluginStage) -> Callable[..., object]:
    """A runtime factory for a plugin kind (its table's ``options`` go to the stage)."""

    def factory(
        cfg: ArmConfig, encoder: object, counter: Any, table: dict | None = None, top_n: int = 50
    ) -> object:
        section = (
            table
            if table is not None
            else {"chunker": cfg.chunker, "reranker": cfg.rerank, "generator": cfg.generator}[stage.seam]
        )
        return build_plugin(
            stage.seam,
            stage.target,
            section.get("options", {}),
            stage.kind,
            top_n=top_n,
            counter=counter.count,
            template=template_from_config(cfg.generator),
            plugin=stage,
        )

    return factory
