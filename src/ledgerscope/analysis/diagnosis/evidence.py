"""The evidence of the ten-step diagnosis: what shows where a record lost its support.

:func:`ledgerscope.analysis.diagnosis.tree.diagnose` decides the step from the record's flags
and verdicts; the functions here build the evidence object for that step from
the record's candidate lists, its fixture and the source texts (the rules for
it close the docstring of :mod:`ledgerscope.analysis.diagnosis.tree`). Pure functions, no I/O.
:mod:`ledgerscope.analysis.diagnosis.sql` mirrors them in DuckDB.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

# re-exported (``X as X``): callers import these from here too
from ledgerscope.analysis.diagnosis.depths import FIRST_STAGE_DEPTH_KEYS as FIRST_STAGE_DEPTH_KEYS
from ledgerscope.analysis.diagnosis.depths import depths_by_arm as depths_by_arm
from ledgerscope.analysis.diagnosis.depths import first_stage_depths as first_stage_depths
from ledgerscope.common.intervals import merge_intervals, uncovered

if TYPE_CHECKING:  # annotations only
    from ledgerscope.inputs.fixtures import Fixture, GoldSpan

#: the candidate lists each step's evidence reads ("units" = the chunker's units table)
EVIDENCE_STAGES: dict[int, tuple[str, ...]] = {
    0: ("packed",),
    1: (),
    2: ("units",),
    3: ("units", "bm25", "dense_exact"),
    4: ("bm25", "dense_exact", "dense_ann"),
    5: ("bm25", "dense_ann", "union"),
    6: ("union", "fused"),
    7: ("fused", "reranked"),
    8: ("reranked", "selected", "packed"),
    9: ("packed",),
    10: ("packed",),
}
# per step: (input stage, lists holding the input rank, lists holding the output rank, all lists shown)
TRANSITIONS: dict[int, tuple[str, tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {
    3: ("chunked", (), ("bm25", "dense_exact"), ("bm25", "dense_exact")),
    4: ("exact", ("dense_exact",), ("dense_ann",), ("bm25", "dense_exact", "dense_ann")),
    5: ("production", ("bm25", "dense_ann"), ("union",), ("bm25", "dense_ann", "union")),
    6: ("union", ("union",), ("fused",), ("union", "fused")),
    7: ("fused", ("fused",), ("reranked",), ("fused", "reranked")),
    8: ("reranked", ("reranked",), ("packed",), ("reranked", "selected", "packed")),
}
QUOTE_CHARS = 120
NO_RANK = 1 << 30  # the rank of a row without one: after every ranked row
ANSWER_CHARS = 200
UNITS_PER_SPAN = 12
#: characters either side of a span searched for step-2/3 unit evidence
UNIT_WINDOW = 2000


# ---------------------------------------------------------------------------
# coverage helpers


def span_gaps(
    span: GoldSpan, rows: Sequence[Mapping[str, Any]], texts: Mapping[str, str]
) -> list[tuple[int, int]]:
    """Parts of the span (holding non-whitespace) that no row's interval covers."""
    doc = span.doc_id
    intervals = [
        (int(r["start"]), int(r["end"]))
        for r in rows
        if r.get("doc_id") == doc and r.get("start") is not None and r.get("end") is not None
    ]
    text = texts.get(span.doc_id)
    if text is not None:
        return uncovered(text, span.start, span.end, intervals)
    gaps, pos = [], span.start  # no text: raw intervals, whitespace not excused
    for s, e in merge_intervals(intervals):
        if e <= pos:
            continue
        if s >= span.end:
            break
        if s > pos:
            gaps.append((pos, min(s, span.end)))
        pos = max(pos, e)
    if pos < span.end:
        gaps.append((pos, span.end))
    return gaps


def _spans_of(fixture: Fixture, sset: Sequence[str]) -> list[GoldSpan]:
    by_id = {s.span_id: s for s in fixture.spans}
    return [by_id[sid] for sid in sset if sid in by_id]


def _closest_set(
    fixture: Fixture,
    before: Sequence[Mapping[str, Any]] | None,
    after: Sequence[Mapping[str, Any]] | None,
    texts: Mapping[str, str],
) -> tuple[int, list[tuple[GoldSpan, list[tuple[int, int]] | None]]]:
    """(set index, [(missing span, its uncovered parts at ``after``)]) for the closest set.

    Sets kept by ``before`` come first (None: every set counts as kept), then the
    fewest spans missing at ``after`` (None: nothing known, every span missing).
    """
    best: tuple[tuple[int, int, int], int, list[Any]] | None = None
    for i, sset in enumerate(fixture.sufficient_sets):
        spans = _spans_of(fixture, sset)
        if len(spans) < len(sset):  # names an unresolved span: it cannot be kept
            continue
        kept_before = (
            before is None
            or len(fixture.sufficient_sets) == 1
            or all(not span_gaps(s, before, texts) for s in spans)
        )
        missing: list[tuple[GoldSpan, list[tuple[int, int]] | None]]
        if after is None:
            missing = [(s, None) for s in spans]
        else:
            missing = [(s, g) for s in spans if (g := span_gaps(s, after, texts))]
        key = (0 if kept_before else 1, len(missing), i)
        if best is None or key < best[0]:
            best = (key, i, missing)
    if best is None:
        return -1, []
    return best[1], best[2]


