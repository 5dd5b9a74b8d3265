"""The ``label-studio`` export: one Label Studio task per (record, document involved), plus its config.

A JSON array of Label Studio tasks, one per (record, document involved),
plus the matching labeling config ``<out>.config.xml``. The documents
involved in a record are those of its gold spans, its packed units and its
reranked units down to the selection cutoff. A task::

    {"data": {"text": <document text>, "question", "qid", "arm", "phase", "doc_id",
              "step", "step_name", "label"},
     "predictions": [{"model_version": "ledgerscope gold+retrieved", "result": [
         {"id": "gold-1", "from_name": "label", "to_name": "text", "type": "labels",
          "value": {"start": 120, "end": 157, "text": <text[start:end]>, "labels": ["gold:rule"]}},
         ... "labels": ["packed rank 1"] ... "labels": ["reranked rank 3"] ...]}]}

Offsets are Unicode code points of ``data.text`` (Python slicing; the
ledger's canonical coordinates), which is what Label Studio stores for text
regions since its emoji-offset fix; older versions count UTF-16 code units
and would show regions after a character outside the Basic Multilingual
Plane shifted. The config declares ``<Labels name="label" toName="text">``
with every label the tasks use and ``<Text name="text" value="$text"/>``.

A task over a restricted document (access labels) carries its text only when asked: by default
``data.text`` and every region's ``text`` read ``[redacted: restricted source text]``, offsets
stay, and ``data.redacted`` holds the document's id, version digest, labels and length.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any
from xml.sax.saxutils import quoteattr

from ledgerscope.export._common import count_questions, publish_mode, source_texts, stream_candidates

if TYPE_CHECKING:
    from ledgerscope.export._common import ExportRequest
    from ledgerscope.export.redaction import Redactor

MODEL_VERSION = "ledgerscope gold+retrieved"
_COLOURS = {"gold": "#2e7d32", "packed": "#1565c0", "reranked": "#ef6c00"}


def export_label_studio(req: ExportRequest) -> tuple[list[Path], int]:
    """Write the tasks to ``out`` and the config beside it, both or neither; (paths, questions)."""
    con, rows, out, loaded, redactor = req.con, req.rows, req.out, req.loaded, req.redactor
    from ledgerscope.common.atomic import atomic_path

    fixtures, _ = loaded  # load_ledger_fixtures, read once by export()
    texts = source_texts(con)
    config = out.with_name(out.name + ".config.xml")
    labels: dict[str, None] = {}
    with atomic_path(out) as tmp, atomic_path(config) as tmp_config:
        with tmp.open("w", encoding="utf-8") as fh:
            fh.write("[")
            first = True
            cands = dict(stream_candidates(con, rows, ("packed", "reranked"), cutoff_stage="reranked"))
            for r in rows:
                tasks = _record_tasks(r, fixtures.get(r["qid"]), cands.get(r["_ord"], []), texts)
                for task in (_redact_task(t, redactor) for t in tasks) if redactor is not None else tasks:
                    for region in task["predictions"][0]["result"]:
                        labels.update(dict.fromkeys(region["value"]["labels"]))
                    fh.write(("\n" if first else ",\n") + json.dumps(task, ensure_ascii=False))
                    first = False
            fh.write("\n]\n")
        tmp_config.write_text(label_config(labels), encoding="utf-8")
        publish_mode(tmp)
        publish_mode(tmp_config)
    return [out, config], count_questions(rows)


def _record_tasks(
    rec: dict[str, Any], fx: Any, cands: list[dict[str, Any]], texts: dict[str, str]
) -> Iterator[dict[str, Any]]:
    """One task per document the record involves: gold docs, then packed, then reranked (cutoff) docs."""
    spans = list(fx.spans) if fx is not None else []
    packed = sorted((c for c in cands if c["stage"] == "packed"), key=lambda c: c["rank"])
    reranked = sorted((c for c in cands if c["stage"] == "reranked"), key=lambda c: c["rank"])
    docs = list(dict.fromkeys([s.doc_id for s in spans] + [c["doc_id"] for c in packed + reranked]))
    for doc in docs:
        text = texts.get(doc)
        if text is None:
            continue
        result: list[dict[str, Any]] = []
        for s in spans:
            if s.doc_id == doc and 0 <= s.start < s.end <= len(text):
                result.append(_region(f"gold-{len(result) + 1}", text, s.start, s.end, f"gold:{s.span_id}"))
        for stage, lst in (("packed", packed), ("reranked", reranked)):
            for c in lst:
                if c["doc_id"] == doc and c["start"] is not None and 0 <= c["start"] < c["end"] <= len(text):
                    result.append(
                        _region(
                            f"{stage}-{c['rank']}",
                            text,
                            int(c["start"]),
                            int(c["end"]),
                            f"{stage} rank {c['rank']}",
                        )
                    )
        yield {
            "data": {
                "text": text,
                "question": rec.get("question"),
                "qid": rec["qid"],
                "arm": rec["arm"],
                "phase": rec["phase"],
                "doc_id": doc,
                "step": rec.get("step"),
                "step_name": rec.get("step_name"),
                "label": rec.get("label"),
            },
            "predictions": [{"model_version": MODEL_VERSION, "result": result}],
        }


def _redact_task(task: dict[str, Any], redactor: Redactor) -> dict[str, Any]:
    """A task with its document's text and its regions' texts withheld if the document is restricted."""
    doc = task["data"]["doc_id"]
    if not redactor.is_restricted(doc):
        return task
    task["data"]["text"] = redactor.document_text(doc, task["data"]["text"])
    task["data"]["redacted"] = redactor.restricted[doc]
    for region in task["predictions"][0]["result"]:
        value = region["value"]
        value["text"] = redactor.span_text(doc, value["start"], value["end"], value["text"])
    return task


def _label_order(name: str) -> tuple[int, int, str]:
    """gold labels first (by name), then packed, then reranked (by rank)."""
    kind, _, rest = name.partition(" rank ")
    if name.startswith("gold:"):
        return 0, 0, name
    return (1 if kind == "packed" else 2), int(rest) if rest.isdigit() else 0, name


def _region(region_id: str, text: str, start: int, end: int, label: str) -> dict[str, Any]:
    """A region of ``text`` with one label, its covered text included as Label Studio stores it."""
    return {
        "id": region_id,
        "from_name": "label",
        "to_name": "text",
        "type": "labels",
        "value": {"start": start, "end": end, "text": text[start:end], "labels": [label]},
    }


def label_config(labels: Iterable[str]) -> str:
    """The Label Studio labeling config for the given label names (gold, packed, reranked colours)."""
    lines = ["<View>", '  <Header value="$question"/>', '  <Labels name="label" toName="text">']
    for name in sorted(dict.fromkeys(labels), key=_label_order):
        colour = _COLOURS.get(name.split(":")[0].split(" ")[0], "#757575")
        lines.append(f"    <Label value={quoteattr(name)} background={quoteattr(colour)}/>")
    lines += ["  </Labels>", '  <Text name="text" value="$text"/>', "</View>", ""]
    return "\n".join(lines)
