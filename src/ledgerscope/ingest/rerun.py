"""``ledgerscope rerun`` on an ingested record: the pipeline is external.

ledgerscope cannot re-execute a pipeline it did not run; it says so, naming the
option that lets it: ``--runner package.module:function``, a callable the user
declares. It is called with keyword arguments ``question``, ``qid``, ``config``
and ``phase`` and returns seed 002's record (a mapping with ``retrieved_ids``,
``context_ids``, ``answer`` and optionally ``citations``, or an object with those
attributes). The fresh record is compared with the recorded one: the retrieved
list and the context by chunk id and rank, the answer exactly, and the answer
verdict ledgerscope's judge gives it. The ledger is only read.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ledgerscope.common.errors import InputError, Problem
from ledgerscope.ledger.read import connect
from ledgerscope.ledger.verify import load_manifest
from ledgerscope.pipeline.run.rerun import RerunDiff
from ledgerscope.rules import judge


def is_ingested(ledger: str | Path) -> bool:
    try:
        return "ingested" in load_manifest(ledger)
    except InputError:
        return False


def load_runner(spec: str) -> Callable[..., Any]:
    """``package.module:function`` -> the callable (an input error naming what is missing)."""
    module, sep, name = spec.partition(":")
    if not sep or not module or not name:
        raise InputError(Problem("--runner", None, "runner", f"{spec!r}: expected package.module:function"))
    try:
        obj: Any = importlib.import_module(module)
    except ImportError as exc:
        raise InputError(Problem("--runner", None, "runner", f"cannot import {module!r}: {exc}")) from None
    for part in name.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            raise InputError(Problem("--runner", None, "runner", f"{module!r} has no {name!r}"))
    if not callable(obj):
        raise InputError(Problem("--runner", None, "runner", f"{spec!r} is not callable"))
    return obj


def _fixtures(con, ledger: Path) -> dict:
    """The ledger's fixtures by qid, resolved against its sources (as the diagnosis reads them)."""
    from ledgerscope.inputs.fixtures import read_fixtures, resolve
    from ledgerscope.ledger.sources import sources_corpus

    corpus = sources_corpus(
        ledger / "sources",
        con.execute("SELECT doc_id, version, text, observed, access FROM sources").fetchall(),
    )
    fset, problems = read_fixtures(ledger / "fixtures.jsonl")
    resolved, _, more = resolve(fset, corpus)
    if problems or more:
        raise InputError(problems + more)
    return {f.qid: f for f in resolved}


def _field(result: Any, name: str) -> Any:
    return result.get(name) if isinstance(result, Mapping) else getattr(result, name, None)


def rerun_ingested(ledger: str | Path, arm: str, qid: str, phase: str, runner: str | None) -> RerunDiff:
    """Re-run one ingested record with the user's runner, or say why it cannot be."""
    ledger = Path(ledger)
    if runner is None:
        raise InputError(
            Problem(
                str(ledger),
                None,
                "rerun",
                "this ledger was ingested from the traces of a pipeline ledgerscope did not "
                f"run (arm {arm!r} is external); ledgerscope cannot re-execute it: give "
                "--runner package.module:function, a callable that answers one question and "
                "returns its seed-002 record",
            )
        )
    con = connect(ledger)
    rows = (
        con.sql("SELECT * FROM records WHERE arm = ? AND phase = ? AND qid = ?", params=[arm, phase, qid])
        .to_arrow_table()
        .to_pylist()
    )
    if not rows:
        raise InputError(
            Problem(str(ledger), None, "record", f"no record of arm {arm!r}, phase {phase!r}, qid {qid!r}")
        )
    recorded = rows[0]
    fixtures = _fixtures(con, ledger)
    lists = {
        stage: ids
        for stage, ids in con.execute(
            'SELECT stage, list(unit_id ORDER BY "rank") FROM candidates '
            "WHERE arm = ? AND phase = ? AND qid = ? GROUP BY stage",
            [arm, phase, qid],
        ).fetchall()
    }
    fn = load_runner(runner)
    result = fn(question=recorded["question"], qid=qid, config=arm, phase=phase)
    fresh = {
        "retrieved_ids": list(_field(result, "retrieved_ids") or []),
        "context_ids": list(_field(result, "context_ids") or []),
        "answer": _field(result, "answer"),
    }
    fx = fixtures[qid]
    abstained = bool(_field(result, "abstained"))
    fresh["answer_verdict"] = judge.judge_answer(fresh["answer"], abstained, fx).verdict
    diff = RerunDiff(arm, qid, phase, fresh=fresh)
    pairs = [
        ("candidates.fused", lists.get("fused"), fresh["retrieved_ids"]),
        ("candidates.packed", lists.get("packed", []), fresh["context_ids"]),
        ("answer", recorded["answer"], fresh["answer"]),
        ("answer_verdict", recorded["answer_verdict"], fresh["answer_verdict"]),
    ]
    for name, before, after in pairs:
        if name == "candidates.fused" and before is None:
            continue  # the trace recorded no retrieved list
        if before != after:
            diff.differences.append({"field": name, "recorded": before, "fresh": after})
    return diff
