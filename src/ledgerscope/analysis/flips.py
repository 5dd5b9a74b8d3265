"""Questions whose answer flipped from correct (baseline) to wrong (candidate), phase by phase, with
the diagnosis step of the candidate's record and the chunk boundary at its gold spans.

What a release gate lists one by one (a JUnit test case per question, the worst in the Markdown
summary): the regressions a reviewer opens first. "Wrong" is a wrong answer, a false assertion or a
critical-condition error; an abstention is not a flip to wrong (the comparison counts abstentions).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from duckdb import DuckDBPyConnection

#: answer verdicts that count as wrong
WRONG = ("wrong", "false-assertion", "critical-condition-error")

_VERDICTS_SQL = (
    "SELECT qid, CAST(phase AS VARCHAR), answer_verdict, segment, stress_set, question "
    "FROM records WHERE arm = ?"
)
_CUTS_SQL = "SELECT CAST(phase AS VARCHAR), doc_id, cut_chars FROM boundaries WHERE arm = ?"


def _verdicts(con: DuckDBPyConnection, arm: str) -> dict[tuple[str, str], tuple[Any, ...]]:
    rows = con.execute(_VERDICTS_SQL, [arm]).fetchall()
    return {(q, p): (v, seg, ss, text) for q, p, v, seg, ss, text in rows}


def boundary_words(spans: list[Any], cuts: Mapping[str, list[int]]) -> str:
    """The chunk cuts at the gold spans, in words: a cut inside a span first, else the nearest cut."""
    inside = [(s, c) for s in spans for c in cuts.get(s.doc_id, []) if s.start < c < s.end]
    if inside:
        return "; ".join(
            f"cut at char {c} of {s.doc_id} inside gold span {s.span_id} [{s.start}, {s.end})"
            for s, c in inside
        )
    near = [(min(abs(c - s.start), abs(c - s.end)), c, s) for s in spans for c in cuts.get(s.doc_id, [])]
    if not near:
        return "no chunk cut in the gold spans' documents"
    dist, c, s = min(near, key=lambda t: (t[0], t[1]))
    return (
        f"no cut inside a gold span; nearest cut at char {c} of {s.doc_id}, {dist} chars from span "
        f"{s.span_id} [{s.start}, {s.end})"
    )


def find_flips(
    con: DuckDBPyConnection,
    candidate: str,
    baseline: str,
    base_con: DuckDBPyConnection | None = None,
    fixtures: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Per question, the phases where the baseline answered correctly and the candidate wrongly:
    ``{qid, segment, stress_set, question, phases: [{phase, baseline, candidate, step, step_name,
    boundary}]}``, the questions that flipped at most phases first."""
    from ledgerscope.analysis.diagnosis import ledger_heads

    cand = _verdicts(con, candidate)
    base = _verdicts(base_con if base_con is not None else con, baseline)
    cells = sorted(k for k, v in cand.items() if v[0] in WRONG and (base.get(k) or (None,))[0] == "correct")
    if not cells:
        return []
    steps = {(r["qid"], r["phase"]): (r["step"], r["step_name"]) for r in ledger_heads(con, candidate)}
    cuts: dict[str, dict[str, list[int]]] = {}
    for phase, doc, chars in con.execute(_CUTS_SQL, [candidate]).fetchall():
        cuts.setdefault(phase, {})[doc] = list(chars or [])
    by_q: dict[str, dict[str, Any]] = {}
    for qid, phase in cells:
        verdict, segment, stress_set, question = cand[(qid, phase)]
        q = by_q.setdefault(
            qid,
            {"qid": qid, "segment": segment, "stress_set": stress_set, "question": question, "phases": []},
        )
        fx = (fixtures or {}).get(qid)
        step, name = steps.get((qid, phase), (None, None))
        q["phases"].append(
            {
                "phase": phase,
                "baseline": "correct",
                "candidate": verdict,
                "step": step,
                "step_name": name,
                "boundary": boundary_words(list(fx.spans), cuts.get(phase, {}))
                if fx
                else "the question's gold spans are not in the ledger's fixtures",
            }
        )
    return sorted(by_q.values(), key=lambda q: (-len(q["phases"]), q["qid"]))
