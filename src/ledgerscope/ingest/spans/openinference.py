"""OpenInference spans onto the staged trace shape (``ledgerscope ingest --from openinference``).

Reads Phoenix's span export (its REST API's span objects: one per line, a JSON
list, or ``{"data": [...]}``) and OTLP JSON (``{"resourceSpans": [...]}``,
one request per line or per file); attributes may be flat
(``retrieval.documents.0.document.id``), nested, or OTLP key/value lists, and
are flattened first, and each span's status (ERROR, with its description or
exception event) is kept. Spans are grouped into requests by the span naming
the question id (:mod:`.requests`: never by trace id, so a harness's parent
span or a batch gives one record per request), and each request is mapped by
:mod:`.spanmap` (LangChain's and LlamaIndex's span shapes: the retrieve pair,
postprocessors, completion prompts, failures, empty retrievals).

The chunk store, when ``--chunks`` does not give one, is the documents the spans
carry (id, content, ``metadata[--doc-key]`` as the source document,
``metadata[--start-key]`` as a code point start): a partial store, so the
chunker's output is not recorded. Every problem names the file, the line (or
the position in a JSON document) and the attribute.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ledgerscope.common.errors import InputError, Problem
from ledgerscope.ingest.build import (
    IngestOptions,
    IngestReport,
    check_out,
    checked_from_traces,
    file_digest,
    ingest_checked,
    read_fixtures_and_corpus,
)
from ledgerscope.ingest.read.chunkstore import chunks_from_objects, read_chunks
from ledgerscope.ingest.read.lines import MAX_PROBLEMS, kind_of
from ledgerscope.ingest.read.traceformat import traces_from_objects
from ledgerscope.ingest.spans.requests import group_requests, metadata
from ledgerscope.ingest.spans.spanmap import request_object
from ledgerscope.inputs.sources import StrictJSONError, strict_loads


@dataclass(frozen=True)
class SpanKeys:
    """Where the mapping finds what OpenInference leaves to the application."""

    qid: str = "qid"
    doc: str = "source"
    start: str = "start_index"
    #: a document's chunk id when it has no ``document.id`` (LangChain's instrumentor records none)
    chunk: str = "chunk_id"


@dataclass
class Span:
    where: tuple[str, int | None, str]  # file, line, position in the document
    trace_id: str
    span_id: str
    parent_id: str | None
    name: str
    kind: str
    start: str
    attributes: dict[str, Any]
    #: OK, ERROR or UNSET; with ERROR, the status description and the exception event's message
    status: str = "UNSET"
    status_message: str | None = None
    exception: str | None = None


# ---------------------------------------------------------------------------
# reading the exports


def _otlp_value(value: Any) -> Any:
    """An OTLP JSON AnyValue as a Python value."""
    if not isinstance(value, dict):
        return value
    for key in ("stringValue", "boolValue", "doubleValue"):
        if key in value:
            return value[key]
    if "intValue" in value:
        return int(value["intValue"])
    if "arrayValue" in value:
        return [_otlp_value(v) for v in (value["arrayValue"] or {}).get("values", [])]
    if "kvlistValue" in value:
        return {kv.get("key"): _otlp_value(kv.get("value")) for kv in value["kvlistValue"].get("values", [])}
    return None


def flatten(attrs: Any, prefix: str = "") -> dict[str, Any]:
    """Nested attributes (dicts, lists) as OpenInference's dotted keys; OTLP key/value lists too."""
    out: dict[str, Any] = {}
    if isinstance(attrs, list) and all(isinstance(a, dict) and "key" in a and "value" in a for a in attrs):
        attrs = {a["key"]: _otlp_value(a["value"]) for a in attrs}
    if isinstance(attrs, dict):
        for k, v in attrs.items():
            key = f"{prefix}{k}"
            if isinstance(v, dict):
                out.update(flatten(v, key + "."))
            elif isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
                for i, x in enumerate(v):
                    out.update(flatten(x, f"{key}.{i}."))
            else:
                out[key] = v
    return out


