"""An arm's components, chosen by configuration kind and loaded once for all its phases.

The factories of every kind live here; the tables from kind to factory are
:mod:`ledgerscope.pipeline.arm.kinds`, which the
configuration's validation reads too, so a new kind is added in one place. A factory gets the
arm's configuration, its embedding model and its chunk tokenizer (a retriever's also its slot's
table and depth). Plugin kinds (entry points) and ``kind = "python"`` are built by
:mod:`ledgerscope.pipeline.arm.plugin_stages`.

Embeddings come from a local sentence-transformers model (the default) or an endpoint
(:mod:`ledgerscope.pipeline.embedding.endpoint`). An endpoint has no token vectors, so the MaxSim reranker is
not
available with it and the extractive reader reads with a local model of its own
(``generator.reader_model``, the bundled MiniLM by default). The chunk tokenizer is
``embedding.tokenizer`` when set, else the local model's own, else (endpoint) the bundled MiniLM's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ledgerscope.common.errors import InputError, Problem
from ledgerscope.common.http_json import EndpointUnreachable
from ledgerscope.pipeline.arm.kinds import CHUNKERS, GENERATORS, RERANKERS, RETRIEVERS, available, resolve
from ledgerscope.pipeline.arm.plugins import PluginStage
from ledgerscope.pipeline.arm.schema import default_of
from ledgerscope.pipeline.chunking.chunk import SentenceChunker, TokenChunker
from ledgerscope.pipeline.contracts.prompt import PromptTemplate, template_from_config
from ledgerscope.pipeline.contracts.stages import Chunker, Generator, Reranker, Retriever
from ledgerscope.pipeline.embedding.encoder import BUNDLED_MINILM, Encoder, TokenCounter, shared_encoder
from ledgerscope.pipeline.generation.reader import ExtractiveReader
from ledgerscope.pipeline.judging.answer_judges import answer_judge
from ledgerscope.pipeline.ranking.dense import exact_retriever, hnsw_retriever
from ledgerscope.pipeline.ranking.lexical import BM25Retriever
from ledgerscope.pipeline.ranking.rerank import MaxSimReranker, PassThroughReranker

if TYPE_CHECKING:
    from ledgerscope.pipeline.arm.config import ArmConfig

Factory = Callable[["ArmConfig", Encoder, TokenCounter], object]


def token_chunker(cfg: ArmConfig, encoder: Encoder, counter: TokenCounter) -> Chunker:
    return TokenChunker(cfg.capacity, cfg.overlap, cfg.edge_policy)


def sentence_chunker(cfg: ArmConfig, encoder: Encoder, counter: TokenCounter) -> Chunker:
    return SentenceChunker(cfg.capacity)


def maxsim_reranker(cfg: ArmConfig, encoder: Encoder, counter: TokenCounter) -> Reranker:
    return MaxSimReranker(encoder.get, encoder.name)


def cross_encoder_reranker(cfg: ArmConfig, encoder: Encoder, counter: TokenCounter) -> Reranker:
    from ledgerscope.pipeline.ranking.rerank import CrossEncoderReranker

    return CrossEncoderReranker(cfg.rerank["model"])


def no_reranker(cfg: ArmConfig, encoder: Encoder, counter: TokenCounter) -> Reranker:
    return PassThroughReranker(cfg.rerank.get("kind"))


def endpoint_reranker(cfg: ArmConfig, encoder: Encoder, counter: TokenCounter) -> Reranker:
    from ledgerscope.pipeline.ranking.rerank_endpoint import EndpointReranker

    s = cfg.setting  # the arm's value, else the schema's default
    return EndpointReranker(
        s("rerank.base_url"),
        s("rerank.model"),
        s("rerank.path") or default_of("rerank.path"),
        s("rerank.api_key_env") or None,
        float(s("rerank.timeout")),
        int(s("rerank.retries")),
        float(s("rerank.backoff")),
    )


def token_encoder(cfg: ArmConfig, encoder: Any) -> Any:
    """The model whose token vectors the reader uses: the arm's own, or (endpoint) a local one."""
    if getattr(encoder, "token_vectors", True):
        return encoder
    return shared_encoder(
        cfg.setting("generator.reader_model") or BUNDLED_MINILM, int(cfg.setting("embedding.batch_size"))
    )


def extractive_generator(cfg: ArmConfig, encoder: Encoder, counter: TokenCounter) -> Generator:
    reader = token_encoder(cfg, encoder)
    own = reader is encoder
    return ExtractiveReader.from_config(
        reader.get,
        counter.count,
        cfg.generator,
        template=template_from_config(cfg.generator),
        prefetch=reader.encode,
        reader_model=None if own else reader.name,
    )


def endpoint_generator(cfg: ArmConfig, encoder: Encoder, counter: TokenCounter) -> Generator:
    from ledgerscope.pipeline.generation.endpoint import EndpointGenerator

    s = cfg.setting  # the arm's value, else the schema's default
    return EndpointGenerator(
        s("generator.base_url"),
        s("generator.model"),
        api_key_env=s("generator.api_key_env") or None,
        temperature=float(s("generator.temperature")),
        max_tokens=int(s("generator.max_tokens")),
        timeout=float(s("generator.timeout")),
        retries=int(s("generator.retries")),
        backoff=float(s("generator.backoff")),
        template=template_from_config(cfg.generator),
    )


