"""Messages that workers post back to the app (tests can wait for them)."""

from __future__ import annotations

from typing import Any

from textual.message import Message


class ListReady(Message):
    """The questions list was (re)built: first page, count, the validated predicate."""

    def __init__(
        self,
        generation: int,
        count: int,
        total: int,
        predicate: str,
        rows: list,
        cursor: int,
        role: str,
        filters: Any = None,
    ) -> None:
        super().__init__()
        self.filters = filters
        self.generation = generation
        self.count = count
        self.total = total
        self.predicate = predicate
        self.rows = rows
        self.cursor = cursor
        self.role = role


class ListFailed(Message):
    """The list could not be built: ``typed`` is the filter predicate as the user typed it, when the
    error is the predicate's."""

    def __init__(self, error: str, opening: bool = False, typed: str = "") -> None:
        super().__init__()
        self.error = error
        self.opening = opening
        self.typed = typed


class PageLoaded(Message):
    def __init__(self, generation: int, page: int, rows: list) -> None:
        super().__init__()
        self.generation = generation
        self.page = page
        self.rows = rows


class DetailLoaded(Message):
    def __init__(self, key: tuple[str, str], detail: Any, error: str | None = None) -> None:
        super().__init__()
        self.key = key
        self.detail = detail
        self.error = error


class SurvivalLoaded(Message):
    def __init__(self, role: str, rows: dict) -> None:
        super().__init__()
        self.role = role
        self.rows = rows


class SummaryLoaded(Message):
    def __init__(self, summaries: dict, choices: dict) -> None:
        super().__init__()
        self.summaries = summaries
        self.choices = choices


class StatsLoaded(Message):
    def __init__(self, comparison: dict | None, decision: dict | None, error: str | None = None) -> None:
        super().__init__()
        self.comparison = comparison
        self.decision = decision
        self.error = error


class SearchDone(Message):
    def __init__(self, text: str, matches: list[int]) -> None:
        super().__init__()
        self.text = text
        self.matches = matches


class RerunDone(Message):
    def __init__(
        self, key: tuple[str, str, str], lines: list[str], identical: bool | None, error: str | None = None
    ) -> None:
        super().__init__()
        self.key = key
        self.lines = lines
        self.identical = identical
        self.error = error


class ChecksDone(Message):
    """The ledger's integrity checks finished: ``problems`` empty when it passed them."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__()
        self.problems = problems
