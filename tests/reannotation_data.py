"""The re-annotation round trip's scenario on the sample ledger, shared by the offline tests and the
real Label Studio test: which tasks, and what each annotator does to them (as the annotation UI
would submit it: the pre-annotations accepted, then edited).

* alice moves ``exc`` of ``re-team-monthly-legacy`` in ``changelog.md`` (a document with emoji,
  characters outside the BMP, before the span: code points and UTF-16 units differ there);
* bob adds a span in ``plans/free-plan.md`` to ``set 1`` of ``re-free-upload`` (whose gold is in
  ``plans/plans-and-limits.md``): a two-document sufficient set, grouped across two tasks;
* on ``ns-audit-csv`` alice accepts the gold as it is and bob labels its span an exception: they
  disagree.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

ALICE, BOB = "alice@example.com", "bob@example.com"
QIDS = ("re-team-monthly-legacy", "re-free-upload", "ns-audit-csv")
WHERE = f"qid IN {QIDS!r} AND arm = 'candidate' AND phase IN ('0', '1')"
JOINT_DOC = "plans/free-plan.md"


def export_tasks(ledger: Path, out: Path) -> tuple[list[dict], str]:
    """The scenario's tasks and labeling config, exported from ``ledger``."""
    from ledgerscope.export import export

    export(ledger, WHERE, "label-studio-tasks", out)
    return json.loads(out.read_text(encoding="utf-8")), out.with_name(out.name + ".config.xml").read_text()


def slot_of(task: dict, doc: str) -> int:
    return next(d["slot"] for d in task["data"]["documents"] if d["doc_id"] == doc)


def moved_end(text: str, start: int, end: int) -> int:
    """Where alice ends the moved span: the end of its line (one short of it when already there)."""
    nl = text.find("\n", end)
    stop = len(text) if nl < 0 else nl
    return stop if stop > end else end - 1


def joint_region(text: str) -> tuple[int, int]:
    """The sentence bob marks in the free plan's page: the first that mentions a file or upload."""
    for m in re.finditer(r"[^.\n]*(?:upload|file)[^.\n]*\.", text, re.IGNORECASE):
        s = m.start() + (len(m.group(0)) - len(m.group(0).lstrip()))
        return s, m.end()
    raise AssertionError("no sentence about uploads in the free plan's page")


def accepted(task: dict) -> list[dict]:
    """What the UI submits when the annotator accepts the pre-annotations as they are."""
    return copy.deepcopy(task["predictions"][0]["result"])


def _rid(task: dict, span_id: str) -> str:
    return next(r for r, s in task["data"]["gold_regions"].items() if s == span_id)


def scenario(tasks: list[dict]) -> list[tuple[int, str, list[dict]]]:
    """(task index, annotator, result) for every annotation of the scenario."""
    out = []
    for i, t in enumerate(tasks):
        qid, docs = t["data"]["qid"], [d["doc_id"] for d in t["data"]["documents"]]
        if qid == "re-team-monthly-legacy":
            result, rid = accepted(t), _rid(t, "exc")
            k = slot_of(t, "changelog.md")
            text = t["data"][f"doc{k}"]
            for r in result:
                if r["id"] == rid:
                    end = moved_end(text, r["value"]["start"], r["value"]["end"])
                    r["value"].update(end=end, text=text[r["value"]["start"] : end])
            out.append((i, ALICE, result))
        elif qid == "re-free-upload" and docs == [JOINT_DOC]:
            text = t["data"]["doc0"]
            s, e = joint_region(text)
            value = {"start": s, "end": e, "text": text[s:e]}
            out.append(
                (
                    i,
                    BOB,
                    [
                        {
                            "id": "bobjoint01",
                            "from_name": "role_0",
                            "to_name": "doc0",
                            "type": "labels",
                            "value": {**value, "labels": ["support"]},
                        },
                        {
                            "id": "bobjoint01",
                            "from_name": "sets_0",
                            "to_name": "doc0",
                            "type": "choices",
                            "value": {**value, "choices": ["set 1"]},
                        },
                    ],
                )
            )
        elif qid == "ns-audit-csv" and t["data"]["gold_regions"]:
            out.append((i, ALICE, accepted(t)))
            result = accepted(t)
            for r in result:
                if r["type"] == "labels":
                    r["value"]["labels"] = ["exception"]
            out.append((i, BOB, result))
    return out


def as_export(
    tasks: list[dict], annotations: list[tuple[int, str, list[dict]]], project: int = 7
) -> list[dict]:
    """A Label Studio JSON export of ``tasks`` with these annotations (``completed_by`` expanded)."""
    out = []
    for i, t in enumerate(tasks):
        task = {"id": 100 + i, "project": project, "data": t["data"], "annotations": [], "predictions": []}
        for n, (j, who, result) in enumerate(annotations):
            if j == i:
                task["annotations"].append(
                    {
                        "id": 1000 + n,
                        "completed_by": {"id": 1 if who == ALICE else 2, "email": who},
                        "result": result,
                        "was_cancelled": False,
                        "created_at": f"2026-12-04T10:{n:02d}:00Z",
                        "updated_at": f"2026-12-04T10:{n:02d}:00Z",
                        "project": project,
                        "task": 100 + i,
                    }
                )
        out.append(task)
    return out