def _trunc(text: str | None, n: int) -> str | None:
    if text is None:
        return None
    return text if len(text) <= n else text[: n - 1] + "…"


def span_json(
    span: GoldSpan, texts: Mapping[str, str], gaps: list[tuple[int, int]] | None = None
) -> dict[str, Any]:
    quote = span.quote if span.quote is not None else (texts.get(span.doc_id) or "")[span.start : span.end]
    out: dict[str, Any] = {
        "span": span.span_id,
        "doc_id": span.doc_id,
        "start": span.start,
        "end": span.end,
        "dependency": span.dependency,
        "quote": _trunc(quote, QUOTE_CHARS),
    }
    if gaps is not None:
        out["uncovered"] = [[int(s), int(e)] for s, e in gaps]
    return out


def _overlaps(row: Mapping[str, Any], span: GoldSpan) -> bool:
    return (
        row.get("doc_id") == span.doc_id
        and row.get("start") is not None
        and int(row["start"]) < span.end
        and int(row["end"]) > span.start
    )


def _by_unit(rows: Sequence[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    out: dict[str, Mapping[str, Any]] = {}
    for r in rows:
        old = out.get(r["unit_id"])
        if old is None or row_rank(r) < row_rank(old):
            out[r["unit_id"]] = r
    return out


def row_rank(row: Mapping[str, Any]) -> int:
    rank = row.get("rank")
    return int(rank) if rank is not None else NO_RANK


def _score(row: Mapping[str, Any] | None) -> float | None:
    if row is None or row.get("score") is None:
        return None
    return float(row["score"])


def stage_rows(
    stage: str, stages: Mapping[str, Sequence[Mapping[str, Any]]], record: Mapping[str, Any]
) -> list[Mapping[str, Any]] | None:
    """A stage's kept rows (with cutoffs applied); None when the data is not there."""

    def get(name: str) -> list[Mapping[str, Any]] | None:
        rows = stages.get(name)
        return None if rows is None else list(rows)

    if stage == "chunked":
        return get("units")
    if stage == "exact":
        parts = [get("bm25"), get("dense_exact")]
    elif stage == "production":
        parts = [get("bm25"), get("dense_ann")]
    else:
        rows = get(stage)
        if rows is None:
            return None
        cut = {"fused": record.get("rerank_depth"), "reranked": record.get("selection_depth")}.get(stage)
        return rows if cut is None else [r for r in rows if row_rank(r) <= int(cut)]
    if all(p is None for p in parts):
        return None
    return [r for p in parts if p for r in p]


# ---------------------------------------------------------------------------
# evidence per step


def evidence_gold(
    record: Mapping[str, Any], fixture: Fixture | None, texts: Mapping[str, str]
) -> dict[str, Any]:
    ev: dict[str, Any] = {"stage": "corpus", "gold_status": record.get("gold_status")}
    if fixture is not None:
        ev["spans"] = [{**span_json(s, texts), "doc_in_corpus": s.doc_id in texts} for s in fixture.spans]
    return ev


def evidence_support(
    step: int,
    stage: str,
    record: Mapping[str, Any],
    stages: Mapping[str, Sequence[Mapping[str, Any]]],
    fixture: Fixture | None,
    texts: Mapping[str, str],
) -> dict[str, Any]:
    """Steps 2-8: the missing spans of the closest sufficient set at ``stage``, the units around them."""
    ev: dict[str, Any] = {"stage": stage}
    if step == 2:
        return _evidence_chunked(ev, stages, fixture, texts)
    in_stage, in_lists, out_lists, shown = TRANSITIONS[step]
    ev["input_stage"] = in_stage
    ev["cutoff"] = _cutoff(step, record, stages)
    if fixture is None:
        ev["note"] = "no fixture for this question"
        return ev
    before = stage_rows(in_stage, stages, record)
    after = stage_rows(stage, stages, record)
    set_index, missing = _closest_set(fixture, before, after, texts)
    ev["sufficient_set"] = set_index
    ev["spans"] = [span_json(s, texts, g) for s, g in missing]
    if before is None:
        ev["units"] = []
        ev["note"] = f"no {in_stage} rows supplied"
        return ev
    index = {name: _by_unit(stages.get(name) or []) for name in shown}
    units = []
    for span, _ in missing:
        hits = list(_by_unit([r for r in before if _overlaps(r, span)]).values())
        hits.sort(key=lambda r: (_best(r["unit_id"], in_lists, index)[0] or NO_RANK, int(r["start"])))
        units += [
            _unit_entry(r, span, step, record, index, (in_lists, out_lists, shown))
            for r in hits[:UNITS_PER_SPAN]
        ]
    ev["units"] = units
    if step == 8:
        ev.update(_packing_summary(record, stages))
    return ev


def _best(
    uid: str, lists: Sequence[str], index: Mapping[str, Mapping[str, Mapping[str, Any]]]
) -> tuple[int | None, float | None]:
    best: Mapping[str, Any] | None = None
    for name in lists:
        r = index.get(name, {}).get(uid)
        if r is not None and (best is None or row_rank(r) < row_rank(best)):
            best = r
    return (None, None) if best is None else (row_rank(best), _score(best))


def _unit_entry(
    r: Mapping[str, Any],
    span: GoldSpan,
    step: int,
    record: Mapping[str, Any],
    index: Mapping[str, Mapping[str, Mapping[str, Any]]],
    lists: tuple[Any, Any, Any],
) -> dict[str, Any]:
    """One unit near a missing span: its ranks going into and out of the step's stage, its rank in
    each stage shown, its lineage, and at step 8 how it was packed."""
    in_lists, out_lists, shown = lists
    uid = r["unit_id"]
    in_rank, in_score = _best(uid, in_lists, index)
    out_rank, out_score = _best(uid, out_lists, index)
    entry: dict[str, Any] = {
        "unit_id": uid,
        "span": span.span_id,
        "doc_id": r["doc_id"],
        "start": int(r["start"]),
        "end": int(r["end"]),
        "input_rank": in_rank,
        "input_score": in_score,
        "output_rank": out_rank,
        "output_score": out_score,
        "ranks": {
            name: (None if (x := index[name].get(uid)) is None else {"rank": row_rank(x), "score": _score(x)})
            for name in shown
        },
    }
    u = index.get("union", {}).get(uid)
    if u is not None and u.get("lineage") is not None:
        entry["lineage"] = list(u["lineage"])
    if step == 8:
        entry.update(_packing_detail(uid, record))
    return entry


def _packing_summary(
    record: Mapping[str, Any], stages: Mapping[str, Sequence[Mapping[str, Any]]]
) -> dict[str, Any]:
    """Step 8's budget figures and the packed units, each with its rank in the selection's input
    (None: the unit came in by neighbour expansion)."""
    rer = _by_unit(stage_rows("reranked", stages, record) or [])
    return {
        "budget_tokens": record.get("budget_tokens"),
        "evidence_tokens": record.get("evidence_tokens"),
        "selection_depth": record.get("selection_depth"),
        "packed": [
            {
                "unit_id": r["unit_id"],
                "rank": row_rank(r),
                "reranked_rank": None if (x := rer.get(r["unit_id"])) is None else row_rank(x),
            }
            for r in sorted(stages.get("packed") or [], key=row_rank)
        ],
    }


def _cutoff(step: int, record: Mapping[str, Any], stages: Mapping[str, Sequence[Mapping[str, Any]]]) -> Any:
    if step == 6:
        return record.get("rerank_depth")
    if step == 7:
        return record.get("selection_depth")
    if step == 8:
        return record.get("budget_tokens")
    if step in (3, 4):
        top_n = record.get("top_n") or {}
        names = ("bm25", "dense_exact") if step == 3 else ("dense_exact", "dense_ann")
        return {n: top_n.get(n, max((row_rank(r) for r in stages.get(n) or []), default=None)) for n in names}
    return None


def _packing_detail(uid: str, record: Mapping[str, Any]) -> dict[str, Any]:
    overflow = [o for o in json_list(record.get("overflow_json")) if o.get("unit_id") == uid]
    dropped = [o for o in json_list(record.get("expansion_dropped_json")) if o.get("unit_id") == uid]
    out: dict[str, Any] = {"overflow": overflow}
    if dropped:
        out["expansion_dropped"] = dropped
    return out


def json_list(value: Any) -> list[dict[str, Any]]:
    if not value:
        return []
    if isinstance(value, list):
        return value
    try:
        data = json.loads(value)
    except (TypeError, ValueError):  # JSONDecodeError, or bytes that are not UTF-8
        return []
    return [d for d in data if isinstance(d, dict)] if isinstance(data, list) else []


def _evidence_chunked(
    ev: dict[str, Any],
    stages: Mapping[str, Sequence[Mapping[str, Any]]],
    fixture: Fixture | None,
    texts: Mapping[str, str],
) -> dict[str, Any]:
    units = stages.get("units")
    if fixture is None:
        ev["note"] = "no fixture for this question"
        return ev
    set_index, missing = _closest_set(fixture, None, units, texts)
    ev["sufficient_set"] = set_index
    ev["spans"] = [span_json(s, texts, g) for s, g in missing]
    if units is None:
        ev["units"] = []
        ev["note"] = "no unit rows supplied"
        return ev
    around = []
    for span, _ in missing:
        same = sorted((u for u in units if u.get("doc_id") == span.doc_id), key=lambda u: int(u["start"]))
        over = [u for u in same if int(u["start"]) < span.end and int(u["end"]) > span.start]
        for u in over:
            s, e = int(u["start"]), int(u["end"])
            rel = (
                "contains"
                if s <= span.start and e >= span.end
                else "inside"
                if s > span.start and e < span.end
                else "overlaps-start"
                if s <= span.start
                else "overlaps-end"
            )
            around.append(_unit_around(u, span, rel))
        # the nearest unit either side, where no overlapping unit reaches that edge of the span
        if not any(int(u["start"]) <= span.start for u in over):
            before = [u for u in same if int(u["end"]) <= span.start]
            if before:
                around.insert(len(around) - len(over), _unit_around(before[-1], span, "before"))
        if not any(int(u["end"]) >= span.end for u in over):
            after = [u for u in same if int(u["start"]) >= span.end]
            if after:
                around.append(_unit_around(after[0], span, "after"))
    ev["units"] = around
    return ev


def _unit_around(u: Mapping[str, Any], span: GoldSpan, relation: str) -> dict[str, Any]:
    return {
        "unit_id": u["unit_id"],
        "span": span.span_id,
        "doc_id": u["doc_id"],
        "start": int(u["start"]),
        "end": int(u["end"]),
        "relation": relation,
    }


def answer_json(record: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "answer": _trunc(record.get("answer"), ANSWER_CHARS),
        "abstained": record.get("abstained"),
        "answer_verdict": record.get("answer_verdict"),
        "answer_reason": record.get("answer_reason"),
        "generator_error": record.get("generator_error"),
    }


def _packed_cover(
    record: Mapping[str, Any],
    stages: Mapping[str, Sequence[Mapping[str, Any]]],
    fixture: Fixture | None,
    texts: Mapping[str, str],
    extra_rows: Sequence[Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """The packed units that hold the kept set's spans, with their position in the context."""
    packed = sorted(stages.get("packed") or [], key=row_rank)
    out: dict[str, Any] = {"n_packed": len(record.get("packed_unit_ids") or []) or len(packed)}
    if fixture is None:
        return out
    idx = record.get("covered_set")
    if idx is None or not (0 <= int(idx) < len(fixture.sufficient_sets)):
        idx, _ = _closest_set(fixture, None, packed, texts)
    idx = int(idx)
    out["sufficient_set"] = idx
    spans = []
    for span in _spans_of(fixture, fixture.sufficient_sets[idx]) if idx >= 0 else []:
        entry = span_json(span, texts)
        entry["packed_units"] = [
            {"unit_id": r["unit_id"], "rank": row_rank(r)} for r in packed if _overlaps(r, span)
        ]
        if extra_rows is not None:
            entry["cited"] = not span_gaps(span, extra_rows, texts)
        spans.append(entry)
    out["spans"] = spans
    return out


def evidence_answer(
    record: Mapping[str, Any],
    stages: Mapping[str, Sequence[Mapping[str, Any]]],
    fixture: Fixture | None,
    texts: Mapping[str, str],
) -> dict[str, Any]:
    return {"stage": "answer", **answer_json(record), **_packed_cover(record, stages, fixture, texts)}


def evidence_citation(
    record: Mapping[str, Any],
    stages: Mapping[str, Sequence[Mapping[str, Any]]],
    fixture: Fixture | None,
    texts: Mapping[str, str],
) -> dict[str, Any]:
    citations = json_list(record.get("citations_json"))
    cited_rows = [c for c in citations if c.get("doc_id") is not None and c.get("start") is not None]
    return {
        "stage": "citations",
        "citation_verdict": record.get("citation_verdict"),
        "citation_reason": record.get("citation_reason"),
        "citations": citations,
        "answer": _trunc(record.get("answer"), ANSWER_CHARS),
        **_packed_cover(record, stages, fixture, texts, cited_rows),
    }


def evidence_pass(
    record: Mapping[str, Any],
    stages: Mapping[str, Sequence[Mapping[str, Any]]],
    fixture: Fixture | None,
    texts: Mapping[str, str],
) -> dict[str, Any]:
    return {
        "stage": "pass",
        "answer_verdict": record.get("answer_verdict"),
        "citation_verdict": record.get("citation_verdict"),
        **_packed_cover(record, stages, fixture, texts),
    }
