"""One arm at one phase: build the indexes, then run every question down the cascade.

    chunk -> bm25 | dense exact | dense ANN -> union/dedup -> fuse -> rerank -> select/pack
          -> generate -> judge

Each stage's output is returned as ledger rows (candidates with ranks, scores
and source intervals; one record per question with the packed context, the
answer and the verdicts). Used by the sweep and by ``rerun`` alike, so a
re-executed record goes through exactly the recorded code path.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from ledgerscope.inputs.fixtures import Fixture
from ledgerscope.inputs.sources import Source
from ledgerscope.ledger import schema
from ledgerscope.pipeline import judge as judging
from ledgerscope.pipeline import support
from ledgerscope.pipeline.answer_judges import answer_judge
from ledgerscope.pipeline.chunk import Boundaries, chunk_sentences, chunk_tokens
from ledgerscope.pipeline.config import ArmConfig, Phase
from ledgerscope.pipeline.dense import ExactIndex, HnswIndex
from ledgerscope.pipeline.encoder import Encoder, TokenCounter
from ledgerscope.pipeline.fuse import fuse
from ledgerscope.pipeline.generate import ExtractiveReader
from ledgerscope.pipeline.lexical import BM25Index
from ledgerscope.pipeline.prompt import GenerationResult, render_context
from ledgerscope.pipeline.rerank import CrossEncoderReranker, maxsim_many
from ledgerscope.pipeline.select import expand, pack, visible
from ledgerscope.pipeline.units import Unit


@dataclass
class ArmRuntime:
    """Per-arm components that survive across phases (models load once)."""

    config: ArmConfig
    encoder: Encoder
    chunk_counter: TokenCounter
    count_tokens: Callable[[str], int]
    generator: object
    cross_encoder: CrossEncoderReranker | None = None
    offsets_cache: dict[str, list[tuple[int, int]]] = field(default_factory=dict)

    def describe(self) -> dict:
        gen = self.generator.describe() if hasattr(self.generator, "describe") else {}
        rr = self.config.rerank.get("kind")
        reranker = {"kind": rr}
        if rr == "maxsim":
            reranker["name"] = "late-interaction MaxSim over the embedding model's token vectors"
            reranker["model"] = self.encoder.name
        elif rr == "cross-encoder":
            reranker["model"] = self.config.rerank.get("model")
        return {
            "embedding": self.encoder.describe(),
            "chunk_tokenizer": self.chunk_counter.describe(),
            "reranker": reranker,
            "generator": gen,
            "judge": answer_judge(self.config.judge).describe(),
        }


def build_runtime(cfg: ArmConfig, encoder_factory: Callable[[str, int], Encoder]) -> ArmRuntime:
    emb = cfg.embedding
    encoder = encoder_factory(emb.get("model"), int(emb.get("batch_size", 64)))
    counter = TokenCounter(emb.get("model"))
    gen_cfg = cfg.generator
    if gen_cfg.get("kind") == "endpoint":
        from ledgerscope.pipeline.endpoint import EndpointGenerator

        generator = EndpointGenerator(
            gen_cfg["base_url"],
            gen_cfg.get("model", ""),
            api_key_env=gen_cfg.get("api_key_env") or None,
            temperature=float(gen_cfg.get("temperature", 0.0)),
            max_tokens=int(gen_cfg.get("max_tokens", 128)),
        )
        count = generator.count_tokens
    else:
        generator = ExtractiveReader.from_config(encoder.get, counter.count, gen_cfg)
        count = counter.count
    cross = None
    if cfg.rerank.get("kind") == "cross-encoder":
        cross = CrossEncoderReranker(cfg.rerank["model"])
    return ArmRuntime(cfg, encoder, counter, count, generator, cross)


@dataclass
class PhaseIndex:
    arm: str
    phase: Phase
    units: list[Unit]
    boundaries: list[Boundaries]
    by_doc: dict[str, list[Unit]]
    bm25: BM25Index
    exact: ExactIndex
    ann: HnswIndex
    config_digest: str = ""
    _all_intervals: dict | None = None

    @property
    def all_intervals(self) -> dict:
        """Every unit's interval grouped by document, computed once per phase."""
        if self._all_intervals is None:
            self._all_intervals = support.intervals_by_doc(self.units)
        return self._all_intervals


