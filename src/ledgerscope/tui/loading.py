"""Loading records as the cursor moves: the one asked for, its neighbours, the time taken.

Holding ``j`` asks for a record per key press; each request runs in a Textual thread worker of
the ``detail`` group with ``exclusive=True``, so a newer request cancels the one in flight: the
cancelled load stops between two queries (``cancelled`` of
:func:`~ledgerscope.analysis.diagnosis.record.read_record_rows`) and posts nothing, and the screen
drops any result whose key is not the one it asked for last (a result posted just before the
cancel). The prefetch of the neighbours is one more exclusive group. :class:`RecordFeed` runs
them in a node's workers; the rest is plain Python.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING

from ledgerscope.tui import messages as msg

if TYPE_CHECKING:
    from textual.dom import DOMNode
    from textual.worker import Worker

    from ledgerscope.tui.data import LedgerSession


def neighbour_keys(
    next_qids: Sequence[str | None],
    phase: str,
    phases: Sequence[str],
    shown_qid: str | None,
    phases_first: bool = False,
) -> list[tuple[str, str]]:
    """The records to load before they are asked for: the next and previous questions (``next_qids``,
    None where there is none) at this phase, then the next and previous phases of the record shown
    (one load reads both). After a phase move (``phases_first``), every other phase of the record
    shown comes first, nearest first, then the neighbouring questions at every phase: one load
    each, not one per phase moved to (a question move keeps the background work small, for the
    next key press)."""
    around = _nearest_first(phases, phase) if phase in phases else []
    qids = [q for q in next_qids if q is not None]
    if phases_first:
        others = [(shown_qid, p) for p in around] if shown_qid is not None else []
        return others + [(q, p) for q in qids for p in [phase, *around]]
    near = [(shown_qid, p) for p in around[:2]] if shown_qid is not None else []
    return [(q, phase) for q in qids] + near


def _nearest_first(phases: Sequence[str], phase: str) -> list[str]:
    """The phases other than ``phase``: the next, the previous, the one after next... wrapping around."""
    i, n = phases.index(phase), len(phases)
    order = [phases[(i + sign * step) % n] for step in range(1, n // 2 + 1) for sign in (1, -1)]
    return [p for p in dict.fromkeys(order) if p != phase]


class MoveTimer:
    """Times each move from its key press until the panes show its record (``timings[kind]``)."""

    def __init__(self) -> None:
        #: seconds from the start to the first list painted, to the detail panes painted after it and to
        #: the integrity checks' answer, and per move kind ("question", "phase") its durations
        self.timings: dict = {"first_list": None, "panes": None, "checks": None, "question": [], "phase": []}
        self._move: tuple[str, float] | None = None

    def start(self, kind: str) -> None:
        self._move = (kind, time.perf_counter())

    def cancel(self) -> None:
        """Nothing moved: nothing to time."""
        self._move = None

    def finish(self) -> None:
        if self._move is not None:
            kind, t0 = self._move
            self._move = None
            self.timings[kind].append(time.perf_counter() - t0)


class RecordFeed:
    """The record pairs the cursor asks for, loaded in ``node``'s thread workers (the one asked for
    last; a newer request cancels an older one), then its neighbours; each result is posted to
    ``node`` as :class:`~ledgerscope.tui.messages.DetailLoaded`."""

    def __init__(self, node: DOMNode, session: LedgerSession) -> None:
        self._node = node
        self._session = session
        self._wanted: tuple[str, str] | None = None
        self._worker: Worker | None = None

    @property
    def wanted(self) -> tuple[str, str] | None:
        """The key asked for last: the only one whose result the screen shows."""
        return self._wanted

    @property
    def loading(self) -> bool:
        """The worker loading the key asked for last has not finished."""
        return self._worker is not None and not self._worker.is_finished

    def request(self, key: tuple[str, str]) -> bool:
        """Ask for ``key``: True while a worker loads it, False when it was kept (posted at once)."""
        self._wanted = key
        if self._session.cached(*key):  # a dict lookup: no worker needed; one in flight is cancelled
            self._node.workers.cancel_group(self._node, "detail")
            self._worker = None
            self._node.post_message(msg.DetailLoaded(key, self._session.detail(*key)))
            return False
        self._worker = self._node.run_worker(
            partial(self._load, key), thread=True, exclusive=True, group="detail", exit_on_error=False
        )
        return True

    def _load(self, key: tuple[str, str]) -> None:
        from textual.worker import get_current_worker

        from ledgerscope.analysis.diagnosis.record import Cancelled  # the reader: not before the first screen

        worker = get_current_worker()
        try:
            detail, error = self._session.detail(*key, cancelled=lambda: worker.is_cancelled), None
        except Cancelled:
            return
        except Exception as exc:  # reported on screen; the UI keeps going
            detail, error = None, f"{type(exc).__name__}: {exc}"
        if not worker.is_cancelled:
            self._node.post_message(msg.DetailLoaded(key, detail, error))

    def prefetch(self, keys: Sequence[tuple[str, str]]) -> None:
        """Load ``keys`` not kept yet, in order (the phases of one question together), in one worker
        (a new prefetch cancels it)."""
        keys = [k for k in keys if not self._session.cached(*k)]
        if keys:
            load = partial(self._prefetch, keys)
            self._node.run_worker(load, thread=True, exclusive=True, group="prefetch", exit_on_error=False)

    def _prefetch(self, keys: list[tuple[str, str]]) -> None:
        from textual.worker import get_current_worker

        worker = get_current_worker()
        for qid, phases in by_question(keys):
            try:
                self._session.details(qid, phases, cancelled=lambda: worker.is_cancelled)
            except Exception:  # cancelled, or a failure that surfaces when the record is asked for
                return


def by_question(keys: Sequence[tuple[str, str]]) -> list[tuple[str, list[str]]]:
    """``keys`` (qid, phase) as runs of one question's phases, in order: each run is one load."""
    runs: list[tuple[str, list[str]]] = []
    for qid, phase in keys:
        if runs and runs[-1][0] == qid:
            runs[-1][1].append(phase)
        else:
            runs.append((qid, [phase]))
    return runs
