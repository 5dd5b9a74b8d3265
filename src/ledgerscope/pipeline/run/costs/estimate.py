"""Before a sweep: what it will send and cost (``sweep --estimate``); while it runs: its caps.

The plan replays the sweep's order without calling any endpoint: each pending partition's units
come from the arm's own chunker (cheap next to encoding), and a text counts as *to encode* the
first time an embedding model needs it and neither its memory nor the persistent cache holds it
(the sweep never encodes a text twice: a dropped text comes back from the cache, or is kept until
its last use). Requests follow the stages' batching: an endpoint embedder sends
``ceil(new texts / batch_size)`` requests per call (a phase's units, then the questions), one probe
per server; a rerank endpoint one request per question (plus a probe), a generator endpoint one per
question per phase and one per oracle question. Tokens are ledgerscope's tokenizer's (the billed
figure is the server's ``usage``, known only after); a generator's prompt is taken at the evidence
budget plus the question and completion at ``max_tokens``: an upper bound. The local reader of an
endpoint-embedding arm encodes packed blocks that only retrieval decides: not predicted, said so.

Caps (``--max-cost``, ``--max-requests``) are checked before each partition: what this run has
sent so far (measured) plus the partition's plan must stay within them, else the sweep stops
cleanly there; rerunning the command resumes from the first partition not written.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ledgerscope.ledger.write import is_done
from ledgerscope.ledger.write import oracle_path as _oracle_path
from ledgerscope.pipeline.arm.config import ArmConfig
from ledgerscope.pipeline.run.costs.prices import Prices
from ledgerscope.pipeline.run.scope import plan_scope

#: tokens a prompt template adds around the evidence and the question (an allowance, not a count)
PROMPT_ALLOWANCE = 40


@dataclass
class Usage:
    """What one step of the sweep sends (or, measured, sent)."""

    texts: int = 0
    emb_tokens: int = 0
    emb_requests: int = 0
    #: a local model's forward passes and the token positions they run, short batches' copied rows
    #: included (the batching rule of :meth:`Encoder.batches`): what its time follows
    emb_batches: int = 0
    emb_forward_tokens: int = 0
    rerank_requests: int = 0
    rerank_pairs: int = 0
    gen_requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def add(self, other: Usage) -> None:
        for key, value in asdict(other).items():
            setattr(self, key, getattr(self, key) + value)

    @property
    def requests(self) -> int:
        return self.emb_requests + self.rerank_requests + self.gen_requests


@dataclass
class Models:
    """The priced model of each stage of an arm (None: not a paid stage)."""

    embedding: str | None
    rerank: str | None
    generator: str | None

    @classmethod
    def of(cls, cfg: ArmConfig) -> Models:
        rerank = cfg.rerank.get("kind")
        if rerank == "endpoint":
            rmodel = cfg.rerank.get("model", "")
        elif rerank in ("maxsim", None) and cfg.embedding.get("kind") != "endpoint":
            rmodel = cfg.embedding.get("model")
        else:
            rmodel = None
        gen = cfg.generator.get("model", "") if cfg.generator.get("kind") == "endpoint" else None
        emb = (
            cfg.embedding.get("model", "")
            if cfg.embedding.get("kind") == "endpoint"
            else cfg.embedding.get("model")
        )
        return cls(emb, rmodel, gen)


def cost_of(usage: Usage, models: Models, prices: Prices | None) -> tuple[float | None, list[str]]:
    """Money for ``usage``; None (and the unpriced models named) when a paid model has no price."""
    if prices is None:
        return None, []
    total, missing = 0.0, []
    for kind, model, amount in (
        ("embedding", models.embedding, {"tokens": usage.emb_tokens, "requests": usage.emb_requests}),
        ("rerank", models.rerank, {"requests": usage.rerank_requests, "tokens": 0}),
        (
            "generator",
            models.generator,
            {
                "requests": usage.gen_requests,
                "prompt_tokens": usage.prompt_tokens,
                "completion_tokens": usage.completion_tokens,
            },
        ),
    ):
        if not any(amount.values()):
            continue
        c = prices.cost(kind, model, amount)
        if c is None:
            missing.append(f"{kind} {model!r}")
        else:
            total += c
    return (None if missing else total), missing


@dataclass
class Step:
    arm: str
    phase: str  # a phase label, or "oracle", or "setup" (the endpoint probes)
    usage: Usage
    units: int = 0
    unit_tokens: int = 0
    questions: int = 0


@dataclass
class Plan:
    steps: list[Step] = field(default_factory=list)
    models: dict[str, Models] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def total(self, arm: str | None = None) -> Usage:
        out = Usage()
        for s in self.steps:
            if arm is None or s.arm == arm:
                out.add(s.usage)
        return out

    def cost(self, prices: Prices | None) -> tuple[float | None, list[str]]:
        total: float | None = 0.0
        missing: list[str] = []
        for s in self.steps:
            c, m = cost_of(s.usage, self.models[s.arm], prices)
            missing += [x for x in m if x not in missing]
            total = None if c is None or total is None else total + c
        return (total if prices is not None else None), missing


class _Embeddings:
    """The sweep's embedding models as the plan sees them: which texts each already has."""

    def __init__(self, encoder_factory: Any):
        self.factory = encoder_factory
        self.seen: dict[tuple, set[str]] = {}
        self.local: dict[tuple, Any] = {}
        self.probed: set[tuple] = set()

    def key(self, cfg: ArmConfig) -> tuple:
        from ledgerscope.pipeline.run.runtime import endpoint_key

        emb = cfg.embedding
        if emb.get("kind") == "endpoint":
            return ("endpoint", *endpoint_key(cfg))
        return ("local", emb.get("model"), int(emb.get("batch_size", 64)), emb.get("device") or "cpu")

    def encode(self, cfg: ArmConfig, texts: Sequence[str], count: Any) -> Usage:
        """One ``encode`` call of the sweep: the texts it would send, their tokens and requests."""
        key = self.key(cfg)
        seen = self.seen.setdefault(key, set())
        new = sorted({t for t in texts if t not in seen and not self._cached(key, cfg, t)})
        seen.update(new)
        counts = [count(t) for t in new]
        usage = Usage(texts=len(new), emb_tokens=sum(counts))
        if key[0] == "endpoint":
            usage.emb_requests = math.ceil(len(new) / max(1, int(cfg.embedding.get("batch_size", 64))))
        else:
            usage.emb_batches, usage.emb_forward_tokens = forward_shape(counts, key[2])
        return usage

    def _cached(self, key: tuple, cfg: ArmConfig, text: str) -> bool:
        if key[0] != "local":
            return False
        enc = self.local.get(key)
        if enc is None:
            emb = cfg.embedding
            enc = self.local[key] = (
                self.factory(emb.get("model"), key[2], device=emb["device"])
                if emb.get("device")
                else self.factory(emb.get("model"), key[2])
            )
        has = getattr(enc, "has", None)
        return bool(has(text)) if callable(has) else False


