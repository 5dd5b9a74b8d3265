"""The optional LLM judge: an OpenAI-compatible endpoint grading answers with a fixed rubric.

Never the default (``[judge] kind = "deterministic"`` is). With ``kind =
"endpoint"`` the sweep asks the endpoint, through the same adapter as the
generator (:class:`~ledgerscope.pipeline.generation.endpoint.EndpointGenerator`), for one
label per answer. The rubric is fixed (:data:`RUBRIC` and its worked :data:`EXAMPLES`,
versioned by :data:`RUBRIC_VERSION`) and recorded whole in the manifest
(``components.judge``), so every verdict says which instructions produced it.

What its verdicts are worth is measured, not assumed: ``ledgerscope judge
calibrate LEDGER --arm A`` compares them with the deterministic judge (confusion
matrix, Cohen's kappa). A small local model agrees poorly; see the README.

Rules:

* support-only fixtures and answerable fixtures without an expected answer are
  ``not-judged`` without a request (there is nothing to grade against), as in
  the deterministic judge;
* the reply's first label (case-insensitive; spaces or hyphens) is the verdict;
  a reply with no label is ``not-judged`` with the reply in the reason;
* a failed request (network, HTTP, timeout) is an ``infrastructure-failure``,
  never silently replaced by the deterministic verdict.
"""

from __future__ import annotations

import hashlib
import json
import re

from ledgerscope.inputs.fixtures import Fixture
from ledgerscope.pipeline.generation.endpoint import EndpointGenerator
from ledgerscope.rules.judge import AnswerJudgement, with_inferred_default

RUBRIC_VERSION = "ledgerscope-llm-judge/1"  # the rubric and its worked examples
LABELS = ("critical-condition-error", "false-assertion", "abstained", "correct", "wrong")
RUBRIC = """\
You grade one answer to a question against an answer key. Reply with exactly one label and nothing else.

Labels:
- correct: the answer states the expected answer (or an accepted alternative). Paraphrases, other \
units of the same quantity, and extra explanation are fine. If the answer gives both the expected \
value and the default value, it is correct.
- critical-condition-error: the answer gives the default answer (the value that applies when the \
qualifying condition is ignored) instead of the expected answer.
- abstained: the answer declines to answer or says the sources do not contain the answer, without \
stating a value.
- wrong: the answer states something else (a different value, a different unit, a partial answer, \
or a bare number where a quantity with a unit is expected).
- false-assertion: the question is NOT answerable from the sources and the answer nevertheless \
states an answer (a hedged guess counts as an assertion).

Reply with one of: correct, critical-condition-error, abstained, wrong, false-assertion."""

#: worked examples sent before every answer (user, assistant turns): small models follow a format
#: they have seen far better than one they were only told about; fixed like the rubric
EXAMPLES = (
    (
        "Question: How long are backups kept?\nAnswerable from the sources: yes\nExpected answer: 14 days\n"
        "Default answer (qualifying condition ignored): 30 days\nAnswer to grade: Backups are kept for two "
        "weeks.\nLabel:",
        "correct",
    ),
    (
        "Question: How long are backups kept?\nAnswerable from the sources: yes\nExpected answer: 14 days\n"
        "Default answer (qualifying condition ignored): 30 days\nAnswer to grade: They are kept for 30 days."
        "\nLabel:",
        "critical-condition-error",
    ),
    (
        "Question: Who signs the contract?\nAnswerable from the sources: no (any stated answer is a "
        "false-assertion)\nAnswer to grade: I cannot answer from the provided sources.\nLabel:",
        "abstained",
    ),
)
_LABEL = re.compile(r"critical[\s_-]*condition[\s_-]*error|false[\s_-]*assertion|abstained|correct|wrong")


def grading_prompt(answer: str | None, fixture: Fixture) -> str:
    """The user message: the answer key and the answer to grade (the rubric is the system message)."""
    contract = fixture.answer
    lines = [f"Question: {fixture.question}"]
    if not fixture.answerable:
        lines.append("Answerable from the sources: no (any stated answer is a false-assertion)")
    else:
        lines.append("Answerable from the sources: yes")
        lines.append(f"Expected answer: {contract.expected}")
        if contract.aliases:
            lines.append("Also accepted: " + "; ".join(contract.aliases))
        lines.append(f"Default answer (qualifying condition ignored): {contract.default or 'none'}")
    lines.append(f"Answer to grade: {answer or ''}")
    lines.append("Label:")
    return "\n".join(lines)


def messages(prompt: str) -> list[dict[str, str]]:
    """The whole request: the rubric, the worked examples, then the answer to grade."""
    out = [{"role": "system", "content": RUBRIC}]
    for question, label in EXAMPLES:
        out += [{"role": "user", "content": question}, {"role": "assistant", "content": label}]
    return [*out, {"role": "user", "content": prompt}]


def parse_label(reply: str) -> str | None:
    """The first label in the reply, normalised (``Critical condition error`` -> the hyphenated form)."""
    m = _LABEL.search(reply.casefold())
    if not m:
        return None
    return re.sub(r"[\s_-]+", "-", m.group(0))


class EndpointJudge:
    """An LLM judge behind an OpenAI-compatible endpoint, with the fixed :data:`RUBRIC`."""

    kind = "endpoint"

    def __init__(self, client: EndpointGenerator):
        self.client = client

    @classmethod
    def from_table(cls, table: dict) -> EndpointJudge:
        return cls(
            EndpointGenerator(
                table["base_url"],
                table.get("model", ""),
                api_key_env=table.get("api_key_env") or None,
                temperature=float(table.get("temperature", 0.0)),
                max_tokens=int(table.get("max_tokens", 16)),
            )
        )

    def describe(self) -> dict:
        return {
            "kind": self.kind,
            "rubric_version": RUBRIC_VERSION,
            "rubric": RUBRIC,
            "examples": [{"user": q, "assistant": a} for q, a in EXAMPLES],
            "rubric_sha256": hashlib.sha256(json.dumps([RUBRIC, EXAMPLES]).encode("utf-8")).hexdigest(),
            "prompt": "system: the rubric; the examples as user/assistant turns; user: "
            "pipeline.judge_llm.grading_prompt",
            "endpoint": self.client.describe(),
        }

    def judge(self, answer: str | None, abstained: bool, fixture: Fixture):
        if fixture.support_only:
            return AnswerJudgement("not-judged", "support-only fixture: no answer contract")
        if fixture.answerable and not fixture.answer.expected:
            return AnswerJudgement("not-judged", "no expected answer in the contract")
        fixture = with_inferred_default(fixture)
        result = self.client.chat(messages(grading_prompt(answer, fixture)))
        if result.error:
            return AnswerJudgement("infrastructure-failure", f"llm judge: {result.error}")
        label = parse_label(result.answer)
        reply = result.answer.strip().replace("\n", " ")[:120]
        if label is None:
            return AnswerJudgement("not-judged", f"llm judge: no label in the reply {reply!r}")
        return AnswerJudgement(label, f"llm judge ({RUBRIC_VERSION}): {reply!r}")
