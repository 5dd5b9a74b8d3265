"""The prompt template: ``[generator] system``, ``context_format`` and ``question_format``, counted in
the budget exactly as rendered and recorded in the manifest; the default is the built-in prompt."""

from __future__ import annotations

import json

import pytest

from ledgerscope.common.errors import InputError
from ledgerscope.inputs.fixtures import load_fixtures
from ledgerscope.inputs.sources import load_corpus
from ledgerscope.ledger.read import connect
from ledgerscope.ledger.verify import load_manifest
from ledgerscope.pipeline.arm.config import arm_from_dict
from ledgerscope.pipeline.contracts.prompt import (
    DEFAULT_TEMPLATE,
    INSTRUCTIONS,
    ContextBlock,
    PromptTemplate,
    render_context,
    render_prompt,
    template_from_config,
)
from ledgerscope.pipeline.contracts.units import Unit
from ledgerscope.pipeline.embedding.encoder import TokenCounter
from ledgerscope.pipeline.ranking.select import pack
from ledgerscope.pipeline.run.sweep import sweep

from .endpoint_servers import FaultyServer
from .test_plugins import BagOfWords

BLOCKS = [
    ContextBlock("1", "d@0-9", "d", "Requests {may} be kept."),
    ContextBlock("2", "e@0-5", "e", "Other."),
]
CUSTOM = {
    "system": "You answer from documents.",
    "context_format": "<doc id={doc_id} n={label}>{text}</doc>",
    "question_format": "{context}\n---\nQ: {question}",
}


def echo(request):
    """A python generator that keeps what it was asked with (for the record's detail)."""
    from ledgerscope.pipeline.contracts.prompt import GenerationResult

    return GenerationResult(
        "I cannot answer from the provided sources.",
        [],
        True,
        detail={"system": request.system, "user": request.user, "prompt": request.prompt},
    )


def test_the_default_template_is_the_built_in_prompt():
    assert template_from_config({}) == DEFAULT_TEMPLATE
    assert DEFAULT_TEMPLATE.prompt("Q?", BLOCKS) == render_prompt("Q?", BLOCKS)
    assert DEFAULT_TEMPLATE.context(BLOCKS) == render_context(BLOCKS)
    assert DEFAULT_TEMPLATE.messages("Q?", BLOCKS) == [
        {"role": "user", "content": render_prompt("Q?", BLOCKS)}
    ]


def test_a_custom_template_renders_every_part_and_sends_the_system_message_apart():
    t = template_from_config(CUSTOM)
    assert t.block(BLOCKS[0]) == "<doc id=d n=1>Requests {may} be kept.</doc>"  # braces in text are text
    assert t.user("Q?", BLOCKS) == t.context(BLOCKS) + "\n---\nQ: Q?"
    assert t.prompt("Q?", BLOCKS) == "You answer from documents.\n\n" + t.user("Q?", BLOCKS)
    assert t.messages("Q?", BLOCKS) == [
        {"role": "system", "content": "You answer from documents."},
        {"role": "user", "content": t.user("Q?", BLOCKS)},
    ]
    only_format = template_from_config({"context_format": "{text}"})
    assert only_format.system == INSTRUCTIONS and not only_format.system_message


def _units(texts):
    out, pos = [], 0
    for i, t in enumerate(texts):
        end = pos + len(t)
        out.append(Unit(f"d@{pos}-{end}", "d", "v", i, pos, end, t, 0, 1, pos, end))
        pos += len(t) + 1
    return out


def test_the_budget_counts_blocks_as_the_template_renders_them():
    count = TokenCounter("bundled:all-MiniLM-L6-v2").count
    units = _units(["Requests may be retained for 30 days.", "This limit is 7 days.", "Backups: 14 days."])
    wordy = PromptTemplate(context_format="=== source number {label} from document {doc_id} ===\n{text}")
    for template in (DEFAULT_TEMPLATE, wordy):
        packed = pack(units, count, 10_000, template=template)
        assert packed.evidence_tokens == count(template.context(packed.blocks))
    budget = pack(units, count, 10_000).evidence_tokens  # everything fits the default rendering ...
    assert len(pack(units, count, budget).units) == 3
    assert len(pack(units, count, budget, template=wordy).units) < 3  # ... not the wordier one


def test_a_sweep_records_the_rendered_context_prompt_tokens_and_the_template(rule_exception_inputs, tmp_path):
    arm = arm_from_dict(
        {
            "name": "templated",
            "capacity": 16,
            "phases": [0],
            "budget_tokens": 80,
            "rerank": {"kind": "none"},
            "generator": {"kind": "python", "callable": "tests.test_prompt_template:echo", **CUSTOM},
        }
    )
    paths = rule_exception_inputs
    fixtures, corpus = load_fixtures(paths["fixtures"], load_corpus(paths["corpus"]))
    sweep(fixtures, corpus, [arm], tmp_path / "ledger", encoder_factory=lambda n, b: BagOfWords())
    con = connect(tmp_path / "ledger")
    count = TokenCounter("bundled:all-MiniLM-L6-v2").count
    rows = con.execute(
        "SELECT question, packed_context, evidence_tokens, prompt_tokens, "
        "generator_detail_json, packed_unit_ids FROM records"
    ).fetchall()
    assert any(ctx for _, ctx, *_ in rows)
    for question, context, evidence, prompt_tokens, detail, packed in rows:
        detail = json.loads(detail)
        assert context.count("<doc id=") == context.count("</doc>") == len(packed)
        assert evidence == (count(context) if context else 0) and evidence <= 80
        assert detail["user"] == f"{context}\n---\nQ: {question}"
        assert detail["prompt"] == f"{CUSTOM['system']}\n\n{detail['user']}"
        assert prompt_tokens == count(detail["prompt"])
    prompt = load_manifest(tmp_path / "ledger")["arms"]["templated"]["components"]["prompt"]
    assert prompt == {**CUSTOM, "system_message": True}


def test_the_endpoint_generator_sends_the_template_over_the_wire():
    from ledgerscope.pipeline.generation.endpoint import EndpointGenerator

    with FaultyServer() as server:
        gen = EndpointGenerator(server.base_url, "m", template=template_from_config(CUSTOM))
        result = gen.generate("How long?", BLOCKS)
        sent = server.last_chat["messages"]
    assert result.answer == "7 days [1]" and result.citations == ["1"]
    assert sent == template_from_config(CUSTOM).messages("How long?", BLOCKS)
    assert gen.describe()["prompt"]["context_format"] == CUSTOM["context_format"]


@pytest.mark.parametrize(
    ("key", "value", "reason"),
    [
        ("context_format", "{title}: {text}", "{title} is not one of {label}, {doc_id}, {unit_id}, {text}"),
        ("context_format", "{text.__class__}", "is not one of"),
        ("context_format", "{text!r}", "{text!r} is not one of"),
        ("context_format", "{text", "not a format string"),
        ("question_format", "Q: {question}", "must hold {context}"),
        ("question_format", "{context} {answer}", "{answer} is not one of {context}, {question}"),
    ],
)
def test_a_bad_template_is_named_by_its_key(key, value, reason):
    with pytest.raises(InputError) as err:
        arm_from_dict({"generator": {key: value}}, "arm.toml")
    hits = [p for p in err.value.problems if p.field == f"generator.{key}"]
    assert hits and reason in hits[0].reason and hits[0].file == "arm.toml", err.value.problems
