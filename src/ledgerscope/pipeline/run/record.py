"""Ledger rows from one question's trace: its candidate rows and its record row, each built here only.

The cascade's stages return typed outputs (:class:`ledgerscope.pipeline.contracts.stages.QuestionTrace`);
this module is
the one place that turns them into the ledger's columns, so a new stage or a replaced one
changes the rows only by what it hands on.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence

import pyarrow as pa

from ledgerscope.ledger import schema
from ledgerscope.pipeline.arm.config import ArmConfig
from ledgerscope.pipeline.contracts.prompt import DEFAULT_TEMPLATE, PromptTemplate
from ledgerscope.pipeline.contracts.stages import PhaseIndex, QuestionTrace, Support
from ledgerscope.pipeline.contracts.units import Unit
from ledgerscope.pipeline.ranking.select import repeated_source_tokens


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
        c["score"].extend([None] * n if scores is None else [None if x is None else float(x) for x in scores])
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


def record_candidates(sink: CandidateSink, arm: str, index: PhaseIndex, trace: QuestionTrace) -> None:
    """Every ranked or selected list of one question, in stage order (scores where a stage has them).

    ``arm`` is the reader's arm, which may differ from the arm whose index it searched.
    """
    phase, qid, units = index.phase.label, trace.fixture.qid, index.units
    for stage, ranked in (
        ("bm25", trace.retrieved.bm25),
        ("dense_exact", trace.retrieved.dense_exact),
        ("dense_ann", trace.retrieved.dense_ann),
    ):
        sink.add(arm, phase, qid, stage, [units[i] for i in ranked.indices], ranked.scores)
    sink.add(arm, phase, qid, "union", trace.merged.units, None, trace.merged.lineage)
    # the whole fused list is recorded; the reranker saw its first rerank_depth entries
    fused = trace.fused.ranked
    sink.add(arm, phase, qid, "fused", [units[i] for i, _ in fused], [s for _, s in fused])
    # the whole reranked list is recorded (reranker regret needs the ranks below the cut)
    sink.add(arm, phase, qid, "reranked", trace.reranked.units, trace.reranked.scores)
    sink.add(arm, phase, qid, "selected", trace.selected.units, None)
    sink.add(arm, phase, qid, "packed", trace.views.primary.units, None)
    sink.add(arm, phase, qid, "topk", trace.views.secondary.units, None)


def build_record(
    cfg: ArmConfig,
    index: PhaseIndex,
    trace: QuestionTrace,
    support: Support,
    oracle_row: Mapping,
    count_tokens: Callable[[str], int],
    template: PromptTemplate = DEFAULT_TEMPLATE,
) -> dict:
    """The question's record row: the fixture, support flags, packed context, answer and verdicts."""
    fx, primary, secondary = trace.fixture, trace.views.primary, trace.views.secondary
    gen, verdicts = trace.generated.result, trace.verdicts
    return {
        "arm": cfg.name,
        "phase": index.phase.label,
        "phase_offset": index.phase.offset,
        "qid": fx.qid,
        "question": fx.question,
        "segment": fx.segment,
        "answerable": fx.answerable,
        "support_only": fx.support_only,
        "stress_set": fx.stress_set,
        "doc_ids": list(fx.doc_ids),
        "gold_status": support.gold_status,
        **support.flags,
        "covered_set": support.covered_set,
        "single_unit_complete": support.single_unit_complete,
        "packed_context": template.context(primary.blocks),
        "packed_unit_ids": [u.unit_id for u in primary.units],
        "evidence_tokens": primary.evidence_tokens,
        "prompt_tokens": gen.prompt_tokens,
        "budget_tokens": cfg.budget_tokens,
        "rerank_depth": cfg.rerank_depth,
        "selection_depth": trace.reranked.depth,
        "repeated_source_tokens": repeated_source_tokens(primary.units, count_tokens),
        "topk_tokens": secondary.evidence_tokens,
        "overflow_json": json.dumps(primary.overflow),
        "expansion_dropped_json": json.dumps(trace.selected.dropped),
        "answer": gen.answer,
        "abstained": gen.abstained,
        "citations_json": json.dumps(trace.generated.citations, ensure_ascii=False),
        "answer_verdict": verdicts.answer,
        "answer_reason": verdicts.answer_reason,
        "citation_verdict": verdicts.citation,
        "citation_reason": verdicts.citation_reason,
        "generator_error": gen.error,
        "attempts": gen.attempts,
        "generator_detail_json": json.dumps(gen.detail, ensure_ascii=False, sort_keys=True),
        "oracle_verdict": oracle_row.get("answer_verdict"),
        "oracle_feasible": oracle_row.get("feasible"),
        "config_digest": index.config_digest,
        # a sweep places every unit it chunks itself: no verdict rests on an unlocated chunk
        "unverifiable_stages": None,
    }
