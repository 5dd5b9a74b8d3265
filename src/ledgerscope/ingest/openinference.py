"""OpenInference spans onto the staged trace shape (``ledgerscope ingest --from openinference``).

Reads Phoenix's span export (its REST API's span objects: one per line, a JSON
list, or ``{"data": [...]}``) and OTLP JSON (``{"resourceSpans": [...]}``,
one request per line or per file); attributes may be flat
(``retrieval.documents.0.document.id``), nested, or OTLP key/value lists, and
are flattened first. Spans are grouped by trace id; per trace, declared mapping:

* ``qid``: the span attribute ``--qid-key``, or that key of a span's
  ``metadata`` (JSON), the first found from the root span down; a trace
  without one is a problem (never guessed from the question text);
* a document's chunk id is its ``document.id``, else ``metadata[--id-key]``
  (LangChain's instrumentor records no id), else a digest of its content;
* RETRIEVER spans (``retrieval.documents.N.document.{id,content,score,metadata}``):
  one retriever is the ``retrieved`` list (what the reranker reads); with a
  RERANKER span as well, the reranker's input documents are that list and the
  retriever's documents its ``union``; several retrievers are named by their
  span names where those are standard first-stage names (``bm25``,
  ``dense_exact``, ``dense_ann``), otherwise declared stages
  ``retriever_1``.. before ``fused``;
* RERANKER spans: ``reranker.input_documents`` -> ``fused``,
  ``reranker.output_documents`` -> ``reranked``;
* the LLM span: its input messages are the literal prompt (``prompt``); the
  context is every recorded document whose content occurs in that prompt
  (exactly, or with whitespace normalised), in prompt order (``context_text``:
  their contents):
  what the model read, never a list cut guessed from a ``top_k``; its output
  (``llm.output_messages.0.message.content``, else ``output.value``) is the answer;
* ``config`` and ``phase``: the metadata keys of those names when present, else
  ``--config`` and ``"0"``.

The chunk store, when ``--chunks`` does not give one, is the documents the spans
carry (id, content, ``metadata[--doc-key]`` as the source document,
``metadata[--start-key]`` as a code point start): a partial store, so the
chunker's output is not recorded. Every problem names the file, the line (or
the position in a JSON document) and the attribute.
"""

from __future__ import annotations

import hashlib
import json
import re
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
from ledgerscope.ingest.chunkstore import chunks_from_objects, read_chunks
from ledgerscope.ingest.lines import MAX_PROBLEMS, kind_of
from ledgerscope.ingest.resolve import normalise
from ledgerscope.ingest.traceformat import traces_from_objects
from ledgerscope.inputs.sources import StrictJSONError, strict_loads

_DOC = re.compile(r"^(retrieval\.documents|reranker\.input_documents|reranker\.output_documents)\.(\d+)\."
                  r"document\.(id|content|score|metadata)(?:\.(.+))?$")
_MSG = re.compile(r"^llm\.(input_messages|output_messages)\.(\d+)\.message\.(role|content)$")
FIRST_STAGE = ("bm25", "dense_exact", "dense_ann")


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
            problems.append(Problem(where[0], where[1], f"{where[2]}{name}",
                                    f"missing or not a string ({kind_of(value)})"))
            return None
    return Span(where, trace_id, span_id, parent, str(obj.get("name", "")), str(kind or "").upper(), start,
                attrs)


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
# the mapping


def _metadata(value: Any) -> dict:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    return value if isinstance(value, dict) else {}


def _documents(span: Span, kind: str) -> list[dict]:
    """The documents of one list of the span (``retrieval.documents``, ``reranker.input_documents``..)."""
    docs: dict[int, dict] = {}
    for key, value in span.attributes.items():
        m = _DOC.match(key)
        if m and m.group(1) == kind:
            doc = docs.setdefault(int(m.group(2)), {})
            if m.group(4) is not None:  # metadata flattened into its keys (Phoenix's export)
                doc.setdefault("metadata", {})[m.group(4)] = value
            elif m.group(3) == "metadata":
                doc["metadata"] = {**_metadata(value), **doc.get("metadata", {})}
            else:
                doc[m.group(3)] = value
    return [docs[i] for i in sorted(docs)]


def _messages(span: Span, kind: str) -> list[str]:
    msgs: dict[int, dict] = {}
    for key, value in span.attributes.items():
        m = _MSG.match(key)
        if m and m.group(1) == kind:
            msgs.setdefault(int(m.group(2)), {})[m.group(3)] = value
    return [str(msgs[i].get("content") or "") for i in sorted(msgs)]


