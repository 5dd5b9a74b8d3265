"""What the extractive reader answers with, given its scored sentences (pure functions, no model).

:class:`~ledgerscope.pipeline.generation.reader.ExtractiveReader` scores every context sentence;
:func:`answer_plan` decides from that scoring alone, so ``scripts/bench_reader.py`` replays it over
a grid of settings without re-running the model:

1. **Questions an extractive reader cannot decide** abstain, with the reason recorded: a yes/no
   question (it opens with an auxiliary verb: "Is ...", "Did ...") or a comparison between named
   alternatives ("Which film came out first, A or B?"): the answer is a judgement over sentences,
   not a sentence (reason ``yes-no question``, counted apart by the validity meter).
2. **Nothing relates**: the best sentence scores below ``threshold``.
3. **The smallest covering set** (:func:`cover`): the best sentence, then, greedily, the sentence
   naming most of the question's words the chosen ones do not name, from any unit or document, until
   no sentence names a new one (so not limited to two). On retrieved context an added sentence must
   also link to a chosen one (share a word the question does not name); a lone sentence may still
   take one :func:`bridge` from another unit (a hop phrased in other words: "in charge of" / "run
   by"). Joint evidence is the normal case: every unit quoted is cited.
4. **Topical** (retrieved context only): the answer's sentences lead the best sentence outside them
   (not a repeat or a fragment of one of them) by less than ``margin``: several sentences answer the
   same part of the question about equally and none better, so the answer is not in the context.
5. **A sufficient context** (an oracle prompt: every block a gold span, sufficient by construction)
   is answered unless nothing in it relates (rule 2): no margin rule; the cover needs no link;
   :func:`follow_links` adds the next hop reached through a name or number a chosen sentence states
   and the question does not (a hop that repeats no question word), and :func:`every_unit` cites each
   other unit whose best sentence names a question word (a definition, the other half of a clause).
6. **The span**: for a question asking for a quantity, date, name or other entity, the span of the
   answer's sentences that answers it (a number with its unit, a date, a capitalised name the
   question does not contain; the last sentence chosen first: it holds the last hop) opens the
   answer, followed by the sentences it comes from.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ledgerscope.pipeline.ranking.lexical import analyze
from ledgerscope.rules.answer_match import extract_quantities

#: letters two words must share to match (a stemmer that can be explained in one line)
STEM_LETTERS = 5
YES_NO = "yes-no question"
COMPARISON = "yes-no question: comparison"
_AUX = (
    "is|are|was|were|am|do|does|did|can|could|will|would|should|shall|has|have|had|may|might|must|"
    "isn't|aren't|wasn't|weren't|don't|doesn't|didn't|can't|won't|hasn't|haven't"
)
_YES_NO = re.compile(rf"^\W*(?:{_AUX})\b(?!\s+(?:{_AUX})\b)", re.IGNORECASE)
_COMPARATIVE = (
    r"first|earlier|later|last|older|younger|longer|shorter|more|less|fewer|larger|smaller|"
    r"bigger|higher|lower|taller|closer|farther|further|greater|better|worse|newer|"
    r"\w+est|\w{3,}er"
)
_COMPARISON = re.compile(rf"\b(?:which|who|whose)\b[^?]*\b(?:{_COMPARATIVE})\b[^?]*\bor\b", re.IGNORECASE)
_DATE = re.compile(
    r"\b(?:\d{1,2}\s+)?(?:January|February|March|April|May|June|July|August|September|October|November|"
    r"December)(?:\s+\d{1,2})?,?\s+\d{4}\b|\b(?:1[5-9]|20)\d{2}\b"
)
_NAME = re.compile(r"\b[A-Z][\w'\-]*\.?(?:\s+(?:(?:of|de|van|von|the|and|&)\s+)?[A-Z][\w'\-]*\.?)*")
_NUMBER = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?(?:\s*%|\s+[A-Za-z]+)?")
_OPENERS = "\"'(“‘«"
_YEAR = re.compile(r"^(?:1[5-9]|20)\d{2}$")
_WANTS = (
    ("date", re.compile(r"^\W*(?:when|what year|in what year|which year|what date|on what date)\b", re.I)),
    (
        "quantity",
        re.compile(
            r"\bhow (?:many|much|long|often|large|big|old|far|high|fast)\b|"
            r"\bwhat (?:percentage|proportion|number|amount)\b",
            re.I,
        ),
    ),
    (
        "name",
        re.compile(
            r"^\W*(?:who|whom|whose|where|which (?:person|country|city|company|film|team))\b"
            r"|^\W*what is the name\b",
            re.I,
        ),
    ),
)


def stems(text: str) -> frozenset[str]:
    """The text's content words, casefolded and cut to :data:`STEM_LETTERS` letters."""
    return frozenset(w[:STEM_LETTERS] for w in analyze(text))


