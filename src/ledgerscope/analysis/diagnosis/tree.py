"""The ten-step diagnosis (seed 001, section 15): where did each record lose its support?

:func:`diagnose` is a pure function of one record, that record's candidate
lists, its fixture and the source texts: the definition. This module decides
the step, label, flags and walk; :mod:`ledgerscope.analysis.diagnosis.evidence` builds
the evidence for the step (the last rule below).
:func:`ledgerscope.analysis.diagnosis.feed.diagnose_ledger` feeds it a whole ledger;
:mod:`ledgerscope.analysis.diagnosis.sql` computes the same rows in DuckDB for the
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
  ``infrastructure-failure`` and the name "infrastructure failure (not
  judged)" (never a generator or oracle judgement, never "answer ignores it").
* Unanswerable controls are not walked on support: ``abstained`` is step 0
  ``control-abstained``; anything else is step 9 ``control-false-assertion``
  named "control answered (false assertion)" (or ``infrastructure-failure``).
* Oracle (same generator on an adjudicated sufficient set under the production
  budget): steps 2-8 with the oracle correct are labelled
  ``retrieval-failure-oracle-success``; steps 2-9 with the oracle failing
  (critical-condition-error, abstained, wrong) ``both-fail``; step 9 with the
  oracle correct ``generator-failure-oracle-success``. An oracle that fails
  while feasible flags ``annotation-check`` (inspect the full-source
  annotation before crediting any boundary remedy); an infeasible oracle flags
  ``budget-infeasible``; an oracle infrastructure failure is flagged
  ``oracle-infrastructure-failure`` and takes part in no label.
* Answer side unverified (:mod:`ledgerscope.analysis.validity`): where the record's arm's oracle is
  correct on fewer answerable questions than the threshold (``answer_unverified`` on the record),
  an answerable record whose oracle failed keeps its step 1-8 (and its step number), but its steps
  9 and 10 and its oracle label are not verdicts: it is flagged ``answer-side-unverified`` (in place
  of ``annotation-check``), labelled so at steps 2-10, and its walk's step 9 and 10 entries say so
  (``answer_side``). An unanswerable control that abstained in such an arm is flagged likewise (an
  abstention proves nothing from a generator that abstains on full support); a false assertion
  stays one.
* Other flags: ``answer-correct-without-support`` (steps 1-8 with a correct
  answer), ``single-unit-incomplete`` (packed support only jointly).
* Stages not recorded (ingested traces): an answerable record's ``support_*``
  flag that is NULL names a stage the pipeline did not record. The walk lists
  it as not recorded (``passed`` None) and never guesses: support is lost at
  the first *recorded* stage after the last recorded one that keeps it, and
  when unrecorded stages lie between them the steps collapse into that
  transition (step: the recorded stage's; name ``support lost in steps a-b``,
  label ``lost-in-steps-a-b``). A citation verdict ``not-recorded`` (the trace
  holds no citations) is step 10 not recorded, flagged ``citations-not-recorded``.
  Such records are flagged ``stages-not-recorded`` and their evidence lists
  ``stages_recorded`` and ``stages_not_recorded``.
* Unplaced chunks (ingested traces): ``unverifiable_stages`` names the stages whose list holds a
  chunk of a gold document that could not be placed while the stage keeps no support (``cited``:
  a cited chunk could not be placed). Support may lie in such a chunk, so a loss at step ``s`` is
  *unverifiable* when a stage from ``s`` to the packed context is so named (any of them could
  hold it), and a failing step 10 when ``cited`` is: the step stays, the name is ``unverifiable:
  unlocated chunk`` (label and flag ``unverifiable-unlocated-chunk``) and the walk marks the stage
  unknown (``passed`` None) or names the later stages; never a silent loss or pass. A stage that
  keeps support never rests on an unplaced chunk.
* A support set explained (steps 2-8): the evidence's ``span_fates`` give every span
  of the set it names with its document (title, else id) and its own fate: kept to
  which stage, lost at which step (:mod:`ledgerscope.analysis.diagnosis.span_fates`);
  the record's step is the set's first loss, the others are listed beside it.
* Evidence names the missing spans of the sufficient set *closest to being
  kept* at the losing stage: among the sets the previous stage kept, the one
  with the fewest uncovered spans at the losing stage (ties: the first). For
  steps 3-8 it lists every unit of the previous stage that overlaps a missing
  span, with its rank and score there and its rank and score (or ``None``:
  absent) in the losing stage's whole list, plus the stage cutoff.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ledgerscope.analysis.diagnosis.evidence import (
    answer_json,
    evidence_answer,
    evidence_citation,
    evidence_gold,
    evidence_pass,
    evidence_support,
)
from ledgerscope.analysis.diagnosis.span_fates import span_fates
from ledgerscope.analysis.diagnosis.steps import (
    INFRA,
    NOT_RECORDED,
    ORACLE_FAILURES,
    PASSING_ANSWERS,
    STAGE_OF_STEP,
    STEP9_NAMES,
    STEP_LABELS,
    STEP_NAMES,
    SUPPORT_WALK,
    UNVERIFIABLE,
    UNVERIFIABLE_NAME,
    citation_fails,
    collapsed,
    diagnosis_step,
    not_recorded,
    resting_on_unlocated,
    support_loss,
    unverifiable_steps,
)
from ledgerscope.analysis.validity import UNVERIFIED

if TYPE_CHECKING:  # annotations only: the heads of a ledger's open need no fixture code
    from ledgerscope.inputs.fixtures import Fixture

#: what other modules read from here (the steps and the walk are defined in :mod:`.steps`)
__all__ = [
    "INFRA",
    "NOT_RECORDED",
    "ORACLE_FAILURES",
    "PASSING_ANSWERS",
    "STAGE_OF_STEP",
    "STEP9_NAMES",
    "STEP_LABELS",
    "STEP_NAMES",
    "SUPPORT_WALK",
    "UNVERIFIABLE",
    "UNVERIFIABLE_NAME",
    "Diagnosis",
    "collapsed",
    "diagnose",
    "diagnosis_step",
    "not_recorded",
    "recorded_stages",
    "resting_on_unlocated",
    "support_loss",
    "unverifiable_steps",
]


@dataclass(frozen=True)
class Diagnosis:
    step: int
    step_name: str
    label: str
    evidence: dict[str, Any] = field(default_factory=dict)
    flags: tuple[str, ...] = ()
    walk: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "step_name": self.step_name,
            "label": self.label,
            "evidence": self.evidence,
            "flags": list(self.flags),
            "walk": self.walk,
        }


def _oracle_fields(record: Mapping[str, Any], oracle: Mapping[str, Any] | None) -> tuple[str | None, Any]:
    if oracle is not None:
        return oracle.get("answer_verdict"), oracle.get("feasible")
    return record.get("oracle_verdict"), record.get("oracle_feasible")


# ---------------------------------------------------------------------------
# the diagnosis


def diagnose(
    record: Mapping[str, Any],
    stages: Mapping[str, Sequence[Mapping[str, Any]]],
    fixture: Fixture | None,
    texts: Mapping[str, str],
    oracle: Mapping[str, Any] | None = None,
) -> Diagnosis:
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
        return _control_diagnosis(record, walk, flags)

    gold_status = record.get("gold_status") or "ok"
    walk.append({"step": 1, "name": STEP_NAMES[1], "passed": gold_status == "ok", "detail": gold_status})
    if gold_status != "ok":
        step = 1
        evidence = evidence_gold(record, fixture, texts)
    else:
        step, evidence = _supported_step(record, stages, fixture, texts, walk, flags)

    if 1 <= step <= 8 and verdict == "correct":
        flags.append("answer-correct-without-support")
    if record.get("support_packed") and record.get("single_unit_complete") is False:
        flags.append("single-unit-incomplete")

    label, step_name = _step_label(record, step)
    if gold_status == "ok":
        _name_unrecorded(record, evidence, flags)
    label = _oracle_label(label, step, infra, oracle_verdict)
    step_name = STEP9_NAMES.get(label, step_name) if step == 9 else step_name
    if gold_status == "ok" and resting_on_unlocated(record, step):
        label, step_name = UNVERIFIABLE, UNVERIFIABLE_NAME
        flags.append(UNVERIFIABLE)
    flags.extend(_oracle_flags(oracle_verdict, oracle_feasible))
    if oracle_verdict is not None:
        evidence["oracle"] = {"verdict": oracle_verdict, "feasible": oracle_feasible}
    if record.get("answer_unverified") and oracle_verdict in ORACLE_FAILURES and gold_status == "ok":
        if "annotation-check" in flags:
            flags.remove("annotation-check")
        _mark_unverified(walk, flags)
        if step >= 2:
            label = UNVERIFIED
    return Diagnosis(step, step_name, label, evidence, tuple(flags), walk)


def _control_diagnosis(record: Mapping[str, Any], walk: list[dict[str, Any]], flags: list[str]) -> Diagnosis:
    """An unanswerable control's place, by its answer alone (it has no support to lose)."""
    step, label = _control(record, walk)
    evidence = {"stage": "control", **answer_json(record)}
    if record.get("answer_unverified") and record.get("answer_verdict") == "abstained":
        _mark_unverified(walk, flags)
    return Diagnosis(step, STEP9_NAMES.get(label, STEP_NAMES[step]), label, evidence, tuple(flags), walk)


