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

from . import coords
from .errors import CoordinateError, DigestMismatch, InputError, Problem
from .sources import Corpus, iter_jsonl, make_source, strict_loads

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

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "expected": self.expected,
            "missing_condition": self.missing_condition,
        }
        if self.aliases:
            out["aliases"] = list(self.aliases)
        if self.default:
            out["default"] = self.default
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
        parsed = _parse_one(obj, str(path), line, inline, problems)
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


def _parse_one(
    obj: dict, file: str, line: int | None, inline: Corpus, problems: list[Problem]
) -> Fixture | None:
    if "source_text" in obj or "sufficient_support_sets" in obj:
        return _parse_seed000(obj, file, line, inline, problems)
    if "gold" in obj:
        return _parse_seed002(obj, file, line, problems)
    if "format" in obj or "spans" in obj:
        return _parse_canonical(obj, file, line, inline, problems)
    problems.append(
        Problem(file, line, "format", "not a recognised fixture (seed 000, seed 002 or canonical)")
    )
    return None


def _str(
    obj: dict, key: str, file: str, line: int | None, problems: list[Problem], required: bool = True
) -> str | None:
    value = obj.get(key)
    if value is None:
        if required:
            problems.append(Problem(file, line, key, "missing"))
        return None
    if not isinstance(value, str):
        problems.append(Problem(file, line, key, f"must be a string, got {type(value).__name__}"))
        return None
    return value


def _offsets(
    value: Any, file: str, line: int | None, where: str, problems: list[Problem]
) -> tuple[int, int] | None:
    if (
        isinstance(value, list | tuple)
        and len(value) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
    ):
        if value[0] < 0 or value[1] < 0:  # never a quote selector in disguise (those have no offsets)
            problems.append(Problem(file, line, where, f"offsets must not be negative, got {list(value)}"))
            return None
        return int(value[0]), int(value[1])
    problems.append(Problem(file, line, where, "must be [start, end] integers"))
    return None


def _parse_seed000(obj, file, line, inline, problems) -> Fixture | None:
    n0 = len(problems)
    fixture_id = _str(obj, "fixture_id", file, line, problems)
    text = _str(obj, "source_text", file, line, problems)
    question = _str(obj, "question", file, line, problems)
    system = obj.get("coordinate_system", coords.UTF8)
    if system not in coords.SYSTEMS:
        problems.append(Problem(file, line, "coordinate_system", f"unknown system {system!r}"))
    raw_spans = obj.get("spans")
    if not isinstance(raw_spans, dict) or not raw_spans:
        problems.append(Problem(file, line, "spans", "must be an object of name: [start, end]"))
    if len(problems) > n0:
        return None
    doc_id = obj.get("doc_id") or fixture_id
    try:
        source = make_source(doc_id, text, obj.get("source_version"), obj.get("observed"))
        inline.add(source)
    except DigestMismatch as exc:
        problems.append(Problem(file, line, "source_version", str(exc)))
        return None
    except InputError as exc:  # unencodable text, or the doc id already holds another version
        problems.extend(
            Problem(file, line, f"source_text ({p.field})", p.reason) for p in exc.problems
        )
        return None
    spans = []
    for name, value in raw_spans.items():
        off = _offsets(value, file, line, f"spans.{name}", problems)
        if off is None:
            continue
        dependency = (
            "primary"
            if len(spans) == 0 and name in ("rule", "primary")
            else (
                "exception"
                if name in ("qualifier", "exception")
                else name
                if name in DEPENDENCIES
                else "primary"
            )
        )
        spans.append(
            GoldSpan(
                name,
                doc_id,
                off[0],
                off[1],
                version=source.version,
                dependency=dependency,
                system=system,
                label=name,
            )
        )
    sets = obj.get("sufficient_support_sets", [])
    if not isinstance(sets, list) or not all(
        isinstance(s, list) and all(isinstance(sid, str) for sid in s) for s in sets
    ):
        problems.append(
            Problem(file, line, "sufficient_support_sets", "must be a list of lists of span names")
        )
        return None
    missing_text = obj.get("if_qualifier_missing", "") or ""
    contract = AnswerContract(
        expected=obj.get("expected_answer"),
        aliases=tuple(obj.get("aliases", ())),
        default=obj.get("default_answer"),
        missing_condition="abstain"
        if missing_text.lower().startswith("abstain") or not missing_text
        else "narrower",
        if_qualifier_missing=missing_text,
    )
    return Fixture(
        qid=fixture_id,
        question=question,
        segment=obj.get("segment", "rule-exception"),
        spans=tuple(spans),
        sufficient_sets=tuple(tuple(s) for s in sets),
        answer=contract,
        answerable=bool(sets),
        origin="seed-000-fixture",
        location=(file, line),
    )