def forward_shape(counts: Sequence[int], batch_size: int) -> tuple[int, int]:
    """Forward passes and token positions a local model runs for texts of these token counts:
    one count per batch, at most ``batch_size`` rows, a short batch padded with copies of its
    rows (:meth:`Encoder.batches`, :func:`min_rows`)."""
    from ledgerscope.pipeline.embedding.encoder import min_rows

    rows: dict[int, int] = {}
    for c in counts:
        rows[c] = rows.get(c, 0) + 1
    batches = positions = 0
    for c, n in rows.items():
        full, rest = divmod(n, batch_size)
        batches += full + (rest > 0)
        positions += full * max(batch_size, min_rows(c)) * c + (max(rest, min_rows(c)) * c if rest else 0)
    return batches, positions


def _counter(cfg: ArmConfig) -> tuple[Any, Any]:
    """The arm's tokenizer: plain counts (endpoint input) and counts with special tokens (a local
    model's forward pass, what its resource record counts)."""
    from ledgerscope.pipeline.run.runtime import chunk_counter

    counter = chunk_counter(cfg)

    def with_specials(text: str) -> int:
        return len(counter.tokenizer.encode(text).ids)

    return counter, (counter.count if cfg.embedding.get("kind") == "endpoint" else with_specials)


def plan_sweep(
    fixtures: Sequence[Any],
    corpus: Any,
    arms: Sequence[ArmConfig],
    out: Path,
    encoder_factory: Any = None,
    repeats: int = 1,
) -> Plan:
    """What the sweep of ``arms`` into ``out`` will send, step by step (no endpoint is called);
    ``repeats``: ``--repeats K``, K generations per record."""
    from ledgerscope.pipeline.embedding.encoder import shared_encoder
    from ledgerscope.pipeline.run.cascade import chunk_phase
    from ledgerscope.pipeline.run.runtime import ArmRuntime, build_chunker

    plan = Plan()
    embeddings = _Embeddings(encoder_factory or shared_encoder)
    questions = [f.question for f in fixtures]
    answerable = sum(1 for f in fixtures if f.sufficient_sets)
    for cfg in arms:
        plan.models[cfg.name] = Models.of(cfg)
        pending = [p for p in cfg.phase_list() if not is_done(out, cfg.name, p.label)]
        oracle_due = not _oracle_path(out, cfg.name).is_file()
        if not pending and not oracle_due:
            continue
        counter, count = _counter(cfg)
        plan.steps.append(Step(cfg.name, "setup", _probes(cfg, embeddings)))
        if oracle_due:
            plan.steps.append(
                Step(
                    cfg.name,
                    "oracle",
                    _oracle_usage(cfg, fixtures, answerable, embeddings, count, counter),
                    questions=answerable,
                )
            )
        rt = ArmRuntime(cfg, None, counter, build_chunker(cfg, None, counter), None, None, None)
        plan.notes.extend(filter(None, [plan_scope(rt, out, fixtures)]))  # an evidence arm's cut
        visible = [s for s in corpus if set(s.access) <= cfg.clearance]
        for phase in pending:
            units, _ = chunk_phase(rt, phase, visible)
            usage = embeddings.encode(cfg, [u.text for u in units], count)
            usage.add(embeddings.encode(cfg, questions, count))
            usage.add(_query_side(cfg, fixtures, counter, repeats))
            plan.steps.append(
                Step(
                    cfg.name,
                    phase.label,
                    usage,
                    len(units),
                    sum(u.token_end - u.token_start for u in units),
                    len(fixtures),
                )
            )
        generator = cfg.generator.get("kind", "extractive")
        if cfg.embedding.get("kind") == "endpoint" and generator == "extractive":
            plan.notes.append(
                f"arm {cfg.name!r}: its local reader encodes the packed blocks retrieval "
                "picks; those texts are not predicted"
            )
    return plan


