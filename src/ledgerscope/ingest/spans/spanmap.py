"""One request's OpenInference spans onto the staged trace shape: LangChain's and LlamaIndex's span shapes.

Declared mapping (per request, see :mod:`.requests` for what a request is):

* RETRIEVER spans: LlamaIndex's ``X.retrieve`` and the ``X._retrieve`` span
  nested in it are one retrieval (the documents of whichever carries them). A
  single top-level retrieval is the ``fused`` list (``union`` when a RERANKER
  reranks it); one top-level retrieval over nested ones (a fusion retriever)
  is ``fused`` and the nested ones are declared stages ``retriever_1``..
  before it; several top-level retrievals are ``bm25`` / ``dense_exact`` /
  ``dense_ann`` when so named, else ``retriever_1``.. (no fused list: the
  pipeline merged them unrecorded);
* RERANKER spans: the first one's input documents are ``fused``, its output
  ``reranked``;
* LlamaIndex postprocessors (spans named ``*._postprocess_nodes`` that are
  not RERANKER spans): their output nodes, parsed from ``output.value``; the
  last one after any reranker is ``selected``, any other a declared stage
  ``postprocessor_N`` in its place;
* the model calls are the LLM spans with no LLM span below them; their
  prompts, in order, are what the model read: ``llm.input_messages`` (chat),
  else ``llm.prompts`` (completion; never the JSON-escaped ``input.value``),
  else the strings of ``input.value``. The context is every recorded document
  whose content a prompt holds, in prompt order; the last call's output is the
  answer;
* a request that failed (its root span, or its last model call, has status
  ERROR; or, with no model call, any of its spans) records the status
  description (else the exception event) as ``error``: an infrastructure
  failure, never judged;
* a request with no model call answers with its root span's output; its
  context is the documents of the last recorded list whose content the input
  of the last step handed retrieved text holds (what a plain-function answer
  step read; the whole list when no step's input shows it); when that list is
  empty (it retrieved nothing, LlamaIndex's "Empty Response") the request
  abstained, and support is lost at retrieval.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ledgerscope.common.errors import Problem
from ledgerscope.ingest.derive.resolve import normalise
from ledgerscope.ingest.spans.requests import Request, metadata, own_value
from ledgerscope.trace.spec import derived_chunk_id

_DOC = re.compile(
    r"^(retrieval\.documents|reranker\.input_documents|reranker\.output_documents)\.(\d+)\."
    r"document\.(id|content|score|metadata)(?:\.(.+))?$"
)
_MSG = re.compile(r"^llm\.(input_messages|output_messages)\.(\d+)\.message\.(role|content)$")
_PROMPTS = re.compile(r"^llm\.prompts\.(\d+)(?:\.prompt\.text)?$")
#: LlamaIndex's printed node: ``<NodeWithScore(node=TextNode(id_=ID), score=S)>``
_NODE = re.compile(r"^<NodeWithScore\(node=\w+\(id_=(.*)\), score=(.*)\)>$")
FIRST_STAGE = ("bm25", "dense_exact", "dense_ann")
_ANSWER_KEYS = ("answer", "output", "response", "result", "text", "content")


def documents(span: Any, kind: str) -> list[dict]:
    """The documents of one list of the span (``retrieval.documents``, ``reranker.input_documents``..)."""
    docs: dict[int, dict] = {}
    for key, value in span.attributes.items():
        m = _DOC.match(key)
        if m and m.group(1) == kind:
            doc = docs.setdefault(int(m.group(2)), {})
            if m.group(4) is not None:  # metadata flattened into its keys (Phoenix's export)
                doc.setdefault("metadata", {})[m.group(4)] = value
            elif m.group(3) == "metadata":
                doc["metadata"] = {**metadata(value), **doc.get("metadata", {})}
            else:
                doc[m.group(3)] = value
    return [docs[i] for i in sorted(docs)]


def _messages(span: Any, kind: str) -> list[str]:
    msgs: dict[int, dict] = {}
    for key, value in span.attributes.items():
        m = _MSG.match(key)
        if m and m.group(1) == kind:
            msgs.setdefault(int(m.group(2)), {})[m.group(3)] = value
    return [str(msgs[i].get("content") or "") for i in sorted(msgs)]


def doc_id(doc: dict, keys: Any) -> str:
    """``metadata[--id-key]`` (the pipeline's own chunk id), else ``document.id`` (LlamaIndex's node
    id), else derived from source, start and content (:func:`ledgerscope.trace.spec.derived_chunk_id`,
    the LangChain handler's rule)."""
    meta = metadata(doc.get("metadata"))
    cid = meta.get(keys.chunk)
    if cid in (None, ""):
        cid = doc.get("id")
    if isinstance(cid, str) and cid:
        return cid
    if isinstance(cid, int | float) and not isinstance(cid, bool):
        return str(cid)
    source, start = meta.get(keys.doc), meta.get(keys.start)
    return derived_chunk_id(
        source if isinstance(source, str) else None,
        start if isinstance(start, int) and not isinstance(start, bool) else None,
        str(doc.get("content", "")),
    )


def _strings(value: Any) -> list[str]:
    """Every string inside a JSON value, in order (the text a JSON-encoded ``input.value`` carries)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def prompt_of(llm: Any) -> str:
    """What one model call read (rules in the module docstring)."""
    attrs = llm.attributes
    if parts := _messages(llm, "input_messages"):
        return "\n\n".join(parts)
    prompts = attrs.get("llm.prompts")
    if isinstance(prompts, str):
        return prompts
    if isinstance(prompts, list | tuple) and prompts:
        return "\n\n".join(str(p) for p in prompts)
    numbered = sorted((int(m.group(1)), v) for k, v in attrs.items() if (m := _PROMPTS.match(k)))
    if numbered:
        return "\n\n".join(str(v) for _, v in numbered)
    value = attrs.get("input.value")
    if isinstance(value, str) and attrs.get("input.mime_type") == "application/json":
        try:
            return "\n\n".join(_strings(json.loads(value)))
        except ValueError:
            pass
    return "" if value is None else str(value)


def _output_text(span: Any) -> str | None:
    """A span's output as text: ``output.value`` (a JSON string, or an object's answer field, decoded)."""
    value = span.attributes.get("output.value")
    if not isinstance(value, str):
        return None
    if span.attributes.get("output.mime_type") != "application/json":
        return value
    try:
        decoded = json.loads(value)
    except ValueError:
        return value
    if isinstance(decoded, str):
        return decoded
    if isinstance(decoded, dict):
        for key in _ANSWER_KEYS:
            if isinstance(decoded.get(key), str):
                return decoded[key]
    return None


def failure(span: Any) -> str | None:
    """The span's failure (status ERROR): its description, else its exception event, else the status."""
    if span.status != "ERROR":
        return None
    return span.status_message or span.exception or "span status ERROR"