def _span(obj: dict, where: tuple[str, int | None, str], problems: list[Problem]) -> Span | None:
    """A Phoenix span object or an OTLP span, checked for what the mapping needs."""
    if "traceId" in obj or "spanId" in obj:  # OTLP
        trace_id, span_id, parent = obj.get("traceId"), obj.get("spanId"), obj.get("parentSpanId") or None
        attrs = flatten(obj.get("attributes") or [])
        kind = attrs.get("openinference.span.kind")
        start = str(obj.get("startTimeUnixNano", ""))
    else:  # Phoenix
        ctx = obj.get("context") if isinstance(obj.get("context"), dict) else {}
        trace_id, span_id, parent = ctx.get("trace_id"), ctx.get("span_id"), obj.get("parent_id")
        attrs = flatten(obj.get("attributes") or {})
        kind = obj.get("span_kind") or attrs.get("openinference.span.kind")
        start = str(obj.get("start_time", ""))
    for name, value in (("trace_id", trace_id), ("span_id", span_id)):
        if not isinstance(value, str) or not value:
            problems.append(
                Problem(
                    where[0], where[1], f"{where[2]}{name}", f"missing or not a string ({kind_of(value)})"
                )
            )
            return None
    status, message = _status(obj)
    return Span(
        where,
        trace_id,
        span_id,
        parent,
        str(obj.get("name", "")),
        str(kind or "").upper(),
        start,
        attrs,
        status,
        message,
        _exception(obj.get("events")),
    )


def _status(obj: dict) -> tuple[str, str | None]:
    """(OK | ERROR | UNSET, description) of an OTLP span (``status.code``) or a Phoenix span
    (``status_code``)."""
    status = obj.get("status")
    if isinstance(status, dict):  # OTLP: {"code": "STATUS_CODE_ERROR" | 2, "message": ...}
        code, message = status.get("code"), status.get("message")
        code = {0: "UNSET", 1: "OK", 2: "ERROR"}.get(code, code) if isinstance(code, int) else code
    else:  # Phoenix: "status_code": "ERROR", "status_message": ...
        code, message = obj.get("status_code"), obj.get("status_message")
    code = str(code or "UNSET").upper().removeprefix("STATUS_CODE_")
    return code, (message if isinstance(message, str) and message else None)


def _exception(events: Any) -> str | None:
    """The first exception event's ``exception.type: exception.message``."""
    for event in events if isinstance(events, list) else []:
        if not isinstance(event, dict) or event.get("name") != "exception":
            continue
        attrs = flatten(event.get("attributes") or [])
        kind, message = attrs.get("exception.type"), attrs.get("exception.message")
        return ": ".join(str(x) for x in (kind, message) if x) or "exception"
    return None


def _spans_in(doc: Any, file: str, line: int | None, problems: list[Problem]) -> list[Span]:
    out: list[Span] = []
    if isinstance(doc, dict) and "resourceSpans" in doc:
        for i, rs in enumerate(doc.get("resourceSpans") or []):
            for j, ss in enumerate((rs or {}).get("scopeSpans") or []):
                for k, sp in enumerate((ss or {}).get("spans") or []):
                    where = (file, line, f"resourceSpans[{i}].scopeSpans[{j}].spans[{k}].")
                    if isinstance(sp, dict) and (s := _span(sp, where, problems)) is not None:
                        out.append(s)
        return out
    items = doc.get("data") if isinstance(doc, dict) and isinstance(doc.get("data"), list) else doc
    if isinstance(items, dict):
        items = [items]
    if not isinstance(items, list):
        problems.append(Problem(file, line, "spans", f"expected span objects, not {kind_of(items)}"))
        return out
    for i, sp in enumerate(items):
        where = (file, line, "" if len(items) == 1 else f"[{i}].")
        if not isinstance(sp, dict):
            problems.append(Problem(file, line, f"{where[2]}span", f"must be an object, not {kind_of(sp)}"))
        elif (s := _span(sp, where, problems)) is not None:
            out.append(s)
    return out


