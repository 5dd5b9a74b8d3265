"""``ledgerscope judge calibrate``: how often an LLM judge agrees with the deterministic one.

For one arm of a ledger, every judged record's answer gets two verdicts:

* the **deterministic** judge's (:func:`ledgerscope.rules.judge.judge_answer`,
  re-derived from the recorded answer and the ledger's own fixtures);
* the **LLM** judge's: the recorded verdict when the arm was swept with
  ``[judge] kind = "endpoint"``; otherwise the endpoint named by the caller
  (``--base-url``, ``--model``) is asked now, with the fixed rubric.

Records left out: support-only questions and answerable ones without an
expected answer (neither judge grades them) and generator infrastructure
failures (no answer to grade). Identical (question, answer, abstention flag)
triples are graded once, so a phase sweep costs one request per distinct answer.

The result holds the confusion matrix (rows: deterministic, columns: LLM),
observed and chance agreement, Cohen's kappa with its Landis-Koch band, and
the LLM replies that carried no label. The deterministic judge is the
reference here, not the truth: disagreement says the two rubrics differ, and
the examples say where.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ledgerscope.analysis.stats.agreement import cohen_kappa, confusion_matrix, kappa_band
from ledgerscope.common.errors import InputError, Problem

if TYPE_CHECKING:
    from ledgerscope.pipeline.judging.judge_llm import EndpointJudge

VERDICT_ORDER = ("correct", "critical-condition-error", "abstained", "wrong", "false-assertion")
_RECORDS_SQL = (
    "SELECT qid, phase, answer, abstained, answer_verdict, answer_reason FROM records "
    "WHERE arm = ? ORDER BY qid, phase"
)


def _llm_judge(
    manifest: dict[str, Any], arm: str, endpoint: dict[str, Any] | None, where: str
) -> tuple[EndpointJudge, bool]:
    """(judge, whether the recorded verdicts are its verdicts)."""
    from ledgerscope.pipeline.judging.judge_llm import EndpointJudge

    table = (manifest["arms"][arm].get("config") or {}).get("judge") or {}
    if endpoint:
        return EndpointJudge.from_table({**table, **endpoint}), False
    if table.get("kind") == "endpoint":
        return EndpointJudge.from_table(table), True
    raise InputError(
        Problem(
            where,
            None,
            "judge",
            f"arm {arm!r} was judged deterministically: name the endpoint of the LLM "
            "judge to calibrate (--base-url, --model)",
        )
    )


def calibrate(
    ledger: str | Path,
    arm: str,
    endpoint: dict[str, Any] | None = None,
    limit: int | None = None,
    examples: int = 5,
) -> dict[str, Any]:
    """Confusion matrix and Cohen's kappa of the LLM judge against the deterministic judge."""
    from ledgerscope.ledger.fixtures import load_ledger_fixtures
    from ledgerscope.ledger.read import connect
    from ledgerscope.ledger.verify import load_manifest
    from ledgerscope.rules.judge import judge_answer, with_inferred_default

    ledger = Path(ledger)
    manifest = load_manifest(ledger)
    where = str(ledger / "manifest.json")
    if arm not in manifest["arms"]:
        raise InputError(Problem(where, None, "arm", f"no arm {arm!r}; arms: {', '.join(manifest['arms'])}"))
    judge, recorded = _llm_judge(manifest, arm, endpoint, where)
    con = connect(ledger)
    fixtures, _texts = load_ledger_fixtures(con, ledger)
    rows = con.execute(_RECORDS_SQL, [arm]).fetchall()
    graded: dict[tuple[Any, ...], tuple[str, str]] = {}
    pairs: list[tuple[str, str]] = []
    disagreements: list[dict[str, Any]] = []
    skipped = 0
    for qid, phase, answer, abstained, verdict, reason in rows:
        fx = fixtures.get(qid)
        generator_failed = verdict == "infrastructure-failure" and not (reason or "").startswith("llm judge")
        if fx is None or generator_failed:
            skipped += 1
            continue
        fx = with_inferred_default(fx)
        reference = judge_answer(answer, bool(abstained), fx).verdict
        if reference == "not-judged":
            skipped += 1
            continue
        if recorded:
            llm, why = verdict, reason
        else:
            key = (qid, answer, bool(abstained))
            if key not in graded:
                if limit is not None and len(graded) >= limit:
                    continue
                j = judge.judge(answer, bool(abstained), fx)
                graded[key] = (j.verdict, j.reason)
            llm, why = graded[key]
        pairs.append((reference, llm))
        if reference != llm and len(disagreements) < examples:
            disagreements.append(
                {
                    "qid": qid,
                    "phase": phase,
                    "answer": answer,
                    "deterministic": reference,
                    "llm": llm,
                    "llm_reason": why,
                }
            )
    return _summary(arm, judge.describe(), recorded, len(rows), pairs, skipped, len(graded), disagreements)


def _summary(
    arm: str,
    judge: dict[str, Any],
    recorded: bool,
    records: int,
    pairs: list[tuple[str, str]],
    skipped: int,
    graded: int,
    disagreements: list[dict[str, Any]],
) -> dict[str, Any]:
    """What ``judge calibrate`` reports: the confusion matrix, kappa and its band, the examples."""
    labels, matrix = confusion_matrix(pairs, VERDICT_ORDER)
    stats = cohen_kappa(pairs)
    return {
        "arm": arm,
        "judge": judge,
        "llm_verdicts": "recorded in the ledger" if recorded else "asked now",
        "records": records,
        "compared": len(pairs),
        "skipped": skipped,
        "distinct_answers_graded": graded,
        "labels": labels,
        "matrix": matrix,
        "rows": "deterministic judge",
        "columns": "LLM judge",
        **{k: stats[k] for k in ("observed", "expected", "kappa")},
        "band": kappa_band(stats["kappa"]),
        "unlabelled": sum(1 for _, llm in pairs if llm not in VERDICT_ORDER),
        "disagreements": disagreements,
        "note": "kappa against the deterministic judge (the reference, not the truth); below 0.6 the "
        "LLM judge's verdicts should not replace the deterministic ones",
    }
