"""Free-text answer matching for the deterministic judge (pure functions, no I/O, no model).

Answers from an LLM endpoint are sentences, not spans; the extractive reader
answers with a whole source sentence. Both are matched against a candidate
(the expected answer, an alias or the default) by the rules below, which
:mod:`ledgerscope.rules.judge` applies in its verdict order.

Normalisation (SQuAD-style, :func:`normalize_tokens`)
-----------------------------------------------------
Citation markers such as ``[1]`` removed, curly quotes and dashes
straightened, case-folded, punctuation removed except ``% $ € £`` and decimal
points, the articles ``a``/``an``/``the`` dropped, whitespace collapsed.

Abstention (:func:`is_abstention`)
----------------------------------
The text (normalised as above, but keeping its words) is an abstention when:

1. it is ``None``, empty or only whitespace/citation markers;
2. it equals the prompt's :data:`ABSTAIN_TEXT`;
3. the whole text is a bare refusal: ``unknown``, ``n/a``, ``na``, ``none``,
   ``no answer``, ``unanswerable``, ``not specified``, ``not stated``,
   ``not mentioned``, ``cannot be determined``, ``I don't know``, ``idk``;
4. it contains a refusal phrase **and** no quantity (see below) appears in it.
   The phrases: ``cannot answer`` / ``can not answer`` / ``can't answer``;
   ``unable to (answer|determine|find)``; ``(could|can) not find`` /
   ``couldn't find``; ``not enough information``; ``insufficient
   (information|context|evidence)``; ``I (don't|do not) know``; ``I'm not
   sure``; ``the (provided|given) (source(s)|context|document(s)|passage(s)|
   text(s)) (do|does) not|don't|doesn't (contain|say|mention|specify|state|
   provide|include|indicate|give|answer)``; ``no (information|mention)
   (about|on|regarding|for|of)``; ``not (specified|mentioned|stated|provided|
   given) in the (provided|given) (sources|context|documents|passages|
   texts)``; ``cannot be determined``. The word ``unknown`` inside a longer
   sentence is not a refusal.

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
    ``GBP``) -> ``USD``/``EUR``/``GBP``. **A currency keeps its currency
    through a rate**: ``€18 per user per month``, ``18 euros per user every
    month``, ``€18/month`` and ``€18 a month`` are all ``(18, "EUR/month")`` (the per-noun, like
    "per file", is scope the words carry, not a unit), so ``$18 per month``
    never matches them.
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

Matching a candidate (:func:`matches`)
--------------------------------------
* If the candidate has quantities, the answer must contain **every** one of
  them. Two quantities are equal when their values and units are equal. A
  **bare number** in the answer (no unit) does *not* equal a quantity with a
  unit ("The limit is 7." does not match "7 days": the unit is part of the
  claim) unless the fixture allows it (``answer.match.bare_number = true``,
  for questions whose wording fixes the unit). Qualifiers around the number
  ("at most") and extra quantities in the answer are not checked; only the
  numbers decide, because the number is what differs between the qualified
  answer and the default.
* If the candidate has no quantities: the normalised candidate occurs in the
  normalised answer as a whole-token sequence (a sentence that quotes the
  answer span), or the **token-F1 rule** holds: the SQuAD bag-of-tokens F1
  between the two is at least the fixture's declared ``answer.match.token_f1``
  (default :data:`F1_THRESHOLD`, 0.6), which accepts short paraphrases and
  reorderings but not a long answer that merely mentions a few of the words.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

#: what every generator says when its sources do not hold the answer (the prompt asks for it verbatim)
ABSTAIN_TEXT = "I cannot answer from the provided sources."

#: token-overlap F1 at or above which a text answer matches a candidate (unless declared otherwise)
F1_THRESHOLD = 0.6

Quantity = tuple[float, str]

# ---------------------------------------------------------------------------
# normalisation

_CITE = re.compile(r"\[\d{1,3}\]")
_QUOTES = str.maketrans(
    {"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u2013": "-", "\u2014": "-", "\u2212": "-"}
)
_ARTICLES = frozenset({"a", "an", "the"})


def clean(text: str) -> str:
    """Citation markers blanked (same length is not kept), quotes and dashes straightened."""
    return _CITE.sub(" ", text).translate(_QUOTES)


def normalize_tokens(text: str) -> list[str]:
    """Case-folded word tokens without punctuation or articles (SQuAD normalisation)."""
    text = clean(text).casefold()
    text = re.sub(r"[^\w%$€£.]+", " ", text)
    text = re.sub(r"(?<!\d)\.|\.(?!\d)", " ", text)  # keep decimal points only
    return [t for t in text.split() if t not in _ARTICLES]


# ---------------------------------------------------------------------------
# abstention

_ABSTAIN_NORM = re.sub(r"\s+", " ", ABSTAIN_TEXT.casefold()).strip().rstrip(".!")
_BARE_REFUSALS = frozenset(
    {
        "unknown",
        "n/a",
        "na",
        "none",
        "no answer",
        "unanswerable",
        "not specified",
        "not stated",
        "not mentioned",
        "cannot be determined",
        "i don't know",
        "i do not know",
        "idk",
    }
)
_REFUSAL = re.compile(
    r"\b(?:"
    r"can ?not answer|can't answer|unable to (?:answer|determine|find)|"
    r"(?:could|can) ?not find|couldn't find|"
    r"not enough information|insufficient (?:information|context|evidence)|"
    r"i (?:don't|do not) know|i'm not sure|i am not sure|"
    r"(?:the )?(?:provided |given )?(?:sources?|context|documents?|passages?|texts?) "
    r"(?:(?:do|does) not|don't|doesn't) "
    r"(?:contain|say|mention|specify|state|provide|include|indicate|give|answer)|"
    r"no (?:information|mention) (?:about|on|regarding|for|of)|"
    r"(?:is |are )?not (?:specified|mentioned|stated|provided|given) in the (?:provided |given )?"
    r"(?:sources?|context|documents?|passages?|texts?)|"
    r"cannot be determined"
    r")"
)


def is_abstention(text: str | None) -> bool:
    """True when ``text`` declines to answer (see the module docstring, "Abstention")."""
    if text is None:
        return True
    norm = re.sub(r"\s+", " ", clean(text).casefold()).strip()
    norm = norm.rstrip(".!;: ").strip()
    if not norm:
        return True
    if norm == _ABSTAIN_NORM or norm in _BARE_REFUSALS:
        return True
    return bool(_REFUSAL.search(norm)) and not extract_quantities(text)


# ---------------------------------------------------------------------------
# quantities

_SMALL = {
    "zero": 0,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "thirteen": 13,
    "fourteen": 14,
    "fifteen": 15,
    "sixteen": 16,
    "seventeen": 17,
    "eighteen": 18,
    "nineteen": 19,
}
_TENS = {
    "twenty": 20,
    "thirty": 30,
    "forty": 40,
    "fifty": 50,
    "sixty": 60,
    "seventy": 70,
    "eighty": 80,
    "ninety": 90,
}
_SCALES = {"thousand": 1_000, "million": 1_000_000, "billion": 1_000_000_000}
_NUMBER_WORDS = "|".join(sorted([*_SMALL, *_TENS, "hundred", *_SCALES], key=len, reverse=True))
_AFTER_SCALE = r"(?:(?<=hundred)|(?<=thousand)|(?<=million)|(?<=billion))\s+and\s+"
_WORD_NUMBER = rf"(?:{_NUMBER_WORDS})(?:(?:[\s-]+|{_AFTER_SCALE})(?:{_NUMBER_WORDS}))*"
_DIGITS = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?"

#: unit word (lower case) -> (canonical unit, factor)
_TIME = {
    "second": ("second", 1),
    "seconds": ("second", 1),
    "sec": ("second", 1),
    "secs": ("second", 1),
    "minute": ("minute", 1),
    "minutes": ("minute", 1),
    "min": ("minute", 1),
    "mins": ("minute", 1),
    "hour": ("hour", 1),
    "hours": ("hour", 1),
    "hr": ("hour", 1),
    "hrs": ("hour", 1),
    "day": ("day", 1),
    "days": ("day", 1),
    "week": ("day", 7),
    "weeks": ("day", 7),
    "wk": ("day", 7),
    "wks": ("day", 7),
    "month": ("month", 1),
    "months": ("month", 1),
    "year": ("year", 1),
    "years": ("year", 1),
    "yr": ("year", 1),
    "yrs": ("year", 1),
}
_CURRENCIES = frozenset({"USD", "EUR", "GBP"})
_UNITS: dict[str, tuple[str, float]] = {
    **_TIME,
    "business day": ("business-day", 1),
    "business days": ("business-day", 1),
    "working day": ("business-day", 1),
    "working days": ("business-day", 1),
    "calendar day": ("day", 1),
    "calendar days": ("day", 1),
    "%": ("%", 1),
    "percent": ("%", 1),
    "per cent": ("%", 1),
    "pct": ("%", 1),
    "byte": ("byte", 1),
    "bytes": ("byte", 1),
    "kb": ("byte", 1e3),
    "kilobyte": ("byte", 1e3),
    "kilobytes": ("byte", 1e3),
    "mb": ("byte", 1e6),
    "megabyte": ("byte", 1e6),
    "megabytes": ("byte", 1e6),
    "gb": ("byte", 1e9),
    "gigabyte": ("byte", 1e9),
    "gigabytes": ("byte", 1e9),
    "tb": ("byte", 1e12),
    "terabyte": ("byte", 1e12),
    "terabytes": ("byte", 1e12),
    "kib": ("byte", 2**10),
    "mib": ("byte", 2**20),
    "gib": ("byte", 2**30),
    "tib": ("byte", 2**40),
    "usd": ("USD", 1),
    "dollar": ("USD", 1),
    "dollars": ("USD", 1),
    "eur": ("EUR", 1),
    "euro": ("EUR", 1),
    "euros": ("EUR", 1),
    "gbp": ("GBP", 1),
    "rpm": ("request/minute", 1),
    "rps": ("request/second", 1),
    "qps": ("query/second", 1),
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
#: what may follow a currency amount to make it a rate: "per user per month", "/month", "a year"
_CURRENCY_RATE = re.compile(
    rf"\s*(?:(?:per|/)\s*[a-z]+\s+)?(?:per\s+|/\s*|an?\s+|each\s+|every\s+)(?P<per>{_TIME_SINGULAR})s?\b",
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


_NOUN_ALIASES = {
    "req": "request",
    "reqs": "request",
    "call": "call",
    "msg": "message",
    "msgs": "message",
    "queries": "query",
    "qry": "query",
}


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


def _number(m: re.Match[str]) -> tuple[float, bool] | None:
    """(value, is a bare "one") of a quantity match, or None for words that are no number."""
    raw = m.group("num")
    if raw[0].isdigit():
        number = float(raw.rstrip("kK").replace(",", ""))
        if m.group("k"):
            number *= 1_000
        bare_one = False
    else:
        word_value = _word_value(raw)
        if word_value is None:
            return None
        number, bare_one = word_value, raw.lower() == "one"
    if m.group("scale"):
        number *= _SCALES[m.group("scale").lower()]
    return number, bare_one


def _unit(m: re.Match[str], text: str) -> tuple[str, float, int]:
    """(unit, factor, end) of a quantity match; a currency amount keeps its currency through a rate."""
    unit, factor, end = "", 1.0, m.end()
    currency = _PREFIX_CURRENCY[m.group("cur").strip().lower()] if m.group("cur") else ""
    if m.group("rate"):
        per = _time_unit(m.group("per"))
        noun = m.group("noun")
        if currency:
            unit = f"{currency}/{per}"
        elif not noun:
            unit = f"per-{per}"
        elif noun.lower() in _UNITS:  # "5 days per week": the quantity's own unit
            unit, factor = _UNITS[noun.lower()]
            if unit in _CURRENCIES:  # "18 euros per month"
                unit = f"{unit}/{per}"
        else:
            unit = f"{_singular(noun)}/{per}"
        return unit, factor, end
    if m.group("unit"):
        unit, factor = _UNITS[re.sub(r"\s+", " ", m.group("unit").lower())]
    elif currency:
        unit = currency
    if unit in _CURRENCIES:
        rate = _CURRENCY_RATE.match(text, end)
        if rate:
            unit, end = f"{unit}/{_time_unit(rate.group('per'))}", rate.end()
    return unit, factor, end


def _scan(text: str) -> list[tuple[int, int, float, str, float, bool]]:
    """(start, end, number, unit, factor, bare "one") for each quantity, in order."""
    out: list[tuple[int, int, float, str, float, bool]] = []
    for m in _QUANTITY.finditer(text):
        parsed = _number(m)
        if parsed is None:
            continue
        number, bare_one = parsed
        unit, factor, end = _unit(m, text)
        out.append((m.start(), end, number, unit, float(factor), bare_one and not unit))
    return out


def quantity_spans(text: str | None) -> list[tuple[int, int, Quantity]]:
    """Each quantity with its ``[start, end)`` in ``clean(text)`` (same rules as
    :func:`extract_quantities`, ranges sharing their unit), in text order."""
    if not text:
        return []
    cleaned = clean(text)
    found = _scan(cleaned)
    units = [(q[3], q[4]) for q in found]
    # ranges and lists share their unit backwards: "7 to 10 days", "7 or 14 days"
    for i in range(len(found) - 2, -1, -1):
        if units[i][0] or not units[i + 1][0]:
            continue
        if _RANGE_JOIN.match(cleaned[found[i][1] : found[i + 1][0]]):
            units[i] = units[i + 1]
    out = []
    for (start, end, number, _u, _f, bare_one), (unit, factor) in zip(found, units, strict=True):
        if bare_one and not unit:
            continue
        out.append((start, end, (round(number * factor, 6), unit)))
    return out


def extract_quantities(text: str | None) -> set[Quantity]:
    """Numbers with normalised units (see the module docstring, "Quantities")."""
    return {q for _s, _e, q in quantity_spans(text)}


# ---------------------------------------------------------------------------
# matching


@dataclass(frozen=True)
class MatchRules:
    """The matching rules a fixture declares (``answer.match``), with the judge's defaults."""

    bare_number: bool = False
    token_f1: float = F1_THRESHOLD

    @classmethod
    def from_contract(cls, declared: Mapping[str, Any] | None) -> MatchRules:
        declared = declared or {}
        f1 = declared.get("token_f1", F1_THRESHOLD)
        return cls(
            bool(declared.get("bare_number", False)),
            float(f1) if isinstance(f1, int | float) and not isinstance(f1, bool) else F1_THRESHOLD,
        )


