"""Loading records as the cursor moves: the latest wanted, the neighbours, the time taken. No Textual.

Holding ``j`` asks for a record per key press; loading each in turn would put
the panes ever further behind the cursor. :class:`LatestOnly` keeps the key
asked for last; the single running load, when done, delivers its result only
if its key is still the one wanted, and otherwise loads the new one.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable, Sequence
from typing import Generic, TypeVar

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
        #: seconds to the first list painted, and per move kind ("question", "phase") its durations
        self.timings: dict = {"first_list": None, "question": [], "phase": []}
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
