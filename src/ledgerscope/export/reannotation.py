"""The ``label-studio-tasks`` export: Label Studio tasks made for re-annotating gold, one per question.

Where the ``label-studio`` export shows each record (one task per (record, document)), this one is
for changing the gold: the tasks of :mod:`ledgerscope.inputs.annotation_tasks`, whose docstring
gives their shape, plus the labeling config ``<out>.config.xml``. A question whose gold spans two
or more documents gets one task holding all its documents (gold documents first, then up to
:data:`EXTRA_DOCS` documents the selected records packed), so a sufficient set can be grouped
across them; any other question gets one task per (question, document) over the same documents. A
question without gold (an ingested trace's) gets tasks over the documents its records packed or
reranked, for marking support from scratch (``data.origin = "trace"``).

The current gold is the prediction (editable pre-annotations with stable ids); the packed and
reranked units of the selected records are read-only context (``data.context``: each unit with its
document, offsets, the records that packed or ranked it, and its text). Every task names the
ledger's fixtures digest (``data.fixtures_digest``) so the import can say which version it edits.
Restricted documents (access labels) leave only with ``--include-restricted``: otherwise their slot
shows the placeholder, names the document (``documents[k].redacted``) and carries no region; the
import leaves their gold as it was.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ledgerscope.export._common import publish_mode, source_texts, stream_candidates

if TYPE_CHECKING:
    from ledgerscope.export._common import ExportRequest
    from ledgerscope.export.redaction import Redactor

#: documents beyond the gold ones that a question's tasks show (most often packed first)
EXTRA_DOCS = 3
_CONTEXT_UNIT_CHARS = 600


def export_reannotation(req: ExportRequest) -> tuple[list[Path], int]:
    """Write the tasks to ``out`` and the config beside it, both or neither; (paths, questions)."""
    con, manifest, rows = req.con, req.manifest, req.rows
    out, loaded, redactor = req.out, req.loaded, req.redactor
    from ledgerscope.common.atomic import atomic_path
    from ledgerscope.inputs.annotation_tasks import labeling_config, pad_slots

    fixtures, _ = loaded
    texts = source_texts(con)
    cands = dict(stream_candidates(con, rows, ("packed", "reranked"), cutoff_stage="reranked"))
    by_qid: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_qid.setdefault(r["qid"], []).append(r)
    extra = {"fixtures_digest": manifest.get("fixtures_digest"), "ledger": manifest.get("identity")}
    tasks = [
        t
        for qid, recs in by_qid.items()
        for t in question_tasks(fixtures.get(qid), recs, cands, texts, extra, redactor)
    ]
    n_docs = max((len(t["data"]["documents"]) for t in tasks), default=1)
    n_sets = max([len(f.sufficient_sets) for f in fixtures.values()] + [1]) + 2
    config = out.with_name(out.name + ".config.xml")
    with atomic_path(out) as tmp, atomic_path(config) as tmp_config:
        body = ",\n".join(json.dumps(pad_slots(t, n_docs), ensure_ascii=False) for t in tasks)
        tmp.write_text("[\n" + body + ("\n" if tasks else "") + "]\n", encoding="utf-8")
        tmp_config.write_text(labeling_config(n_docs, n_sets), encoding="utf-8")
        publish_mode(tmp)
        publish_mode(tmp_config)
    return [out, config], len(by_qid)


def question_tasks(
    fx: Any,
    recs: list[dict[str, Any]],
    cands: dict[int, list[dict[str, Any]]],
    texts: dict[str, str],
    extra: dict[str, Any],
    redactor: Redactor | None = None,
) -> Iterator[dict[str, Any]]:
    """One question's tasks: one holding all its documents when its gold spans several, else one per
    document."""
    from ledgerscope.inputs.annotation_tasks import build_task

    units = [dict(c, record=f"{r['arm']}@{r['phase']}") for r in recs for c in cands.get(r["_ord"], [])]
    gold_docs = list(fx.doc_ids) if fx is not None else []
    # beside the gold documents, those the records packed (a question without gold: reranked too)
    shown = [c for c in units if c["stage"] == "packed" or not gold_docs]
    ordered = sorted(shown, key=lambda c: (c["stage"] != "packed", c["rank"]))
    others = [d for d in dict.fromkeys(c["doc_id"] for c in ordered) if d not in gold_docs][:EXTRA_DOCS]
    docs = [d for d in gold_docs + others if d in texts]
    qid, question = recs[0]["qid"], recs[0].get("question") or (fx.question if fx is not None else "")
    steps = sorted(
        {f"{r['arm']}@{r['phase']}: step {r.get('step')} {r.get('step_name') or ''}".strip() for r in recs}
    )
    meta = {**extra, "records": steps}
    groups = [docs] if len(gold_docs) > 1 else [[d] for d in docs]
    for group in groups:
        withheld = [d for d in group if redactor is not None and redactor.is_restricted(d)]
        documents = [
            (d, redactor.document_text(d, texts[d]) if redactor is not None and d in withheld else texts[d])
            for d in group
        ]
        task = build_task(fx, qid, question, documents, _context(units, group, texts, redactor), meta)
        yield _withhold(task, withheld, redactor) if withheld else task


def _withhold(task: dict[str, Any], withheld: list[str], redactor: Redactor | None) -> dict[str, Any]:
    """A task whose restricted documents show only the placeholder: their gold regions are left out
    (their spans stay as they are on import) and the slot says why (``redacted``)."""
    assert redactor is not None  # a task has withheld documents only under a redactor
    data = task["data"]
    slots = {f"doc{d['slot']}": d for d in data["documents"] if d["doc_id"] in withheld}
    for entry in slots.values():
        entry["redacted"] = redactor.restricted[entry["doc_id"]]
    result = task["predictions"][0]["result"]
    gone = {r["id"] for r in result if r.get("to_name") in slots and "start" in r["value"]}
    task["predictions"][0]["result"] = [r for r in result if r["id"] not in gone]
    data["gold_regions"] = {k: v for k, v in data["gold_regions"].items() if k not in gone}
    return task


def _context(
    units: list[dict[str, Any]], docs: list[str], texts: dict[str, str], redactor: Redactor | None
) -> str:
    """The packed and reranked units over the task's documents, each once, with the records that had
    them: plain text for a read-only ``Text``."""
    seen: dict[tuple[Any, ...], dict[str, Any]] = {}
    for c in units:
        if c["doc_id"] not in docs or c["start"] is None:
            continue
        key = (c["doc_id"], int(c["start"]), int(c["end"]))
        entry = seen.setdefault(key, {"packed": [], "reranked": []})
        entry[c["stage"]].append(f"{c['record']} #{c['rank']}")
    lines = []
    for (doc, start, end), where in sorted(seen.items(), key=lambda kv: (not kv[1]["packed"], kv[0])):
        body = texts[doc][start:end]
        if redactor is not None and redactor.is_restricted(doc):
            body = redactor.span_text(doc, start, end, body) or ""
        if len(body) > _CONTEXT_UNIT_CHARS:
            body = body[:_CONTEXT_UNIT_CHARS] + " …"
        stages = "; ".join(
            f"{k}: {', '.join(v[:6])}{' …' if len(v) > 6 else ''}" for k, v in where.items() if v
        )
        lines.append(f"{doc} [{start}, {end}) {stages}\n{body}")
    return "\n\n".join(lines) or "(no packed or reranked unit of the selected records in these documents)"
