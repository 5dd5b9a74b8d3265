"""The judge an arm's ``[judge]`` table names: the deterministic rules (the default) or an LLM.

The sweep and the oracle grade every answer through :func:`answer_judge`, so
``kind = "endpoint"`` changes the grader without touching the cascade; the
judge's :meth:`describe` is recorded in the manifest (``components.judge``).
"""

from __future__ import annotations

import json

from ledgerscope.inputs.fixtures import Fixture
from ledgerscope.rules.answer_match import F1_THRESHOLD
from ledgerscope.rules.judge import AnswerJudgement, judge_answer


class DeterministicJudge:
    """The rules of :mod:`ledgerscope.rules.judge` (the default ``[judge] kind``)."""

    kind = "deterministic"

    def describe(self) -> dict:
        return {
            "kind": self.kind,
            "rules": "ledgerscope.rules.judge and .answer_match (docstrings)",
            "token_f1_default": F1_THRESHOLD,
        }

    def judge(self, answer: str | None, abstained: bool, fixture: Fixture) -> AnswerJudgement:
        return judge_answer(answer, abstained, fixture)


#: one judge per distinct [judge] table for the process's life: a sweep names one or two tables, and an
#: endpoint judge keeps its HTTP client (and the server it may have started) across arms and phases
_JUDGES: dict[str, object] = {}


def answer_judge(table: dict | None):
    """The judge an arm's ``[judge]`` table names (one instance per distinct table)."""
    table = table or {}
    key = json.dumps(table, sort_keys=True, default=str)
    judge = _JUDGES.get(key)
    if judge is None:
        if table.get("kind", "deterministic") == "endpoint":
            from ledgerscope.pipeline.judging.judge_llm import EndpointJudge

            judge = EndpointJudge.from_table(table)
        else:
            judge = DeterministicJudge()
        _JUDGES[key] = judge
    return judge