def question_kind(question: str) -> str | None:
    """``yes-no question`` (or its comparison form) for a question an extractive reader cannot decide."""
    if _YES_NO.search(question):
        return YES_NO
    if _COMPARISON.search(question):
        return COMPARISON
    return None


def wanted_span(question: str) -> str | None:
    """What kind of span the question asks for: ``date``, ``quantity``, ``name`` or None (a sentence)."""
    for kind, pattern in _WANTS:
        if pattern.search(question):
            return kind
    return None


def _same(a: str, b: str) -> bool:
    """One sentence repeats the other or is a fragment of it (a unit boundary cut it)."""
    a, b = " ".join(a.split()), " ".join(b.split())
    return a in b or b in a


def _fresh(item: dict, chosen: Sequence[dict]) -> bool:
    """Not one of the chosen sentences, nor a repeat or fragment of one."""
    return all(item is not c and not _same(item["sentence"], c["sentence"]) for c in chosen)


def cover(question: str, scored: Sequence[dict], floor: float = 0.0, linked: bool = False) -> list[dict]:
    """The smallest set of sentences that covers the question's words, greedily: the best sentence, then
    while some sentence (scoring at least ``floor``) names question words the chosen ones do not, the
    one naming most of them (ties: the better scored), from any unit or document. ``linked``: only a
    sentence that also shares a word the question does not name with a chosen one (retrieved context:
    a sentence about another part of the question is an answer's next step only if it links to it)."""
    if not scored:
        return []
    q = stems(question)
    chosen = [scored[0]]
    covered = stems(scored[0]["sentence"]) & q
    others = stems(scored[0]["sentence"]) - q
    while True:
        best, best_new = None, frozenset()
        for item in scored[1:]:
            if item["score"] < floor or not _fresh(item, chosen):
                continue
            words = stems(item["sentence"])
            if linked and not (words - q) & others:
                continue
            new = (words & q) - covered
            if len(new) > len(best_new):  # scored is best first: ties keep the better scored
                best, best_new = item, new
        if best is None:
            return chosen
        chosen.append(best)
        covered |= best_new
        others |= stems(best["sentence"]) - q


def _names(text: str, first: bool = False) -> frozenset[str]:
    """Stems of the names and numbers a sentence states (capitalised words, digits, opening quotes
    ignored); its first word only with ``first`` (a capital there may be only the sentence's)."""
    words = [w.lstrip(_OPENERS) for w in text.split()[0 if first else 1 :]]
    return stems(" ".join(w for w in words if w[:1].isupper() or w[:1].isdigit()))


def follow_links(question: str, scored: Sequence[dict], chosen: Sequence[dict]) -> list[dict]:
    """``chosen`` plus, for each unit no chosen sentence comes from, its best sentence that names a name
    or number a chosen sentence names and the question does not (the entity a hop goes through),
    repeated until no unit links: the next hop of a multi-hop answer often repeats no question word."""
    q = stems(question)
    out = list(chosen)
    while True:
        units = {c["block"] for c in out}
        names = frozenset().union(*(_names(c["sentence"]) for c in out)) - q
        nxt = next(
            (
                item
                for item in scored
                if item["block"] not in units and _fresh(item, out) and _names(item["sentence"], True) & names
            ),
            None,
        )
        if nxt is None:
            return out
        out.append(nxt)


