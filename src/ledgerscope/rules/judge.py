"""Deterministic answer and citation verdicts (pure functions, no I/O, no model).

Every rule the judge applies is written here, so a verdict in a ledger can be
re-derived by hand. The judge is deliberately lexical: it never asks a model.

Free-text matching
------------------
Abstention, SQuAD-style normalisation, quantities with units and currencies,
aliases and the token-F1 rule are in :mod:`ledgerscope.rules.answer_match`
(its docstring holds every rule); the names are re-exported here.

Answer verdicts (:func:`judge_answer`), first rule that applies
---------------------------------------------------------------
1. ``support_only`` fixture -> ``not-judged`` (no answer contract).
2. unanswerable fixture -> ``abstained`` if the generator flagged an abstention
   or the text is one, else ``false-assertion``.
3. answerable, and flagged or detected abstention -> ``abstained``. An empty
   answer counts as an abstention: callers must label infrastructure failures
   themselves and not pass them to the judge.
4. answerable without an expected answer -> ``not-judged``.
5. the answer matches the expected answer or any alias -> ``correct``.
6. the answer matches the contract's default (the answer one gives when the
   mandatory qualifier is missed), declared or inferred (below) ->
   ``critical-condition-error``.
7. otherwise -> ``wrong``.

Matching follows :func:`~ledgerscope.rules.answer_match.matches` with the
fixture's declared rules (``answer.match``: ``bare_number``, ``token_f1``).

*Both values present.* An answer that contains the expected quantities and the
default's too ("30 days in general; 7 days for temporary requests") is
``correct``: rule 5 is checked before rule 6, so the qualified value wins. The
judge cannot parse which value the answer attaches to the qualified case, and
an answer that states the qualified value has not silently dropped the
qualifier; the reason records that the default was mentioned as well. An answer
with the default but without the expected value is the critical-condition
error.

Inferred defaults (:func:`infer_default`)
-----------------------------------------
A declared default always wins. Otherwise a *condition-dependent* fixture (an
answerable, answer-judged fixture with at least one qualifier span, see
:data:`~ledgerscope.inputs.fixtures.QUALIFIER_DEPENDENCIES`, and at least one
span that is not a qualifier) whose expected answer states quantities gets a
candidate default: the quantities in its non-qualifier spans (in span order)
whose unit is one of the expected answer's units and whose value differs from
every expected value. Exactly one distinct such quantity -> that quantity, as
the span words it (seed 000's rule span "Requests may be retained for 30
days." gives ``"30 days"``), recorded in the contract with
``default_inferred_from`` = the span id; none, or several different ones (the
rule names more than one value, so no single default can be named), -> no
default. :func:`with_inferred_default` writes it into the fixture; the sweep
does that before it records the fixtures, so the ledger's answer contract says
what was inferred and from which span.

Citation verdicts (:func:`judge_citations`), first rule that applies
--------------------------------------------------------------------
Each citation is ``(label, doc_id, start, end)``; ``doc_id`` is ``None`` when
the label does not name a packed unit.

1. answer verdict ``abstained`` -> ``not-applicable``.
2. any citation with ``doc_id``, ``start`` or ``end`` ``None`` ->
   ``unresolvable`` (it points nowhere).
3. no citations -> ``no-citation``.
4. unanswerable fixture (a false assertion with citations) -> ``unsupported``:
   no sufficient set exists to cover.
5. cited intervals are grouped by document and, per document, their union is
   tested against each sufficient set in order with
   :func:`~ledgerscope.common.intervals.covers` over that document's text
   (whitespace between adjacent units is not evidence). The first set whose
   every span is covered -> ``supported`` (``covered_set`` names it). Joint
   evidence across several cited units counts.
6. otherwise -> ``unsupported`` (the reason names the uncovered spans of the
   set that came closest).

If a gold span's document text is missing from ``source_texts``, coverage of
that span is checked on the raw intervals without excusing whitespace.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from ledgerscope.common.intervals import covers, uncovered
from ledgerscope.rules.answer_match import (
    F1_THRESHOLD,
    MatchRules,
    Quantity,
    clean,
    extract_quantities,
    is_abstention,
    matches,
    normalize_tokens,
    quantity_spans,
    token_f1,
)

if TYPE_CHECKING:  # the fixture model is inputs/, a layer above: rules read its fields, never import it
    from ledgerscope.inputs.fixtures import Fixture

__all__ = [
    "ANSWER_VERDICTS",
    "CITATION_VERDICTS",
    "F1_THRESHOLD",
    "AnswerJudgement",
    "CitationJudgement",
    "Quantity",
    "extract_quantities",
    "infer_default",
    "is_abstention",
    "judge_answer",
    "judge_citations",
    "normalize_tokens",
    "token_f1",
    "with_inferred_default",
]

ANSWER_VERDICTS = (
    "correct",
    "critical-condition-error",
    "abstained",
    "wrong",
    "false-assertion",
    "not-judged",
)
CITATION_VERDICTS = ("supported", "unsupported", "unresolvable", "no-citation", "not-applicable")

Citation = tuple[str, str | None, int | None, int | None]


@dataclass(frozen=True)
class AnswerJudgement:
    verdict: str
    reason: str
    matched: str | None = None


def infer_default(fixture: Fixture) -> tuple[str, str] | None:
    """(default text, span id) inferred from the non-qualifier spans, or None (module docstring)."""
    contract = fixture.answer
    if fixture.support_only or not fixture.answerable or not contract.expected:
        return None
    if not any(s.is_qualifier for s in fixture.spans) or all(s.is_qualifier for s in fixture.spans):
        return None
    expected = extract_quantities(contract.expected)
    units = {unit for _value, unit in expected}
    if not expected:
        return None
    found: list[tuple[Quantity, str, str]] = []  # (quantity, words, span id)
    for span in fixture.spans:
        if span.is_qualifier or not span.quote:
            continue
        text = clean(span.quote)
        for start, end, quantity in quantity_spans(span.quote):
            differs = all(quantity[0] != value for value, _unit in expected)
            if quantity[1] in units and differs:
                found.append((quantity, text[start:end].strip(), span.span_id))
    if len({q for q, _w, _s in found}) != 1:
        return None
    _quantity, words, span_id = found[0]
    return words, span_id


def with_inferred_default(fixture: Fixture) -> Fixture:
    """The fixture with its inferred default written into the answer contract (declared wins)."""
    if fixture.answer.default:
        return fixture
    inferred = infer_default(fixture)
    if inferred is None:
        return fixture
    words, span_id = inferred
    return replace(fixture, answer=replace(fixture.answer, default=words, default_inferred_from=span_id))


def judge_answer(answer: str | None, abstained: bool, fixture: Fixture) -> AnswerJudgement:
    """The answer verdict for one record (rules in the module docstring)."""
    if fixture.support_only:
        return AnswerJudgement("not-judged", "support-only fixture: no answer contract")
    declined = abstained or is_abstention(answer)
    if not fixture.answerable:
        if declined:
            return AnswerJudgement("abstained", "unanswerable control: the generator abstained")
        return AnswerJudgement("false-assertion", "unanswerable control answered with a claim")
    if declined:
        why = "generator flagged an abstention" if abstained else "answer is an abstention"
        return AnswerJudgement("abstained", why)
    contract = with_inferred_default(fixture).answer
    if not contract.expected:
        return AnswerJudgement("not-judged", "no expected answer in the contract")
    rules = MatchRules.from_contract(contract.match)
    text = answer or ""
    answer_qs = extract_quantities(text)
    default_hit = bool(contract.default) and matches(text, answer_qs, contract.default or "", rules)
    source = (
        f" (inferred from span {contract.default_inferred_from!r})" if contract.default_inferred_from else ""
    )
    for candidate in (contract.expected, *contract.aliases):
        if matches(text, answer_qs, candidate, rules):
            reason = f"matches {'expected' if candidate == contract.expected else 'alias'} "
            reason += f"{candidate!r}"
            if default_hit:
                reason += f"; also mentions the default {contract.default!r}{source} (qualified value wins)"
            return AnswerJudgement("correct", reason, candidate)
    if default_hit:
        return AnswerJudgement(
            "critical-condition-error",
            f"gives the default {contract.default!r}{source} where the qualifier governs "
            f"(expected {contract.expected!r})",
            contract.default,
        )
    return AnswerJudgement(
        "wrong",
        f"matches neither expected {contract.expected!r}"
        + (f" nor default {contract.default!r}{source}" if contract.default else ""),
    )


# ---------------------------------------------------------------------------
# citations


@dataclass(frozen=True)
class CitationJudgement:
    verdict: str
    reason: str
    covered_set: tuple[str, ...] | None = None


def judge_citations(
    cited: Sequence[Citation],
    fixture: Fixture,
    source_texts: dict[str, str],
    answer_verdict: str,
) -> CitationJudgement:
    """The citation verdict for one record (rules in the module docstring)."""
    if answer_verdict == "abstained":
        return CitationJudgement("not-applicable", "the answer abstained")
    dangling = [label for label, doc, start, end in cited if doc is None or start is None or end is None]
    if dangling:
        return CitationJudgement("unresolvable", f"citation(s) {', '.join(dangling)} name no packed unit")
    if not cited:
        return CitationJudgement("no-citation", "the answer cites nothing")
    if not fixture.answerable or not fixture.sufficient_sets:
        return CitationJudgement("unsupported", "no sufficient support set exists for this question")
    by_doc: dict[str, list[tuple[int, int]]] = {}
    for _label, doc, start, end in cited:
        by_doc.setdefault(doc, []).append((int(start), int(end)))  # type: ignore[arg-type]
    spans = {s.span_id: s for s in fixture.spans}
    best: tuple[int, tuple[str, ...], list[str]] | None = None
    for sset in fixture.sufficient_sets:
        missing = []
        for sid in sset:
            span = spans.get(sid)
            if span is None or not _span_covered(span.doc_id, span.start, span.end, by_doc, source_texts):
                missing.append(sid)
        if not missing:
            return CitationJudgement(
                "supported", f"cited intervals cover sufficient set {list(sset)}", tuple(sset)
            )
        if best is None or len(missing) < best[0]:
            best = (len(missing), tuple(sset), missing)
    assert best is not None
    return CitationJudgement(
        "unsupported",
        f"cited intervals leave span(s) {', '.join(best[2])} of set {list(best[1])} uncovered",
    )


def _span_covered(
    doc_id: str, start: int, end: int, by_doc: dict[str, list[tuple[int, int]]], source_texts: dict[str, str]
) -> bool:
    intervals = by_doc.get(doc_id, [])
    if not intervals:
        return False
    text = source_texts.get(doc_id)
    if text is None:
        return not uncovered("x" * end, start, end, intervals)
    return covers(text, start, end, intervals)