def read_spans(path: Path, problems: list[Problem]) -> list[Span]:
    """Every span of an export file: one JSON document, or one per line."""
    try:
        raw = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        problems.append(Problem(str(path), None, "spans", f"not valid UTF-8 at byte {exc.start}"))
        return []
    except OSError as exc:
        problems.append(Problem(str(path), None, "spans", f"cannot be read: {exc.strerror or exc}"))
        return []
    try:
        return _spans_in(strict_loads(raw), str(path), None, problems)
    except (ValueError, StrictJSONError, RecursionError):
        pass
    out: list[Span] = []
    for n, line in enumerate(raw.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            doc = strict_loads(line)
        except (ValueError, RecursionError) as exc:
            problems.append(Problem(str(path), n, "line", f"not valid JSON: {exc}"))
            continue
        out.extend(_spans_in(doc, str(path), n, problems))
    return out


# ---------------------------------------------------------------------------
# the chunk store and the ingest


def chunk_objects(
    docs: dict[str, tuple[dict, tuple]], keys: SpanKeys, problems: list[Problem]
) -> list[tuple[str, int | None, dict]]:
    """The spans' documents as chunk store objects (a partial store)."""
    out = []
    for cid, (d, where) in sorted(docs.items()):
        meta = metadata(d.get("metadata"))
        doc = meta.get(keys.doc)
        if not isinstance(doc, str) or not doc:
            problems.append(
                Problem(
                    where[0],
                    where[1],
                    f"{where[2]}document.metadata.{keys.doc}",
                    f"document {cid[:60]!r} names no source document (--doc-key; or give "
                    "the pipeline's chunk store with --chunks)",
                )
            )
            continue
        obj: dict[str, Any] = {"chunk_id": cid, "doc_id": doc, "text": str(d.get("content") or "")}
        start = meta.get(keys.start)
        if isinstance(start, int) and not isinstance(start, bool) and start >= 0:
            obj.update(start=start, end=start + len(obj["text"]), coordinate_system="codepoint-half-open")
        out.append((where[0], where[1], obj))
    return out


def span_traces(
    paths: list[Path], keys: SpanKeys, skip_unidentified: bool, problems: list[Problem]
) -> tuple[list[tuple[str, int | None, dict]], dict, Counter]:
    """Every request of the exports as a trace object (with where its root span lies), the documents
    the spans carry, and the traces skipped by why."""
    spans: list[Span] = []
    for path in paths:
        spans.extend(read_spans(path, problems))
    grouping = group_requests(spans, keys.qid, skip_unidentified)
    problems += grouping.problems
    docs: dict[str, tuple[dict, tuple]] = {}
    objects = []
    for req in grouping.requests:
        if len(problems) > MAX_PROBLEMS:
            break
        obj = request_object(req, keys, docs, problems)
        objects.append((req.root.where[0], req.root.where[1], obj))
    return objects, docs, grouping.skipped


def ingest_spans(opts: IngestOptions, keys: SpanKeys, skip_unidentified: bool = False) -> IngestReport:
    """``ledgerscope ingest --from openinference``: spans read, grouped into requests, mapped, checked,
    then ingested."""
    check_out(
        opts.out,
        [
            *opts.traces,
            opts.fixtures,
            *([opts.chunks] if opts.chunks else []),
            *([opts.corpus] if opts.corpus else []),
        ],
    )
    fixtures, corpus = read_fixtures_and_corpus(opts)
    problems: list[Problem] = []
    objects, docs, skipped = span_traces(opts.traces, keys, skip_unidentified, problems)
    if problems:
        raise InputError(problems[:MAX_PROBLEMS])
    traces = traces_from_objects(objects, opts.config, problems)
    if opts.chunks is not None:
        chunks, more = read_chunks(opts.chunks, opts.coordinates)
        chunks_file = str(opts.chunks)
        chunk_input = {
            "name": opts.chunks.name,
            "sha256": file_digest(opts.chunks),
            "partial": opts.chunks_partial,
        }
    else:
        more = []
        chunks = chunks_from_objects(chunk_objects(docs, keys, more), opts.coordinates, more)
        chunks_file = str(opts.traces[0])
        chunk_input = {"name": "the spans' documents", "partial": True}
        opts = replace(
            opts,
            chunks_partial=True,
            partial_reason="the chunk store is the spans' documents (only what was retrieved)",
        )
    problems += more
    if not problems and not len(traces):
        why = "; ".join(f"{n} {w}" for w, n in sorted(skipped.items()))
        problems.append(
            Problem(
                ", ".join(map(str, opts.traces)),
                None,
                "spans",
                "no request in the span export" + (f" (skipped: {why})" if why else ""),
            )
        )
    if problems:
        raise InputError(problems[:MAX_PROBLEMS])
    opts = replace(opts, source="openinference", skipped=dict(skipped))
    inputs = {
        "spans": [{"name": p.name, "sha256": file_digest(p)} for p in opts.traces],
        "chunks": chunk_input,
        "fixtures": {"name": opts.fixtures.name, "sha256": file_digest(opts.fixtures)},
        "keys": {"qid": keys.qid, "doc": keys.doc, "start": keys.start, "chunk": keys.chunk},
        "skipped": dict(sorted(skipped.items())),
    }
    checked = checked_from_traces(opts, traces, fixtures, corpus, chunks, inputs, chunks_file)
    return ingest_checked(opts, checked)
