"""One arm at one phase: build the indexes, then run every question down the cascade.

    chunk -> embed -> index                                      (once per phase: build_phase)
    retrieve (bm25 | dense exact | dense ANN) -> union -> fuse -> rerank -> select -> pack
          -> generate -> judge -> support                        (per question: run_one)

Each stage is a named function from typed inputs to a typed output
(:mod:`ledgerscope.pipeline.contracts.stages`); the
replaceable components (chunker, retrievers, reranker, generator) come from the arm's
runtime (:mod:`.runtime`). The ledger rows are assembled from the finished trace in one
place (:mod:`.record`). Used by the sweep and by ``rerun`` alike, so a re-executed record
goes through exactly the recorded code path.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from functools import partial

import numpy as np

from ledgerscope.common.blas import single_threaded_blas
from ledgerscope.inputs.fixtures import Fixture
from ledgerscope.inputs.sources import Source
from ledgerscope.pipeline.arm.config import ArmConfig
from ledgerscope.pipeline.contracts.prompt import DEFAULT_TEMPLATE, PromptTemplate
from ledgerscope.pipeline.contracts.stages import (
    Fused,
    Generated,
    Generator,
    Merged,
    Packed,
    PhaseIndex,
    QuestionTrace,
    Reranked,
    Reranker,
    Retrieved,
    Selected,
    StageFailure,
    Support,
    Verdicts,
    Views,
    build_index_or_failure,
    failed_generation,
    generate_or_failure,
)
from ledgerscope.pipeline.contracts.units import Boundaries, Phase, Unit
from ledgerscope.pipeline.judging.answer_judges import answer_judge
from ledgerscope.pipeline.ranking.fuse import fuse as fuse_runs
from ledgerscope.pipeline.ranking.rerank import MaxSimReranker, PassThroughReranker
from ledgerscope.pipeline.ranking.select import expand, visible
from ledgerscope.pipeline.ranking.select import pack as pack_units
from ledgerscope.pipeline.run.record import CandidateSink, build_record, record_candidates
from ledgerscope.pipeline.run.repeats import run_repeats
from ledgerscope.pipeline.run.resources import Laps, timed
from ledgerscope.pipeline.run.runtime import ArmRuntime, build_runtime
from ledgerscope.rules import judge as judging
from ledgerscope.rules import support as supporting

# re-exported: callers build a runtime and a phase index from here
__all__ = [
    "ArmRuntime",
    "CandidateSink",
    "PhaseIndex",
    "build_phase",
    "build_runtime",
    "chunk_phase",
    "finish",
    "run_one",
    "run_questions",
    "run_to_pack",
    "support",
]


# --- once per phase -------------------------------------------------------------------------


def chunk_phase(
    rt: ArmRuntime, phase: Phase, sources: Sequence[Source]
) -> tuple[list[Unit], list[Boundaries]]:
    """The arm's chunker over every source at this phase (tokenizer offsets cached per version)."""
    units: list[Unit] = []
    bounds: list[Boundaries] = []
    missing = [s for s in sources if s.version not in rt.offsets_cache]
    if missing:
        offsets = rt.chunk_counter.offsets_many([s.text for s in missing])
        for s, offs in zip(missing, offsets, strict=True):
            rt.offsets_cache[s.version] = offs
    for src in sources:
        u, b = rt.chunker.chunk(src, rt.offsets_cache[src.version], doc_offset(rt, phase, src.doc_id))
        units.extend(u)
        bounds.append(b)
    return units, bounds


def doc_offset(rt: ArmRuntime, phase: Phase, doc_id: str) -> int:
    """The phase offset a document is cut at: the phase's, or (``phase_scope = "evidence"``, a
    document outside the phased set) the base phase's, so its units are shared by every phase."""
    if rt.phase_scope is None or doc_id in rt.phase_scope[1]:
        return phase.offset
    return rt.phase_scope[0]


def build_phase(
    rt: ArmRuntime,
    phase: Phase,
    sources: Sequence[Source],
    on_stage: Callable[[str], None] | None = None,
) -> PhaseIndex:
    """Chunk the visible sources, embed the units, build the three retrievers' indexes."""
    cfg = rt.config
    visible_sources = [s for s in sources if set(s.access) <= cfg.clearance]
    units, bounds = chunk_phase(rt, phase, visible_sources)
    if on_stage:
        on_stage("chunk")
    # one pass of the embedding model over every unit text: the dense retrievers, the MaxSim
    # reranker and the reader all read these from the encoder's cache
    rt.encoder.encode([u.text for u in units])
    if on_stage:
        on_stage("embed")
    by_doc: dict[str, list[Unit]] = {}
    for u in units:
        by_doc.setdefault(u.doc_id, []).append(u)
    r = rt.retrievers
    index = PhaseIndex(
        cfg.name,
        phase,
        units,
        bounds,
        by_doc,
        build_index_or_failure(r.bm25, units),
        build_index_or_failure(r.dense_exact, units),
        build_index_or_failure(r.dense_ann, units),
        cfg.digest(),
    )
    if on_stage:
        on_stage("index")
    return index


