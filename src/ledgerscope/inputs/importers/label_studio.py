"""Reading a Label Studio export of re-annotation tasks: each annotator's version of each task.

Accepted: the JSON export of the UI (a snapshot) and of the API (``GET
/api/projects/ID/export?exportType=JSON``), a list of tasks whose ``annotations[].completed_by`` is a
user id (``users`` maps ids to emails, from ``GET /api/users``) or an object with the email; an
object with ``tasks``; or JSON lines. Only tasks of :data:`ledgerscope.inputs.annotation_tasks.TASK_FORMAT`
are read; cancelled (skipped) annotations are ignored; an annotator with several annotations of
one task counts once, by the latest.

Every document of a task is checked before anything is read from it: its text must have the
sha256 the task names (``docK_version``), and each region's offsets, taken as code points, must
slice to the region's text. A task that fails either is refused with its id and question named.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ledgerscope.common.errors import InputError, Problem
from ledgerscope.inputs.annotation_tasks import ROLES, TASK_FORMAT, UNANSWERABLE, text_version


@dataclass(frozen=True)
class Region:
    """One span an annotator left: where, its role, its sets, and the pre-annotation it came from."""

    rid: str
    doc_id: str
    version: str
    start: int
    end: int
    role: str
    sets: tuple[str, ...]
    gold_id: str | None  # the span id of the pre-annotation with this region id, if any


@dataclass
class TaskVersion:
    """One annotator's submitted version of one task."""

    annotator: str
    regions: list[Region]
    unanswerable: bool
    comment: str
    time: str
    annotation_id: Any


@dataclass
class Task:
    """A re-annotation task as exported back: its documents and each annotator's version."""

    task_id: Any
    project: Any
    qid: str
    question: str
    origin: str
    docs: dict[str, tuple[str, str]]  # doc id -> (version, text)
    fixtures_digest: str | None
    versions: dict[str, TaskVersion] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"task {self.task_id} (question {self.qid!r})"


def read_export(path: Path, users: dict[str, str] | None = None) -> list[Task]:
    """The re-annotation tasks of a Label Studio export, each checked; InputError naming every bad one."""
    raw = _load(path)
    tasks, problems = [], []
    for i, obj in enumerate(raw):
        data = obj.get("data") if isinstance(obj, dict) else None
        if not isinstance(data, dict) or data.get("task_format") != TASK_FORMAT:
            continue
        where = f"task {obj.get('id', f'#{i}')} (question {data.get('qid')!r})"
        try:
            tasks.append(_task(obj, data, users or {}))
        except _Refused as exc:
            problems.append(Problem(str(path), None, where, str(exc)))
        except (AttributeError, TypeError, KeyError, ValueError) as exc:  # a field of the wrong shape
            problems.append(Problem(str(path), None, where, f"not a Label Studio task as exported: {exc!r}"))
    if problems:
        raise InputError(problems)
    if not tasks:
        raise InputError(
            Problem(
                str(path),
                None,
                "tasks",
                "no ledgerscope re-annotation task in the export "
                f"(tasks whose data.task_format is {TASK_FORMAT!r})",
            )
        )
    return tasks


class _Refused(ValueError):
    """A task that cannot be read as it is (the message says why)."""


def _load(path: Path) -> list:
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as exc:
        reason = f"cannot be read: {exc.strerror or exc}"
        raise InputError(Problem(str(path), None, "export", reason)) from None
    except UnicodeDecodeError as exc:
        raise InputError(Problem(str(path), None, "export", f"not UTF-8: {exc}")) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        try:
            data = [json.loads(line) for line in text.splitlines() if line.strip()]
        except json.JSONDecodeError as exc:
            reason = f"not JSON or JSON lines: {exc}"
            raise InputError(Problem(str(path), exc.lineno, "export", reason)) from None
    if isinstance(data, dict):
        data = data.get("tasks", [data])
    if not isinstance(data, list):
        raise InputError(Problem(str(path), None, "export", "expected a list of Label Studio tasks"))
    return data