def _step_label(record: Mapping[str, Any], step: int) -> tuple[str, str]:
    """The step's label and name; a loss spread over several support steps is named as that span."""
    label, step_name = STEP_LABELS[step], STEP_NAMES[step]
    if 2 <= step <= 8 and (span := collapsed(record, step)) is not None:
        label, step_name = f"lost-in-steps-{span[0]}-{span[1]}", f"support lost in steps {span[0]}-{span[1]}"
    return label, step_name


def _mark_unverified(walk: list[dict[str, Any]], flags: list[str]) -> None:
    """Flag the record and mark its walk's answer-side entries (steps 9 and 10): not verdicts here."""
    flags.append(UNVERIFIED)
    for entry in walk:
        if entry["step"] in (9, 10):
            entry["answer_side"] = "unverified"
            entry["detail"] += "; answer side unverified (the generator fails with full support)"


def _supported_step(
    record: Mapping[str, Any],
    stages: Mapping[str, Sequence[Mapping[str, Any]]],
    fixture: Fixture | None,
    texts: Mapping[str, str],
    walk: list[dict[str, Any]],
    flags: list[str],
) -> tuple[int, dict[str, Any]]:
    """Steps 2-10 once the gold is sound: walk the support stages up to the first loss (steps 2-8,
    with its evidence) or, with support kept throughout, on to the answer (``_after_support``)."""
    lost, recovered = support_loss(record)
    if recovered:
        flags.append("support-recovered")
    _walk_support(record, lost, recovered, walk)
    if lost is None:
        return _after_support(record, stages, fixture, texts, walk, flags)
    if (span := collapsed(record, lost)) is not None:
        unrecorded = f"step {span[0]}" if span[0] == span[1] - 1 else f"steps {span[0]}-{span[1] - 1}"
        walk[-1]["detail"] += (
            f"; {unrecorded} not recorded, so the loss lies somewhere in steps {span[0]}-{span[1]}"
        )
    evidence = evidence_support(lost, STAGE_OF_STEP[lost], record, stages, fixture, texts)
    if fixture is not None:  # the set as a set: every span's own fate, its document named
        evidence["span_fates"] = span_fates(record, stages, fixture, texts, evidence["sufficient_set"])
    missing = [m["span"] for m in evidence.get("spans", [])]
    if missing:
        walk[-1]["detail"] += f" (missing: {', '.join(missing)})"
    return lost, evidence