def _doc_id(doc: dict, id_key: str) -> str:
    """``document.id``, else the metadata's chunk id key, else a digest of the content."""
    cid = doc.get("id")
    if cid in (None, ""):
        cid = _metadata(doc.get("metadata")).get(id_key)
    if isinstance(cid, str) and cid:
        return cid
    if isinstance(cid, int | float) and not isinstance(cid, bool):
        return str(cid)
    return "sha256:" + hashlib.sha256(str(doc.get("content", "")).encode("utf-8", "replace")).hexdigest()[:24]


def _lookup(spans: list[Span], key: str) -> Any:
    """A key's value on the trace's spans (an attribute, or in a span's metadata), root first."""
    for sp in spans:
        for name in (key, f"metadata.{key}"):  # an attribute, or metadata flattened into attributes
            if sp.attributes.get(name) not in (None, ""):
                return sp.attributes[name]
        meta = _metadata(sp.attributes.get("metadata"))  # metadata as OpenInference writes it: JSON text
        if key in meta:
            return meta[key]
    return None


def _ordered(spans: list[Span]) -> list[Span]:
    """Root spans first, then by start time (a stable, documented order)."""
    return sorted(spans, key=lambda s: (s.parent_id is not None, s.start, s.span_id))


def trace_object(spans: list[Span], keys: SpanKeys, docs_out: dict[str, tuple[dict, tuple]],
                 problems: list[Problem]) -> dict | None:
    """One trace's spans as a staged trace object (rules in the module docstring)."""
    spans = _ordered(spans)
    where = spans[0].where
    file, line = where[0], where[1]
    qid = _lookup(spans, keys.qid)
    if qid is None:
        problems.append(Problem(file, line, keys.qid, f"trace {spans[0].trace_id[:40]}: no span attribute or "
                                "metadata key names the question id (--qid-key)"))
        return None
    retrievers = [s for s in spans if s.kind == "RETRIEVER"]
    rerankers = [s for s in spans if s.kind == "RERANKER"]
    llms = [s for s in spans if s.kind == "LLM"]
    stages: dict[str, list[dict]] = {}
    order: list[str] = []
    if rerankers:
        stages["fused"] = _documents(rerankers[0], "reranker.input_documents")
        stages["reranked"] = _documents(rerankers[0], "reranker.output_documents")
    for i, sp in enumerate(retrievers, start=1):
        docs = _documents(sp, "retrieval.documents")
        if len(retrievers) == 1:
            stages["union" if rerankers else "fused"] = docs
        elif sp.name in FIRST_STAGE and sp.name not in stages:
            stages[sp.name] = docs
        else:
            stages[f"retriever_{i}"] = docs
            order.append(f"retriever_{i}")
    for sp in [*retrievers, *rerankers]:
        for kind in ("retrieval.documents", "reranker.input_documents", "reranker.output_documents"):
            for d in _documents(sp, kind):
                docs_out.setdefault(_doc_id(d, keys.chunk), (d, sp.where))
    if not llms:
        problems.append(Problem(file, line, "span_kind", f"trace {spans[0].trace_id[:40]} ({qid!r}): "
                                "no LLM span "
                                "(the model's input and output are what a trace must record)"))
        return None
    llm = llms[-1]
    prompt_parts = _messages(llm, "input_messages") or [str(llm.attributes.get("input.value") or "")]
    prompt = "\n\n".join(prompt_parts)
    answer = (_messages(llm, "output_messages") or [llm.attributes.get("output.value")])[0]
    seen: dict[str, None] = {}
    for docs in stages.values():
        for d in docs:
            seen.setdefault(_doc_id(d, keys.chunk), None)
    content = {cid: str(docs_out[cid][0].get("content") or "") for cid in seen}
    context = _in_prompt(prompt, list(content.items()))
    obj: dict[str, Any] = {"qid": qid if isinstance(qid, str) else str(qid), "context_ids": context,
                           "context_text": [content[c] for c in context],
                           "answer": answer if isinstance(answer, str) else None, "prompt": prompt}
    meta = {k: _lookup(spans, k) for k in ("config", "phase")}
    for k, v in meta.items():
        if v is not None:
            obj[k] = str(v)
    body = {}
    for name, docs in stages.items():
        ids = [_doc_id(d, keys.chunk) for d in docs]
        scores = [d.get("score") if isinstance(d.get("score"), int | float) else None for d in docs]
        body[name] = {"ids": ids, **({"scores": scores} if any(s is not None for s in scores) else {})}
    if body:
        obj["stages"] = body
    if order:
        obj["stage_order"] = [*order, "fused"] if "fused" in body else order
    if llm.attributes.get("llm.token_count.prompt") is not None:
        n = llm.attributes["llm.token_count.prompt"]
        if isinstance(n, int) and not isinstance(n, bool) and n >= 0:
            obj["claims"] = {"prompt_tokens": n}
    return obj


