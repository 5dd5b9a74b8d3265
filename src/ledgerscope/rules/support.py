"""Does a set of units keep a question's support? (Pure functions.)

A set of units *keeps* support when, for at least one sufficient set, the
union of the units' source intervals covers every span of the set (joint
evidence across units counts). Spans are resolved onto units at evaluation
time, never stored as unit ids.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import TYPE_CHECKING, Protocol

from ledgerscope.common.intervals import covers, merge_intervals

if TYPE_CHECKING:  # the fixture model is inputs/, a layer above: rules read its fields, never import it
    from ledgerscope.inputs.fixtures import Fixture, GoldSpan

#: a source version: (doc id, version digest); a gold span may leave its version unpinned
DocKey = tuple[str, str | None]
ByDoc = Mapping[DocKey, list[tuple[int, int]]]


class Located(Protocol):
    """Anything with a source interval: a unit, a candidate row, a cited block."""

    @property
    def doc_id(self) -> str: ...
    @property
    def version(self) -> str | None: ...
    @property
    def start(self) -> int: ...
    @property
    def end(self) -> int: ...


def intervals_by_doc(
    units: Iterable[Located], only: Collection[DocKey] | None = None
) -> dict[DocKey, list[tuple[int, int]]]:
    """Group unit intervals by (doc id, version); anything with doc_id, version, start, end works.

    ``only``: the (doc id, version) keys wanted (a fixture's gold documents): a question's
    candidates span the whole corpus, its spans one or two documents."""
    out: dict[DocKey, list[tuple[int, int]]] = {}
    for u in units:
        key = (u.doc_id, u.version)
        if only is None or key in only:
            out.setdefault(key, []).append((u.start, u.end))
    return {k: merge_intervals(v) for k, v in out.items()}


def gold_keys(fixture: Fixture) -> frozenset[DocKey]:
    """The (doc id, version) of every gold span: the only intervals support is decided on."""
    return frozenset((s.doc_id, s.version) for s in fixture.spans)


def span_kept(span: GoldSpan, by_doc: ByDoc, texts: Mapping[str, str]) -> bool:
    intervals = by_doc.get((span.doc_id, span.version))
    if not intervals:
        return False
    return covers(texts[span.doc_id], span.start, span.end, intervals)


def kept_set(fixture: Fixture, units: Iterable[Located], texts: Mapping[str, str]) -> int | None:
    """Index of the first sufficient set the units keep, or None (also for unanswerable)."""
    return kept_set_in(fixture, intervals_by_doc(units, gold_keys(fixture)), texts)


def kept_set_in(fixture: Fixture, by_doc: ByDoc, texts: Mapping[str, str]) -> int | None:
    """:func:`kept_set` over intervals already grouped by :func:`intervals_by_doc`."""
    for i, sset in enumerate(fixture.sufficient_sets):
        if all(span_kept(fixture.span(sid), by_doc, texts) for sid in sset):
            return i
    return None


def keeps(fixture: Fixture, units: Iterable[Located], texts: Mapping[str, str]) -> bool:
    return kept_set(fixture, units, texts) is not None


def single_unit_complete(fixture: Fixture, units: Iterable[Located], texts: Mapping[str, str]) -> bool:
    """Some sufficient set lies entirely inside one unit (a diagnostic flag only)."""
    units = list(units)
    for sset in fixture.sufficient_sets:
        spans = [fixture.span(sid) for sid in sset]
        for u in units:
            if all(
                s.doc_id == u.doc_id
                and s.version == u.version
                and covers(texts[s.doc_id], s.start, s.end, [(u.start, u.end)])
                for s in spans
            ):
                return True
    return False


def missing_spans(fixture: Fixture, units: Iterable[Located], texts: Mapping[str, str]) -> list[str]:
    """Span ids of the closest sufficient set that the units do not cover."""
    by_doc = intervals_by_doc(units, gold_keys(fixture))
    best: list[str] | None = None
    for sset in fixture.sufficient_sets:
        miss = [sid for sid in sset if not span_kept(fixture.span(sid), by_doc, texts)]
        if best is None or len(miss) < len(best):
            best = miss
    return best or []