def _walk_support(
    record: Mapping[str, Any], lost: int | None, recovered: tuple[int, ...], walk: list[dict[str, Any]]
) -> None:
    """One walk entry per support step up to the loss: not recorded (unknown, not passed), lost,
    lost then regained later, or kept; so the reader sees where the tree looked."""
    unrecorded = not_recorded(record)
    for s, _col, stage in SUPPORT_WALK:
        if lost is not None and s > lost:
            break
        if s in unrecorded:
            walk.append(
                {
                    "step": s,
                    "name": STEP_NAMES[s],
                    "passed": None,
                    "detail": f"not recorded: {_stage_title(stage)} (the pipeline did not record it)",
                }
            )
        elif s == lost:
            walk.append(_loss_entry(record, s, stage))
        elif s in recovered:
            walk.append(
                {
                    "step": s,
                    "name": STEP_NAMES[s],
                    "passed": True,
                    "detail": f"support lost: {_stage_title(stage)}; a later stage regains it",
                }
            )
        else:
            walk.append(
                {
                    "step": s,
                    "name": STEP_NAMES[s],
                    "passed": True,
                    "detail": f"support kept: {_stage_title(stage)}",
                }
            )


def _loss_entry(record: Mapping[str, Any], step: int, stage: str) -> dict[str, Any]:
    """The walk's entry for the step where support is lost, or unknown when it rests on a chunk
    that could not be placed (at this stage, or at a later one that could regain it)."""
    resting = resting_on_unlocated(record, step)
    if step in resting:
        return {
            "step": step,
            "name": STEP_NAMES[step],
            "passed": None,
            "detail": f"{UNVERIFIABLE_NAME}: {_stage_title(stage)}: support not covered without a "
            "chunk of a gold document that could not be placed",
        }
    detail = f"support lost: {_stage_title(stage)}"
    if resting:
        detail += (
            f"; {UNVERIFIABLE_NAME}: step(s) {', '.join(map(str, resting))} hold a chunk of a gold "
            "document that could not be placed, which may regain it"
        )
    return {"step": step, "name": STEP_NAMES[step], "passed": False, "detail": detail}