def quantity_equal(answer_q: Quantity, want: Quantity, bare_number: bool = False) -> bool:
    """Same value and unit; a unit-less answer number counts only when ``bare_number``."""
    if not math.isclose(answer_q[0], want[0], rel_tol=1e-9, abs_tol=1e-9):
        return False
    return answer_q[1] == want[1] or (bare_number and answer_q[1] == "")


def contains_all(
    answer_qs: Iterable[Quantity], wanted: Iterable[Quantity], bare_number: bool = False
) -> bool:
    answer_qs = list(answer_qs)
    return all(any(quantity_equal(a, w, bare_number) for a in answer_qs) for w in wanted)


def token_f1(prediction: str, reference: str) -> float:
    """SQuAD-style bag-of-tokens F1 over normalised tokens."""
    p, r = normalize_tokens(prediction), normalize_tokens(reference)
    if not p or not r:
        return 0.0
    common = sum((Counter(p) & Counter(r)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(p), common / len(r)
    return 2 * precision * recall / (precision + recall)


def text_match(answer: str, candidate: str, f1_threshold: float = F1_THRESHOLD) -> bool:
    """Whole-token containment of the normalised candidate, or token F1 at the threshold."""
    a, c = normalize_tokens(answer), normalize_tokens(candidate)
    if not c:
        return False
    if f" {' '.join(c)} " in f" {' '.join(a)} ":
        return True
    return token_f1(answer, candidate) >= f1_threshold


def matches(answer: str, answer_qs: set[Quantity], candidate: str, rules: MatchRules = MatchRules()) -> bool:
    """Whether ``answer`` (with its quantities ``answer_qs``) states ``candidate`` (module docstring)."""
    wanted = extract_quantities(candidate)
    if wanted:
        return contains_all(answer_qs, wanted, rules.bare_number)
    return text_match(answer, candidate, rules.token_f1)