def _parse_seed002(obj, file, line, problems) -> Fixture | None:
    n0 = len(problems)
    qid = _str(obj, "qid", file, line, problems)
    question = _str(obj, "text", file, line, problems)
    gold = obj.get("gold")
    if not isinstance(gold, list):
        problems.append(Problem(file, line, "gold", "must be a list of {doc, start, end}"))
    if len(problems) > n0:
        return None
    spans = []
    for i, g in enumerate(gold):
        if not isinstance(g, dict) or not isinstance(g.get("doc"), str):
            problems.append(Problem(file, line, f"gold[{i}]", "must be {doc, start, end}"))
            continue
        off = _offsets([g.get("start"), g.get("end")], file, line, f"gold[{i}]", problems)
        if off is None:
            continue
        spans.append(
            GoldSpan(
                f"g{i}",
                g["doc"],
                off[0],
                off[1],
                dependency="primary" if i == 0 else "joint",
                system=coords.CODEPOINT,
            )
        )
    return Fixture(
        qid=qid,
        question=question,
        segment=obj.get("segment", "joint-evidence" if len(spans) > 1 else "rule-exception"),
        spans=tuple(spans),
        sufficient_sets=(tuple(s.span_id for s in spans),) if spans else (),
        answer=AnswerContract(expected=obj.get("answer")),
        answerable=bool(spans),
        support_only=obj.get("answer") is None,
        origin=str(obj.get("source", "seed-002-gold")),
        location=(file, line),
    )


def _parse_canonical(obj, file, line, inline, problems) -> Fixture | None:
    n0 = len(problems)
    fmt = obj.get("format", FORMAT)
    if fmt != FORMAT:
        problems.append(
            Problem(file, line, "format", f"unknown format version {fmt!r} (expected {FORMAT})")
        )
        return None
    qid = _str(obj, "qid", file, line, problems)
    question = _str(obj, "question", file, line, problems)
    segment = _str(obj, "segment", file, line, problems)
    system = obj.get("coordinate_system", coords.CODEPOINT)
    if system not in coords.SYSTEMS:
        problems.append(Problem(file, line, "coordinate_system", f"unknown system {system!r}"))
    raw_spans = obj.get("spans", [])
    if not isinstance(raw_spans, list):
        problems.append(Problem(file, line, "spans", "must be a list"))
    if len(problems) > n0:
        return None
    for src in obj.get("sources", []) or []:
        try:
            inline.add(
                make_source(
                    src["doc_id"],
                    src["text"],
                    src.get("version"),
                    src.get("observed"),
                    src.get("access", ()),
                )
            )
        except DigestMismatch as exc:
            problems.append(Problem(file, line, "sources.version", str(exc)))
        except InputError as exc:  # unencodable text, or the doc id already holds another version
            problems.extend(
                Problem(file, line, f"sources.{p.field}", p.reason) for p in exc.problems
            )
        except (KeyError, TypeError, AttributeError):
            problems.append(Problem(file, line, "sources", "each needs doc_id and text"))
    spans = []
    for i, s in enumerate(raw_spans):
        where = f"spans[{i}]"
        if not isinstance(s, dict):
            problems.append(Problem(file, line, where, "must be an object"))
            continue
        sid, doc = s.get("id"), s.get("doc_id")
        if not isinstance(sid, str) or not isinstance(doc, str):
            problems.append(Problem(file, line, where, "needs string id and doc_id"))
            continue
        if s.get("start") is None and s.get("end") is None and isinstance(s.get("quote"), str):
            off = (-1, -1)  # a quote selector: resolved against the source by quote + prefix/suffix
        else:
            off = _offsets(
                [s.get("start"), s.get("end")], file, line, f"{where}.start/end", problems
            )
        if off is None:
            continue
        spans.append(
            GoldSpan(
                sid,
                doc,
                off[0],
                off[1],
                version=s.get("version"),
                quote=s.get("quote"),
                prefix=s.get("prefix", "") or "",
                suffix=s.get("suffix", "") or "",
                dependency=s.get("dependency", "primary"),
                label=s.get("label", "") or "",
                system=s.get("coordinate_system", system),
            )
        )
    ans = obj.get("answer") or {}
    if not isinstance(ans, dict):
        problems.append(Problem(file, line, "answer", "must be an object"))
        return None
    sets = obj.get("sufficient_sets", [])
    if not isinstance(sets, list) or not all(
        isinstance(x, list) and all(isinstance(sid, str) for sid in x) for x in sets
    ):
        problems.append(
            Problem(file, line, "sufficient_sets", "must be a list of lists of span ids")
        )
        return None
    adjudication = obj.get("adjudication") or {"state": "adjudicated"}
    return Fixture(
        qid=qid,
        question=question,
        segment=segment,
        spans=tuple(spans),
        sufficient_sets=tuple(tuple(x) for x in sets),
        answer=AnswerContract(
            expected=ans.get("expected"),
            aliases=tuple(ans.get("aliases", ()) or ()),
            default=ans.get("default"),
            missing_condition=ans.get("missing_condition", "abstain"),
            if_qualifier_missing=ans.get("if_qualifier_missing", "") or "",
        ),
        answerable=bool(obj.get("answerable", True)),
        support_only=bool(obj.get("support_only", False)),
        adjudication=adjudication
        if isinstance(adjudication, dict)
        else {"state": str(adjudication)},
        stress_set=obj.get("stress_set", "representative"),
        origin=obj.get("origin", "") or "",
        annotations=obj.get("annotations") or {},
        location=(file, line),
    )


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
    from .atomic import atomic_write_text

    lines = []
    for fx in fixtures:
        obj = fx.to_json()
        if inline_sources and corpus is not None:
            obj["sources"] = [corpus.sources[d].to_json() for d in fx.doc_ids if d in corpus]
        lines.append(json.dumps(obj, ensure_ascii=False))
    atomic_write_text(path, "\n".join(lines) + ("\n" if lines else ""))
