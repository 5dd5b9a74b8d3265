"""OpenInference spans grouped into the requests a pipeline ran, by the span that names the question.

A trace id is not a request: an evaluation harness runs forty requests under
one parent span (one trace id), a batch run may share one, and a nested chain
repeats the question id on every span below the query. Declared rules:

* a request is the subtree under a span that names a question id (the span
  attribute or ``metadata`` key ``--qid-key``) whose ancestors name none: the
  query's root. Every span below it belongs to it, whatever trace or parent
  spans lie above it;
* a span below a request's root that names *another* question id is an error
  naming both (one request cannot answer two questions);
* spans outside every request, per trace id: when they hold a RETRIEVER,
  RERANKER or LLM span they are a request without a question id, an error
  unless the user asks to skip such traces (``--skip-unidentified``, counted);
  a trace that holds no request at all and none of those spans (index
  building: splitters, embeddings) is skipped and counted; what is left beside
  requests (a harness's own parent span) is not a request and is ignored;
* a span whose parent is not in the export (a partial export) is a root; a
  span given twice (the same export read twice, a re-run appended) and spans
  whose parents form a cycle are errors.

Pure over :class:`~ledgerscope.ingest.spans.openinference.Span`-shaped objects (a
``trace_id``, ``span_id``, ``parent_id``, ``kind``, ``attributes``, ``where``).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ledgerscope.common.errors import Problem

#: span kinds that make a group of spans request-shaped
REQUEST_KINDS = frozenset({"RETRIEVER", "RERANKER", "LLM"})
INDEX_BUILDING = "trace(s) without a request (no question id, no retriever or LLM span: index building)"
UNIDENTIFIED = "request-shaped trace(s) without a question id (--skip-unidentified)"


@dataclass
class Request:
    """One request: its question id, its root span and every span below it (in export order)."""

    qid: str
    root: Any
    spans: list[Any] = field(default_factory=list)


@dataclass
class Grouping:
    requests: list[Request]
    #: why traces were skipped -> how many
    skipped: Counter
    problems: list[Problem]


def metadata(value: Any) -> dict:
    """A span's ``metadata`` attribute (JSON text as OpenInference writes it, or already a mapping)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    return value if isinstance(value, dict) else {}


def own_value(span: Any, key: str) -> Any:
    """A key's value on one span: its attribute, or its ``metadata``'s key (flattened or JSON)."""
    attrs = span.attributes
    for name in (key, f"metadata.{key}"):
        if attrs.get(name) not in (None, ""):
            return attrs[name]
    value = metadata(attrs.get("metadata")).get(key)
    return None if value in (None, "") else value


def _qid(span: Any, key: str) -> str | None:
    value = own_value(span, key)
    if value is None or isinstance(value, dict | list | bool):
        return None
    return str(value)


def _where(span: Any) -> str:
    file, line, pos = span.where
    return f"{file}:{line}" if line is not None else f"{file} ({pos.rstrip('.') or 'the document'})"


def _tree(spans: list[Any], problems: list[Problem]) -> tuple[dict, dict, list]:
    """(span by (trace, span id), children by parent key, roots); a span given twice is a problem."""
    by_key: dict[tuple[str, str], Any] = {}
    for sp in spans:
        key = (sp.trace_id, sp.span_id)
        if key in by_key:
            file, line, pos = sp.where
            problems.append(
                Problem(
                    file,
                    line,
                    f"{pos}span_id",
                    f"span {sp.span_id[:40]!r} of trace "
                    f"{sp.trace_id[:40]!r} appears twice (first at {_where(by_key[key])}): "
                    "the same spans exported or appended twice",
                )
            )
            continue
        by_key[key] = sp
    children: dict[tuple[str, str], list[Any]] = {}
    roots = []
    for sp in by_key.values():
        parent = (sp.trace_id, sp.parent_id) if sp.parent_id else None
        if parent is not None and parent in by_key and parent != (sp.trace_id, sp.span_id):
            children.setdefault(parent, []).append(sp)
        else:
            roots.append(sp)
    return by_key, children, roots


