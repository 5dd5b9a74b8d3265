"""``ledgerscope import label-studio``: annotators' work back into a new fixture version.

Each task is decided by :mod:`.adjudicate`; each question touched by a decided or disputed task is
rebuilt from the previous version (``--fixtures OLD``):

* the spans of the documents a decided task holds are its regions: a region whose id is a
  pre-annotation's keeps that span's id (moved when its offsets changed, relabelled when its role
  did), a new region gets a new id (``ls1``, ``ls2``, ...), a pre-annotation left out is removed;
  spans in other documents stay as they were;
* sufficient sets are named per question (``set 1`` ...), so spans grouped under one name form one
  set across all documents and tasks of the question; a question none of whose spans names a set
  gets one set of all of them;
* a question marked unanswerable from this corpus loses its sets (its spans stay, for the record);
* provenance: ``annotations.label_studio.spans[SPAN_ID]`` names the annotator(s), time, task,
  project, rule and the change, for every span (``kept`` for those nobody touched), with
  ``previous_fixtures`` (the sha256 of the OLD file) beside them;
* a disputed task leaves its documents' previous gold and sets the question's adjudication to
  ``disputed`` with each annotator's version (never merged); ``--adjudicator`` decides instead.

A question without previous gold (tasks exported from an ingested trace ledger, ``origin:
trace``) becomes its first fixture version: support-only, ``origin: from-trace``. Questions no task
touched are copied unchanged (a canonical line byte for byte). Offsets are code points of the
sha256-pinned task texts; every rebuilt fixture is resolved again against them (and ``--corpus``)
before anything is written.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from pathlib import Path

from ledgerscope.common.errors import InputError, Problem
from ledgerscope.inputs.annotation_tasks import dependency_for, role_of, set_name
from ledgerscope.inputs.fixtures import (
    AnswerContract,
    Fixture,
    FixtureSet,
    GoldSpan,
    read_fixtures,
    resolve,
)
from ledgerscope.inputs.importers.adjudicate import Decision, agreed_spans, decide
from ledgerscope.inputs.importers.label_studio import Region, Task, read_export
from ledgerscope.inputs.sources import Corpus, make_source


@dataclass
class ImportResult:
    fixtures: list[Fixture]
    previous: list[Fixture]
    out: Path
    tasks: int = 0
    annotated: int = 0
    decisions: dict[str, int] = field(default_factory=dict)
    disputed: list[str] = field(default_factory=list)


def file_digest(path: Path) -> str:
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


def import_label_studio(
    export: Path,
    out: Path,
    fixtures: Path | None = None,
    corpus: Corpus | None = None,
    adjudicator: str | None = None,
    users: dict[str, str] | None = None,
) -> ImportResult:
    """Read the export, decide every task, rebuild the questions they touch, write ``out``."""
    from ledgerscope.common.atomic import atomic_write_text

    tasks = read_export(export, users)
    merged = _task_corpus(tasks, corpus)
    previous, raw, order = _previous(fixtures, merged, {t.qid for t in tasks})
    prev_digest = file_digest(fixtures) if fixtures is not None else None
    decisions: dict[str, list[Decision]] = {}
    for t in tasks:
        d = decide(t, adjudicator)
        if d is not None:
            decisions.setdefault(t.qid, []).append(d)
    rebuilt = {qid: rebuild(previous.get(qid), ds, prev_digest) for qid, ds in decisions.items()}
    checked = _resolve(list(rebuilt.values()), merged, out)
    lines, result_fixtures = [], []
    for qid in order + [q for q in checked if q not in previous]:
        if qid in checked:
            lines.append(json.dumps(checked[qid].to_json(), ensure_ascii=False))
            result_fixtures.append(checked[qid])
        else:
            lines.append(raw[qid])
            result_fixtures.append(previous[qid])
    atomic_write_text(out, "\n".join(lines) + ("\n" if lines else ""))
    counts: dict[str, int] = {}
    for ds in decisions.values():
        for d in ds:
            counts[d.rule] = counts.get(d.rule, 0) + 1
    disputed = sorted(q for q, fx in checked.items() if fx.adjudication.get("state") == "disputed")
    return ImportResult(
        result_fixtures,
        [previous[q] for q in order],
        out,
        len(tasks),
        sum(len(ds) for ds in decisions.values()),
        counts,
        disputed,
    )


def _task_corpus(tasks: list[Task], corpus: Corpus | None) -> Corpus:
    """The tasks' documents (digests checked on reading) plus the given corpus."""
    merged = Corpus(dict(corpus.sources) if corpus else {})
    for t in tasks:
        for doc, (version, text) in t.docs.items():
            if doc not in merged:
                merged.add(make_source(doc, text, version))
            elif merged.get(doc).version != version:
                raise InputError(
                    Problem(
                        t.name,
                        None,
                        f"documents.{doc}",
                        f"the task's text has digest {version}, the corpus's "
                        f"{merged.get(doc).version}: the source changed since the export",
                    )
                )
    return merged