# --- the stages, per question ---------------------------------------------------------------


def retrieve(index: PhaseIndex, questions: Sequence[str], laps: Laps | None = None) -> list[Retrieved]:
    """All three retrievers over every question at once (the dense ones batch their queries);
    ``laps`` shares each search's wall time among the questions (the resource record)."""
    times: dict[str, float] = {}
    with timed(times, "bm25"):
        bm25 = index.bm25.search(questions)
    with timed(times, "dense_exact"):
        exact = index.dense_exact.search(questions)
    with timed(times, "dense_ann"):
        ann = index.dense_ann.search(questions)
    if laps is not None:
        for stage, seconds in times.items():
            laps.share(stage, seconds)
    return [Retrieved(*lists) for lists in zip(bm25, exact, ann, strict=True)]


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
            names = lineage.get(key)
            if names is None:
                lineage[key] = [name]
                first[key] = (rank, i)
            else:
                names.append(name)
                if rank < first[key][0]:
                    first[key] = (rank, i)
    keys = sorted(first, key=first.__getitem__)
    return [units[first[k][1]] for k in keys], [lineage[k] for k in keys]


def union(units: Sequence[Unit], hits: Retrieved) -> Merged:
    """The production retrievers' lists (BM25 and ANN) merged by source interval."""
    merged, lineage = union_dedup(units, [("bm25", hits.bm25.pairs()), ("dense_ann", hits.dense_ann.pairs())])
    return Merged(merged, lineage)


def fuse(cfg: ArmConfig, units: Sequence[Unit], hits: Retrieved) -> Fused:
    """The production lists fused by the configured method; the head goes to the reranker."""
    ranked = fuse_runs(
        {"bm25": hits.bm25.pairs(), "dense": hits.dense_ann.pairs()},
        cfg.setting("fusion.method"),
        int(cfg.setting("fusion.rrf_k")),
        cfg.setting("fusion.weights"),
    )
    head = ranked[: cfg.rerank_depth]
    return Fused(ranked, [units[i] for i, _ in head], [s for _, s in head])


def rerank(reranker: Reranker, cfg: ArmConfig, question: str, fused: Fused) -> Reranked:
    """The head reordered by the reranker's scores (ties keep the fused order), then cut.

    A reranker that fails (:class:`StageFailure`) leaves the fused order, recorded without
    scores, and the failure, which makes the record an infrastructure failure."""
    depth = int(cfg.setting("rerank.selection_depth"))
    try:
        if fused.head:
            scores = reranker.score_candidates(question, fused.head, fused.head_scores)
        else:
            scores = np.array(fused.head_scores, dtype=np.float64)
    except StageFailure as exc:
        head = list(fused.head)
        return Reranked(head, [None] * len(head), head[:depth], depth, exc.describe())
    order = sorted(range(len(fused.head)), key=lambda i: (-float(scores[i]), i))
    ordered = [fused.head[i] for i in order]
    return Reranked(ordered, [float(scores[i]) for i in order], ordered[:depth], depth)


def select(cfg: ArmConfig, reranked: Reranked, by_doc: dict[str, list[Unit]]) -> Selected:
    """The kept units the reader may see, each followed by its neighbours when configured."""
    units = [u for u in reranked.kept if visible(u, cfg.clearance)]
    if cfg.setting("selection.expansion") == "neighbours":
        units, dropped = expand(units, by_doc, int(cfg.setting("selection.neighbours")), cfg.clearance)
        return Selected(units, dropped)
    return Selected(units, [])


def pack(
    cfg: ArmConfig,
    selected: Selected,
    count_tokens: Callable[[str], int],
    template: PromptTemplate = DEFAULT_TEMPLATE,
) -> Views:
    """Both views: under the token budget and as a fixed top-k; the configured mode is primary.
    Blocks cost their rendering by the arm's prompt template."""
    mode = cfg.setting("selection.mode")
    budget, top_k = cfg.budget_tokens, cfg.top_k
    primary = pack_units(
        selected.units,
        count_tokens,
        budget if mode == "budget" else None,
        top_k if mode == "top-k" else None,
        template,
    )
    secondary = pack_units(
        selected.units,
        count_tokens,
        budget if mode == "top-k" else None,
        top_k if mode == "budget" else None,
        template,
    )
    return Views(primary, secondary)


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


