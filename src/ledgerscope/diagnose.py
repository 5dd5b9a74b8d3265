"""The ten-step diagnosis (seed 001, section 15): where did each record lose its support?

:func:`diagnose` is a pure function of one record, that record's candidate
lists, its fixture and the source texts: the definition.
:func:`ledgerscope.diagnose_ledger.diagnose_ledger` feeds it a whole ledger;
:mod:`ledgerscope.diagnose_sql` computes the same rows in DuckDB for the
commands (checked against it record for record).

Declared rules
--------------
* The record's ``support_*`` flags (written by the cascade) are the truth for
  *which* step fires; candidate rows are read only to build the evidence.
* Steps, in order: 1 ``gold_status`` is not ``ok``; 2 ``support_chunked``; 3
  ``support_exact`` (BM25 + exact dense together); 4 ``support_production``
  (BM25 + ANN); 5 ``support_union``; 6 ``support_fused`` (fused list cut at
  ``rerank_depth``); 7 ``support_reranked`` (reranked list cut at
  ``selection_depth``); 8 ``support_packed``; 9 the answer verdict is neither
  ``correct`` nor ``not-judged``; 10 the answer is correct (or not judged) but
  the citations do not support it; 0 pass.
* Support is lost for good at the first stage after which no later stage up to
  the packed context keeps it. A stage that loses support which a later stage
  regains (ANN finding a unit exact search ranked lower; neighbour expansion
  restoring a unit cut by the reranker) is not the record's step: it is listed
  in the walk as passed with a note and flagged ``support-recovered``. In
  particular, a record whose packed context keeps support never fails steps
  2 to 8.
* Support-only fixtures (answer ``not-judged``): step 9 is not applicable; step
  10 fires when the citations are ``unsupported`` or ``unresolvable`` (the
  answer cites intervals that do not hold a sufficient set, or points nowhere).
  A support-only answer that cites nothing (``no-citation``/``not-applicable``)
  passes, flagged ``citations-not-checked``: there is no answer contract, so
  an uncited answer gives the attribution check nothing to test.
* Answer-judged records with a correct answer fail step 10 on any citation
  verdict other than ``supported`` (``no-citation`` included).
* ``infrastructure-failure`` (the generator failed) is flagged on every step;
  where support survived to the packed context it is step 9 with the label
  ``infrastructure-failure`` (never a generator or oracle judgement).
* Unanswerable controls are not walked on support: ``abstained`` is step 0
  ``control-abstained``; anything else is step 9 ``control-false-assertion``
  (or ``infrastructure-failure``).
* Oracle (same generator on an adjudicated sufficient set under the production
  budget): steps 2-8 with the oracle correct are labelled
  ``retrieval-failure-oracle-success``; steps 2-9 with the oracle failing
  (critical-condition-error, abstained, wrong) ``both-fail``; step 9 with the
  oracle correct ``generator-failure-oracle-success``. An oracle that fails
  while feasible flags ``annotation-check`` (inspect the full-source
  annotation before crediting any boundary remedy); an infeasible oracle flags
  ``budget-infeasible``; an oracle infrastructure failure is flagged
  ``oracle-infrastructure-failure`` and takes part in no label.
* Other flags: ``answer-correct-without-support`` (steps 1-8 with a correct
  answer), ``single-unit-incomplete`` (packed support only jointly).
* Evidence names the missing spans of the sufficient set *closest to being
  kept* at the losing stage: among the sets the previous stage kept, the one
  with the fewest uncovered spans at the losing stage (ties: the first). For
  steps 3-8 it lists every unit of the previous stage that overlaps a missing
  span, with its rank and score there and its rank and score (or ``None``:
  absent) in the losing stage's whole list, plus the stage cutoff.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .fixtures import Fixture, GoldSpan
from .pipeline.units import merge_intervals, uncovered

STEP_NAMES: dict[int, str] = {
    0: "pass",
    1: "gold absent from corpus",
    2: "no unit contains it",
    3: "exact retrievers miss",
    4: "ANN misses",
    5: "union/dedup drops it",
    6: "fusion ranks it low",
    7: "reranker removes it",
    8: "selector omits it",
    9: "answer ignores it",
    10: "citation wrong",
}
STEP_LABELS: dict[int, str] = {
    0: "pass",
    1: "gold-absent-from-corpus",
    2: "no-unit-contains-it",
    3: "exact-retrievers-miss",
    4: "ann-misses",
    5: "union-dedup-drops-it",
    6: "fusion-ranks-it-low",
    7: "reranker-removes-it",
    8: "selector-omits-it",
    9: "answer-ignores-it",
    10: "citation-wrong",
}
#: (step, record flag, stage that flag describes), in cascade order
SUPPORT_WALK: tuple[tuple[int, str, str], ...] = (
    (2, "support_chunked", "chunked"),
    (3, "support_exact", "exact"),
    (4, "support_production", "production"),
    (5, "support_union", "union"),
    (6, "support_fused", "fused"),
    (7, "support_reranked", "reranked"),
    (8, "support_packed", "packed"),
)
STAGE_OF_STEP = {step: stage for step, _, stage in SUPPORT_WALK}
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
_TRANSITIONS: dict[int, tuple[str, tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {
    3: ("chunked", (), ("bm25", "dense_exact"), ("bm25", "dense_exact")),
    4: ("exact", ("dense_exact",), ("dense_ann",), ("bm25", "dense_exact", "dense_ann")),
    5: ("production", ("bm25", "dense_ann"), ("union",), ("bm25", "dense_ann", "union")),
    6: ("union", ("union",), ("fused",), ("union", "fused")),
    7: ("fused", ("fused",), ("reranked",), ("fused", "reranked")),
    8: ("reranked", ("reranked",), ("packed",), ("reranked", "selected", "packed")),
}
PASSING_ANSWERS = frozenset({"correct", "not-judged"})
ORACLE_FAILURES = frozenset({"critical-condition-error", "abstained", "wrong", "false-assertion"})
INFRA = "infrastructure-failure"
QUOTE_CHARS = 120
NO_RANK = 1 << 30  # the rank of a row without one: after every ranked row
ANSWER_CHARS = 200
UNITS_PER_SPAN = 12


@dataclass(frozen=True)
class Diagnosis:
    step: int
    step_name: str
    label: str
    evidence: dict[str, Any] = field(default_factory=dict)
    flags: tuple[str, ...] = ()
    walk: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"step": self.step, "step_name": self.step_name, "label": self.label,
                "evidence": self.evidence, "flags": list(self.flags), "walk": self.walk}


# ---------------------------------------------------------------------------
# the walk (flags only)


def support_loss(record: Mapping[str, Any]) -> tuple[int | None, tuple[int, ...]]:
    """(the step at which support is lost for good or None, steps lost and later regained)."""
    kept = [bool(record.get(col)) for _, col, _ in SUPPORT_WALK]
    steps = [step for step, _, _ in SUPPORT_WALK]
    if kept[-1]:
        return None, tuple(s for s, k in zip(steps, kept, strict=True) if not k)
    last = max((i for i, k in enumerate(kept) if k), default=-1)
    recovered = tuple(s for s, k in zip(steps[: last + 1], kept[: last + 1], strict=True) if not k)
    return steps[last + 1], recovered


def diagnosis_step(record: Mapping[str, Any]) -> int:
    """The record's step from its flags and verdicts alone (cheap; no evidence)."""
    verdict = record.get("answer_verdict")
    if record.get("answerable") is False:
        return 0 if verdict == "abstained" else 9
    if (record.get("gold_status") or "ok") != "ok":
        return 1
    lost, _ = support_loss(record)
    if lost is not None:
        return lost
    if verdict == INFRA or verdict not in PASSING_ANSWERS:
        return 9
    return 10 if _citation_fails(record) else 0