def _probes(cfg: ArmConfig, embeddings: _Embeddings) -> Usage:
    """The runtime's one-text probes: one per embedding server (shared by arms), one per reranker."""
    usage = Usage()
    key = embeddings.key(cfg)
    if key[0] == "endpoint" and key not in embeddings.probed:
        embeddings.probed.add(key)
        usage.emb_requests += 1
    if cfg.rerank.get("kind") == "endpoint":
        usage.rerank_requests += 1
        usage.rerank_pairs += 1
    return usage


def _oracle_usage(
    cfg: ArmConfig,
    fixtures: Sequence[Any],
    answerable: int,
    embeddings: _Embeddings,
    count: Any,
    counter: Any,
) -> Usage:
    """The oracle run: the extractive reader on the arm's own model encodes the gold quotes and the
    questions first; a generator endpoint answers once per question with a sufficient set."""
    usage = Usage()
    kind = cfg.generator.get("kind", "extractive")
    if kind == "extractive" and cfg.embedding.get("kind") != "endpoint":
        texts = [s.quote for f in fixtures for s in f.spans if s.quote] + [f.question for f in fixtures]
        usage.add(embeddings.encode(cfg, texts, count))
    if kind == "endpoint":
        usage.gen_requests += answerable
        usage.prompt_tokens += sum(
            cfg.budget_tokens + counter.count(f.question) + PROMPT_ALLOWANCE
            for f in fixtures
            if f.sufficient_sets
        )
        usage.completion_tokens += answerable * int(cfg.generator.get("max_tokens", 128))
    return usage