def _oracle_label(label: str, step: int, infra: bool, oracle_verdict: Any) -> str:
    """The label once the oracle arm is known: an oracle success or failure beside a retrieval or
    generator failure says which side to blame; an infrastructure failure at step 9 says neither."""
    oracle_failed = oracle_verdict in ORACLE_FAILURES
    oracle_ok = oracle_verdict == "correct"
    if step == 9 and infra:
        return INFRA
    if 2 <= step <= 8 and oracle_ok:
        return "retrieval-failure-oracle-success"
    if 2 <= step <= 9 and oracle_failed:
        return "both-fail"
    if step == 9 and oracle_ok:
        return "generator-failure-oracle-success"
    return label


def _oracle_flags(oracle_verdict: Any, oracle_feasible: Any) -> list[str]:
    """Flags from the oracle arm: a feasible oracle that still fails points at the annotation."""
    flags = []
    if oracle_verdict in ORACLE_FAILURES and oracle_feasible is not False:
        flags.append("annotation-check")
    if oracle_feasible is False:
        flags.append("budget-infeasible")
    if oracle_verdict == INFRA:
        flags.append("oracle-infrastructure-failure")
    return flags


def recorded_stages(record: Mapping[str, Any]) -> tuple[list[str], list[str]] | None:
    """(stages recorded, stages not recorded) of a record that does not record them all, else None."""
    missing = set(not_recorded(record))
    citations = record.get("citation_verdict") == NOT_RECORDED
    if not missing and not citations:
        return None
    have = [stage for step, _, stage in SUPPORT_WALK if step not in missing]
    lack = [stage for step, _, stage in SUPPORT_WALK if step in missing]
    return (have, [*lack, "citations"]) if citations else ([*have, "citations"], lack)


def _name_unrecorded(record: Mapping[str, Any], evidence: dict[str, Any], flags: list[str]) -> None:
    """The ``stages-not-recorded`` flag and the evidence's two lists, where a stage is not recorded."""
    stages = recorded_stages(record)
    if stages is None:
        return
    flags.append("stages-not-recorded")
    evidence["stages_recorded"], evidence["stages_not_recorded"] = stages


_STAGE_TITLES = {
    "chunked": "the chunked units",
    "exact": "BM25 + exact dense",
    "production": "BM25 + ANN",
    "union": "the deduplicated union",
    "fused": "the fused list cut at rerank depth",
    "reranked": "the reranked list cut at selection depth",
    "packed": "the packed context",
}


def _stage_title(stage: str) -> str:
    return _STAGE_TITLES.get(stage, stage)


def _control(record: Mapping[str, Any], walk: list[dict[str, Any]]) -> tuple[int, str]:
    verdict = record.get("answer_verdict")
    if verdict == "abstained":
        walk.append({"step": 9, "name": "unanswerable control", "passed": True, "detail": "abstained"})
        return 0, "control-abstained"
    walk.append({"step": 9, "name": "unanswerable control", "passed": False, "detail": str(verdict)})
    return 9, INFRA if verdict == INFRA else "control-false-assertion"


def _after_support(
    record: Mapping[str, Any],
    stages: Mapping[str, Sequence[Mapping[str, Any]]],
    fixture: Fixture | None,
    texts: Mapping[str, str],
    walk: list[dict[str, Any]],
    flags: list[str],
) -> tuple[int, dict[str, Any]]:
    verdict = record.get("answer_verdict")
    cv = record.get("citation_verdict")
    if verdict == "not-judged":
        walk.append(
            {"step": 9, "name": STEP_NAMES[9], "passed": None, "detail": "not judged (support-only fixture)"}
        )
    else:
        ok = verdict in PASSING_ANSWERS
        walk.append({"step": 9, "name": STEP_NAMES[9], "passed": ok, "detail": f"answer verdict {verdict}"})
        if not ok:
            return 9, evidence_answer(record, stages, fixture, texts)
    if cv == NOT_RECORDED:
        walk.append(
            {
                "step": 10,
                "name": STEP_NAMES[10],
                "passed": None,
                "detail": "not recorded: the pipeline recorded no citations",
            }
        )
        flags.append("citations-not-recorded")
        return 0, evidence_pass(record, stages, fixture, texts)
    fails = citation_fails(record)
    if fails and resting_on_unlocated(record, 10):
        walk.append(
            {
                "step": 10,
                "name": STEP_NAMES[10],
                "passed": None,
                "detail": f"{UNVERIFIABLE_NAME}: citation verdict {cv}, and a cited chunk could not "
                "be placed",
            }
        )
        return 10, evidence_citation(record, stages, fixture, texts)
    walk.append({"step": 10, "name": STEP_NAMES[10], "passed": not fails, "detail": f"citation verdict {cv}"})
    if fails:
        return 10, evidence_citation(record, stages, fixture, texts)
    if verdict == "not-judged" and cv != "supported":
        flags.append("citations-not-checked")
    return 0, evidence_pass(record, stages, fixture, texts)
