"""One arm's records read from a ledger as arrays, one entry per record, every metric scored:
what :mod:`.compare` matches and resamples."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ledgerscope.analysis.stats.metrics import record_metrics
from ledgerscope.common.errors import InputError, Problem

if TYPE_CHECKING:
    from duckdb import DuckDBPyConnection


@dataclass
class ArmRecords:
    """One arm's records as arrays (one entry per record)."""

    arm: str
    qid: np.ndarray
    phase: np.ndarray
    segment: np.ndarray
    stress_set: np.ndarray
    cluster: np.ndarray
    values: dict[str, np.ndarray]
    counts: dict[str, int]


#: the columns read per record: name, SQL, stand-in for NULL (fetched without NULLs, so never as a
#: masked array, each with its NULL flag); the token counts as floats, NULL as NaN
_ARM_COLUMNS = [
    ("qid", "qid", "''"),
    ("phase", "phase", "''"),
    ("segment", "segment", "''"),
    ("stress_set", "stress_set", "''"),
    ("answerable", "answerable", "false"),
    ("support_only", "support_only", "false"),
    ("first_doc", "doc_ids[1]", "''"),
    ("support_packed", "support_packed", "false"),
    ("answer_verdict", "answer_verdict", "''"),
    ("citation_verdict", "citation_verdict", "''"),
]
_ARMS_SQL = (
    "SELECT arm, "
    + ", ".join(
        f"coalesce({sql}, {null}) AS c{i}, {sql} IS NULL AS n{i}"
        for i, (_name, sql, null) in enumerate(_ARM_COLUMNS)
    )
    + "".join(
        f", coalesce(CAST({c} AS DOUBLE), 'NaN'::DOUBLE) AS {c}" for c in ("prompt_tokens", "evidence_tokens")
    )
    + " FROM records WHERE arm IN ({}) ORDER BY records.arm, records.qid, records.phase"
)


def _columns(fetched: dict[str, Any]) -> dict[str, np.ndarray]:
    """The fetched columns by name, NULLs back as None (tokens: NaN)."""
    cols = {
        "arm": fetched["arm"],
        "prompt_tokens": fetched["prompt_tokens"],
        "evidence_tokens": fetched["evidence_tokens"],
    }
    for i, (name, _sql, _null) in enumerate(_ARM_COLUMNS):
        values, null = fetched[f"c{i}"], fetched[f"n{i}"]
        if null.any():
            values = values.astype(object)
            values[null] = None
        cols[name] = values
    return cols


def load_arm(con: DuckDBPyConnection, arm: str, *, source: str = "records") -> ArmRecords:
    """Pull one arm's records from a connection's ``records`` view and score every metric."""
    return load_arms(con, [arm], source=source)[0]


def load_arms(con: DuckDBPyConnection, arms: Sequence[str], *, source: str = "records") -> list[ArmRecords]:
    """:func:`load_arm` for each arm, in order, from one query."""
    cols = _columns(con.execute(_ARMS_SQL.format(", ".join("?" * len(arms))), list(arms)).fetchnumpy())
    masks = [cols["arm"] == arm for arm in arms]
    return [
        _arm_records(con, arm, {k: v[mask] for k, v in cols.items()}, source)
        for arm, mask in zip(arms, masks, strict=True)
    ]


def _no_records(con: DuckDBPyConnection, arm: str, source: str) -> InputError:
    """The problem of an arm with no records, naming the arms the ledger holds."""
    arms = [r[0] for r in con.execute("SELECT DISTINCT arm FROM records ORDER BY arm").fetchall()]
    return InputError(
        Problem(
            source,
            None,
            "arm",
            f"no records for arm {arm!r}; arms present: {', '.join(arms) or 'none'}",
        )
    )


def _check_one_record_per_cell(arm: str, qid: np.ndarray, phase: np.ndarray, source: str) -> None:
    """One record per (question, phase) of the arm, else the problem names the first repeated one."""
    keys = list(zip(qid.tolist(), phase.tolist(), strict=True))
    if len(set(keys)) != len(keys):
        dup = next(k for k in keys if keys.count(k) > 1)
        raise InputError(
            Problem(
                source,
                None,
                "records",
                f"arm {arm!r} has more than one record for question {dup[0]!r}, phase {dup[1]!r}",
            )
        )


def _arm_records(con: DuckDBPyConnection, arm: str, cols: dict[str, Any], source: str) -> ArmRecords:
    n = len(cols["qid"])
    if not n:
        raise _no_records(con, arm, source)
    qid = np.asarray(cols["qid"], dtype=object)
    phase = np.array([str(p) for p in cols["phase"].tolist()], dtype=object)
    _check_one_record_per_cell(arm, qid, phase, source)
    cluster = np.array(
        [
            d if d is not None else f"qid:{q}"
            for q, d in zip(qid.tolist(), cols["first_doc"].tolist(), strict=True)
        ],
        dtype=object,
    )
    values = record_metrics(
        **{
            k: cols[k]
            for k in (
                "answerable",
                "support_only",
                "support_packed",
                "answer_verdict",
                "citation_verdict",
                "prompt_tokens",
                "evidence_tokens",
            )
        }
    )
    verdicts = cols["answer_verdict"].tolist()
    counts = {
        "records": n,
        "questions": len(set(qid.tolist())),
        "phases": len(set(phase.tolist())),
        "infrastructure_failure": verdicts.count("infrastructure-failure"),
        "not_judged": verdicts.count("not-judged"),
    }
    return ArmRecords(
        arm,
        qid,
        phase,
        np.asarray(cols["segment"], dtype=object),
        np.asarray(cols["stress_set"], dtype=object),
        cluster,
        values,
        counts,
    )