def chunk_phase(
    rt: ArmRuntime, phase: Phase, sources: Sequence[Source]
) -> tuple[list[Unit], list[Boundaries]]:
    cfg = rt.config
    units: list[Unit] = []
    bounds: list[Boundaries] = []
    missing = [s.text for s in sources if s.version not in rt.offsets_cache]
    if missing:
        for s, offs in zip(
            [s for s in sources if s.version not in rt.offsets_cache],
            rt.chunk_counter.offsets_many(missing),
            strict=True,
        ):
            rt.offsets_cache[s.version] = offs
    for src in sources:
        offsets = rt.offsets_cache[src.version]
        if cfg.chunker_kind == "sentence":
            u, b = chunk_sentences(src, offsets, cfg.capacity, phase.offset)
        else:
            u, b = chunk_tokens(
                src, offsets, cfg.capacity, cfg.overlap, phase.offset, cfg.edge_policy
            )
        units.extend(u)
        bounds.append(b)
    return units, bounds


def build_phase(
    rt: ArmRuntime,
    phase: Phase,
    sources: Sequence[Source],
    on_stage: Callable[[str], None] | None = None,
) -> PhaseIndex:
    """Chunk the visible sources and build BM25, exact and HNSW indexes for one phase."""
    cfg = rt.config
    visible_sources = [s for s in sources if set(s.access) <= cfg.clearance]
    units, bounds = chunk_phase(rt, phase, visible_sources)
    if on_stage:
        on_stage("chunk")
    texts = [u.text for u in units]
    vectors = rt.encoder.vectors(texts)
    if on_stage:
        on_stage("embed")
    r = cfg.retrieval
    hnsw = r.get("hnsw", {})
    by_doc: dict[str, list[Unit]] = {}
    for u in units:
        by_doc.setdefault(u.doc_id, []).append(u)
    index = PhaseIndex(
        cfg.name,
        phase,
        units,
        bounds,
        by_doc,
        BM25Index(texts, float(r.get("bm25_k1", 1.5)), float(r.get("bm25_b", 0.75))),
        ExactIndex(vectors),
        HnswIndex(
            vectors,
            int(hnsw.get("M", 16)),
            int(hnsw.get("ef_construction", 200)),
            int(hnsw.get("ef_search", 64)),
            int(hnsw.get("seed", 0)),
        ),
        cfg.digest(),
    )
    if on_stage:
        on_stage("index")
    return index


class CandidateSink:
    """Candidate rows accumulated column by column (a sweep writes millions of them)."""

    def __init__(self) -> None:
        self.cols: dict[str, list] = {name: [] for name in schema.CANDIDATES.names}

    def add(
        self,
        arm: str,
        phase: str,
        qid: str,
        stage: str,
        units: Sequence[Unit],
        scores: Sequence[float | None] | None,
        lineage: Sequence[list[str]] | None = None,
    ) -> None:
        n = len(units)
        c = self.cols
        c["arm"].extend([arm] * n)
        c["phase"].extend([phase] * n)
        c["qid"].extend([qid] * n)
        c["stage"].extend([stage] * n)
        c["rank"].extend(range(1, n + 1))
        c["unit_id"].extend([u.unit_id for u in units])
        c["score"].extend(
            [None] * n if scores is None else [None if x is None else float(x) for x in scores]
        )
        c["doc_id"].extend([u.doc_id for u in units])
        c["start"].extend([u.start for u in units])
        c["end"].extend([u.end for u in units])
        c["lineage"].extend(list(lineage) if lineage else [[]] * n)

    def __len__(self) -> int:
        return len(self.cols["arm"])

    def table(self) -> pa.Table:
        return pa.Table.from_pydict(self.cols, schema=schema.CANDIDATES)

    def rows(self) -> list[dict]:
        return self.table().to_pylist()