def _previous(
    path: Path | None, corpus: Corpus, touched: set[str]
) -> tuple[dict[str, Fixture], dict[str, str], list[str]]:
    """The previous version: the touched questions resolved (by qid), every question's canonical line
    as it was (untouched ones are copied, not resolved), and the file's order."""
    if path is None:
        return {}, {}, []
    fset, problems = read_fixtures(path)
    raw = {}
    if path.suffix.lower() != ".json":
        for line in path.read_text(encoding="utf-8").splitlines():
            obj = json.loads(line) if line.strip() else None
            if isinstance(obj, dict) and obj.get("format") and isinstance(obj.get("qid"), str):
                raw[obj["qid"]] = line
    order = [f.qid for f in fset.fixtures]
    todo = [f for f in fset.fixtures if f.qid in touched or f.qid not in raw]
    resolved, _, more = resolve(replace(fset, fixtures=todo), corpus)
    if problems or more:
        hint = " (pass --corpus, or the ledger, for the documents no task holds)"
        more = [replace(p, reason=p.reason + hint) if "not in the corpus" in p.reason else p for p in more]
        raise InputError(problems + more)
    by_qid = {f.qid: f for f in resolved}
    for f in fset.fixtures:
        by_qid.setdefault(f.qid, f)  # untouched: as parsed (only its line is written)
        raw.setdefault(f.qid, json.dumps(by_qid[f.qid].to_json(), ensure_ascii=False))
    return by_qid, raw, order


def _resolve(fixtures: list[Fixture], corpus: Corpus, out: Path) -> dict[str, Fixture]:
    """Every rebuilt fixture checked against the pinned texts; nothing is written if one fails."""
    resolved, _, problems = resolve(FixtureSet(fixtures, Corpus(), str(out)), corpus)
    if problems:
        raise InputError(problems)
    return {f.qid: f for f in resolved}


def rebuild(old: Fixture | None, decisions: list[Decision], prev_digest: str | None) -> Fixture:
    """One question's new version from its previous one and its tasks' decisions."""
    first = decisions[0].task
    spans, prov, names = _kept_spans(old, decisions)
    used = {s.span_id for s in old.spans} if old is not None else set()
    taken: set[str] = set()
    for d in decisions:
        if d.regions is None:
            continue
        for r in sorted(d.regions, key=lambda r: (r.doc_id, r.start, r.end)):
            prior = old.span(r.gold_id) if old is not None and r.gold_id in used - taken else None
            sid = prior.span_id if prior is not None else _new_id(used | taken)
            taken.add(sid)
            spans.append(_gold_span(sid, r, d.task.docs[r.doc_id][1], prior))
            prov[sid] = _provenance(d, r, prior, old)
            for n in r.sets:
                names.setdefault(n, []).append(sid)
    unanswerable = any(d.unanswerable for d in decisions if d.regions is not None)
    sets = (
        tuple(tuple(ids) for _, ids in sorted(names.items()))
        if names
        else ((tuple(s.span_id for s in spans),) if spans else ())
    )
    answerable = bool(sets) and not unanswerable
    base = old or Fixture(
        first.qid,
        first.question,
        "rule-exception",
        (),
        (),
        AnswerContract(),
        support_only=True,
        origin="from-trace",
    )
    segment = _segment(base, answerable, spans)
    ls = {
        "previous_fixtures": prev_digest,
        "exported_from": first.fixtures_digest,
        "spans": prov,
        "tasks": [_task_note(d) for d in decisions],
    }
    return replace(
        base,
        spans=tuple(spans),
        sufficient_sets=sets if answerable else (),
        answerable=answerable,
        segment=segment,
        origin=base.origin if base.spans else "from-trace",
        support_only=base.support_only or (answerable and not base.answer.expected),
        adjudication=_adjudication(old, decisions),
        annotations={**base.annotations, "label_studio": ls},
    )