def _in_prompt(prompt: str, docs: list[tuple[str, str]]) -> list[str]:
    """The documents whose content the prompt holds (exactly, or with whitespace normalised), in the
    order they appear in it."""
    norm, _ = normalise(prompt)
    hits = []
    for cid, text in docs:
        if not text.strip():
            continue
        pos = prompt.find(text)
        if pos < 0:
            n, _ = normalise(text)
            npos = norm.find(n)
            pos = -1 if npos < 0 else len(prompt) + npos  # after the exact ones, in normalised order
        if pos >= 0:
            hits.append((pos, cid))
    return [cid for _, cid in sorted(hits)]


def chunk_objects(docs: dict[str, tuple[dict, tuple]], keys: SpanKeys,
                  problems: list[Problem]) -> list[tuple[str, int, dict]]:
    """The spans' documents as chunk store objects (a partial store)."""
    out = []
    for cid, (d, where) in sorted(docs.items()):
        meta = _metadata(d.get("metadata"))
        doc_id = meta.get(keys.doc)
        if not isinstance(doc_id, str) or not doc_id:
            problems.append(Problem(where[0], where[1], f"{where[2]}document.metadata.{keys.doc}",
                                    f"document {cid[:60]!r} names no source document (--doc-key)"))
            continue
        obj: dict[str, Any] = {"chunk_id": cid, "doc_id": doc_id, "text": str(d.get("content") or "")}
        start = meta.get(keys.start)
        if isinstance(start, int) and not isinstance(start, bool) and start >= 0:
            obj.update(start=start, end=start + len(obj["text"]), coordinate_system="codepoint-half-open")
        out.append((where[0], where[1] or 0, obj))
    return out


def ingest_spans(opts: IngestOptions, keys: SpanKeys) -> IngestReport:
    """``ledgerscope ingest --from openinference``: spans read, mapped, checked, then ingested."""
    check_out(opts.out, [*opts.traces, opts.fixtures, *([opts.chunks] if opts.chunks else []),
                         *([opts.corpus] if opts.corpus else [])])
    fixtures, corpus = read_fixtures_and_corpus(opts)
    problems: list[Problem] = []
    by_trace: dict[str, list[Span]] = {}
    for path in opts.traces:
        for sp in read_spans(path, problems):
            by_trace.setdefault(sp.trace_id, []).append(sp)
    docs: dict[str, tuple[dict, tuple]] = {}
    objects = []
    for trace_id in sorted(by_trace, key=lambda t: _ordered(by_trace[t])[0].where[1] or 0):
        obj = trace_object(by_trace[trace_id], keys, docs, problems)
        if obj is not None:
            first = _ordered(by_trace[trace_id])[0].where
            objects.append((first[0], first[1], obj))
        if len(problems) > MAX_PROBLEMS:
            break
    if problems:
        raise InputError(problems[:MAX_PROBLEMS])
    traces = traces_from_objects(objects, opts.config, problems)
    if opts.chunks is not None:
        chunks, more = read_chunks(opts.chunks, opts.coordinates)
        chunks_file = str(opts.chunks)
        chunk_input = {"name": opts.chunks.name, "sha256": file_digest(opts.chunks),
                       "partial": opts.chunks_partial}
    else:
        more: list[Problem] = []
        chunks = chunks_from_objects(chunk_objects(docs, keys, more), opts.coordinates, more)
        chunks_file = str(opts.traces[0])
        chunk_input = {"name": "the spans' documents", "partial": True}
        opts = replace(opts, chunks_partial=True,
                       partial_reason="the chunk store is the spans' documents (only what was retrieved)")
    problems += more
    if not problems and not len(traces):
        problems.append(Problem(", ".join(map(str, opts.traces)), None, "spans",
                                "no traces in the span export"))
    if problems:
        raise InputError(problems[:MAX_PROBLEMS])
    opts = replace(opts, source="openinference")
    inputs = {"spans": [{"name": p.name, "sha256": file_digest(p)} for p in opts.traces],
              "chunks": chunk_input,
              "fixtures": {"name": opts.fixtures.name, "sha256": file_digest(opts.fixtures)},
              "keys": {"qid": keys.qid, "doc": keys.doc, "start": keys.start, "chunk": keys.chunk}}
    checked = checked_from_traces(opts, traces, fixtures, corpus, chunks, inputs, chunks_file)
    return ingest_checked(opts, checked)
