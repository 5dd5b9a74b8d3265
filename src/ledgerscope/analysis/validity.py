"""What the answer side's verdicts are worth here: the oracle's validity meter.

The oracle runs the arm's own generator on an adjudicated sufficient set: full support. Where it is
not correct, the generator cannot answer what it was given, so a step-9 or step-10 verdict, an
oracle label (``both-fail``, ``generator-failure-oracle-success``) or a release rule's answer-side
check says nothing about retrieval or chunking. The meter counts, per arm (and per stress set and
segment), the oracle's outcome on every answerable, answer-judged question:

* ``correct``; ``abstained``; ``yes_no`` (abstained because an extractive reader cannot decide a
  yes/no or comparison question: the generator says so, ``reason: yes-no question``; counted apart,
  not wrong); ``wrong`` (wrong, critical-condition error, false assertion); ``infeasible`` (the
  sufficient set does not fit the budget, whatever the verdict); ``infrastructure`` (it failed to
  run).

``rate`` is correct over answerable. Below the threshold (the release rule's ``min_oracle_correct``,
default :data:`DEFAULT_MIN_ORACLE_CORRECT`) the arm's answer side is *unverified* for this generator
on this data: the diagnosis flags and relabels the answer side of every record whose oracle failed
(:mod:`ledgerscope.analysis.diagnosis.tree`) and :func:`gate_checks` turns the release decision's
answer-side checks inconclusive. Support-only questions (no answer contract) and unanswerable
controls are not counted: the oracle has no answer to get right there.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from duckdb import DuckDBPyConnection

#: the share of answerable questions the oracle must answer correctly for the answer side to count
DEFAULT_MIN_ORACLE_CORRECT = 0.8
#: the reason a generator records when it abstains on a yes/no or comparison question
YES_NO_REASON = "yes-no question"
#: the flag and label of a record whose answer side is unverified
UNVERIFIED = "answer-side-unverified"
OUTCOMES = ("correct", "abstained", "yes_no", "wrong", "infeasible", "infrastructure")
#: release-rule tolerances that judge the generator's answers (never passed on an unverified side)
ANSWER_SIDE_TOLERANCES = ("max_answer_loss", "max_critical_errors_per_segment")
#: the in-memory table :func:`register_answer_side` writes: (arm, unverified)
TABLE = "answer_side_arms"

#: one row per (arm, question): its answerability, oracle verdict, feasibility and reason (the oracle
#: table's, else the records' own oracle columns, as ingested ledgers have); ``{extra}``: more columns
_QUESTION_SQL = """
SELECT r.arm, r.qid,{extra}
       bool_or(coalesce(r.answerable, true)) AS answerable,
       coalesce(any_value(o.answer_verdict), any_value(r.oracle_verdict)) AS verdict,
       CASE WHEN any_value(o.arm) IS NOT NULL THEN any_value(o.feasible)
            ELSE any_value(r.oracle_feasible) END AS feasible,
       any_value(o.answer_reason) AS reason
FROM records r LEFT JOIN oracle o ON o.arm = r.arm AND o.qid = r.qid
{where} GROUP BY r.arm, r.qid"""
#: the meter's rows: each question's with its segment and stress set, in (arm, qid) order
_ROWS_SQL = (
    _QUESTION_SQL.replace(
        "{extra}", " any_value(r.stress_set) AS stress_set, any_value(r.segment) AS segment,"
    )
    + " ORDER BY r.arm, r.qid"
)
#: the arms' statuses' input: how many questions share each (arm, answerability, verdict, feasibility,
#: reason); the segment and stress set, which only the meter's blocks need, are not read
_COUNTS_SQL = (
    "SELECT arm, answerable, verdict, feasible, reason, count(*) AS n FROM ("
    + _QUESTION_SQL.replace("{extra}", "")
    + ") GROUP BY ALL"
)


def oracle_outcome(verdict: str | None, feasible: bool | None, reason: str | None) -> str | None:
    """The meter's category for one oracle row, or None when it does not count (no answer contract)."""
    if verdict in (None, "", "not-applicable", "not-judged"):
        return None
    if feasible is False:
        return "infeasible"
    if verdict == "correct":
        return "correct"
    if verdict == "abstained":
        return "yes_no" if reason and YES_NO_REASON in reason else "abstained"
    if verdict == "infrastructure-failure":
        return "infrastructure"
    return "wrong"


def status(block: Mapping[str, Any], threshold: float) -> str:
    """``verified``, ``unverified`` or ``not-measured`` (no answerable, answer-judged question)."""
    if not block.get("answerable"):
        return "not-measured"
    return "verified" if block["correct"] / block["answerable"] >= threshold else "unverified"