def _citation_fails(record: Mapping[str, Any]) -> bool:
    cv = record.get("citation_verdict")
    if record.get("answer_verdict") == "not-judged":
        return cv in ("unsupported", "unresolvable")
    return cv != "supported"


def _oracle_fields(record: Mapping[str, Any], oracle: Mapping[str, Any] | None) -> tuple[str | None, Any]:
    if oracle is not None:
        return oracle.get("answer_verdict"), oracle.get("feasible")
    return record.get("oracle_verdict"), record.get("oracle_feasible")


# ---------------------------------------------------------------------------
# the diagnosis


def diagnose(record: Mapping[str, Any], stages: Mapping[str, Sequence[Mapping[str, Any]]],
             fixture: Fixture | None, texts: Mapping[str, str],
             oracle: Mapping[str, Any] | None = None) -> Diagnosis:
    """Place one record on the ten-step tree, with evidence (rules in the module docstring).

    ``stages`` maps a candidate stage (``bm25``, ``dense_exact``, ``dense_ann``,
    ``union``, ``fused``, ``reranked``, ``selected``, ``packed``) to the record's
    rows sorted by rank; ``units`` may hold the chunker's units of the gold
    documents (for steps 2 and 3). Rows may be restricted to those overlapping
    gold spans: ranks are read from the rows, never from list positions.
    """
    verdict = record.get("answer_verdict")
    flags: list[str] = []
    walk: list[dict[str, Any]] = []
    oracle_verdict, oracle_feasible = _oracle_fields(record, oracle)
    infra = verdict == INFRA
    if infra:
        flags.append(INFRA)

    if record.get("answerable") is False:
        step, label = _control(record, walk)
        evidence = {"stage": "control", **_answer_json(record)}
        return Diagnosis(step, STEP_NAMES[step], label, evidence, tuple(flags), walk)

    gold_status = record.get("gold_status") or "ok"
    walk.append({"step": 1, "name": STEP_NAMES[1], "passed": gold_status == "ok", "detail": gold_status})
    step: int
    evidence: dict[str, Any]
    if gold_status != "ok":
        step = 1
        evidence = _evidence_gold(record, fixture, texts)
    else:
        lost, recovered = support_loss(record)
        if recovered:
            flags.append("support-recovered")
        for s, _col, stage in SUPPORT_WALK:
            if lost is not None and s > lost:
                break
            if s == lost:
                walk.append({"step": s, "name": STEP_NAMES[s], "passed": False,
                             "detail": f"support lost: {_stage_title(stage)}"})
            elif s in recovered:
                walk.append({"step": s, "name": STEP_NAMES[s], "passed": True,
                             "detail": f"support lost: {_stage_title(stage)}; a later stage regains it"})
            else:
                walk.append({"step": s, "name": STEP_NAMES[s], "passed": True,
                             "detail": f"support kept: {_stage_title(stage)}"})
        if lost is not None:
            step = lost
            evidence = _evidence_support(lost, record, stages, fixture, texts)
            missing = [m["span"] for m in evidence.get("spans", [])]
            if missing:
                walk[-1]["detail"] += f" (missing: {', '.join(missing)})"
        else:
            step, evidence = _after_support(record, stages, fixture, texts, walk, flags)

    if 1 <= step <= 8 and verdict == "correct":
        flags.append("answer-correct-without-support")
    if record.get("support_packed") and record.get("single_unit_complete") is False:
        flags.append("single-unit-incomplete")

    label = STEP_LABELS[step]
    oracle_failed = oracle_verdict in ORACLE_FAILURES
    oracle_ok = oracle_verdict == "correct"
    if step == 9 and infra:
        label = INFRA
    elif 2 <= step <= 8 and oracle_ok:
        label = "retrieval-failure-oracle-success"
    elif 2 <= step <= 9 and oracle_failed:
        label = "both-fail"
    elif step == 9 and oracle_ok:
        label = "generator-failure-oracle-success"
    if oracle_failed and oracle_feasible is not False:
        flags.append("annotation-check")
    if oracle_feasible is False:
        flags.append("budget-infeasible")
    if oracle_verdict == INFRA:
        flags.append("oracle-infrastructure-failure")
    if oracle_verdict is not None:
        evidence["oracle"] = {"verdict": oracle_verdict, "feasible": oracle_feasible}
    return Diagnosis(step, STEP_NAMES[step], label, evidence, tuple(flags), walk)


