"""The record pairs the detail panes show, read once per question and kept. No Textual.

A :class:`~ledgerscope.tui.model.Detail` is both roles' records of one (question, phase), each with
its rows and full diagnosis (:mod:`ledgerscope.analysis.diagnosis.record`). :class:`DetailStore`
keeps the last :attr:`DetailStore.SIZE` of them and loads what is missing in one set of queries
per ledger for every phase asked at once (a phase move then finds its record loaded), sharing a
load in flight between threads (the worker asking and the prefetch) rather than running it twice.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ledgerscope.tui.model import Detail, RecordDetail, span_coverage

if TYPE_CHECKING:  # imported on the first load, after the first screen
    from ledgerscope.analysis.diagnosis.record import RecordRows

Key = tuple[str, str]  # (qid, phase)


class Session(Protocol):
    """What :func:`load_details` reads of a :class:`~ledgerscope.tui.data.LedgerSession` (named here
    by its parts: the session module keeps its store, so it cannot be imported back)."""

    arms: Mapping[str, Any]

    @property
    def roles(self) -> tuple[str, ...]: ...

    def fixtures(self, role: str) -> tuple[dict, dict]: ...

    def cursor(self, role: str) -> Any: ...

    def unverified(self, role: str, cur: Any) -> frozenset[str]: ...


class DetailStore:
    """The last :attr:`SIZE` record pairs, by (qid, phase); each loaded once, whichever thread asks."""

    SIZE = 128  # sixteen questions at eight phases

    def __init__(self, load: Callable[[str, list[str], Callable[[], bool] | None], dict[str, Detail]]):
        self._load = load
        self._lock = threading.Lock()
        self._kept: OrderedDict[Key, Detail] = OrderedDict()
        self._inflight: dict[Key, threading.Event] = {}

    def cached(self, qid: str, phase: str) -> bool:
        with self._lock:
            return (qid, phase) in self._kept

    def get(
        self, qid: str, phases: Sequence[str], cancelled: Callable[[], bool] | None = None
    ) -> dict[str, Detail]:
        """The record pairs of ``qid`` at ``phases``: those kept, the others loaded here in one go, or
        waited for when another thread loads them (and loaded here if that load gave up).
        ``cancelled``: see :func:`~ledgerscope.analysis.diagnosis.record.read_record_rows`."""
        got: dict[str, Detail] = {}
        while True:
            mine, theirs = self._claim(qid, phases, got)
            if not mine and not theirs:
                return got
            if mine:
                got.update(self._load_claimed(qid, mine, cancelled))
            for done in theirs:
                done.wait()

    def _claim(
        self, qid: str, phases: Sequence[str], got: dict[str, Detail]
    ) -> tuple[list[str], list[threading.Event]]:
        """Under the lock: take what is kept into ``got``; of the rest, the phases this thread is to
        load (marked in flight) and the loads in flight to wait for."""
        mine: list[str] = []
        theirs: list[threading.Event] = []
        with self._lock:
            for phase in phases:
                key = (qid, phase)
                if phase in got:
                    continue
                if key in self._kept:
                    self._kept.move_to_end(key)
                    got[phase] = self._kept[key]
                elif key in self._inflight:
                    theirs.append(self._inflight[key])
                else:
                    self._inflight[key] = threading.Event()
                    mine.append(phase)
        return mine, theirs

    def _load_claimed(
        self, qid: str, phases: list[str], cancelled: Callable[[], bool] | None
    ) -> dict[str, Detail]:
        try:
            loaded = self._load(qid, phases, cancelled)
            with self._lock:
                for phase, detail in loaded.items():
                    self._kept[(qid, phase)] = detail
                while len(self._kept) > self.SIZE:
                    self._kept.popitem(last=False)
            return loaded
        finally:
            with self._lock:
                events = [self._inflight.pop((qid, p)) for p in phases]
            for done in events:
                done.set()


def load_details(
    session: Session, qid: str, phases: Sequence[str], cancelled: Callable[[], bool] | None = None
) -> dict[str, Detail]:
    """Every role's record of ``qid`` at each of ``phases``: one set of queries per ledger for the
    roles and phases it holds."""
    from ledgerscope.analysis.diagnosis.record import read_record_rows

    found: dict[str, dict[str, RecordDetail]] = {p: {} for p in phases}
    for roles in _roles_by_ledger(session):
        fixtures, texts = session.fixtures(roles[0])
        fx = fixtures.get(qid)
        names = [session.arms[r].name for r in roles]
        held = [p for p in phases if any(p in session.arms[r].phases for r in roles)]
        rows: dict[tuple[str, str], RecordRows] = {}
        if held:
            cur = session.cursor(roles[0])
            try:
                gold = fx.doc_ids if fx is not None else None
                unverified = session.unverified(roles[0], cur)
                rows = read_record_rows(
                    cur, names, held, qid, gold, unverified=unverified, cancelled=cancelled
                )
            finally:
                cur.close()
        for role in roles:
            arm = session.arms[role]
            for phase in phases:
                found[phase][role] = record_detail(
                    role, arm.name, arm.top_n, phase, fx, texts, rows.get((arm.name, phase))
                )
    return {p: Detail(qid, p, {role: found[p][role] for role in session.roles}) for p in phases}


def record_detail(
    role: str,
    arm: str,
    top_n: Mapping[str, int],
    phase: str,
    fx: Any,
    texts: Mapping[str, str],
    rows: RecordRows | None,
) -> RecordDetail:
    """One role's record as the panes show it: rows, diagnosis, the texts of the documents shown and
    the gold spans' coverage by the packed context (an empty record where the arm has none)."""
    from ledgerscope.analysis.diagnosis.record import diagnose_record

    if rows is None:
        return RecordDetail(role, arm, phase, None, {}, [], {}, None, fx, {})
    diag = diagnose_record(rows, fx, texts, top_n)
    shown = set(rows.docs) | {c["doc_id"] for s in rows.stages.values() for c in s if c.get("doc_id")}
    doc_texts = {d: texts[d] for d in shown if d in texts}
    cov = span_coverage(fx, rows.stages.get("packed", []), texts) if fx is not None else {}
    return RecordDetail(
        role,
        arm,
        phase,
        rows.record,
        rows.stages,
        rows.units,
        rows.cuts,
        rows.oracle,
        fx,
        doc_texts,
        diag,
        cov,
    )


def _roles_by_ledger(session: Session) -> list[list[str]]:
    groups: dict[Path, list[str]] = {}
    for role in session.roles:
        groups.setdefault(session.arms[role].ledger.resolve(), []).append(role)
    return list(groups.values())