def bm25_retriever(cfg: ArmConfig, encoder: Any, counter: TokenCounter, table: dict, top_n: int) -> Retriever:
    s = cfg.setting  # the arm's value, else the schema's default
    return BM25Retriever(top_n, float(s("retrieval.bm25_k1")), float(s("retrieval.bm25_b")))


def hnsw_slot_retriever(
    cfg: ArmConfig, encoder: Any, counter: TokenCounter, table: dict, top_n: int
) -> Retriever:
    s = cfg.setting  # the arm's value, else the schema's default
    return hnsw_retriever(
        encoder,
        top_n,
        int(s("retrieval.hnsw.M")),
        int(s("retrieval.hnsw.ef_construction")),
        int(s("retrieval.hnsw.ef_search")),
        int(s("retrieval.hnsw.seed")),
    )


def exact_slot_retriever(
    cfg: ArmConfig, encoder: Any, counter: TokenCounter, table: dict, top_n: int
) -> Retriever:
    return exact_retriever(encoder, top_n)


@dataclass
class Retrievers:
    """The three retriever slots, named as the ledger's stages: bm25 and dense_ann are the
    production pair (fused), dense_exact the reference the ANN index is diagnosed against."""

    bm25: Retriever
    dense_exact: Retriever
    dense_ann: Retriever


def build_retrievers(cfg: ArmConfig, encoder: Any, counter: TokenCounter | None = None) -> Retrievers:
    """The production slots by their configured kinds (``retrieval.lexical``, ``retrieval.ann``)."""
    r = cfg.retrieval
    slots = []
    for slot, default, depth in (("lexical", "bm25", "bm25_top_n"), ("ann", "hnsw", "ann_top_n")):
        table = r.get(slot) if isinstance(r.get(slot), dict) else {}
        factory = _choose("retriever", RETRIEVERS, f"retrieval.{slot}", table.get("kind"), default)
        slots.append(factory(cfg, encoder, counter, table, int(cfg.setting(f"retrieval.{depth}"))))
    return Retrievers(slots[0], exact_retriever(encoder, int(cfg.setting("retrieval.dense_top_n"))), slots[1])


def _choose(seam: str, table: dict, section: str, kind: str | None, default: str) -> Callable[..., Any]:
    """The factory for a configured kind (a configuration that names none gets the default)."""
    name = kind if kind is not None else default
    factory = table.get(name)
    if factory is None:
        stage = available(seam).get(name)
        if isinstance(stage, PluginStage):
            from ledgerscope.pipeline.arm.plugin_stages import entry_point_factory

            return entry_point_factory(stage)
        raise ValueError(f"{section}.kind {kind!r}: not one of {', '.join(available(seam))}")
    return resolve(factory)


@dataclass
class ArmRuntime:
    """Per-arm components that survive across phases (models load once)."""

    config: ArmConfig
    encoder: Encoder
    chunk_counter: TokenCounter
    chunker: Chunker
    retrievers: Retrievers
    reranker: Reranker
    generator: Generator
    offsets_cache: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    prompt: PromptTemplate = field(default_factory=PromptTemplate)
    #: ``phase_scope = "evidence"`` once the base phase ran: (its offset, the documents re-chunked per
    #: phase); every other document is cut at the base offset in every phase (:mod:`.scope`)
    phase_scope: tuple[int, frozenset[str]] | None = None
    #: the criterion that fixed ``phase_scope`` (:data:`.scope.REACH`)
    phase_reach: str | None = None

    @property
    def count_tokens(self) -> Callable[[str], int]:
        """The evidence budget's tokenizer: the generator's own."""
        return self.generator.count_tokens

    def caches(self) -> list[Any]:
        """The encoders holding per-text vectors: the arm's and, when separate, the reader's."""
        out = [self.encoder]
        reader = getattr(getattr(self.generator, "prefetch", None), "__self__", None)
        if reader is not None and reader is not self.encoder and callable(getattr(reader, "drop", None)):
            out.append(reader)
        return out

    def describe(self) -> dict:
        out = {
            "embedding": self.encoder.describe(),
            "chunk_tokenizer": self.chunk_counter.describe(),
            "reranker": self.reranker.describe(),
            "generator": self.generator.describe(),
            "judge": answer_judge(self.config.judge).describe(),
        }
        if self.prompt != PromptTemplate():
            out["prompt"] = self.prompt.describe()
        for slot, retriever in (("lexical", self.retrievers.bm25), ("ann", self.retrievers.dense_ann)):
            if callable(getattr(retriever, "describe", None)):
                out.setdefault("retrievers", {})[slot] = retriever.describe()
        if callable(getattr(self.chunker, "describe", None)):
            out["chunker"] = self.chunker.describe()
        return out


def chunk_counter(cfg: ArmConfig) -> TokenCounter:
    """The tokenizer the arm's chunk offsets and phases count in."""
    return TokenCounter(chunk_tokenizer_name(cfg))