def bridge(question: str, scored: Sequence[dict], chosen: Sequence[dict]) -> dict | None:
    """When the cover is one sentence: the best-scored sentence of another unit that shares with it a
    word the question does not name (the entity the hop goes through) and names a question word itself
    (a hop phrased in other words than the question's: "in charge of" / "run by"); None: none."""
    if len(chosen) != 1:
        return None
    q = stems(question)
    first = stems(chosen[0]["sentence"])
    for item in scored:
        if item["block"] == chosen[0]["block"] or not _fresh(item, chosen):
            continue
        words = stems(item["sentence"])
        if (words & first) - q and words & q:
            return item
    return None


def every_unit(question: str, scored: Sequence[dict], chosen: Sequence[dict], floor: float) -> list[dict]:
    """``chosen`` plus, for each unit none of them comes from, its best sentence if it names a question
    word and scores at least ``floor``: in a sufficient set every unit is evidence, and one that relates
    to the question is part of the answer's support (a definition, the other half of a clause)."""
    q = stems(question)
    out = list(chosen)
    for item in scored:
        if item["block"] in {c["block"] for c in out} or item["score"] < floor or not _fresh(item, out):
            continue
        if stems(item["sentence"]) & q:
            out.append(item)
    return out


def lead(scored: Sequence[dict], chosen: Sequence[dict]) -> float:
    """How far the answer's best sentence leads the best one outside the answer (its score when none)."""
    if not scored:
        return 0.0
    for item in scored:
        if _fresh(item, chosen):
            return scored[0]["score"] - item["score"]
    return scored[0]["score"]


def answer_plan(
    question: str, scored: Sequence[dict], threshold: float, margin: float, sufficient: bool = False
) -> tuple[list[dict], str | None]:
    """(the sentences to answer with, in the order chosen; the reason to abstain or None). ``scored``:
    the reader's sentences, best first (``sentence``, ``score``, ``label``, ``block``, ``start``).
    ``sufficient``: the context is a sufficient set by construction (an oracle prompt), so it is
    answered unless nothing in it relates to the question (the margin rule is for retrieved context)."""
    kind = question_kind(question)
    if kind is not None:
        return [], kind
    if not scored or scored[0]["score"] < threshold:
        return [], "below-threshold"
    chosen = cover(question, scored, threshold, linked=not sufficient)
    if sufficient:
        return every_unit(question, scored, follow_links(question, scored, chosen), threshold), None
    second = bridge(question, scored, chosen)
    if second is not None:
        chosen = [*chosen, second]
    if lead(scored, chosen) < margin:
        return [], "topical"
    return chosen, None


def extract_span(question: str, sentences: Sequence[str]) -> str | None:
    """The answer span in the sentences for a question that asks for a date, quantity or name: the
    first one the question does not already contain (None: the question asks for a sentence)."""
    kind = wanted_span(question)
    if kind is None:
        return None
    q_norm = question.casefold()
    for sentence in sentences:
        if kind == "date":
            found = [m.group(0) for m in _DATE.finditer(sentence)]
        elif kind == "quantity":
            found = [
                m.group(0)
                for m in _NUMBER.finditer(sentence)
                if extract_quantities(m.group(0)) and not _YEAR.match(m.group(0).split()[0].strip(","))
            ]
        else:  # a capitalised run with a content word (not a sentence-initial "The")
            found = [m.group(0) for m in _NAME.finditer(sentence) if analyze(m.group(0))]
        for span in found:
            span = span.strip(" ,.")
            if span and span.casefold() not in q_norm:
                return span
    return None


def answer_text(question: str, chosen: Sequence[dict]) -> str:
    """The answer: the span (where the question asks for one), then each sentence with its citation."""
    quoted = " ".join(f"{c['sentence']} [{c['label']}]" for c in chosen)
    # the last sentence chosen holds the last hop: its span answers, the first ones lead to it
    span = extract_span(question, [c["sentence"] for c in reversed(chosen)])
    return f"{span}: {quoted}" if span else quoted
