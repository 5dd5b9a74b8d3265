"""Messages that workers post back to the app (tests can wait for them).

Dataclasses: Textual's :class:`~textual.message.Message` initialises itself in ``__post_init__``
for them, so each message is its fields and nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from textual.message import Message
from textual.message_pump import MessagePump


@dataclass
class ListReady(Message):
    """The questions list was (re)built: first page, count, the validated predicate."""

    generation: int
    count: int
    total: int
    predicate: str
    rows: list
    cursor: int
    role: str
    filters: Any = None


@dataclass
class ListFailed(Message):
    """The list could not be built: ``typed`` is the filter predicate as the user typed it, when the
    error is the predicate's."""

    error: str
    opening: bool = False
    typed: str = ""


@dataclass
class PageLoaded(Message):
    generation: int
    page: int
    rows: list


@dataclass
class DetailLoaded(Message):
    key: tuple[str, str]
    detail: Any
    error: str | None = None


@dataclass
class SurvivalLoaded(Message):
    role: str
    rows: dict


@dataclass
class SummaryLoaded(Message):
    summaries: dict
    choices: dict


@dataclass
class StatsLoaded(Message):
    comparison: dict | None
    decision: dict | None
    error: str | None = None


@dataclass
class SearchDone(Message):
    text: str
    matches: list[int]


@dataclass
class RerunDone(Message):
    key: tuple[str, str, str]
    lines: list[str]
    identical: bool | None
    error: str | None = None


@dataclass
class ChecksDone(Message):
    """The ledger's integrity checks finished: ``problems`` empty when it passed them."""

    problems: list[str]


def post_if_current(node: MessagePump, message: Message) -> None:
    """Post ``message`` from a worker to ``node`` unless the worker was cancelled: in an exclusive
    group a newer request cancels it, and its result, now stale, must not paint over the newer one."""
    from textual.worker import get_current_worker

    if not get_current_worker().is_cancelled:
        node.post_message(message)
