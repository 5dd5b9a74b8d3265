"""Annotated questions with gold support as document+offset spans (never chunk ids).

One internal model (:class:`Fixture`, :class:`GoldSpan`) read from three forms:

* the seed 000 annotation fixture, verbatim (inline ``source_text``, named
  ``spans``, ``sufficient_support_sets``, ``coordinate_system``);
* the seed 002 gold record (``qid``, ``text``, ``gold: [{doc, start, end}]``),
  whose spans form one jointly sufficient set in code points;
* the canonical JSONL form (``format: ledgerscope-fixture/1``), which
  :func:`write_fixtures` writes.

Parsing keeps each span in its declared coordinate system; :func:`resolve`
translates it to canonical code points against the source text, checks the
digest and the quote, and reports every problem with file, line and field.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ledgerscope.common.errors import CoordinateError, InputError, Problem
from ledgerscope.inputs import coords
from ledgerscope.inputs.sources import Corpus, iter_jsonl, strict_loads

FORMAT = "ledgerscope-fixture/1"
SEGMENTS = (
    "rule-exception",
    "definition-referent",
    "number-scope",
    "cross-reference",
    "joint-evidence",
    "unanswerable",
)
DEPENDENCIES = (
    "primary",
    "exception",
    "condition",
    "definition",
    "referent",
    "numerical-scope",
    "cross-reference",
    "joint",
)
#: Dependencies whose omission can change the justified answer (mandatory qualifiers).
QUALIFIER_DEPENDENCIES = frozenset(
    {"exception", "condition", "definition", "referent", "numerical-scope", "cross-reference"}
)
MISSING_CONDITION = ("abstain", "narrower")
ADJUDICATION_STATES = ("adjudicated", "needs-review", "disputed", "draft")
STRESS_SETS = ("representative", "enriched")


@dataclass(frozen=True)
class GoldSpan:
    """A gold span in canonical code points once resolved (``version``/``quote`` filled)."""

    span_id: str
    doc_id: str
    start: int
    end: int
    version: str | None = None
    quote: str | None = None
    prefix: str = ""
    suffix: str = ""
    dependency: str = "primary"
    label: str = ""
    system: str = coords.CODEPOINT

    @property
    def is_qualifier(self) -> bool:
        return self.dependency in QUALIFIER_DEPENDENCIES

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.span_id,
            "doc_id": self.doc_id,
            "version": self.version,
            "start": self.start,
            "end": self.end,
            "quote": self.quote,
            "dependency": self.dependency,
        }
        if self.prefix:
            out["prefix"] = self.prefix
        if self.suffix:
            out["suffix"] = self.suffix
        if self.label:
            out["label"] = self.label
        return out


@dataclass(frozen=True)
class AnswerContract:
    expected: str | None = None
    aliases: tuple[str, ...] = ()
    default: str | None = None  # the answer if the mandatory qualifier is missed
    missing_condition: str = "abstain"
    if_qualifier_missing: str = ""
    #: the span id the default was inferred from (None: declared, or none at all); see
    #: ledgerscope.pipeline.judge.infer_default
    default_inferred_from: str | None = None
    #: matching rules the judge applies to this answer (``bare_number``, ``token_f1``)
    match: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "expected": self.expected,
            "missing_condition": self.missing_condition,
        }
        if self.aliases:
            out["aliases"] = list(self.aliases)
        if self.default:
            out["default"] = self.default
        if self.default_inferred_from:
            out["default_inferred_from"] = self.default_inferred_from
        if self.match:
            out["match"] = dict(self.match)
        if self.if_qualifier_missing:
            out["if_qualifier_missing"] = self.if_qualifier_missing
        return out


@dataclass(frozen=True)
class Fixture:
    """One annotated question."""

    qid: str
    question: str
    segment: str
    spans: tuple[GoldSpan, ...]
    sufficient_sets: tuple[tuple[str, ...], ...]
    answer: AnswerContract = AnswerContract()
    answerable: bool = True
    support_only: bool = False
    adjudication: dict[str, Any] = field(default_factory=lambda: {"state": "adjudicated"})
    stress_set: str = "representative"
    origin: str = ""
    annotations: dict[str, Any] = field(default_factory=dict)
    #: where it was read from, for messages: (file, line)
    location: tuple[str, int | None] = ("<memory>", None)

    def span(self, span_id: str) -> GoldSpan:
        for s in self.spans:
            if s.span_id == span_id:
                return s
        raise KeyError(span_id)

    @property
    def doc_ids(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(s.doc_id for s in self.spans))

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "format": FORMAT,
            "qid": self.qid,
            "question": self.question,
            "segment": self.segment,
            "answerable": self.answerable,
            "support_only": self.support_only,
            "answer": self.answer.to_json(),
            "coordinate_system": coords.CODEPOINT,
            "spans": [s.to_json() for s in self.spans],
            "sufficient_sets": [list(s) for s in self.sufficient_sets],
            "adjudication": self.adjudication,
            "stress_set": self.stress_set,
        }
        if self.origin:
            out["origin"] = self.origin
        if self.annotations:
            out["annotations"] = self.annotations
        return out


@dataclass
class FixtureSet:
    fixtures: list[Fixture]
    inline_sources: Corpus
    file: str


# ---------------------------------------------------------------------------
# parsing


def read_fixtures(path: str | Path) -> tuple[FixtureSet, list[Problem]]:
    """Parse a fixtures file (.json object/array or .jsonl) without resolving spans."""
    from ledgerscope.inputs.fixture_forms import (
        parse_one,  # the three forms' parsers build this module's model
    )

    path = Path(path)
    problems: list[Problem] = []
    items: list[tuple[int | None, dict]] = []
    if not path.is_file():
        return FixtureSet([], Corpus(), str(path)), [
            Problem(str(path), None, "fixtures", "no such file")
        ]
    if path.suffix.lower() == ".json":
        try:
            data = strict_loads(path.read_bytes().decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:  # JSONDecodeError, StrictJSONError
            line = getattr(exc, "lineno", None)
            reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
            return FixtureSet([], Corpus(), str(path)), [
                Problem(str(path), line, "file", f"not valid JSON: {reason}")
            ]
        objs = data if isinstance(data, list) else [data]
        for obj in objs:
            if not isinstance(obj, dict):
                problems.append(Problem(str(path), None, "item", "expected a JSON object"))
                continue
            items.append((None, obj))
    else:
        items.extend(iter_jsonl(path, problems))
    if not items and not problems:
        problems.append(Problem(str(path), None, "fixtures", "no fixtures in the file"))
    inline = Corpus()
    fixtures: list[Fixture] = []
    seen: dict[str, int | None] = {}
    for line, obj in items:
        parsed = parse_one(obj, str(path), line, inline, problems)
        if parsed is None:
            continue
        if parsed.qid in seen:
            problems.append(
                Problem(
                    str(path),
                    line,
                    "qid",
                    f"duplicate qid {parsed.qid!r}"
                    + (f" (first at line {seen[parsed.qid]})" if seen[parsed.qid] is not None else ""),
                )
            )
            continue
        seen[parsed.qid] = line
        fixtures.append(parsed)
    return FixtureSet(fixtures, inline, str(path)), problems


# ---------------------------------------------------------------------------
# resolution and validation


def resolve(
    fixture_set: FixtureSet, corpus: Corpus | None = None
) -> tuple[list[Fixture], Corpus, list[Problem]]:
    """Translate every span to canonical code points and check it against its source.

    Returns the resolved fixtures, the merged corpus (given corpus plus inline
    sources) and the problems found. A fixture with any problem is left out.
    """
    merged = Corpus(dict(corpus.sources) if corpus else {})
    problems: list[Problem] = []
    for src in fixture_set.inline_sources:
        try:
            merged.add(src)
        except InputError as exc:
            problems.extend(exc.problems)
    out = []
    for fx in fixture_set.fixtures:
        n0 = len(problems)
        resolved = _resolve_one(fx, merged, problems)
        if len(problems) == n0:
            out.append(resolved)
    return out, merged, problems


def _resolve_one(fx: Fixture, corpus: Corpus, problems: list[Problem]) -> Fixture:
    file, line = fx.location

    def bad(fieldname: str, reason: str) -> None:
        problems.append(Problem(file, line, fieldname, f"{fx.qid}: {reason}"))

    if fx.segment not in SEGMENTS:
        bad("segment", f"unknown segment {fx.segment!r}; known: {', '.join(SEGMENTS)}")
    if fx.answer.missing_condition not in MISSING_CONDITION:
        bad("answer.missing_condition", f"must be one of {', '.join(MISSING_CONDITION)}")
    for key, value in fx.answer.match.items():
        if key == "bare_number" and not isinstance(value, bool):
            bad("answer.match.bare_number", "must be true or false")
        elif key == "token_f1" and (isinstance(value, bool) or not isinstance(value, int | float)
                                    or not 0 < value <= 1):
            bad("answer.match.token_f1", "must be a number in (0, 1]")
        elif key not in ("bare_number", "token_f1"):
            bad(f"answer.match.{key}", "unknown matching rule (known: bare_number, token_f1)")
    state = fx.adjudication.get("state")
    if state not in ADJUDICATION_STATES:
        bad(
            "adjudication.state",
            f"unknown state {state!r}; known: {', '.join(ADJUDICATION_STATES)}",
        )
    if fx.stress_set not in STRESS_SETS:
        bad("stress_set", f"must be one of {', '.join(STRESS_SETS)}")
    resolved_spans = []
    ids = set()
    for span in fx.spans:
        where = f"spans.{span.span_id}"
        if span.span_id in ids:
            bad(where, "duplicate span id")
            continue
        ids.add(span.span_id)
        if span.dependency not in DEPENDENCIES:
            bad(
                f"{where}.dependency",
                f"unknown dependency {span.dependency!r}; known: {', '.join(DEPENDENCIES)}",
            )
        if span.system not in coords.SYSTEMS:
            bad(f"{where}.coordinate_system", f"unknown system {span.system!r}")
            continue
        src = corpus.get(span.doc_id)
        if src is None:
            bad(f"{where}.doc_id", f"source {span.doc_id!r} is not in the corpus")
            continue
        if span.version is not None and span.version != src.version:
            bad(
                f"{where}.version",
                f"span names {span.version} but the source's digest is {src.version}",
            )
            continue
        try:
            if span.start < 0:  # quote selector
                hit = coords.resolve_quote(src.text, span.quote or "", span.prefix, span.suffix)
                start, end = hit.start, hit.end
            else:
                start, end = coords.to_codepoint_span(src.text, span.start, span.end, span.system)
        except CoordinateError as exc:
            pos = "quote" if span.start < 0 else f"[{span.start},{span.end}) {span.system}"
            bad(where, f"{pos}: {exc}")
            continue
        if start == end:
            bad(where, "span is empty")
            continue
        sliced = src.text[start:end]
        if span.quote is not None and span.quote != sliced:
            bad(
                f"{where}.quote",
                f"slice {sliced[:50]!r} differs from the recorded quote {span.quote[:50]!r}",
            )
            continue
        prefix, suffix = span.prefix, span.suffix
        if prefix and src.text[max(0, start - len(prefix)) : start] != prefix:
            bad(f"{where}.prefix", "recorded prefix does not match the text before the span")
            continue
        if suffix and src.text[end : end + len(suffix)] != suffix:
            bad(f"{where}.suffix", "recorded suffix does not match the text after the span")
            continue
        if not prefix and not suffix:
            prefix, suffix = coords.quote_context(src.text, start, end)
        resolved_spans.append(
            replace(
                span,
                start=start,
                end=end,
                version=src.version,
                quote=sliced,
                prefix=prefix,
                suffix=suffix,
                system=coords.CODEPOINT,
            )
        )
    for i, sset in enumerate(fx.sufficient_sets):
        if not sset:
            bad(f"sufficient_sets[{i}]", "empty support set")
        for sid in sset:
            if sid not in ids:
                bad(f"sufficient_sets[{i}]", f"names span {sid!r}, which is not defined")
    if fx.segment == "unanswerable" and fx.answerable:
        bad("answerable", "segment 'unanswerable' requires answerable: false")
    if fx.answerable and not fx.sufficient_sets:
        bad("sufficient_sets", "an answerable question needs at least one sufficient support set")
    if not fx.answerable and fx.sufficient_sets:
        bad("sufficient_sets", "an unanswerable question cannot have a sufficient support set")
    if fx.answerable and not fx.support_only and not fx.answer.expected:
        bad(
            "answer.expected",
            "an answer-judged question needs an expected answer (or support_only: true)",
        )
    return replace(fx, spans=tuple(resolved_spans))


def load_fixtures(path: str | Path, corpus: Corpus | None = None) -> tuple[list[Fixture], Corpus]:
    """Read and resolve; raise InputError listing every problem."""
    fset, problems = read_fixtures(path)
    fixtures, merged, more = resolve(fset, corpus)
    problems += more
    if problems:
        raise InputError(problems)
    return fixtures, merged


def write_fixtures(
    fixtures: list[Fixture],
    path: str | Path,
    corpus: Corpus | None = None,
    inline_sources: bool = False,
) -> None:
    """Write canonical JSONL atomically; optionally carry each fixture's sources inline."""
    from ledgerscope.common.atomic import atomic_write_text

    lines = []
    for fx in fixtures:
        obj = fx.to_json()
        if inline_sources and corpus is not None:
            obj["sources"] = [corpus.sources[d].to_json() for d in fx.doc_ids if d in corpus]
        lines.append(json.dumps(obj, ensure_ascii=False))
    atomic_write_text(path, "\n".join(lines) + ("\n" if lines else ""))