def _stem(name: str) -> str:
    head, _, last = name.rpartition(".")
    return f"{head}.{last.lstrip('_').removeprefix('a')}" if head else name


def _retrievals(spans: list[Any], parent: dict[str, Any]) -> list[tuple[Any, list[dict], bool]]:
    """(span, documents, nested in another retrieval) per retrieval, the retrieve/_retrieve pair as one."""
    out: dict[str, tuple[Any, list[dict], bool]] = {}
    for sp in spans:
        if sp.kind != "RETRIEVER":
            continue
        up = parent.get(sp.parent_id)
        if up is not None and up.kind == "RETRIEVER" and _stem(up.name) == _stem(sp.name):
            outer = out.get(up.span_id)
            docs = documents(sp, "retrieval.documents")
            if outer is not None and not outer[1] and docs:
                out[up.span_id] = (outer[0], docs, outer[2])
            continue
        nested = any(a.kind == "RETRIEVER" for a in _ancestors(sp, parent))
        out[sp.span_id] = (sp, documents(sp, "retrieval.documents"), nested)
    return list(out.values())


def _postprocessed(span: Any, problems: list[Problem]) -> list[dict] | None:
    """A LlamaIndex postprocessor's output nodes (id and score) from its ``output.value``."""
    try:
        items = json.loads(span.attributes.get("output.value") or "")
    except ValueError:
        items = None
    out = []
    for item in items if isinstance(items, list) else [None]:
        m = _NODE.match(item) if isinstance(item, str) else None
        if m is None:
            file, line, pos = span.where
            problems.append(
                Problem(
                    file,
                    line,
                    f"{pos}output.value",
                    f"postprocessor span {span.name[:60]!r}: its output does not name its "
                    "nodes (<NodeWithScore(node=..(id_=..), score=..)>), so the list it "
                    "handed on is unknown",
                )
            )
            return None
        try:
            score: float | None = float(m.group(2))
        except ValueError:
            score = None
        out.append({"id": m.group(1), "score": score})
    return out


def stage_lists(spans: list[Any], problems: list[Problem]) -> tuple[dict[str, list[dict]], list[str]]:
    """The request's ranked lists by stage name, and the cascade order of those names (rules above)."""
    parent = {s.span_id: s for s in spans}
    retrievals = _retrievals(spans, parent)
    rerankers = [s for s in spans if s.kind == "RERANKER"]
    posts = [s for s in spans if s.kind != "RERANKER" and s.name.endswith("._postprocess_nodes")]
    stages: dict[str, list[dict]] = {}
    order: list[str] = []
    top = [r for r in retrievals if not r[2]]
    if len(top) == 1:
        for i, (_, docs, _) in enumerate([r for r in retrievals if r[2]], start=1):
            stages[f"retriever_{i}"] = docs
            order.append(f"retriever_{i}")
        name = "union" if rerankers else "fused"
        stages[name] = top[0][1]
        order.append(name)
    else:
        for i, (sp, docs, _) in enumerate(retrievals, start=1):
            name = sp.name if sp.name in FIRST_STAGE and sp.name not in stages else f"retriever_{i}"
            stages[name] = docs
            order.append(name)
    first_rerank = rerankers[0].start if rerankers else None
    before = [p for p in posts if first_rerank is not None and p.start < first_rerank]
    after = [p for p in posts if p not in before]
    for i, sp in enumerate(before, start=1):
        if (docs := _postprocessed(sp, problems)) is not None:
            stages[f"postprocessor_{i}"] = docs
            order.append(f"postprocessor_{i}")
    if rerankers:
        stages["fused"] = documents(rerankers[0], "reranker.input_documents")
        stages["reranked"] = documents(rerankers[0], "reranker.output_documents")
        order += ["fused", "reranked"]
    for i, sp in enumerate(after, start=len(before) + 1):
        if (docs := _postprocessed(sp, problems)) is not None:
            name = "selected" if sp is after[-1] else f"postprocessor_{i}"
            stages[name] = docs
            order.append(name)
    return stages, order