_STAGE_TITLES = {"chunked": "the chunked units", "exact": "BM25 + exact dense", "production": "BM25 + ANN",
                 "union": "the deduplicated union", "fused": "the fused list cut at rerank depth",
                 "reranked": "the reranked list cut at selection depth", "packed": "the packed context"}


def _stage_title(stage: str) -> str:
    return _STAGE_TITLES.get(stage, stage)


def _control(record: Mapping[str, Any], walk: list[dict[str, Any]]) -> tuple[int, str]:
    verdict = record.get("answer_verdict")
    if verdict == "abstained":
        walk.append({"step": 9, "name": "unanswerable control", "passed": True, "detail": "abstained"})
        return 0, "control-abstained"
    walk.append({"step": 9, "name": "unanswerable control", "passed": False, "detail": str(verdict)})
    return 9, INFRA if verdict == INFRA else "control-false-assertion"


def _after_support(record, stages, fixture, texts, walk, flags) -> tuple[int, dict[str, Any]]:
    verdict = record.get("answer_verdict")
    cv = record.get("citation_verdict")
    if verdict == "not-judged":
        walk.append({"step": 9, "name": STEP_NAMES[9], "passed": None,
                     "detail": "not judged (support-only fixture)"})
    else:
        ok = verdict in PASSING_ANSWERS
        walk.append({"step": 9, "name": STEP_NAMES[9], "passed": ok, "detail": f"answer verdict {verdict}"})
        if not ok:
            return 9, _evidence_answer(record, stages, fixture, texts)
    fails = _citation_fails(record)
    walk.append({"step": 10, "name": STEP_NAMES[10], "passed": not fails, "detail": f"citation verdict {cv}"})
    if fails:
        return 10, _evidence_citation(record, stages, fixture, texts)
    if verdict == "not-judged" and cv != "supported":
        flags.append("citations-not-checked")
    return 0, _evidence_pass(record, stages, fixture, texts)