def _task(obj: dict, data: dict, users: dict[str, str]) -> Task:
    docs: dict[str, tuple[str, str]] = {}
    slots: dict[str, str] = {}
    for entry in data.get("documents") or []:
        k, doc = entry.get("slot"), entry.get("doc_id")
        if entry.get("redacted"):  # restricted text withheld by the export: not editable here
            continue
        text = data.get(f"doc{k}")
        if not isinstance(text, str) or not isinstance(doc, str):
            raise _Refused(f"document slot {k} has no text")
        named = data.get(f"doc{k}_version") or entry.get("version")
        actual = text_version(text)
        if named != actual:
            raise _Refused(
                f"the text of document {doc!r} no longer matches its source digest "
                f"({named} named, {actual} found): re-export the task from the ledger"
            )
        docs[doc], slots[f"doc{k}"] = (actual, text), doc
    task = Task(
        obj.get("id"),
        obj.get("project"),
        str(data.get("qid")),
        str(data.get("question") or ""),
        str(data.get("origin") or "gold"),
        docs,
        data.get("fixtures_digest"),
    )
    gold = data.get("gold_regions") or {}
    for ann in obj.get("annotations") or []:
        if not isinstance(ann, dict) or ann.get("was_cancelled"):
            continue
        version = _version(ann, slots, docs, gold, users)
        old = task.versions.get(version.annotator)
        if old is None or version.time >= old.time:
            task.versions[version.annotator] = version
    return task


def annotator_of(completed_by: Any, users: dict[str, str]) -> str:
    """The annotator's email (``completed_by`` expanded, or a user id the ``users`` map names)."""
    if isinstance(completed_by, dict):
        if completed_by.get("email"):
            return str(completed_by["email"])
        completed_by = completed_by.get("id")
    return users.get(str(completed_by), f"user:{completed_by}")


def _version(
    ann: dict, slots: dict[str, str], docs: dict[str, tuple[str, str]], gold: dict, users: dict[str, str]
) -> TaskVersion:
    """One annotation's regions (roles and sets joined by region id), unanswerable mark and comment."""
    roles: dict[str, dict] = {}
    sets: dict[str, list[str]] = {}
    unanswerable, comment = False, ""
    for item in ann.get("result") or []:
        name, value, rid = item.get("from_name", ""), item.get("value") or {}, str(item.get("id"))
        if name.startswith("role_") and item.get("type") == "labels":
            roles[rid] = {**value, "to_name": item.get("to_name")}
        elif name.startswith("sets_") and item.get("type") == "choices":
            sets[rid] = [str(c) for c in value.get("choices") or []]
        elif name == "answerable":
            unanswerable = UNANSWERABLE in (value.get("choices") or [])
        elif name == "comment":
            comment = "\n".join(str(t) for t in value.get("text") or [])
    regions = []
    for rid, value in roles.items():
        doc = slots.get(str(value.get("to_name")))
        if doc is None:
            raise _Refused(
                f"region {rid} is on {value.get('to_name')!r}, not a document of the task "
                "(or one whose text was withheld)"
            )
        version, text = docs[doc]
        start, end = value.get("start"), value.get("end")
        if not (isinstance(start, int) and isinstance(end, int) and 0 <= start < end <= len(text)):
            raise _Refused(f"region {rid}: offsets [{start}, {end}) are not inside document {doc!r}")
        if value.get("text") is not None and text[start:end] != value["text"]:
            raise _Refused(
                f"region {rid}: [{start}, {end}) in code points of {doc!r} does not slice to the "
                "region's text (offsets counted in another unit?)"
            )
        labels = [x for x in value.get("labels") or [] if x in ROLES]
        if len(labels) != 1:
            raise _Refused(f"region {rid}: needs exactly one role of {', '.join(ROLES)}")
        regions.append(
            Region(rid, doc, version, start, end, labels[0], tuple(sets.get(rid, ())), gold.get(rid))
        )
    time = str(ann.get("updated_at") or ann.get("created_at") or "")
    return TaskVersion(
        annotator_of(ann.get("completed_by"), users), regions, unanswerable, comment, time, ann.get("id")
    )