def _repeated_source_tokens(units: Sequence[Unit], count: Callable[[str], int]) -> int:
    """Tokens the packed context spends on source characters it already contains (overlap)."""
    total = 0
    by_doc: dict[tuple[str, str], list[Unit]] = {}
    for u in units:
        by_doc.setdefault((u.doc_id, u.version), []).append(u)
    for group in by_doc.values():
        group.sort(key=lambda u: u.start)
        reach = -1
        for u in group:
            if u.start < reach:
                overlap_end = min(reach, u.end)
                total += count(u.text[: overlap_end - u.start])
            reach = max(reach, u.end)
    return total


def single_threaded_blas():
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - threadpoolctl ships with scipy's usual installs
        import contextlib

        return contextlib.nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


def run_questions(
    rt: ArmRuntime,
    index: PhaseIndex,
    fixtures: Sequence[Fixture],
    texts: dict[str, str],
    oracle: dict[str, dict],
    on_question: Callable[[], None] | None = None,
) -> tuple[list[dict], CandidateSink]:
    """Every question down the cascade at this phase; returns (records, candidate sink)."""
    cfg = rt.config
    r = cfg.retrieval
    qvecs = rt.encoder.vectors([f.question for f in fixtures])
    exact_all = index.exact.search_many(qvecs, int(r.get("dense_top_n", 50)))
    ann_all = index.ann.search_many(qvecs, int(r.get("ann_top_n", 50)))
    records: list[dict] = []
    cands = CandidateSink()
    # The per-question products are tiny: waking BLAS worker threads for each costs more than the
    # product itself (and competes with the model's own threads on small machines).
    with single_threaded_blas():
        for fx, exact_hits, ann_hits in zip(fixtures, exact_all, ann_all, strict=True):
            rec = _run_one(
                rt, index, fx, texts, exact_hits, ann_hits, oracle.get(fx.qid, {}), cands
            )
            records.append(rec)
            if on_question:
                on_question()
    return records, cands


def union_dedup(
    units: Sequence[Unit], runs: Sequence[tuple[str, Sequence[tuple[int, float]]]]
) -> tuple[list[Unit], list[list[str]]]:
    """Union of ranked runs, one entry per source interval, each with the retrievers that found it.

    Order: best rank in any run, then unit index (deterministic).
    """
    lineage: dict[tuple[str, int, int], list[str]] = {}
    first: dict[tuple[str, int, int], tuple[int, int]] = {}
    for name, run in runs:
        for rank, (i, _) in enumerate(run):
            u = units[i]
            key = (u.version, u.start, u.end)
            lineage.setdefault(key, []).append(name)
            if key not in first or rank < first[key][0]:
                first[key] = (rank, i)
    keys = sorted(first, key=lambda k: first[k])
    return [units[first[k][1]] for k in keys], [lineage[k] for k in keys]


def rerank_scores(
    rt: ArmRuntime, question: str, candidates: Sequence[Unit], fused_scores: Sequence[float]
) -> np.ndarray:
    """Second-stage scores for the reranker's input, by the configured kind."""
    kind = rt.config.rerank.get("kind")
    if kind == "maxsim" and candidates:
        q = rt.encoder.get(question)
        return maxsim_many(q.tokens, [rt.encoder.get(u.text).tokens for u in candidates])
    if kind == "cross-encoder" and candidates:
        return rt.cross_encoder.score(question, [u.text for u in candidates])
    return np.array(fused_scores, dtype=np.float64)