def generate(generator: Generator, question: str, primary: Packed, failure: dict | None = None) -> Generated:
    """The arm's generator on the primary view; its cited labels resolved to packed units.

    After an upstream infrastructure ``failure`` the generator is not asked: the record is that
    failure (an answer from a partial candidate list would be judged as if it were the pipeline's).
    """
    if failure is not None:
        return Generated(failed_generation(failure), [], [])
    result = generate_or_failure(generator, question, primary.blocks)
    citations, cited = resolve_citations(result.citations, primary.blocks, primary.units)
    return Generated(result, citations, cited)


def judge(
    generated: Generated, fx: Fixture, texts: dict[str, str], judge_table: dict | None = None
) -> Verdicts:
    """Answer and citation verdicts (the answer by the arm's ``[judge]``); a generator failure is an
    infrastructure verdict, not a wrong answer."""
    gen = generated.result
    if gen.error:
        stage = (gen.detail.get("infrastructure") or {}).get("stage", "generator")
        return Verdicts("infrastructure-failure", gen.error, "not-applicable", f"{stage} failed")
    aj = answer_judge(judge_table).judge(gen.answer, gen.abstained, fx)
    cj = judging.judge_citations(
        [(c["label"], c["doc_id"], c["start"], c["end"]) for c in generated.citations],
        fx,
        texts,
        aj.verdict,
    )
    return Verdicts(aj.verdict, aj.reason, cj.verdict, cj.reason)


def stage_units(index: PhaseIndex, trace: QuestionTrace) -> dict[str, list[Unit]]:
    """The unit set each support flag is computed over, in the record's column order."""
    units, hits = index.units, trace.retrieved
    out = {
        "chunked": units,
        "bm25": [units[i] for i in hits.bm25.indices],
        "dense_exact": [units[i] for i in hits.dense_exact.indices],
        "dense_ann": [units[i] for i in hits.dense_ann.indices],
        "union": trace.merged.units,
        "fused": trace.fused.head,
        "reranked": trace.reranked.kept,
        "selected": trace.selected.units,
        "packed": trace.views.primary.units,
        "cited": trace.generated.cited,
        "topk": trace.views.secondary.units,
    }
    out["exact"] = out["bm25"] + out["dense_exact"]
    out["production"] = out["bm25"] + out["dense_ann"]
    return out


def support(index: PhaseIndex, trace: QuestionTrace, texts: dict[str, str]) -> Support:
    """Does each stage's unit set still keep a sufficient set? (None for unanswerable questions.)"""
    fx, units_by_stage = trace.fixture, stage_units(index, trace)
    answerable = fx.answerable and bool(fx.sufficient_sets)
    flags: dict[str, bool | None] = {}
    for name, us in units_by_stage.items():
        if not answerable:
            flags[f"support_{name}"] = None
        elif name == "chunked":
            flags[f"support_{name}"] = supporting.kept_set_in(fx, index.all_intervals, texts) is not None
        else:
            flags[f"support_{name}"] = supporting.keeps(fx, us, texts)
    packed = units_by_stage["packed"]
    gold_ok = all(s.doc_id in index.by_doc or s.doc_id in texts for s in fx.spans)
    restricted = [s.doc_id for s in fx.spans if s.doc_id not in index.by_doc]
    gold_status = (
        "ok"
        if gold_ok and not restricted
        else f"not in the authorized corpus: {', '.join(sorted(set(restricted)))}"
    )
    return Support(
        flags,
        supporting.kept_set(fx, packed, texts) if answerable else None,
        supporting.single_unit_complete(fx, packed, texts) if answerable else None,
        gold_status,
    )


def run_to_pack(
    rt: ArmRuntime, index: PhaseIndex, fx: Fixture, hits: Retrieved, times: dict[str, float] | None = None
) -> tuple:
    """One question from its retrieved lists to its packed views (everything before generation);
    ``times`` gets each stage's seconds."""
    cfg = rt.config
    times = {} if times is None else times
    with timed(times, "fuse"):
        merged = union(index.units, hits)
        fused = fuse(cfg, index.units, hits)
    with timed(times, "rerank"):
        reranked = rerank(rt.reranker, cfg, fx.question, fused)
    with timed(times, "pack"):
        selected = select(cfg, reranked, index.by_doc)
        views = pack(cfg, selected, rt.count_tokens, rt.prompt)
    return merged, fused, reranked, selected, views


#: rerankers whose scores depend on the question and the candidates alone (no model server, no
#: user code that may count or fail its calls)
_PURE_RERANKERS = (MaxSimReranker, PassThroughReranker)


def _pack_key(fx: Fixture, hits: Retrieved) -> tuple:
    """What :func:`run_to_pack` reads of a question: its text and the two production lists
    (scores by ``repr``, which tells -0.0 from 0.0 and 1 from 1.0)."""
    b, a = hits.bm25, hits.dense_ann
    return fx.question, tuple(b.indices), repr(b.scores), tuple(a.indices), repr(a.scores)


