"""An arm's components, chosen by configuration kind and loaded once for all its phases.

The factories of every kind live here; the tables from kind to factory are :mod:`.kinds`, which the
configuration's validation reads too, so a new kind is added in one place. A factory gets the
arm's configuration, its embedding model and its chunk tokenizer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ledgerscope.pipeline.answer_judges import answer_judge
from ledgerscope.pipeline.chunk import SentenceChunker, TokenChunker
from ledgerscope.pipeline.dense import exact_retriever, hnsw_retriever
from ledgerscope.pipeline.encoder import Encoder, TokenCounter
from ledgerscope.pipeline.generate import ExtractiveReader
from ledgerscope.pipeline.kinds import CHUNKERS, GENERATORS, RERANKERS, resolve
from ledgerscope.pipeline.lexical import BM25Retriever
from ledgerscope.pipeline.rerank import MaxSimReranker, PassThroughReranker
from ledgerscope.pipeline.stages import Chunker, Generator, Reranker, Retriever

if TYPE_CHECKING:
    from ledgerscope.pipeline.config import ArmConfig

Factory = Callable[["ArmConfig", Encoder, TokenCounter], object]


def token_chunker(cfg: ArmConfig, encoder: Encoder, counter: TokenCounter) -> Chunker:
    return TokenChunker(cfg.capacity, cfg.overlap, cfg.edge_policy)


def sentence_chunker(cfg: ArmConfig, encoder: Encoder, counter: TokenCounter) -> Chunker:
    return SentenceChunker(cfg.capacity)


def maxsim_reranker(cfg: ArmConfig, encoder: Encoder, counter: TokenCounter) -> Reranker:
    return MaxSimReranker(encoder.get, encoder.name)


def cross_encoder_reranker(cfg: ArmConfig, encoder: Encoder, counter: TokenCounter) -> Reranker:
    from ledgerscope.pipeline.rerank import CrossEncoderReranker

    return CrossEncoderReranker(cfg.rerank["model"])


def no_reranker(cfg: ArmConfig, encoder: Encoder, counter: TokenCounter) -> Reranker:
    return PassThroughReranker(cfg.rerank.get("kind"))


def extractive_generator(cfg: ArmConfig, encoder: Encoder, counter: TokenCounter) -> Generator:
    return ExtractiveReader.from_config(encoder.get, counter.count, cfg.generator)


def endpoint_generator(cfg: ArmConfig, encoder: Encoder, counter: TokenCounter) -> Generator:
    from ledgerscope.pipeline.endpoint import EndpointGenerator

    g = cfg.generator
    return EndpointGenerator(
        g["base_url"],
        g.get("model", ""),
        api_key_env=g.get("api_key_env") or None,
        temperature=float(g.get("temperature", 0.0)),
        max_tokens=int(g.get("max_tokens", 128)),
    )




@dataclass
class Retrievers:
    """The three retriever slots, named as the ledger's stages: bm25 and dense_ann are the
    production pair (fused), dense_exact the reference the ANN index is diagnosed against."""

    bm25: Retriever
    dense_exact: Retriever
    dense_ann: Retriever


def build_retrievers(cfg: ArmConfig, encoder: Encoder) -> Retrievers:
    r = cfg.retrieval
    hnsw = r.get("hnsw", {})
    return Retrievers(
        BM25Retriever(
            int(r.get("bm25_top_n", 50)), float(r.get("bm25_k1", 1.5)), float(r.get("bm25_b", 0.75))
        ),
        exact_retriever(encoder, int(r.get("dense_top_n", 50))),
        hnsw_retriever(
            encoder,
            int(r.get("ann_top_n", 50)),
            int(hnsw.get("M", 16)),
            int(hnsw.get("ef_construction", 200)),
            int(hnsw.get("ef_search", 64)),
            int(hnsw.get("seed", 0)),
        ),
    )


def _choose(table: dict, section: str, kind: str | None, default: str) -> Factory:
    """The factory for a configured kind (a configuration that names none gets the default)."""
    factory = table.get(kind if kind is not None else default)
    if factory is None:
        raise ValueError(f"{section}.kind {kind!r}: not one of {', '.join(table)}")
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

    @property
    def count_tokens(self) -> Callable[[str], int]:
        """The evidence budget's tokenizer: the generator's own."""
        return self.generator.count_tokens

    def describe(self) -> dict:
        out = {
            "embedding": self.encoder.describe(),
            "chunk_tokenizer": self.chunk_counter.describe(),
            "reranker": self.reranker.describe(),
            "generator": self.generator.describe(),
            "judge": answer_judge(self.config.judge).describe(),
        }
        describe = getattr(self.chunker, "describe", None)
        if describe is not None:  # an external chunker: its splitter, the phase rule, the offset checks
            out["chunker"] = describe()
        return out


def chunk_counter(cfg: ArmConfig) -> TokenCounter:
    """The tokenizer the arm's chunk offsets and phases count in."""
    return TokenCounter(cfg.embedding.get("model"))


def build_chunker(cfg: ArmConfig, encoder: Encoder | None, counter: TokenCounter) -> Chunker:
    """The arm's chunker (no chunker needs the model: ``encoder`` may be None)."""
    return _choose(CHUNKERS, "chunker", cfg.chunker.get("kind"), "token")(cfg, encoder, counter)


def build_runtime(cfg: ArmConfig, encoder_factory: Callable[[str, int], Encoder]) -> ArmRuntime:
    emb = cfg.embedding
    encoder = encoder_factory(emb.get("model"), int(emb.get("batch_size", 64)))
    counter = chunk_counter(cfg)
    parts = (cfg, encoder, counter)
    chunker = build_chunker(*parts)
    generator = _choose(GENERATORS, "generator", cfg.generator.get("kind"), "extractive")(*parts)
    reranker = _choose(RERANKERS, "rerank", cfg.rerank.get("kind"), "none")(*parts)
    return ArmRuntime(cfg, encoder, counter, chunker, build_retrievers(cfg, encoder), reranker, generator)