def build_chunker(cfg: ArmConfig, encoder: Encoder | None, counter: TokenCounter) -> Chunker:
    """The arm's chunker (no chunker needs the model: ``encoder`` may be None)."""
    return _choose("chunker", CHUNKERS, "chunker", cfg.chunker.get("kind"), "token")(cfg, encoder, counter)


def chunk_tokenizer_name(cfg: ArmConfig) -> str:
    """The arm's chunk tokenizer: ``[embedding] tokenizer``, else the model's (the bundled MiniLM's
    for endpoint embeddings, whose model is not here to ask)."""
    emb = cfg.embedding
    if emb.get("tokenizer"):
        return emb["tokenizer"]
    return BUNDLED_MINILM if emb.get("kind") == "endpoint" else emb.get("model")


def endpoint_key(cfg: ArmConfig) -> tuple:
    """What makes two arms' endpoint embedders interchangeable: the same server (its base URL
    normalised), path, model, dimensions, key variable and request settings."""
    from ledgerscope.common.http_json import api_root

    s = cfg.setting  # the arm's value, else the schema's default
    return (
        api_root(s("embedding.base_url")),
        s("embedding.path") or default_of("embedding.path"),
        s("embedding.model"),
        int(s("embedding.dimensions")),
        s("embedding.api_key_env") or None,
        int(s("embedding.batch_size")),
        float(s("embedding.timeout")),
        int(s("embedding.retries")),
        float(s("embedding.backoff")),
    )


def endpoint_embedder(cfg: ArmConfig, shared: dict[tuple, Any] | None = None) -> Any:
    """``[embedding] kind = "endpoint"``, probed once: a server that is down or answers in the wrong
    shape is an error naming the arm and the URL, before any partition is written.

    ``shared`` (one dict per sweep) holds one embedder per :func:`endpoint_key`: arms and phases
    that embed through the same server share its vector cache and its kept-alive connection, so a
    unit text two arms cut alike is sent once in the sweep, not once per arm."""
    from ledgerscope.pipeline.embedding.endpoint import EndpointEmbedder

    key = endpoint_key(cfg)
    if shared is not None and key in shared:
        return shared[key]
    _, path, model, dimensions, key_env, batch, timeout, retries, backoff = key
    embedder = EndpointEmbedder(
        cfg.embedding["base_url"], model, key_env, batch, timeout, retries, backoff, path, dimensions
    )
    probe(embedder, cfg, "embedding.base_url")
    if shared is not None:
        shared[key] = embedder
    return embedder


def unreachable_endpoints(cfg: ArmConfig) -> list[Problem]:
    """Every endpoint stage of the arm with nothing listening at its address (a TCP connect each),
    as problems naming the arm's file, the key and the URL."""
    from ledgerscope.common.http_json import JsonClient

    out = []
    for section in ("embedding", "rerank", "generator", "judge"):
        table = getattr(cfg, section)
        if table.get("kind") != "endpoint" or not table.get("base_url"):
            continue
        client = JsonClient(table["base_url"], timeout=float(table.get("timeout", 60.0)))
        why = client.unreachable(min(client.timeout, 10.0))
        if why:
            out.append(
                Problem(
                    cfg.where,
                    None,
                    f"{section}.base_url",
                    f"arm {cfg.name!r}: the {section} endpoint {client.root} is unreachable: {why}",
                )
            )
    return out


def probe(stage: Any, cfg: ArmConfig, key: str) -> None:
    try:
        stage.probe()
    except EndpointUnreachable as exc:
        raise InputError(Problem(cfg.where, None, key, f"arm {cfg.name!r}: {exc}")) from None


def build_runtime(
    cfg: ArmConfig, encoder_factory: Callable[[str, int], Encoder], embedders: dict[tuple, Any] | None = None
) -> ArmRuntime:
    """The arm's components; ``embedders`` shares endpoint embedders between the arms of one sweep."""
    emb = cfg.embedding
    if emb.get("kind") == "endpoint":
        encoder = endpoint_embedder(cfg, embedders)
    else:
        batch = int(cfg.setting("embedding.batch_size"))
        device = emb.get("device")
        encoder = (
            encoder_factory(emb.get("model"), batch, device=device)
            if device
            else encoder_factory(emb.get("model"), batch)
        )
    counter = chunk_counter(cfg)
    if hasattr(encoder, "count_tokens") and getattr(encoder, "count_tokens", None) is None:
        encoder.count_tokens = counter.count  # what a server that reports no usage is counted by
    parts = (cfg, encoder, counter)
    chunker = build_chunker(*parts)
    generator = _choose("generator", GENERATORS, "generator", cfg.generator.get("kind"), "extractive")(*parts)
    reranker = _choose("reranker", RERANKERS, "rerank", cfg.rerank.get("kind"), "none")(*parts)
    if callable(getattr(reranker, "probe", None)):
        probe(reranker, cfg, "rerank.base_url")
    return ArmRuntime(
        cfg,
        encoder,
        counter,
        chunker,
        build_retrievers(cfg, encoder, counter),
        reranker,
        generator,
        prompt=template_from_config(cfg.generator),
    )