# ---------------------------------------------------------------------------
# coverage helpers


def _gaps(span: GoldSpan, rows: Sequence[Mapping[str, Any]],
          texts: Mapping[str, str]) -> list[tuple[int, int]]:
    """Parts of the span (holding non-whitespace) that no row's interval covers."""
    doc = span.doc_id
    intervals = [(int(r["start"]), int(r["end"])) for r in rows
                 if r.get("doc_id") == doc and r.get("start") is not None and r.get("end") is not None]
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


def _closest_set(fixture: Fixture, before: Sequence[Mapping[str, Any]] | None,
                 after: Sequence[Mapping[str, Any]] | None,
                 texts: Mapping[str, str]) -> tuple[int, list[tuple[GoldSpan, list[tuple[int, int]] | None]]]:
    """(set index, [(missing span, its uncovered parts at ``after``)]) for the closest set.

    Sets kept by ``before`` come first (None: every set counts as kept), then the
    fewest spans missing at ``after`` (None: nothing known, every span missing).
    """
    best: tuple[tuple[int, int, int], int, list] | None = None
    for i, sset in enumerate(fixture.sufficient_sets):
        spans = _spans_of(fixture, sset)
        if len(spans) < len(sset):  # names an unresolved span: it cannot be kept
            continue
        kept_before = (before is None or len(fixture.sufficient_sets) == 1
                       or all(not _gaps(s, before, texts) for s in spans))
        if after is None:
            missing = [(s, None) for s in spans]
        else:
            missing = [(s, g) for s in spans if (g := _gaps(s, after, texts))]
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


def _span_json(span: GoldSpan, texts: Mapping[str, str], gaps: list[tuple[int, int]] | None = None) -> dict:
    quote = span.quote if span.quote is not None else (texts.get(span.doc_id) or "")[span.start:span.end]
    out: dict[str, Any] = {"span": span.span_id, "doc_id": span.doc_id, "start": span.start, "end": span.end,
                           "dependency": span.dependency, "quote": _trunc(quote, QUOTE_CHARS)}
    if gaps is not None:
        out["uncovered"] = [[int(s), int(e)] for s, e in gaps]
    return out


def _overlaps(row: Mapping[str, Any], span: GoldSpan) -> bool:
    return (row.get("doc_id") == span.doc_id and row.get("start") is not None
            and int(row["start"]) < span.end and int(row["end"]) > span.start)