def in_prompt(prompt: str, docs: list[tuple[str, str]]) -> list[str]:
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


def _read_by_last_step(spans: list[Any], docs: list[tuple[str, str]]) -> list[str]:
    """With no model call: the documents whose content the input of the last step handed retrieved
    text holds (what a plain-function answer step read), in its order; none such, the documents."""
    retrieved = [s.start for s in spans if s.kind == "RETRIEVER"]
    after = max(retrieved) if retrieved else ""
    for sp in sorted(
        (s for s in spans if s.kind not in ("RETRIEVER", "RERANKER") and s.start > after),
        key=lambda s: (s.start, s.span_id),
        reverse=True,
    ):
        text = prompt_of(sp)
        if any(t and t in text for _, t in docs):
            return in_prompt(text, docs)
    return [c for c, _ in docs]


def _model_calls(spans: list[Any]) -> list[Any]:
    """The LLM spans with no LLM span below them (LlamaIndex's ``predict`` wraps ``complete``)."""
    by_id = {s.span_id: s for s in spans}
    wrapping = set()
    for s in spans:
        if s.kind == "LLM":
            wrapping.update(a.span_id for a in _ancestors(s, by_id) if a.kind == "LLM")
    return [s for s in spans if s.kind == "LLM" and s.span_id not in wrapping]


def _ancestors(span: Any, by_id: dict[str, Any]) -> list[Any]:
    """The span's ancestors inside the request, nearest first (a parent cycle ends the walk)."""
    out, seen, p = [], {span.span_id}, span.parent_id
    while p in by_id and p not in seen:
        seen.add(p)
        out.append(by_id[p])
        p = by_id[p].parent_id
    return out


def request_object(
    req: Request, keys: Any, docs_out: dict[str, tuple[dict, tuple]], problems: list[Problem]
) -> dict:
    """One request as a staged trace object (rules in the module docstring)."""
    spans = req.spans
    stages, order = stage_lists(spans, problems)
    ids = {name: [doc_id(d, keys) for d in docs] for name, docs in stages.items()}
    for sp in spans:
        for kind in ("retrieval.documents", "reranker.input_documents", "reranker.output_documents"):
            for d in documents(sp, kind):
                docs_out.setdefault(doc_id(d, keys), (d, sp.where))
    calls = _model_calls(spans)
    error = failure(req.root) or (
        failure(calls[-1]) if calls else next((f for f in map(failure, spans) if f), None)
    )
    obj: dict[str, Any] = {"qid": req.qid}
    known = list(dict.fromkeys(c for names in ids.values() for c in names))
    content = {c: str(docs_out[c][0].get("content") or "") for c in known if c in docs_out}
    if calls:
        prompts = [prompt_of(c) for c in calls]
        prompt = "\n\n".join(p for p in prompts if p)
        context = in_prompt(prompt, [(c, t) for c, t in content.items()])
        out = calls[-1]
        answer = None if failure(out) else (_messages(out, "output_messages") or [_output_text(out)])[0]
        obj["prompt"] = prompt
        n = out.attributes.get("llm.token_count.prompt")
        if isinstance(n, int) and not isinstance(n, bool) and n >= 0 and len(calls) == 1:
            obj["claims"] = {"prompt_tokens": n}
    else:
        last = ids[order[-1]] if order else []
        context = _read_by_last_step(spans, [(c, content[c]) for c in last if c in content])
        answer = None if error else _output_text(req.root)
        if not last and not error:
            obj["abstained"] = True
    obj.update(context_ids=context, context_text=[content[c] for c in context], answer=answer)
    if error:
        obj["error"] = error
    for k in ("config", "phase"):
        if (v := _lookup(req, k)) is not None:
            obj[k] = str(v)
    body = {}
    for name in order:
        scores = [d.get("score") if isinstance(d.get("score"), int | float) else None for d in stages[name]]
        body[name] = {"ids": ids[name], **({"scores": scores} if any(s is not None for s in scores) else {})}
    if body:
        obj["stages"] = body
    declared = [n for n in order if n.startswith(("retriever_", "postprocessor_"))]
    if declared:
        obj["stage_order"] = order
    return obj


def _lookup(req: Request, key: str) -> Any:
    """A key's value on the request's spans, its root first."""
    for sp in [req.root, *req.spans]:
        if (v := own_value(sp, key)) is not None:
            return v
    return None