def _gold_span(sid: str, r: Region, text: str, prior: GoldSpan | None) -> GoldSpan:
    """An annotated region as gold span ``sid`` of its document ``text``, keeping what the span it
    revises (``prior``) said of its dependency and label."""
    return GoldSpan(
        sid,
        r.doc_id,
        r.start,
        r.end,
        version=r.version,
        quote=text[r.start : r.end],
        dependency=dependency_for(r.role, prior.dependency if prior else None),
        label=prior.label if prior is not None else "",
    )


def _segment(base: Fixture, answerable: bool, spans: list[GoldSpan]) -> str:
    """The new version's segment: the previous one, unless the annotators changed what it can be
    (a question that became answerable or unanswerable, or one the traces brought without spans)."""
    segment = base.segment
    if (answerable and segment == "unanswerable") or not base.spans:
        segment = "joint-evidence" if len({s.doc_id for s in spans}) > 1 else "rule-exception"
    if not answerable and segment != "unanswerable" and not base.spans:
        segment = "unanswerable"
    return segment


def _kept_spans(old: Fixture | None, decisions: list[Decision]) -> tuple[list, dict, dict]:
    """The previous spans of documents no decided task holds, their provenance and their set names."""
    decided = {doc for d in decisions if d.regions is not None for doc in d.task.docs}
    spans, prov, names = [], {}, {}
    if old is None:
        return spans, prov, names
    for sp in old.spans:
        if sp.doc_id in decided:
            continue
        spans.append(sp)
        prov[sp.span_id] = {"change": "kept", "annotator": None}
        for i, sset in enumerate(old.sufficient_sets):
            if sp.span_id in sset:
                names.setdefault(set_name(i), []).append(sp.span_id)
    return spans, prov, names


def _new_id(used: set[str]) -> str:
    n = 1
    while f"ls{n}" in used:
        n += 1
    return f"ls{n}"


def _provenance(d: Decision, r, prior: GoldSpan | None, old: Fixture | None) -> dict:
    if prior is None:
        change = "added" if old is not None and old.spans else "from-trace"
    elif (prior.start, prior.end, prior.doc_id) != (r.start, r.end, r.doc_id):
        change = "moved"
    elif role_of(prior.dependency, prior.label) != r.role:
        change = "relabelled"
    else:
        change = "kept"
    annotators = [d.annotators[0]] if d.rule == "single annotator" else d.annotators
    return {
        "change": change,
        "annotator": ", ".join(annotators),
        "time": d.time,
        "task": d.task.task_id,
        "project": d.task.project,
        "rule": d.rule,
        "role": r.role,
    }


def _task_note(d: Decision) -> dict:
    note = {
        "task": d.task.task_id,
        "project": d.task.project,
        "annotators": d.annotators,
        "rule": d.rule,
        "documents": sorted(d.task.docs),
    }
    comments = {a: v.comment for a, v in d.task.versions.items() if v.comment}
    if comments:
        note["comments"] = comments
    return note


def _adjudication(old: Fixture | None, decisions: list[Decision]) -> dict:
    previous = old.adjudication if old is not None else None
    disputed = [d for d in decisions if d.rule == "disputed"]
    if disputed:
        return {
            "state": "disputed",
            "reason": "annotators disagree; previous gold kept for these documents",
            "versions": [
                {
                    "task": d.task.task_id,
                    "documents": sorted(d.task.docs),
                    "by_annotator": d.versions,
                    "agreed": agreed_spans(d.task.versions),
                }
                for d in disputed
            ],
            "previous": previous,
        }
    out: dict = {
        "state": "adjudicated",
        "by": sorted({a for d in decisions for a in d.annotators}),
        "rules": sorted({d.rule for d in decisions}),
        "previous": previous,
    }
    overruled = [
        {"task": d.task.task_id, "by_annotator": d.versions} for d in decisions if d.rule == "adjudicator"
    ]
    if overruled:
        out["overruled"] = overruled
    return out