def _block(outcomes: Sequence[str], threshold: float) -> dict[str, Any]:
    out: dict[str, Any] = {k: outcomes.count(k) for k in OUTCOMES}
    out["answerable"] = len(outcomes)
    out["failed_with_full_support"] = out["abstained"] + out["yes_no"] + out["wrong"]
    out["rate"] = round(out["correct"] / len(outcomes), 6) if outcomes else None
    out["status"] = status(out, threshold)
    return out


def meter(rows: Iterable[Mapping[str, Any]], threshold: float = DEFAULT_MIN_ORACLE_CORRECT) -> dict[str, Any]:
    """Per arm: the counts over all its answerable questions, per segment, and per stress set (each with
    its segments). ``rows``: one per (arm, question) with ``arm``, ``answerable``, ``verdict``,
    ``feasible``, ``reason``, ``segment``, ``stress_set``. JSON-serialisable."""
    by_arm: dict[str, list[tuple[str, str, str]]] = {}
    for r in rows:
        by_arm.setdefault(r["arm"], [])
        outcome = oracle_outcome(r.get("verdict"), r.get("feasible"), r.get("reason"))
        if r.get("answerable") is False or outcome is None:
            continue
        by_arm[r["arm"]].append((outcome, str(r.get("stress_set") or ""), str(r.get("segment") or "")))
    arms = {}
    for arm, items in by_arm.items():
        entry = _block([o for o, _, _ in items], threshold)
        entry["segments"] = _split(items, 2, threshold)
        entry["stress_sets"] = {}
        for s in sorted({x[1] for x in items}):
            inside = [x for x in items if x[1] == s]
            entry["stress_sets"][s] = {
                **_block([o for o, _, _ in inside], threshold),
                "segments": _split(inside, 2, threshold),
            }
        arms[arm] = entry
    return {"threshold": threshold, "arms": arms}


def _split(items: list[tuple[str, str, str]], index: int, threshold: float) -> dict[str, dict[str, Any]]:
    return {
        key: _block([x[0] for x in items if x[index] == key], threshold)
        for key in sorted({x[index] for x in items})
    }


def oracle_rows(con: DuckDBPyConnection, arms: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """The meter's input from a connection made by :func:`ledgerscope.ledger.read.connect`."""
    return _fetch(con, _ROWS_SQL, arms)


def _fetch(con: DuckDBPyConnection, template: str, arms: Sequence[str] | None) -> list[dict[str, Any]]:
    """``template`` (``_ROWS_SQL`` or ``_COUNTS_SQL``) run over the records of ``arms`` (all: None),
    against a null oracle where the connection has no ``oracle`` view."""
    where, params = ("", [])
    if arms:
        where, params = f"WHERE r.arm IN ({', '.join('?' for _ in arms)})", list(arms)
    sql = (
        template
        if _has_oracle(con)
        else template.replace(
            "LEFT JOIN oracle o ON o.arm = r.arm AND o.qid = r.qid",
            "LEFT JOIN (SELECT NULL::VARCHAR AS arm, NULL::VARCHAR AS answer_verdict, "
            "NULL::BOOLEAN AS feasible, "
            "NULL::VARCHAR AS answer_reason) o ON false",
        )
    )
    cur = con.execute(sql.format(where=where), params)
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def _has_oracle(con: DuckDBPyConnection) -> bool:
    """Whether the connection has an ``oracle`` table or view (records made up in memory may not)."""
    return bool(
        con.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = 'oracle'").fetchall()[
            0
        ][0]
    )


def ledger_meter(
    con: DuckDBPyConnection, arms: Sequence[str] | None = None, threshold: float = DEFAULT_MIN_ORACLE_CORRECT
) -> dict[str, Any]:
    """:func:`meter` of a ledger's arms (all of them by default)."""
    return meter(oracle_rows(con, arms), threshold)


def arm_statuses(con: DuckDBPyConnection, threshold: float = DEFAULT_MIN_ORACLE_CORRECT) -> dict[str, str]:
    """Each arm's ``status`` in :func:`ledger_meter` (``verified``, ``unverified``, ``not-measured``),
    from counts of alike questions: what the diagnosis needs, without the meter's per-question rows
    (a ledger's open reads it before its first screen)."""
    counted: dict[str, list[int]] = {}  # arm -> [correct, counted]
    for r in _fetch(con, _COUNTS_SQL, None):
        tally = counted.setdefault(r["arm"], [0, 0])
        outcome = oracle_outcome(r["verdict"], r["feasible"], r["reason"])
        if r["answerable"] is False or outcome is None:
            continue
        tally[0] += r["n"] if outcome == "correct" else 0
        tally[1] += r["n"]
    return {arm: status({"correct": c, "answerable": n}, threshold) for arm, (c, n) in counted.items()}


