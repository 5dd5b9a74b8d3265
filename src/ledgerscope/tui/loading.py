"""Loading records as the cursor moves: the latest wanted, the neighbours, the time taken.

Holding ``j`` asks for a record per key press; loading each in turn would put
the panes ever further behind the cursor. :class:`LatestOnly` keeps the key
asked for last; the single running load, when done, delivers its result only
if its key is still the one wanted, and otherwise loads the new one.
:class:`RecordFeed` runs it (and the prefetch of the neighbours) in a node's
thread workers; the rest is plain Python.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Generic, TypeVar

from ledgerscope.tui import messages as msg

if TYPE_CHECKING:
    from textual.dom import DOMNode

    from ledgerscope.tui.data import LedgerSession

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class LatestOnly(Generic[K, V]):
    """The wanted key and whether a load runs, under one lock (the UI thread and a worker share it)."""

    def __init__(self, load: Callable[[K], V]) -> None:
        self._load = load
        self._lock = threading.Lock()
        self._wanted: K | None = None
        self._running = False

    @property
    def wanted(self) -> K | None:
        with self._lock:
            return self._wanted

    @property
    def running(self) -> bool:
        with self._lock:
            return self._running

    def want(self, key: K, ready: Callable[[K], bool]) -> str:
        """Ask for ``key``: ``"ready"`` (no load runs and ``ready(key)``: load it inline, it is
        cached), ``"start"`` (start a worker running :meth:`run`) or ``"queued"`` (the running
        load picks it up)."""
        with self._lock:
            self._wanted = key
            if self._running:
                return "queued"
            if ready(key):
                return "ready"
            self._running = True
            return "start"

    def run(self) -> tuple[K, V | None, str | None]:
        """In the worker: load until the key loaded is still the one wanted; (key, value, error)."""
        while True:
            with self._lock:
                key = self._wanted
            try:
                value, error = self._load(key), None
            except Exception as exc:  # reported to the caller; the UI keeps going
                value, error = None, f"{type(exc).__name__}: {exc}"
            with self._lock:
                if key == self._wanted:
                    self._running = False
                    return key, value, error


def neighbour_keys(
    next_qids: Sequence[str | None], phase: str, phases: Sequence[str], shown_qid: str | None
) -> list[tuple[str, str]]:
    """The records to load before they are asked for: the next and previous questions at this phase
    (``next_qids``, None where there is none), the next and previous phases of the record shown."""
    keys = [(qid, phase) for qid in next_qids if qid is not None]
    if shown_qid is not None and phase in phases:
        i = phases.index(phase)
        keys += [(shown_qid, phases[(i + delta) % len(phases)]) for delta in (1, -1)]
    return keys


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
    """The record pairs the cursor asks for, loaded in ``node``'s thread workers: the one asked
    for last (:class:`LatestOnly`), then its neighbours; each result is posted to ``node`` as
    :class:`~ledgerscope.tui.messages.DetailLoaded`."""

    def __init__(self, node: DOMNode, session: LedgerSession) -> None:
        self._node = node
        self._session = session
        self._latest: LatestOnly[tuple[str, str], object] = LatestOnly(lambda key: session.detail(*key))

    @property
    def wanted(self) -> tuple[str, str] | None:
        return self._latest.wanted

    @property
    def loading(self) -> bool:
        return self._latest.running

    def request(self, key: tuple[str, str]) -> bool:
        """Ask for ``key``: True while a worker loads it, False when it was cached (posted at once)."""
        state = self._latest.want(key, lambda k: self._session.cached(*k))
        if state == "ready":  # a dict lookup: no worker needed
            self._node.post_message(msg.DetailLoaded(key, self._session.detail(*key)))
            return False
        if state == "start":
            self._node.run_worker(self._load, thread=True, group="detail")
        return True

    def _load(self) -> None:
        self._node.post_message(msg.DetailLoaded(*self._latest.run()))

    def prefetch(self, keys: Sequence[tuple[str, str]]) -> None:
        """Load ``keys`` not cached yet, in order, in one worker (a new prefetch cancels it)."""
        keys = [k for k in keys if not self._session.cached(*k)]
        if keys:
            load = partial(self._prefetch, keys)
            self._node.run_worker(load, thread=True, exclusive=True, group="prefetch")

    def _prefetch(self, keys: list[tuple[str, str]]) -> None:
        from textual.worker import get_current_worker

        worker = get_current_worker()
        for key in keys:
            if worker.is_cancelled:
                return
            try:
                self._session.detail(*key)
            except Exception:  # a prefetch failure surfaces when the record is really asked for
                return
