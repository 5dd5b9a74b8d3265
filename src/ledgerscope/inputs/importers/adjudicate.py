"""Several annotators on one task: what they agree on is adjudicated, the rest is disputed.

The declared rule, per task: two regions *agree* when they lie in the same document, carry the
same role and overlap with an intersection over union of at least :data:`AGREEMENT_IOU` (in code
points). Annotators agree on a task when every region of each has an agreeing region in every
other's version, their sufficient sets are the same groups of agreeing regions (set names aside),
and they mark the question unanswerable alike. Then the task is *adjudicated*: each group of
agreeing regions becomes one span covering all of them (the union, so no annotator's evidence is
cut). Otherwise the task is *disputed*: nothing of it is merged, the previous gold of its documents
stays, and every annotator's version is kept whole beside it, with the spans they all agree on
listed (``agreed``) for whoever decides, unless the adjudicator (``--adjudicator
EMAIL``) submitted a version of the task: then that version decides and the others are kept as
overruled. A task one annotator submitted is that annotator's decision.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ledgerscope.inputs.importers.label_studio import Region, Task, TaskVersion

AGREEMENT_IOU = 0.9


@dataclass
class Decision:
    """What one task decided: its regions (None when disputed), by whom and under which rule."""

    task: Task
    regions: list[Region] | None
    unanswerable: bool
    annotators: list[str]
    rule: str  # "single annotator", "agreed", "adjudicator", "disputed"
    versions: dict[str, dict]  # every annotator's version when there were several
    time: str


def iou(a: Region, b: Region) -> float:
    inter = max(0, min(a.end, b.end) - max(a.start, b.start))
    return inter / ((a.end - a.start) + (b.end - b.start) - inter)


def agrees(a: Region, b: Region) -> bool:
    return a.doc_id == b.doc_id and a.role == b.role and iou(a, b) >= AGREEMENT_IOU


def version_json(v: TaskVersion) -> dict:
    """An annotator's version as the fixture keeps it (disputed or overruled)."""
    return {
        "time": v.time,
        "annotation": v.annotation_id,
        "unanswerable": v.unanswerable,
        "comment": v.comment,
        "spans": [
            {
                "doc_id": r.doc_id,
                "start": r.start,
                "end": r.end,
                "role": r.role,
                "sets": list(r.sets),
                **({"was": r.gold_id} if r.gold_id else {}),
            }
            for r in v.regions
        ],
    }


def decide(task: Task, adjudicator: str | None = None) -> Decision | None:
    """The task's decision under the declared rule; None when nobody submitted it."""
    versions = task.versions
    if not versions:
        return None
    names = sorted(versions)
    latest = max(v.time for v in versions.values())
    if len(names) == 1:
        v = versions[names[0]]
        return Decision(task, v.regions, v.unanswerable, names, "single annotator", {}, latest)
    kept = {a: version_json(versions[a]) for a in names}
    merged = _agreed(versions)
    if merged is not None:
        unanswerable = versions[names[0]].unanswerable
        return Decision(task, merged, unanswerable, names, "agreed", {}, latest)
    if adjudicator is not None and adjudicator in versions:
        v = versions[adjudicator]
        return Decision(task, v.regions, v.unanswerable, names, "adjudicator", kept, latest)
    return Decision(task, None, False, names, "disputed", kept, latest)


def _clusters(versions: dict[str, TaskVersion]) -> list[dict[str, Region]]:
    """Groups of agreeing regions, at most one per annotator (greedy, in annotator and region order)."""
    clusters: list[dict[str, Region]] = []
    for a in sorted(versions):
        for r in versions[a].regions:
            for c in clusters:
                if a not in c and all(agrees(r, x) for x in c.values()):
                    c[a] = r
                    break
            else:
                clusters.append({a: r})
    return clusters


def agreed_spans(versions: dict[str, TaskVersion]) -> list[dict]:
    """The spans every annotator of a disputed task agrees on (kept beside the versions)."""
    return [
        {
            "doc_id": r.doc_id,
            "start": min(x.start for x in c.values()),
            "end": max(x.end for x in c.values()),
            "role": r.role,
        }
        for c in _clusters(versions)
        if len(c) == len(versions)
        for r in [next(iter(c.values()))]
    ]


def _agreed(versions: dict[str, TaskVersion]) -> list[Region] | None:
    """The merged regions if every annotator agrees (the rule above), else None."""
    names = sorted(versions)
    if len({versions[a].unanswerable for a in names}) > 1:
        return None
    clusters = _clusters(versions)
    if any(len(c) != len(names) for c in clusters):
        return None
    groups = []
    for a in names:
        by_set: dict[str, set[int]] = {}
        for i, c in enumerate(clusters):
            for s in c[a].sets:
                by_set.setdefault(s, set()).add(i)
        groups.append({frozenset(g) for g in by_set.values()})
    if any(g != groups[0] for g in groups):
        return None
    merged = []
    for c in clusters:
        first = c[names[0]]
        gold = next((r.gold_id for r in c.values() if r.gold_id), None)
        merged.append(
            replace(
                first,
                start=min(r.start for r in c.values()),
                end=max(r.end for r in c.values()),
                gold_id=gold,
            )
        )
    return merged
