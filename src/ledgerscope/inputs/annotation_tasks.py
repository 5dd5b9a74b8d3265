"""Label Studio re-annotation tasks: their shape, their labeling config, and the role vocabulary.

One module holds what both sides of the loop must agree on: the export builds tasks with
:func:`build_task` and :func:`labeling_config`; the importer (:mod:`.importers.label_studio`)
reads the same control names back. A task is one question; it holds one ``Text`` object per
document slot (``doc0``, ``doc1``, ...): every document of a question whose support spans several
(so a sufficient set can be grouped across them), otherwise one document. Per region:

* ``role_K`` (``Labels`` on ``docK``): the span's role, one of :data:`ROLES`;
* ``sets_K`` (``Choices``, per region, several allowed): the sufficient sets the span belongs to
  (``set 1`` ... ``set N``); sets are named per question, so a set grouped in two tasks of the same
  question is one set;
* task level: ``answerable`` (``Choices``: the question is unanswerable from this corpus) and
  ``comment`` (``TextArea``).

Current gold comes as a prediction (pre-annotation) whose region ids are ``gold-<n>``; the task's
``data.gold_regions`` maps each id to its span id, so the import tells a moved span (same id, new
offsets) from a new one. Offsets are code points of ``data.docK``, whose sha256 is
``data.docK_version`` (the source's version): the import refuses a task whose text no longer has it.
Retrieved and packed units are read-only context: ``data.context``, a plain ``Text`` no control
labels.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import Any
from xml.sax.saxutils import quoteattr

from ledgerscope.inputs.fixtures.model import QUALIFIER_DEPENDENCIES, Fixture

TASK_FORMAT = "ledgerscope-reannotation/1"
MODEL_VERSION = "ledgerscope gold"
ROLES = ("support", "rule", "qualifier", "exception")
UNANSWERABLE = "unanswerable from this corpus"
_ROLE_COLOURS = {"support": "#2e7d32", "rule": "#1565c0", "qualifier": "#ef6c00", "exception": "#c62828"}
#: the dependency a role becomes when an annotator gives it (or changes it to it)
ROLE_DEPENDENCY = {
    "support": "primary",
    "rule": "primary",
    "qualifier": "condition",
    "exception": "exception",
}


def role_of(dependency: str, label: str = "") -> str:
    """The role an existing span shows under: exception, a qualifier, a rule (by label) or support."""
    if dependency == "exception":
        return "exception"
    if dependency in QUALIFIER_DEPENDENCIES:
        return "qualifier"
    return "rule" if label.strip().lower() == "rule" else "support"


def dependency_for(role: str, previous: str | None) -> str:
    """A span's dependency after annotation: kept when its role did not change (a ``definition`` stays
    one), else the role's own (:data:`ROLE_DEPENDENCY`)."""
    if previous is not None and role_of(previous) == role:
        return previous
    return ROLE_DEPENDENCY[role]


def set_name(i: int) -> str:
    return f"set {i + 1}"