def _query_side(cfg: ArmConfig, fixtures: Sequence[Any], counter: Any, repeats: int = 1) -> Usage:
    """Per question at one phase: a rerank request (up to ``rerank_depth`` pairs) and ``repeats``
    generations."""
    usage = Usage()
    n = len(fixtures)
    if cfg.rerank.get("kind") == "endpoint":
        usage.rerank_requests += n
        usage.rerank_pairs += n * cfg.rerank_depth
    if cfg.generator.get("kind") == "endpoint":
        usage.gen_requests += n * repeats
        usage.prompt_tokens += repeats * sum(
            cfg.budget_tokens + counter.count(f.question) + PROMPT_ALLOWANCE for f in fixtures
        )
        usage.completion_tokens += repeats * n * int(cfg.generator.get("max_tokens", 128))
    return usage


def summary(plan: Plan, prices: Prices | None, seconds: dict | None = None) -> dict[str, Any]:
    """``sweep --estimate --json``: one object (totals first, then per arm and step)."""
    total = plan.total()
    cost, missing = plan.cost(prices)
    out: dict[str, Any] = {
        "texts_to_encode": total.texts,
        "requests": total.requests,
        "tokens": total.emb_tokens + total.prompt_tokens + total.completion_tokens,
        "cost": cost,
        "seconds": (seconds or {}).get("total"),
        "embedding_tokens": total.emb_tokens,
        "embedding_requests": total.emb_requests,
        "rerank_requests": total.rerank_requests,
        "rerank_pairs": total.rerank_pairs,
        "generator_requests": total.gen_requests,
        "prompt_tokens": total.prompt_tokens,
        "completion_tokens": total.completion_tokens,
        "partitions": sum(1 for s in plan.steps if s.phase not in ("setup", "oracle")),
        "currency": prices.currency if prices else None,
        "prices": prices.path if prices else None,
        "unpriced": missing,
        "token_source": "tokenizer (the servers' usage is known only after)",
        "seconds_detail": seconds or {},
        "notes": list(plan.notes),
    }
    arms: dict[str, Any] = {}
    for s in plan.steps:
        entry = arms.setdefault(s.arm, {"steps": []})
        c, _ = cost_of(s.usage, plan.models[s.arm], prices)
        entry["steps"].append(
            {"phase": s.phase, **asdict(s.usage), "units": s.units, "unit_tokens": s.unit_tokens, "cost": c}
        )
    out["arms"] = arms
    return out


# --- caps while the sweep runs ----------------------------------------------------------------


@dataclass(frozen=True)
class Caps:
    """``--max-cost`` (money by ``prices``) and ``--max-requests`` (embedding, rerank and generation
    requests; /tokenize calls are not billed and not counted) for one run of the command."""

    max_cost: float | None = None
    max_requests: int | None = None
    prices: Prices | None = None