class _Walk:
    """Every span onto the request above it (or outside every request), from the roots down."""

    def __init__(self, children: dict, qid_key: str, problems: list[Problem]):
        self.children, self.qid_key, self.problems = children, qid_key, problems
        self.requests: list[Request] = []
        self.outside: dict[str, list[Any]] = {}
        self.has_request: set[str] = set()
        self.seen: set[tuple[str, str]] = set()

    def walk(self, start: Any) -> None:
        stack: list[tuple[Any, Request | None]] = [(start, None)]
        while stack:
            sp, req = stack.pop()
            key = (sp.trace_id, sp.span_id)
            if key in self.seen:
                continue
            self.seen.add(key)
            qid = _qid(sp, self.qid_key)
            if qid is not None and req is None:
                req = Request(qid, sp)
                self.requests.append(req)
                self.has_request.add(sp.trace_id)
            elif qid is not None and qid != req.qid:
                file, line, pos = sp.where
                self.problems.append(
                    Problem(
                        file,
                        line,
                        f"{pos}{self.qid_key}",
                        f"span {sp.name[:60]!r} names question {qid[:60]!r} "
                        f"inside the request of question {req.qid[:60]!r} "
                        f"(its root at {_where(req.root)}): two "
                        "question ids in one request",
                    )
                )
            if req is not None:
                req.spans.append(sp)
            else:
                self.outside.setdefault(sp.trace_id, []).append(sp)
            stack.extend((c, req) for c in reversed(self.children.get(key, [])))


def _leftovers(w: _Walk, qid_key: str, skip_unidentified: bool) -> Counter:
    """Spans outside every request, per trace: a request without a question id (a problem, or skipped
    and counted), a trace without a request (skipped and counted), or a harness's own spans."""
    skipped: Counter = Counter()
    for trace_id, rest in w.outside.items():
        if any(s.kind in REQUEST_KINDS for s in rest):
            if skip_unidentified:
                skipped[UNIDENTIFIED] += 1
                continue
            first = min(rest, key=lambda s: (s.parent_id is not None, s.start))
            file, line, pos = first.where
            kinds = sorted({s.kind for s in rest if s.kind in REQUEST_KINDS})
            w.problems.append(
                Problem(
                    file,
                    line,
                    f"{pos}{qid_key}",
                    f"trace {trace_id[:40]!r} holds {'/'.join(kinds)} span(s) that no span "
                    "naming a question id (--qid-key) lies above: a request without a "
                    "question id (attach it with metadata, or --skip-unidentified to skip "
                    "and count such traces)",
                )
            )
        elif trace_id not in w.has_request:
            skipped[INDEX_BUILDING] += 1
    return skipped


def group_requests(spans: list[Any], qid_key: str, skip_unidentified: bool = False) -> Grouping:
    """The requests of an export (rules in the module docstring), in the order of their roots."""
    problems: list[Problem] = []
    by_key, children, roots = _tree(spans, problems)
    w = _Walk(children, qid_key, problems)
    for root in roots:
        w.walk(root)
    cyclic: dict[str, Any] = {}
    for sp in by_key.values():  # reached from no root: its ancestors loop back to it
        if (sp.trace_id, sp.span_id) not in w.seen:
            cyclic.setdefault(sp.trace_id, sp)
            w.walk(sp)
    for trace_id, sp in cyclic.items():
        file, line, pos = sp.where
        problems.append(
            Problem(
                file,
                line,
                f"{pos}parent_id",
                f"span {sp.span_id[:40]!r} of trace "
                f"{trace_id[:40]!r}: its parent spans form a cycle (no root to group it by)",
            )
        )
    skipped = _leftovers(w, qid_key, skip_unidentified)
    for req in w.requests:
        req.spans.sort(key=lambda s: (s.start, s.span_id))
    return Grouping(w.requests, skipped, problems)