def pack_all(
    rt: ArmRuntime,
    index: PhaseIndex,
    fixtures: Sequence[Fixture],
    retrieved: Sequence[Retrieved],
    laps: Laps | None = None,
) -> list[tuple]:
    """:func:`run_to_pack` for every question. With a pure reranker, a question asked again with
    the same production lists (one hypothesis of every document) shares the first one's packing:
    union, fusion, rerank, selection and packing are pure functions of exactly those inputs.
    ``laps`` gets each question's stage seconds (a shared packing's, since production would pay them)."""
    pure = type(rt.reranker) in _PURE_RERANKERS
    done: dict[tuple, tuple] = {}
    out = []
    for i, (fx, hits) in enumerate(zip(fixtures, retrieved, strict=True)):
        key = _pack_key(fx, hits) if pure else i
        if key not in done:
            times: dict[str, float] = {}
            done[key] = (run_to_pack(rt, index, fx, hits, times), times)
        packed, times = done[key]
        if laps is not None:
            laps.add(i, times)
            laps.pairs[i] = len(packed[1].head)
        out.append(packed)
    return out


def finish(
    rt: ArmRuntime,
    fx: Fixture,
    hits: Retrieved,
    packed: tuple,
    texts: dict[str, str],
    times: dict[str, float] | None = None,
) -> QuestionTrace:
    """Generation and verdicts for a question packed by :func:`run_to_pack`."""
    merged, fused, reranked, selected, views = packed
    with timed({} if times is None else times, "generate"):
        generated = generate(rt.generator, fx.question, views.primary, hits.failure or reranked.failure)
    verdicts = judge(generated, fx, texts, rt.config.judge)
    return QuestionTrace(fx, hits, merged, fused, reranked, selected, views, generated, verdicts)


def run_one(
    rt: ArmRuntime, index: PhaseIndex, fx: Fixture, hits: Retrieved, texts: dict[str, str]
) -> QuestionTrace:
    """One question from its retrieved lists to its verdicts."""
    return finish(rt, fx, hits, run_to_pack(rt, index, fx, hits), texts)


def _prefetch_reader(rt: ArmRuntime, fixtures: Sequence[Fixture], packed: Sequence[tuple]) -> None:
    """A reader with a model of its own (endpoint embeddings) reads the packed blocks: encode them in
    one batch rather than one text at a time. With the arm's own model they are cached already."""
    if len(rt.caches()) < 2 or getattr(rt.generator, "prefetch", None) is None:
        return
    wanted = {f.question for f in fixtures}
    for _, _, _, _, views in packed:
        wanted.update(b.text for b in views.primary.blocks)
    rt.generator.prefetch(sorted(wanted))


def run_questions(
    rt: ArmRuntime,
    index: PhaseIndex,
    fixtures: Sequence[Fixture],
    texts: dict[str, str],
    oracle: dict[str, dict],
    on_question: Callable[[], None] | None = None,
    laps: Laps | None = None,
    repeats: int = 1,
    repeat_rows: list[dict] | None = None,
) -> tuple[list[dict], CandidateSink]:
    """Every question down the cascade at this phase; returns (records, candidate sink).
    ``laps`` (the resource record) gets each question's stage seconds and generation result;
    ``repeats`` > 1: each record's answers, repeat 0's first, go to ``repeat_rows`` (:mod:`.repeats`)."""
    questions = [f.question for f in fixtures]
    t0 = time.perf_counter()
    rt.encoder.encode(questions)  # one batch (an endpoint retries here what failed at an earlier phase)
    if laps is not None:
        laps.share("embed_query", time.perf_counter() - t0)
    retrieved = retrieve(index, questions, laps)
    records: list[dict] = []
    cands = CandidateSink()
    # The per-question products are tiny: waking BLAS worker threads for each costs more than the
    # product itself (and competes with the model's own threads on small machines).
    with single_threaded_blas():
        packed = pack_all(rt, index, fixtures, retrieved, laps)
    _prefetch_reader(rt, fixtures, packed)
    with single_threaded_blas():
        for i, (fx, hits, upto) in enumerate(zip(fixtures, retrieved, packed, strict=True)):
            times: dict[str, float] = {}
            trace = finish(rt, fx, hits, upto, texts, times)
            if repeats > 1 and repeat_rows is not None:  # --repeats: repeat 0 is this trace
                again = partial(finish, rt, fx, hits, upto, texts, times)
                repeat_rows += run_repeats(again, rt, index.phase.label, trace, repeats)
            if laps is not None:
                laps.add(i, times)
                laps.results.append(trace.generated.result)
            flags = support(index, trace, texts)
            record_candidates(cands, rt.config.name, index, trace)
            records.append(
                build_record(
                    rt.config, index, trace, flags, oracle.get(fx.qid, {}), rt.count_tokens, rt.prompt
                )
            )
            if on_question:
                on_question()
    return records, cands
