"""Deterministic answer and citation verdicts (pure functions, no I/O, no model).

Every rule the judge applies is written here, so a verdict in a ledger can be
re-derived by hand. The judge is deliberately lexical: it never asks a model.

Abstention (:func:`is_abstention`)
----------------------------------
Text is normalised (citation markers such as ``[1]`` removed, curly quotes
straightened, case-folded, whitespace collapsed, trailing punctuation dropped).
It is an abstention when:

1. it is ``None``, empty or only whitespace/citation markers;
2. it equals the prompt's :data:`~ledgerscope.pipeline.prompt.ABSTAIN_TEXT`;
3. the whole text is a bare refusal: ``unknown``, ``n/a``, ``na``, ``none``,
   ``no answer``, ``unanswerable``, ``not specified``, ``not stated``,
   ``not mentioned``, ``cannot be determined``, ``I don't know``, ``idk``;
4. it contains a refusal phrase **and** no quantity (see below) appears in it.
   The phrases: ``cannot answer`` / ``can not answer`` / ``can't answer``;
   ``unable to (answer|determine|find)``; ``not enough information``;
   ``insufficient (information|context|evidence)``; ``I (don't|do not) know``;
   ``the (provided|given) (source(s)|context|document(s)|passage(s)|text(s))
   (do|does) not (contain|say|mention|specify|state|provide|include|indicate|
   give|answer)``; ``no information (about|on|regarding|for)``; ``not
   (specified|mentioned|stated|provided|given) in the (provided|given)
   (sources|context|documents|passages|texts)``; ``cannot be determined``.
   The word ``unknown`` inside a longer sentence is not a refusal.

   A refusal phrase next to a number ("the sources do not say, but probably
   30 days") is a hedged *assertion*, not an abstention: the number is a claim
   the answer verdict must score (a false assertion on an unanswerable control,
   a critical-condition error if it is the default).

Quantities (:func:`extract_quantities`)
---------------------------------------
Citation markers are removed first. A quantity is ``(value, unit)``:

* numbers: digits (``1,200``, ``7``, ``1.5``, with an optional ``k`` suffix =
  thousand) and English number words ``zero`` .. ``nineteen``, the tens
  ``twenty`` .. ``ninety`` (``twenty-one`` / ``twenty one``), ``hundred``,
  ``thousand``, ``million``, ``billion`` (``two hundred fifty``); a number
  followed by ``thousand``/``million``/``billion`` is multiplied.
* units follow the number after a space or a hyphen (``7 days``, ``7-day``):

  - time: ``second``, ``minute``, ``hour``, ``day``, ``month``, ``year`` are
    their own units; ``week`` is converted to days (x7); ``business day`` /
    ``working day`` is its own unit (``business-day``), since it differs from
    calendar days; ``calendar day`` is ``day``.
  - percent: ``%``, ``percent``, ``per cent``, ``pct`` -> ``%``.
  - data sizes are converted to bytes (unit ``byte``): SI for ``KB``/``MB``/
    ``GB``/``TB`` (10^3 steps), IEC for ``KiB``/``MiB``/``GiB``/``TiB`` (2^10
    steps), spelled-out forms (``gigabytes``) as their SI symbol.
  - currency: a prefix symbol or code (``$``, ``€``, ``£``, ``USD``, ``EUR``,
    ``GBP``) or a suffix word/code (``dollars``, ``euros``, ``USD``, ``EUR``,
    ``GBP``) -> ``USD``/``EUR``/``GBP``.
  - rates: ``<n> <noun> per <time unit>`` or ``<n> <noun>/<time unit>`` ->
    unit ``<noun>/<time unit>`` with the noun singularised (``-ies`` -> ``-y``,
    final ``s`` dropped; ``req``/``reqs`` -> ``request``), so ``100 requests per
    minute`` and ``100 req/min`` are both ``(100, "request/minute")``; one
    extra word may precede the noun (``200 API calls per hour`` ->
    ``call/hour``); ``<n> per <time unit>`` -> ``per-<time unit>``; the
    abbreviations ``rpm``, ``rps``, ``qps`` map to ``request/minute``,
    ``request/second``, ``query/second``. Rate denominators are not converted
    between time units. A count without ``per`` (``10k requests``) is unit-less.
* a range or list shares its unit backwards: in ``7 to 10 days``, ``7-10
  days``, ``7 or 14 days``, ``between 7 and 30 days`` every number is in days.
* a digit string with no unit is kept as ``(value, "")``; a bare number word is
  kept too, except a bare ``one`` (too often a pronoun: "the one marked").
  ``a``/``an`` are never read as 1 ("once a day" is not a quantity).
* values are rounded to 6 decimals so that set membership is exact.

Answer verdicts (:func:`judge_answer`), first rule that applies
---------------------------------------------------------------
1. ``support_only`` fixture -> ``not-judged`` (no answer contract).
2. unanswerable fixture -> ``abstained`` if the generator flagged an abstention
   or the text is one (rules above), else ``false-assertion``.
3. answerable, and flagged or detected abstention -> ``abstained``. An empty
   answer counts as an abstention: callers must label infrastructure failures
   themselves and not pass them to the judge.
4. answerable without an expected answer -> ``not-judged``.
5. the answer matches the expected answer or any alias -> ``correct``.
6. the answer matches the contract's ``default`` (the answer one gives when the
   mandatory qualifier is missed) -> ``critical-condition-error``.
7. otherwise -> ``wrong``.

*Matching* a candidate (expected, alias or default) against the answer:

* if the candidate has quantities, the answer must contain **every** one of
  them. An answer quantity equals a candidate quantity when the values are
  equal and the units are equal; a unit-less number in the answer also equals
  a candidate quantity of the same value ("The limit is 7 [1]." matches
  "7 days", since the question supplies the unit). Qualifiers around the
  number ("at most") and extra quantities in the answer are not checked; only
  the numbers decide, because the number is what differs between the
  qualified answer and the default.
* if the candidate has no quantities: the normalised candidate (case-folded,
  citation markers and punctuation removed, articles ``a``/``an``/``the``
  dropped) occurs in the normalised answer as a whole-token sequence, or the
  SQuAD-style token-overlap F1 between the two is at least
  :data:`F1_THRESHOLD` (0.6), which accepts short paraphrases and reorderings
  but not a long answer that merely mentions a few of the words.

*Both values present.* An answer that contains the expected quantities and the
default's too ("30 days in general; 7 days for temporary requests") is
``correct``: rule 5 is checked before rule 6, so the qualified value wins. The
judge cannot parse which value the answer attaches to the qualified case, and
an answer that states the qualified value has not silently dropped the
qualifier; the reason records that the default was mentioned as well. An answer
with the default but without the expected value is the critical-condition
error.

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
   :func:`~ledgerscope.pipeline.units.covers` over that document's text
   (whitespace between adjacent units is not evidence). The first set whose
   every span is covered -> ``supported`` (``covered_set`` names it). Joint
   evidence across several cited units counts.
6. otherwise -> ``unsupported`` (the reason names the uncovered spans of the
   set that came closest).

If a gold span's document text is missing from ``source_texts``, coverage of
that span is checked on the raw intervals without excusing whitespace.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ledgerscope.common.intervals import covers, uncovered
from ledgerscope.inputs.fixtures import Fixture
from ledgerscope.pipeline.prompt import ABSTAIN_TEXT

ANSWER_VERDICTS = (
    "correct",
    "critical-condition-error",
    "abstained",
    "wrong",
    "false-assertion",
    "not-judged",
)
CITATION_VERDICTS = ("supported", "unsupported", "unresolvable", "no-citation", "not-applicable")
#: token-overlap F1 at or above which a text answer matches a candidate
F1_THRESHOLD = 0.6

Quantity = tuple[float, str]
Citation = tuple[str, str | None, int | None, int | None]

# ---------------------------------------------------------------------------
# normalisation

_CITE = re.compile(r"\[\d{1,3}\]")
_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"',
                         "\u2013": "-", "\u2014": "-", "\u2212": "-"})
_ARTICLES = frozenset({"a", "an", "the"})


def _clean(text: str) -> str:
    return _CITE.sub(" ", text).translate(_QUOTES)


def _norm_tokens(text: str) -> list[str]:
    """Case-folded word tokens without punctuation or articles."""
    text = _clean(text).casefold()
    text = re.sub(r"[^\w%$€£.]+", " ", text)
    text = re.sub(r"(?<!\d)\.|\.(?!\d)", " ", text)  # keep decimal points only
    return [t for t in text.split() if t not in _ARTICLES]


# ---------------------------------------------------------------------------
# abstention

_ABSTAIN_NORM = re.sub(r"\s+", " ", ABSTAIN_TEXT.casefold()).strip().rstrip(".!")
_BARE_REFUSALS = frozenset({
    "unknown", "n/a", "na", "none", "no answer", "unanswerable", "not specified", "not stated",
    "not mentioned", "cannot be determined", "i don't know", "i do not know", "idk",
})
_REFUSAL = re.compile(
    r"\b(?:"
    r"can ?not answer|can't answer|unable to (?:answer|determine|find)|"
    r"not enough information|insufficient (?:information|context|evidence)|"
    r"i (?:don't|do not) know|"
    r"(?:the )?(?:provided |given )?(?:sources?|context|documents?|passages?|texts?) "
    r"(?:do|does) not (?:contain|say|mention|specify|state|provide|include|indicate|give|answer)|"
    r"no information (?:about|on|regarding|for)|"
    r"(?:is |are )?not (?:specified|mentioned|stated|provided|given) in the (?:provided |given )?"
    r"(?:sources?|context|documents?|passages?|texts?)|"
    r"cannot be determined"
    r")"
)


def is_abstention(text: str | None) -> bool:
    """True when ``text`` declines to answer (see the module docstring, "Abstention")."""
    if text is None:
        return True
    norm = re.sub(r"\s+", " ", _clean(text).casefold()).strip()
    norm = norm.rstrip(".!;: ").strip()
    if not norm:
        return True
    if norm == _ABSTAIN_NORM or norm in _BARE_REFUSALS:
        return True
    return bool(_REFUSAL.search(norm)) and not extract_quantities(text)


# ---------------------------------------------------------------------------
# quantities

_SMALL = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13,
    "fourteen": 14, "fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18,
    "nineteen": 19,
}
_TENS = {
    "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70,
    "eighty": 80, "ninety": 90,
}
_SCALES = {"thousand": 1_000, "million": 1_000_000, "billion": 1_000_000_000}
_NUMBER_WORDS = "|".join(sorted([*_SMALL, *_TENS, "hundred", *_SCALES], key=len, reverse=True))
_AFTER_SCALE = r"(?:(?<=hundred)|(?<=thousand)|(?<=million)|(?<=billion))\s+and\s+"
_WORD_NUMBER = rf"(?:{_NUMBER_WORDS})(?:(?:[\s-]+|{_AFTER_SCALE})(?:{_NUMBER_WORDS}))*"
_DIGITS = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?"

#: unit word (lower case) -> (canonical unit, factor)
_TIME = {
    "second": ("second", 1), "seconds": ("second", 1), "sec": ("second", 1),
    "secs": ("second", 1),
    "minute": ("minute", 1), "minutes": ("minute", 1), "min": ("minute", 1),
    "mins": ("minute", 1),
    "hour": ("hour", 1), "hours": ("hour", 1), "hr": ("hour", 1), "hrs": ("hour", 1),
    "day": ("day", 1), "days": ("day", 1),
    "week": ("day", 7), "weeks": ("day", 7), "wk": ("day", 7), "wks": ("day", 7),
    "month": ("month", 1), "months": ("month", 1),
    "year": ("year", 1), "years": ("year", 1), "yr": ("year", 1), "yrs": ("year", 1),
}
_UNITS: dict[str, tuple[str, float]] = {
    **_TIME,
    "business day": ("business-day", 1), "business days": ("business-day", 1),
    "working day": ("business-day", 1), "working days": ("business-day", 1),
    "calendar day": ("day", 1), "calendar days": ("day", 1),
    "%": ("%", 1), "percent": ("%", 1), "per cent": ("%", 1), "pct": ("%", 1),
    "byte": ("byte", 1), "bytes": ("byte", 1),
    "kb": ("byte", 1e3), "kilobyte": ("byte", 1e3), "kilobytes": ("byte", 1e3),
    "mb": ("byte", 1e6), "megabyte": ("byte", 1e6), "megabytes": ("byte", 1e6),
    "gb": ("byte", 1e9), "gigabyte": ("byte", 1e9), "gigabytes": ("byte", 1e9),
    "tb": ("byte", 1e12), "terabyte": ("byte", 1e12), "terabytes": ("byte", 1e12),
    "kib": ("byte", 2**10), "mib": ("byte", 2**20), "gib": ("byte", 2**30),
    "tib": ("byte", 2**40),
    "usd": ("USD", 1), "dollar": ("USD", 1), "dollars": ("USD", 1),
    "eur": ("EUR", 1), "euro": ("EUR", 1), "euros": ("EUR", 1),
    "gbp": ("GBP", 1),
    "rpm": ("request/minute", 1), "rps": ("request/second", 1), "qps": ("query/second", 1),
}
_PREFIX_CURRENCY = {"$": "USD", "€": "EUR", "£": "GBP", "usd": "USD", "eur": "EUR", "gbp": "GBP"}
_TIME_SINGULAR = r"second|minute|hour|day|week|month|year|sec|min|hr"
_UNIT_WORDS = "|".join(sorted((re.escape(u) for u in _UNITS), key=len, reverse=True))

_QUANTITY = re.compile(
    r"(?P<cur>[$€£]|\b(?:usd|eur|gbp)\s?)?"
    rf"(?P<num>(?<![\w.,])(?:{_DIGITS})(?P<k>k\b)?|\b{_WORD_NUMBER}\b)"
    rf"(?:\s+(?P<scale>thousand|million|billion)\b)?"
    r"(?:"
    rf"(?P<rate>[\s-]*(?:[a-z]+\s+)??(?P<noun>[a-z]+)?\s*(?:\bper\s+|/\s*)(?P<per>{_TIME_SINGULAR})s?\b)"
    rf"|(?:\s*-\s*|\s*)(?P<unit>{_UNIT_WORDS})(?![\w])"
    r")?",
    re.IGNORECASE,
)
_RANGE_JOIN = re.compile(r"^\s*(?:-|to|and|or|,|through)\s*$", re.IGNORECASE)


def _word_value(words: str) -> float | None:
    total, current, seen = 0, 0, False
    for w in re.split(r"[\s-]+", words.lower()):
        if not w or w == "and":
            continue
        if w in _SMALL:
            current += _SMALL[w]
        elif w in _TENS:
            current += _TENS[w]
        elif w == "hundred":
            current = max(current, 1) * 100
        elif w in _SCALES:
            total += max(current, 1) * _SCALES[w]
            current = 0
        else:
            return None
        seen = True
    return float(total + current) if seen else None


_NOUN_ALIASES = {"req": "request", "reqs": "request", "call": "call", "msg": "message",
                 "msgs": "message", "queries": "query", "qry": "query"}


def _singular(word: str) -> str:
    w = word.lower()
    if w in _NOUN_ALIASES:
        return _NOUN_ALIASES[w]
    if w.endswith("ies") and len(w) > 4:
        return w[:-3] + "y"
    if w.endswith("s") and not w.endswith("ss") and len(w) > 3:
        return w[:-1]
    return w


def _time_unit(word: str) -> str:
    w = word.lower()
    return {"sec": "second", "min": "minute", "hr": "hour"}.get(w, w)


def _scan(text: str) -> list[tuple[int, int, float, str, float, bool]]:
    """(start, end, number, unit, factor, bare "one") for each quantity, in order."""
    out: list[tuple[int, int, float, str, float, bool]] = []
    for m in _QUANTITY.finditer(text):
        raw = m.group("num")
        if raw[0].isdigit():
            number = float(raw.rstrip("kK").replace(",", ""))
            if m.group("k"):
                number *= 1_000
            bare_one = False
        else:
            word_value = _word_value(raw)
            if word_value is None:
                continue
            number = word_value
            bare_one = raw.lower() == "one"
        if m.group("scale"):
            number *= _SCALES[m.group("scale").lower()]
        unit, factor = "", 1.0
        if m.group("cur"):
            unit = _PREFIX_CURRENCY[m.group("cur").strip().lower()]
        if m.group("rate"):
            per = _time_unit(m.group("per"))
            noun = m.group("noun")
            if not noun:
                unit = f"per-{per}"
            elif noun.lower() in _UNITS:  # "5 days per week": the quantity's own unit
                unit, factor = _UNITS[noun.lower()]
            else:
                unit = f"{_singular(noun)}/{per}"
        elif m.group("unit"):
            unit, factor = _UNITS[re.sub(r"\s+", " ", m.group("unit").lower())]
        out.append((m.start(), m.end(), number, unit, float(factor), bare_one and not unit))
    return out


def extract_quantities(text: str | None) -> set[Quantity]:
    """Numbers with normalised units (see the module docstring, "Quantities")."""
    if not text:
        return set()
    cleaned = _clean(text)
    found = _scan(cleaned)
    units = [(q[3], q[4]) for q in found]
    # ranges and lists share their unit backwards: "7 to 10 days", "7 or 14 days"
    for i in range(len(found) - 2, -1, -1):
        if units[i][0] or not units[i + 1][0]:
            continue
        if _RANGE_JOIN.match(cleaned[found[i][1]:found[i + 1][0]]):
            units[i] = units[i + 1]
    out: set[Quantity] = set()
    for (_s, _e, number, _u, _f, bare_one), (unit, factor) in zip(found, units, strict=True):
        if bare_one and not unit:
            continue
        out.add((round(number * factor, 6), unit))
    return out


# ---------------------------------------------------------------------------
# matching


def _quantity_equal(answer_q: Quantity, want: Quantity) -> bool:
    if not math.isclose(answer_q[0], want[0], rel_tol=1e-9, abs_tol=1e-9):
        return False
    return answer_q[1] == want[1] or answer_q[1] == ""


def _contains_all(answer_qs: Iterable[Quantity], wanted: Iterable[Quantity]) -> bool:
    answer_qs = list(answer_qs)
    return all(any(_quantity_equal(a, w) for a in answer_qs) for w in wanted)


def token_f1(prediction: str, reference: str) -> float:
    """SQuAD-style bag-of-tokens F1 over normalised tokens."""
    p, r = _norm_tokens(prediction), _norm_tokens(reference)
    if not p or not r:
        return 0.0
    common = sum((Counter(p) & Counter(r)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(p), common / len(r)
    return 2 * precision * recall / (precision + recall)


def _text_match(answer: str, candidate: str) -> bool:
    a, c = _norm_tokens(answer), _norm_tokens(candidate)
    if not c:
        return False
    if f" {' '.join(c)} " in f" {' '.join(a)} ":
        return True
    return token_f1(answer, candidate) >= F1_THRESHOLD


def _matches(answer: str, answer_qs: set[Quantity], candidate: str) -> bool:
    wanted = extract_quantities(candidate)
    if wanted:
        return _contains_all(answer_qs, wanted)
    return _text_match(answer, candidate)


@dataclass(frozen=True)
class AnswerJudgement:
    verdict: str
    reason: str
    matched: str | None = None


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
    contract = fixture.answer
    if not contract.expected:
        return AnswerJudgement("not-judged", "no expected answer in the contract")
    text = answer or ""
    answer_qs = extract_quantities(text)
    default_hit = bool(contract.default) and _matches(text, answer_qs, contract.default)
    for candidate in (contract.expected, *contract.aliases):
        if _matches(text, answer_qs, candidate):
            reason = f"matches {'expected' if candidate == contract.expected else 'alias'} "
            reason += f"{candidate!r}"
            if default_hit:
                reason += f"; also mentions the default {contract.default!r} (qualified value wins)"
            return AnswerJudgement("correct", reason, candidate)
    if default_hit:
        return AnswerJudgement(
            "critical-condition-error",
            f"gives the default {contract.default!r} where the qualifier governs "
            f"(expected {contract.expected!r})",
            contract.default,
        )
    return AnswerJudgement("wrong", f"matches neither expected {contract.expected!r}"
                           + (f" nor default {contract.default!r}" if contract.default else ""))


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
    dangling = [label for label, doc, start, end in cited
                if doc is None or start is None or end is None]
    if dangling:
        return CitationJudgement(
            "unresolvable", f"citation(s) {', '.join(dangling)} name no packed unit"
        )
    if not cited:
        return CitationJudgement("no-citation", "the answer cites nothing")
    if not fixture.answerable or not fixture.sufficient_sets:
        return CitationJudgement(
            "unsupported", "no sufficient support set exists for this question"
        )
    by_doc: dict[str, list[tuple[int, int]]] = {}
    for _label, doc, start, end in cited:
        by_doc.setdefault(doc, []).append((int(start), int(end)))  # type: ignore[arg-type]
    spans = {s.span_id: s for s in fixture.spans}
    best: tuple[int, tuple[str, ...], list[str]] | None = None
    for sset in fixture.sufficient_sets:
        missing = []
        for sid in sset:
            span = spans.get(sid)
            if span is None or not _span_covered(span.doc_id, span.start, span.end,
                                                 by_doc, source_texts):
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


def _span_covered(doc_id: str, start: int, end: int, by_doc: dict[str, list[tuple[int, int]]],
                  source_texts: dict[str, str]) -> bool:
    intervals = by_doc.get(doc_id, [])
    if not intervals:
        return False
    text = source_texts.get(doc_id)
    if text is None:
        return not uncovered("x" * end, start, end, intervals)
    return covers(text, start, end, intervals)