def _by_unit(rows: Sequence[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    out: dict[str, Mapping[str, Any]] = {}
    for r in rows:
        old = out.get(r["unit_id"])
        if old is None or _rank(r) < _rank(old):
            out[r["unit_id"]] = r
    return out


def _rank(row: Mapping[str, Any]) -> int:
    rank = row.get("rank")
    return int(rank) if rank is not None else NO_RANK


def _score(row: Mapping[str, Any] | None) -> float | None:
    if row is None or row.get("score") is None:
        return None
    return float(row["score"])


def _stage_rows(stage: str, stages: Mapping[str, Sequence[Mapping[str, Any]]],
                record: Mapping[str, Any]) -> list[Mapping[str, Any]] | None:
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
        return rows if cut is None else [r for r in rows if _rank(r) <= int(cut)]
    if all(p is None for p in parts):
        return None
    return [r for p in parts if p for r in p]


# ---------------------------------------------------------------------------
# evidence per step


def _evidence_gold(record, fixture, texts) -> dict[str, Any]:
    ev: dict[str, Any] = {"stage": "corpus", "gold_status": record.get("gold_status")}
    if fixture is not None:
        ev["spans"] = [{**_span_json(s, texts), "doc_in_corpus": s.doc_id in texts} for s in fixture.spans]
    return ev


def _evidence_support(step: int, record, stages, fixture, texts) -> dict[str, Any]:
    stage = STAGE_OF_STEP[step]
    ev: dict[str, Any] = {"stage": stage}
    if step == 2:
        return _evidence_chunked(ev, stages, fixture, texts)
    in_stage, in_lists, out_lists, shown = _TRANSITIONS[step]
    ev["input_stage"] = in_stage
    ev["cutoff"] = _cutoff(step, record, stages)
    if fixture is None:
        ev["note"] = "no fixture for this question"
        return ev
    before = _stage_rows(in_stage, stages, record)
    after = _stage_rows(stage, stages, record)
    set_index, missing = _closest_set(fixture, before, after, texts)
    ev["sufficient_set"] = set_index
    ev["spans"] = [_span_json(s, texts, g) for s, g in missing]
    if before is None:
        ev["units"] = []
        ev["note"] = f"no {in_stage} rows supplied"
        return ev
    index = {name: _by_unit(stages.get(name) or []) for name in shown}
    units = []
    for span, _ in missing:
        hits = list(_by_unit([r for r in before if _overlaps(r, span)]).values())
        hits.sort(key=lambda r: (_best(r["unit_id"], in_lists, index)[0] or NO_RANK, int(r["start"])))
        for r in hits[:UNITS_PER_SPAN]:
            uid = r["unit_id"]
            in_rank, in_score = _best(uid, in_lists, index)
            out_rank, out_score = _best(uid, out_lists, index)
            entry: dict[str, Any] = {
                "unit_id": uid, "span": span.span_id, "doc_id": r["doc_id"],
                "start": int(r["start"]), "end": int(r["end"]),
                "input_rank": in_rank, "input_score": in_score,
                "output_rank": out_rank, "output_score": out_score,
                "ranks": {name: (None if (x := index[name].get(uid)) is None
                                 else {"rank": _rank(x), "score": _score(x)}) for name in shown},
            }
            u = index.get("union", {}).get(uid)
            if u is not None and u.get("lineage") is not None:
                entry["lineage"] = list(u["lineage"])
            if step == 8:
                entry.update(_packing_detail(uid, record))
            units.append(entry)
    ev["units"] = units
    if step == 8:
        ev["budget_tokens"] = record.get("budget_tokens")
        ev["evidence_tokens"] = record.get("evidence_tokens")
        ev["selection_depth"] = record.get("selection_depth")
        # rank in the selection's input; None: the unit came in by neighbour expansion
        rer = _by_unit(_stage_rows("reranked", stages, record) or [])
        ev["packed"] = [{"unit_id": r["unit_id"], "rank": _rank(r),
                         "reranked_rank": None if (x := rer.get(r["unit_id"])) is None else _rank(x)}
                        for r in sorted(stages.get("packed") or [], key=_rank)]
    return ev


def _best(uid: str, lists: Sequence[str], index: Mapping[str, Mapping[str, Mapping[str, Any]]]
          ) -> tuple[int | None, float | None]:
    best: Mapping[str, Any] | None = None
    for name in lists:
        r = index.get(name, {}).get(uid)
        if r is not None and (best is None or _rank(r) < _rank(best)):
            best = r
    return (None, None) if best is None else (_rank(best), _score(best))


def _cutoff(step: int, record, stages) -> Any:
    if step == 6:
        return record.get("rerank_depth")
    if step == 7:
        return record.get("selection_depth")
    if step == 8:
        return record.get("budget_tokens")
    if step in (3, 4):
        top_n = record.get("top_n") or {}
        names = ("bm25", "dense_exact") if step == 3 else ("dense_exact", "dense_ann")
        return {n: top_n.get(n, max((_rank(r) for r in stages.get(n) or []), default=None)) for n in names}
    return None


def _packing_detail(uid: str, record) -> dict[str, Any]:
    overflow = [o for o in _json_list(record.get("overflow_json")) if o.get("unit_id") == uid]
    dropped = [o for o in _json_list(record.get("expansion_dropped_json")) if o.get("unit_id") == uid]
    out: dict[str, Any] = {"overflow": overflow}
    if dropped:
        out["expansion_dropped"] = dropped
    return out


def _json_list(value: Any) -> list[dict]:
    if not value:
        return []
    if isinstance(value, list):
        return value
    try:
        data = json.loads(value)
    except (TypeError, json.JSONDecodeError):
        return []
    return [d for d in data if isinstance(d, dict)] if isinstance(data, list) else []


def _evidence_chunked(ev: dict[str, Any], stages, fixture, texts) -> dict[str, Any]:
    units = stages.get("units")
    if fixture is None:
        ev["note"] = "no fixture for this question"
        return ev
    set_index, missing = _closest_set(fixture, None, units, texts)
    ev["sufficient_set"] = set_index
    ev["spans"] = [_span_json(s, texts, g) for s, g in missing]
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
            rel = ("contains" if s <= span.start and e >= span.end else
                   "inside" if s > span.start and e < span.end else
                   "overlaps-start" if s <= span.start else "overlaps-end")
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


def _unit_around(u, span: GoldSpan, relation: str) -> dict[str, Any]:
    return {"unit_id": u["unit_id"], "span": span.span_id, "doc_id": u["doc_id"], "start": int(u["start"]),
            "end": int(u["end"]), "relation": relation}


def _answer_json(record) -> dict[str, Any]:
    return {"answer": _trunc(record.get("answer"), ANSWER_CHARS), "abstained": record.get("abstained"),
            "answer_verdict": record.get("answer_verdict"), "answer_reason": record.get("answer_reason"),
            "generator_error": record.get("generator_error")}


def _packed_cover(record, stages, fixture, texts, extra_rows=None) -> dict[str, Any]:
    """The packed units that hold the kept set's spans, with their position in the context."""
    packed = sorted(stages.get("packed") or [], key=_rank)
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
        entry = _span_json(span, texts)
        entry["packed_units"] = [{"unit_id": r["unit_id"], "rank": _rank(r)}
                                 for r in packed if _overlaps(r, span)]
        if extra_rows is not None:
            entry["cited"] = not _gaps(span, extra_rows, texts)
        spans.append(entry)
    out["spans"] = spans
    return out


def _evidence_answer(record, stages, fixture, texts) -> dict[str, Any]:
    return {"stage": "answer", **_answer_json(record), **_packed_cover(record, stages, fixture, texts)}


def _evidence_citation(record, stages, fixture, texts) -> dict[str, Any]:
    citations = _json_list(record.get("citations_json"))
    cited_rows = [c for c in citations if c.get("doc_id") is not None and c.get("start") is not None]
    return {"stage": "citations", "citation_verdict": record.get("citation_verdict"),
            "citation_reason": record.get("citation_reason"), "citations": citations,
            "answer": _trunc(record.get("answer"), ANSWER_CHARS),
            **_packed_cover(record, stages, fixture, texts, cited_rows)}


def _evidence_pass(record, stages, fixture, texts) -> dict[str, Any]:
    return {"stage": "pass", "answer_verdict": record.get("answer_verdict"),
            "citation_verdict": record.get("citation_verdict"),
            **_packed_cover(record, stages, fixture, texts)}