def unverified_arms(con: DuckDBPyConnection, threshold: float = DEFAULT_MIN_ORACLE_CORRECT) -> frozenset[str]:
    """The arms of a ledger whose answer side is unverified (what the diagnosis flags by)."""
    return frozenset(a for a, st in arm_statuses(con, threshold).items() if st == "unverified")


def register_answer_side(con: DuckDBPyConnection, threshold: float = DEFAULT_MIN_ORACLE_CORRECT) -> str:
    """Write :data:`TABLE` (arm, unverified) on the connection, for the SQL diagnosis; return its name.

    An in-memory table, not TEMP, so the connection's cursors see it (as the heads table)."""
    arms = arm_statuses(con, threshold)
    con.execute(f"CREATE OR REPLACE TABLE {TABLE} (arm VARCHAR, unverified BOOLEAN)")
    if arms:
        rows = [[a, st == "unverified"] for a, st in arms.items()]
        con.executemany(f"INSERT INTO {TABLE} VALUES (?, ?)", rows)
    return TABLE


# ---------------------------------------------------------------------------
# words


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.0%}"


def counts_text(block: Mapping[str, Any]) -> str:
    """``41/46 correct (89%); 1 abstained, 0 yes/no, 4 wrong, 0 infeasible``."""
    extra = f", {block['infrastructure']} infrastructure" if block.get("infrastructure") else ""
    return (
        f"{block['correct']}/{block['answerable']} correct ({_pct(block.get('rate'))}); "
        f"{block['abstained']} abstained, {block['yes_no']} yes/no, {block['wrong']} wrong, "
        f"{block['infeasible']} infeasible{extra}"
    )


def verdict_text(arm: str, block: Mapping[str, Any], threshold: float) -> str:
    """One plain sentence on what the arm's answer-side verdicts are worth."""
    st = status(block, threshold)
    if st == "not-measured":
        return (
            f"arm {arm}: oracle not measured (no answerable, answer-judged question): "
            "the answer side is not checked"
        )
    head = f"arm {arm}: oracle {counts_text(block)}"
    if st == "verified":
        return f"{head}; answer side verified (threshold {_pct(threshold)})"
    return (
        f"{head}; ANSWER SIDE UNVERIFIED for this generator on this data (below {_pct(threshold)}): "
        f"the generator fails with full support on {inconclusive_count(block)}; steps 9-10 and "
        f"oracle labels of records whose oracle failed are marked {UNVERIFIED}"
    )


def inconclusive_count(block: Mapping[str, Any]) -> str:
    """``N of M questions``: the oracle's failures with full support over the answerable questions."""
    return f"{block['failed_with_full_support']} of {block['answerable']} questions"


# ---------------------------------------------------------------------------
# the release decision


def gate_checks(
    checks: list[Any], validity: Mapping[str, Any] | None, arms: Sequence[str], threshold: float
) -> list[Any]:
    """The decision's checks with every answer-side one (:data:`ANSWER_SIDE_TOLERANCES`) turned
    *inconclusive* where an arm's answer side is unverified in the check's stress set: it never passes
    (nor violates) on a generator that fails with full support."""
    if not validity:
        return checks
    out = []
    for c in checks:
        if c.tolerance.split(".")[0] not in ANSWER_SIDE_TOLERANCES:
            out.append(c)
            continue
        failing = []
        for arm in arms:
            entry = (validity.get("arms") or {}).get(arm)
            if entry is None:
                continue
            block = (entry.get("stress_sets") or {}).get(c.stress_set, entry)
            if status(block, threshold) == "unverified":
                failing.append(f"arm {arm}: generator fails with full support on {inconclusive_count(block)}")
        if not failing:
            out.append(c)
            continue
        reason = (
            f"{c.stress_set}: {c.tolerance}: inconclusive: answer side unverified "
            f"({'; '.join(failing)}; the oracle is correct on less than {_pct(threshold)}); "
            f"as measured: {c.reason}"
        )
        out.append(replace(c, status="inconclusive", reason=reason))
    return out


def validity_lines(validity: Mapping[str, Any] | None) -> list[str]:
    """The meter as plain lines: per arm its sentence, then per stress set and segment its counts."""
    if not validity:
        return []
    threshold = validity.get("threshold", DEFAULT_MIN_ORACLE_CORRECT)
    lines = [
        f"answer side (oracle: the arm's generator on an adjudicated sufficient set; threshold "
        f"{_pct(threshold)} of answerable questions correct)"
    ]
    for arm, entry in (validity.get("arms") or {}).items():
        lines.append("  " + verdict_text(arm, entry, threshold))
        for s, block in (entry.get("stress_sets") or {}).items():
            lines.append(f"    stress set {s}: {counts_text(block)}: {status(block, threshold)}")
            for g, seg in (block.get("segments") or {}).items():
                lines.append(f"      segment {g}: {counts_text(seg)}: {status(seg, threshold)}")
    return lines
