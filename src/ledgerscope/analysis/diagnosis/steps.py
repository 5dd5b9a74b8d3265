"""The ten steps of the diagnosis tree: their names and labels, the support walk (step, record flag,
stage), and what a record's flags alone say about where support was lost (no candidate rows read).
:mod:`.tree` places a record with its evidence on top of these; it re-exports them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

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
PASSING_ANSWERS = frozenset({"correct", "not-judged"})
#: a citation verdict for a record whose pipeline recorded no citations (ingested traces)
NOT_RECORDED = "not-recorded"
#: the label, flag and step name of a verdict that rests on a chunk that could not be placed
UNVERIFIABLE = "unverifiable-unlocated-chunk"
UNVERIFIABLE_NAME = "unverifiable: unlocated chunk"
ORACLE_FAILURES = frozenset({"critical-condition-error", "abstained", "wrong", "false-assertion"})
INFRA = "infrastructure-failure"
#: step 9's name where the answer was not the generator's judgement to blame: a failed request (never
#: judged) and an unanswerable control that answered are not "answer ignores it"
STEP9_NAMES = {
    INFRA: "infrastructure failure (not judged)",
    "control-false-assertion": "control answered (false assertion)",
}


# ---------------------------------------------------------------------------
# the walk (flags only)


def support_loss(record: Mapping[str, Any]) -> tuple[int | None, tuple[int, ...]]:
    """(the step at which support is lost for good or None, steps lost and later regained).

    Only recorded stages count (a NULL flag is a stage not recorded)."""
    walked = [(step, bool(record.get(col))) for step, col, _ in SUPPORT_WALK if record.get(col) is not None]
    steps = [step for step, _ in walked]
    kept = [k for _, k in walked]
    if not walked or kept[-1]:
        return None, tuple(s for s, k in walked if not k)
    last = max((i for i, k in enumerate(kept) if k), default=-1)
    recovered = tuple(s for s, k in zip(steps[: last + 1], kept[: last + 1], strict=True) if not k)
    return steps[last + 1], recovered


def not_recorded(record: Mapping[str, Any]) -> tuple[int, ...]:
    """The support steps whose stage the record does not record (NULL flags of an answerable record)."""
    if record.get("answerable") is False or (record.get("gold_status") or "ok") != "ok":
        return ()
    return tuple(step for step, col, _ in SUPPORT_WALK if record.get(col) is None)


def collapsed(record: Mapping[str, Any], lost: int) -> tuple[int, int] | None:
    """(first, last) steps the loss at ``lost`` may lie in when the stages before it are not recorded."""
    missing = set(not_recorded(record))
    first = lost
    while first - 1 in missing:
        first -= 1
    return (first, lost) if first < lost else None


def unverifiable_steps(record: Mapping[str, Any]) -> tuple[int, ...]:
    """The steps whose stage the record names in ``unverifiable_stages`` (10 for ``cited``)."""
    names = set((record.get("unverifiable_stages") or "").split(","))
    steps = tuple(step for step, _, stage in SUPPORT_WALK if stage in names)
    return (*steps, 10) if "cited" in names else steps


def resting_on_unlocated(record: Mapping[str, Any], step: int) -> tuple[int, ...]:
    """The unverifiable steps a failure at ``step`` rests on: for a support loss, those from it to
    the packed context; for step 10, step 10 itself."""
    steps = unverifiable_steps(record)
    if 2 <= step <= 8:
        return tuple(s for s in steps if step <= s <= 8)
    return (10,) if step == 10 and 10 in steps else ()


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
    return 10 if citation_fails(record) else 0


def citation_fails(record: Mapping[str, Any]) -> bool:
    cv = record.get("citation_verdict")
    if cv == NOT_RECORDED:
        return False
    if record.get("answer_verdict") == "not-judged":
        return cv in ("unsupported", "unresolvable")
    return cv != "supported"