def resolve_citations(
    labels: Sequence[str], blocks: Sequence, units: Sequence[Unit]
) -> tuple[list[dict], list[Unit]]:
    """Citation labels to packed units; a label that names no packed block stays unresolved."""
    by_label = {b.label: u for b, u in zip(blocks, units, strict=True)}
    citations, cited = [], []
    for label in labels:
        u = by_label.get(label)
        citations.append(
            {
                "label": label,
                "unit_id": u.unit_id if u else None,
                "doc_id": u.doc_id if u else None,
                "start": u.start if u else None,
                "end": u.end if u else None,
            }
        )
        if u is not None:
            cited.append(u)
    return citations, cited


def _run_one(
    rt: ArmRuntime,
    index: PhaseIndex,
    fx: Fixture,
    texts: dict[str, str],
    exact_hits,
    ann_hits,
    oracle_row: dict,
    sink: CandidateSink,
) -> dict:
    cfg = rt.config
    r = cfg.retrieval
    arm, phase = cfg.name, index.phase.label
    units = index.units
    bm_idx, bm_sc = index.bm25.search(fx.question, int(r.get("bm25_top_n", 50)))
    lists = {
        "bm25": list(zip(bm_idx.tolist(), bm_sc.tolist(), strict=True)),
        "dense_exact": list(zip(exact_hits[0].tolist(), exact_hits[1].tolist(), strict=True)),
        "dense_ann": list(zip(ann_hits[0].tolist(), ann_hits[1].tolist(), strict=True)),
    }
    for stage, hits in lists.items():
        sink.add(arm, phase, fx.qid, stage, [units[i] for i, _ in hits], [s for _, s in hits])

    union_units, union_lineage = union_dedup(
        units, [("bm25", lists["bm25"]), ("dense_ann", lists["dense_ann"])]
    )
    sink.add(arm, phase, fx.qid, "union", union_units, None, union_lineage)

    fusion = cfg.fusion
    weights = fusion.get("weights", {})
    fused_all = fuse(
        {"bm25": lists["bm25"], "dense": lists["dense_ann"]},
        fusion.get("method", "rrf"),
        int(fusion.get("rrf_k", 60)),
        weights,
    )
    # the whole fused list is recorded; the reranker sees its first rerank_depth entries
    sink.add(
        arm, phase, fx.qid, "fused", [units[i] for i, _ in fused_all], [s for _, s in fused_all]
    )
    fused = fused_all[: cfg.rerank_depth]
    fused_units = [units[i] for i, _ in fused]

    scores = rerank_scores(rt, fx.question, fused_units, [s for _, s in fused])
    order = sorted(range(len(fused_units)), key=lambda i: (-float(scores[i]), i))
    depth = int(cfg.rerank.get("selection_depth", 10))
    # the whole reranked list is recorded (reranker regret needs the ranks below the cut)
    sink.add(
        arm,
        phase,
        fx.qid,
        "reranked",
        [fused_units[i] for i in order],
        [float(scores[i]) for i in order],
    )
    reranked = [fused_units[i] for i in order][:depth]

    sel = cfg.selection
    dropped: list[dict] = []
    selected = [u for u in reranked if visible(u, cfg.clearance)]
    if sel.get("expansion") == "neighbours":
        selected, dropped = expand(
            selected, index.by_doc, int(sel.get("neighbours", 1)), cfg.clearance
        )
    sink.add(arm, phase, fx.qid, "selected", selected, None)
    mode = sel.get("mode", "budget")
    primary = pack(
        selected,
        rt.count_tokens,
        cfg.budget_tokens if mode == "budget" else None,
        cfg.top_k if mode == "top-k" else None,
    )
    secondary = pack(
        selected,
        rt.count_tokens,
        cfg.budget_tokens if mode == "top-k" else None,
        cfg.top_k if mode == "budget" else None,
    )
    sink.add(arm, phase, fx.qid, "packed", primary.units, None)
    sink.add(arm, phase, fx.qid, "topk", secondary.units, None)

    gen: GenerationResult = rt.generator.generate(fx.question, primary.blocks)
    citations, cited_units = resolve_citations(gen.citations, primary.blocks, primary.units)
    if gen.error:
        verdict, reason = "infrastructure-failure", gen.error
        cit_verdict, cit_reason = "not-applicable", "generator failed"
    else:
        aj = answer_judge(cfg.judge).judge(gen.answer, gen.abstained, fx)
        verdict, reason = aj.verdict, aj.reason
        cj = judging.judge_citations(
            [(c["label"], c["doc_id"], c["start"], c["end"]) for c in citations], fx, texts, verdict
        )
        cit_verdict, cit_reason = cj.verdict, cj.reason

    stage_units = {
        "chunked": units,
        "bm25": [units[i] for i, _ in lists["bm25"]],
        "dense_exact": [units[i] for i, _ in lists["dense_exact"]],
        "dense_ann": [units[i] for i, _ in lists["dense_ann"]],
        "union": union_units,
        "fused": fused_units,
        "reranked": reranked,
        "selected": selected,
        "packed": primary.units,
        "cited": cited_units,
        "topk": secondary.units,
    }
    stage_units["exact"] = stage_units["bm25"] + stage_units["dense_exact"]
    stage_units["production"] = stage_units["bm25"] + stage_units["dense_ann"]
    flags: dict[str, bool | None] = {}
    answerable = fx.answerable and bool(fx.sufficient_sets)
    gold_ok = all(s.doc_id in index.by_doc or s.doc_id in texts for s in fx.spans)
    restricted = [s.doc_id for s in fx.spans if s.doc_id not in index.by_doc]
    for name, us in stage_units.items():
        if not answerable:
            flags[f"support_{name}"] = None
        elif name == "chunked":
            flags[f"support_{name}"] = (
                support.kept_set_in(fx, index.all_intervals, texts) is not None
            )
        else:
            flags[f"support_{name}"] = support.keeps(fx, us, texts)
    covered = support.kept_set(fx, primary.units, texts) if answerable else None
    record = {
        "arm": arm,
        "phase": phase,
        "phase_offset": index.phase.offset,
        "qid": fx.qid,
        "question": fx.question,
        "segment": fx.segment,
        "answerable": fx.answerable,
        "support_only": fx.support_only,
        "stress_set": fx.stress_set,
        "doc_ids": list(fx.doc_ids),
        "gold_status": "ok"
        if gold_ok and not restricted
        else f"not in the authorized corpus: {', '.join(sorted(set(restricted)))}",
        **flags,
        "covered_set": covered,
        "single_unit_complete": support.single_unit_complete(fx, primary.units, texts)
        if answerable
        else None,
        "packed_context": render_context(primary.blocks),
        "packed_unit_ids": [u.unit_id for u in primary.units],
        "evidence_tokens": primary.evidence_tokens,
        "prompt_tokens": gen.prompt_tokens,
        "budget_tokens": cfg.budget_tokens,
        "rerank_depth": cfg.rerank_depth,
        "selection_depth": depth,
        "repeated_source_tokens": _repeated_source_tokens(primary.units, rt.count_tokens),
        "topk_tokens": secondary.evidence_tokens,
        "overflow_json": json.dumps(primary.overflow),
        "expansion_dropped_json": json.dumps(dropped),
        "answer": gen.answer,
        "abstained": gen.abstained,
        "citations_json": json.dumps(citations, ensure_ascii=False),
        "answer_verdict": verdict,
        "answer_reason": reason,
        "citation_verdict": cit_verdict,
        "citation_reason": cit_reason,
        "generator_error": gen.error,
        "attempts": gen.attempts,
        "generator_detail_json": json.dumps(gen.detail, ensure_ascii=False, sort_keys=True),
        "oracle_verdict": oracle_row.get("answer_verdict"),
        "oracle_feasible": oracle_row.get("feasible"),
        "config_digest": index.config_digest,
    }
    return record