def text_version(text: str) -> str:
    """A source's version digest: sha256 of its UTF-8 bytes (as :mod:`ledgerscope.inputs.sources`)."""
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def build_task(
    fx: Fixture | None,
    qid: str,
    question: str,
    docs: Sequence[tuple[str, str]],
    context: str,
    extra: dict[str, Any] | None = None,
) -> dict:
    """One task: ``docs`` as (doc id, text) slots, the fixture's spans in them as a prediction."""
    data: dict[str, Any] = {
        "task_format": TASK_FORMAT,
        "qid": qid,
        "question": question,
        "origin": "gold" if fx is not None and fx.spans else "trace",
        "context": context,
        "documents": [],
        "gold_regions": {},
    }
    result: list[dict] = []
    slot_of = {doc: k for k, (doc, _) in enumerate(docs)}
    for k, (doc, text) in enumerate(docs):
        data[f"doc{k}"], data[f"doc{k}_title"] = text, doc
        data[f"doc{k}_version"] = text_version(text)
        data["documents"].append({"slot": k, "doc_id": doc, "version": data[f"doc{k}_version"]})
    if fx is not None:
        sets_of = {
            sid: [set_name(i) for i, s in enumerate(fx.sufficient_sets) if sid in s]
            for sid in (sp.span_id for sp in fx.spans)
        }
        for sp in fx.spans:
            k = slot_of.get(sp.doc_id)
            if k is None or not (0 <= sp.start < sp.end <= len(docs[k][1])):
                continue
            rid = f"gold-{len(data['gold_regions']) + 1}"
            data["gold_regions"][rid] = sp.span_id
            result += region(
                rid, k, docs[k][1], sp.start, sp.end, role_of(sp.dependency, sp.label), sets_of[sp.span_id]
            )
        if not fx.answerable:
            result.append(
                {
                    "id": "unanswerable",
                    "from_name": "answerable",
                    "to_name": "doc0",
                    "type": "choices",
                    "value": {"choices": [UNANSWERABLE]},
                }
            )
    data.update(extra or {})
    return {"data": data, "predictions": [{"model_version": MODEL_VERSION, "result": result}]}


def region(
    rid: str, slot: int, text: str, start: int, end: int, role: str, sets: Iterable[str]
) -> list[dict]:
    """A span as Label Studio stores it: its role (``labels``) and, if any, its sets (per-region
    ``choices``), both under the region's id."""
    value = {"start": start, "end": end, "text": text[start:end]}
    out = [
        {
            "id": rid,
            "from_name": f"role_{slot}",
            "to_name": f"doc{slot}",
            "type": "labels",
            "value": {**value, "labels": [role]},
        }
    ]
    sets = list(sets)
    if sets:
        out.append(
            {
                "id": rid,
                "from_name": f"sets_{slot}",
                "to_name": f"doc{slot}",
                "type": "choices",
                "value": {**value, "choices": sets},
            }
        )
    return out


def pad_slots(task: dict, n_docs: int) -> dict:
    """Empty slots up to ``n_docs``: every task of a project answers every ``$docK`` of its config."""
    for k in range(len(task["data"]["documents"]), n_docs):
        task["data"].setdefault(f"doc{k}", "")
        task["data"].setdefault(f"doc{k}_title", "")
        task["data"].setdefault(f"doc{k}_version", "")
    return task


def labeling_config(n_docs: int, n_sets: int) -> str:
    """The labeling config for tasks of up to ``n_docs`` documents and ``n_sets`` sufficient sets."""
    lines = [
        "<View>",
        '  <Header value="$question"/>',
        '  <Choices name="answerable" toName="doc0" choice="multiple" showInline="true">',
        f"    <Choice value={quoteattr(UNANSWERABLE)}/>",
        "  </Choices>",
    ]
    for k in range(max(1, n_docs)):
        lines += [
            f'  <Header value="$doc{k}_title" size="5"/>',
            f'  <Labels name="role_{k}" toName="doc{k}">',
        ]
        lines += [
            f"    <Label value={quoteattr(r)} background={quoteattr(_ROLE_COLOURS[r])}/>" for r in ROLES
        ]
        lines += [
            "  </Labels>",
            f'  <Text name="doc{k}" value="$doc{k}" granularity="symbol"/>',
            f'  <Choices name="sets_{k}" toName="doc{k}" perRegion="true" choice="multiple" '
            'showInline="true">',
        ]
        lines += [f"    <Choice value={quoteattr(set_name(i))}/>" for i in range(max(1, n_sets))]
        lines += ["  </Choices>"]
    lines += [
        '  <Header value="Comment" size="5"/>',
        '  <TextArea name="comment" toName="doc0" editable="true" maxSubmissions="1" rows="2"/>',
        '  <Header value="Retrieved and packed context (read only)" size="5"/>',
        '  <Text name="context" value="$context"/>',
        "</View>",
        "",
    ]
    return "\n".join(lines)
