"""The three input forms of a fixture, parsed into :mod:`ledgerscope.inputs.fixtures`' model.

* seed 000's annotation fixture, verbatim (inline ``source_text``, named
  ``spans``, ``sufficient_support_sets``, ``coordinate_system``);
* seed 002's gold record (``qid``, ``text``, ``gold: [{doc, start, end}]``);
* the canonical JSONL form (``format: ledgerscope-fixture/1``).

Each parser appends located problems (file, line, field) and returns None
where the object cannot become a fixture; spans stay in their declared
coordinate system until :func:`ledgerscope.inputs.fixtures.resolve`.
"""

from __future__ import annotations

from typing import Any

from ledgerscope.common.errors import DigestMismatch, InputError, Problem
from ledgerscope.inputs import coords
from ledgerscope.inputs.fixtures import DEPENDENCIES, FORMAT, AnswerContract, Fixture, GoldSpan
from ledgerscope.inputs.sources import Corpus, make_source


def parse_one(
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
            default_inferred_from=ans.get("default_inferred_from") or None,
            match=ans.get("match") if isinstance(ans.get("match"), dict) else {},
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


