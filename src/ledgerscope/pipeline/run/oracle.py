"""The oracle full-support prompt (seed 000, "Oracle diagnostics"): the arm's own generator on
an adjudicated sufficient set, the same question and the same answer rubric.

Retrieval is skipped: the gold quotes of the cheapest sufficient set fill the
context under the production evidence budget (what does not fit is left out
and the row says infeasible). Retrieval failing where the oracle succeeds
points at retrieval; both failing points at the generator, the prompt or the
annotation. The diagnosis reads this row beside the record's.
"""

from __future__ import annotations

from collections.abc import Sequence

from ledgerscope.inputs.fixtures import Fixture
from ledgerscope.pipeline.contracts.stages import generate_or_failure
from ledgerscope.pipeline.generation.reader import ExtractiveReader, oracle_blocks
from ledgerscope.pipeline.judging.answer_judges import answer_judge
from ledgerscope.pipeline.run.runtime import ArmRuntime


def prepare_oracle(rt: ArmRuntime, fixtures: Sequence[Fixture]) -> None:
    """Batch-encode every gold quote an oracle prompt will show (one pass, not one per span)."""
    if isinstance(rt.generator, ExtractiveReader) and rt.generator.prefetch is not None:
        rt.generator.prefetch(
            [s.quote for f in fixtures for s in f.spans if s.quote] + [f.question for f in fixtures]
        )


def run_oracle(rt: ArmRuntime, fx: Fixture) -> dict:
    """The same generator on an adjudicated sufficient set, under the production budget."""
    cfg = rt.config
    row = {
        "arm": cfg.name,
        "qid": fx.qid,
        "support_set": None,
        "feasible": None,
        "evidence_tokens": None,
        "budget_tokens": cfg.budget_tokens,
        "context": None,
        "answer": None,
        "abstained": None,
        "answer_verdict": "not-applicable",
        "answer_reason": "no sufficient set (unanswerable control)",
        "generator_error": None,
        "attempts": 0,
    }
    if not fx.sufficient_sets:
        return row
    options = []
    for i, sset in enumerate(fx.sufficient_sets):
        spans = [fx.span(sid) for sid in sset]
        blocks = oracle_blocks([(s.span_id, s.doc_id, s.quote or "") for s in spans])
        options.append((rt.count_tokens(rt.prompt.context(blocks)), i, blocks))
    tokens, set_index, blocks = min(options, key=lambda o: (o[0], o[1]))
    feasible = tokens <= cfg.budget_tokens
    if not feasible:  # pack what fits, in set order, and say so
        fitted = []
        for b in blocks:
            if rt.count_tokens(rt.prompt.context([*fitted, b])) <= cfg.budget_tokens:
                fitted.append(b)
        blocks = fitted
    gen = generate_or_failure(rt.generator, fx.question, blocks)
    if gen.error:
        verdict, reason = "infrastructure-failure", gen.error
    else:
        aj = answer_judge(cfg.judge).judge(gen.answer, gen.abstained, fx)
        verdict, reason = aj.verdict, aj.reason
        because = (gen.detail or {}).get("abstained_because") if gen.abstained else None
        if because:  # the generator's own reason (a yes/no question is counted apart by the meter)
            reason = f"{reason}; reason: {because}"
    row.update(
        support_set=set_index,
        feasible=feasible,
        evidence_tokens=tokens,
        context=rt.prompt.context(blocks),
        answer=gen.answer,
        abstained=gen.abstained,
        answer_verdict=verdict,
        answer_reason=reason,
        generator_error=gen.error,
        attempts=gen.attempts,
    )
    return row