def measured(runtimes: dict[str, Any], start: dict[int, dict[str, float]]) -> list[tuple[Usage, Models]]:
    """What the sweep's components have sent since ``start`` (:func:`counters`), priced per model."""
    out = []
    for comp, role in endpoint_components(runtimes):
        before = start.get(id(comp), {})
        now = component_counts(comp, role)
        d = {k: now[k] - before.get(k, 0.0) for k in now}
        if role == "embedding":
            u = Usage(emb_tokens=int(d["tokens"]), emb_requests=int(d["requests"]))
            out.append((u, Models(getattr(comp, "name", None), None, None)))
        elif role == "rerank":
            model = getattr(comp, "model", None)
            out.append((Usage(rerank_requests=int(d["requests"])), Models(None, model, None)))
        else:
            out.append(
                (
                    Usage(
                        gen_requests=int(d["requests"]),
                        prompt_tokens=int(d["prompt"]),
                        completion_tokens=int(d["completion"]),
                    ),
                    Models(None, None, getattr(comp, "model", None)),
                )
            )
    return out


def endpoint_components(runtimes: dict[str, Any]) -> list[tuple[Any, str]]:
    seen: dict[int, tuple[Any, str]] = {}
    for rt in runtimes.values():
        for comp, role in ((rt.encoder, "embedding"), (rt.reranker, "rerank"), (rt.generator, "generator")):
            remote = getattr(comp, "kind", "") in ("endpoint", "openai-compatible-endpoint")
            if role != "embedding" and not remote:
                continue
            seen.setdefault(id(comp), (comp, role))
    return list(seen.values())


def component_counts(comp: Any, role: str) -> dict[str, float]:
    if role == "embedding":
        tokens = (
            getattr(comp, "usage_tokens", 0) + getattr(comp, "counted_tokens", 0)
            if hasattr(comp, "usage_tokens")
            else getattr(comp, "forward_tokens", 0)
        )
        return {"tokens": float(tokens), "requests": float(getattr(comp, "requests", 0))}
    if role == "rerank":
        return {"requests": float(getattr(comp, "requests", 0))}
    u = getattr(comp, "usage", {}) or {}
    return {
        "requests": float(u.get("requests", 0)),
        "prompt": float(u.get("prompt_tokens", 0)),
        "completion": float(u.get("completion_tokens", 0)),
    }


def counters(runtimes: dict[str, Any]) -> dict[int, dict[str, float]]:
    return {id(c): component_counts(c, role) for c, role in endpoint_components(runtimes)}


class Guard:
    """Stops the sweep before a partition whose plan would take it past a cap."""

    def __init__(self, caps: Caps, plan: Plan, runtimes: dict[str, Any], start: dict[int, dict[str, float]]):
        self.caps, self.plan, self.runtimes, self.start = caps, plan, runtimes, start

    def before(self, arm: str, phase: str, oracle_pending: bool) -> str | None:
        """None to go on, or why the sweep stops here (said to the user)."""
        spent = measured(self.runtimes, self.start)
        next_steps = [
            s
            for s in self.plan.steps
            if s.arm == arm and (s.phase == phase or (oracle_pending and s.phase == "oracle"))
        ]
        requests = sum(u.requests for u, _ in spent) + sum(s.usage.requests for s in next_steps)
        caps = self.caps
        where = f"before arm {arm!r} phase {phase!r}"
        if caps.max_requests is not None and requests > caps.max_requests:
            return (
                f"stopped {where}: it would bring this run to {requests} requests, over --max-requests "
                f"{caps.max_requests}; rerun the command (with a higher cap) to resume"
            )
        if caps.max_cost is not None:
            cost = sum(cost_of(u, m, caps.prices)[0] or 0.0 for u, m in spent)
            cost += sum(cost_of(s.usage, self.plan.models[arm], caps.prices)[0] or 0.0 for s in next_steps)
            if cost > caps.max_cost:
                cur = caps.prices.currency if caps.prices else ""
                return (
                    f"stopped {where}: it would bring this run's cost to {cost:.6f} {cur}, over "
                    f"--max-cost {caps.max_cost:g}; rerun the command (with a higher cap) to resume"
                )
        return None
