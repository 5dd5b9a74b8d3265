"""Re-execute one recorded (arm, phase, question) from the ledger's own manifest.

The ledger carries everything needed: the arm configuration, the phase list,
the sources (with digests) and the resolved fixtures. The record goes through
the same code path as in the sweep (:mod:`.cascade`), and the result is
compared with what was recorded: candidate lists by unit id and rank exactly,
scores within a small tolerance (a model forward pass in a different batch
can differ in the last float bits), every record field exactly. The ledger is
only read, never written.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import pyarrow as pa
import pyarrow.parquet as pq

from ledgerscope.common.errors import InputError, Problem
from ledgerscope.inputs.fixtures import Fixture, read_fixtures, resolve
from ledgerscope.inputs.sources import Corpus
from ledgerscope.ledger.layout import Layout, layout_for, ledger_layout
from ledgerscope.ledger.read import connect
from ledgerscope.ledger.sources import sources_corpus
from ledgerscope.ledger.verify import load_manifest
from ledgerscope.pipeline.arm.config import ArmConfig, arm_from_dict
from ledgerscope.pipeline.contracts.units import Phase
from ledgerscope.pipeline.embedding.encoder import shared_encoder
from ledgerscope.pipeline.run.cascade import build_phase, run_questions
from ledgerscope.pipeline.run.oracle import run_oracle
from ledgerscope.pipeline.run.repeats import manifest_repeats
from ledgerscope.pipeline.run.runtime import build_runtime, unreachable_endpoints

SCORE_TOLERANCE = 1e-4


@dataclass
class RerunDiff:
    arm: str
    qid: str
    phase: str
    differences: list[dict] = field(default_factory=list)
    fresh: dict = field(default_factory=dict)
    #: (recorded, now) embedding device types when they differ: the differences are then the
    #: device's (CPU results are the reference), not evidence that the pipeline changed
    devices: tuple[str, str] | None = None

    @property
    def identical(self) -> bool:
        return not self.differences

    def to_json(self) -> dict:
        return {
            "arm": self.arm,
            "qid": self.qid,
            "phase": self.phase,
            "identical": self.identical,
            "differences": self.differences,
            **(
                {"device_differences": {"recorded": self.devices[0], "now": self.devices[1]}}
                if self.devices
                else {}
            ),
        }

    def lines(self) -> list[str]:
        head = f"rerun {self.arm} / phase {self.phase} / {self.qid}: "
        if self.identical:
            return [head + "identical to the recorded record (candidates, context, answer, verdicts)"]
        kind = (
            f" (device differences: recorded on {self.devices[0]}, rerun on {self.devices[1]})"
            if self.devices
            else ""
        )
        out = [head + f"{len(self.differences)} difference(s){kind}"]
        for d in self.differences:
            out.append(f"  {d['field']}: recorded {_short(d['recorded'])} -> now {_short(d['fresh'])}")
        return out


def _short(value, width: int = 100) -> str:
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else repr(value)
    return text if len(text) <= width else text[: width - 1] + "…"


def load_ledger_inputs(ledger: Path) -> tuple[dict, Corpus, list]:
    """Manifest, corpus (digests re-checked) and resolved fixtures stored in a ledger."""
    connect(ledger).close()  # the ledger's structure and rows are checked before anything is read
    manifest = load_manifest(ledger)
    path = ledger_layout(ledger).sources_path(ledger)
    if not path.is_file():
        raise InputError(Problem(str(path), None, "sources", "missing: the ledger's sources"))
    try:
        rows = pq.read_table(path, columns=["doc_id", "version", "text", "observed", "access"]).to_pylist()
    except (pa.ArrowException, OSError) as exc:
        raise InputError(Problem(str(path), None, "parquet", f"cannot be read: {exc}")) from None
    corpus = sources_corpus(
        path, ((r["doc_id"], r["version"], r["text"], r["observed"], r["access"]) for r in rows)
    )
    fset, problems = read_fixtures(ledger / "fixtures.jsonl")
    fixtures, _, more = resolve(fset, corpus)
    if problems or more:
        raise InputError(problems + more)
    return manifest, corpus, fixtures


class _Target(NamedTuple):
    """The recorded partition and question a rerun re-executes, each checked against the manifest."""

    entry: dict
    phase: Phase
    fixture: Fixture
    layout: Layout
    marker: Path
    config: ArmConfig


def rerun_record(ledger: str | Path, arm: str, qid: str, phase: str) -> RerunDiff:
    ledger = Path(ledger)
    manifest, corpus, fixtures = load_ledger_inputs(ledger)
    entry, at, fx, layout, marker, cfg = _target(ledger, manifest, fixtures, arm, qid, phase)

    oracle_path = layout.oracle_path(ledger, arm)
    recorded = _read_rows(layout.table_file(ledger, "records", arm, phase), qid)
    recorded_cands = _read_rows(layout.table_file(ledger, "candidates", arm, phase), qid)
    recorded_oracle = _read_rows(oracle_path, qid) if oracle_path.is_file() else []

    # the same external stages the sweep used (endpoints, callables): say plainly if one is gone
    unreachable = unreachable_endpoints(cfg)
    if unreachable:
        raise InputError(unreachable)
    rt = build_runtime(cfg, shared_encoder)
    from ledgerscope.pipeline.run.scope import restore_scope

    restore_scope(rt, json.loads(marker.read_text(encoding="utf-8")))  # evidence scope
    index = build_phase(rt, at, list(corpus))
    fresh_oracle = run_oracle(rt, fx)
    texts = {s.doc_id: s.text for s in corpus}
    k = manifest_repeats(ledger)  # --repeats K: every repeat is asked again with its recorded seed
    fresh_repeats: list[dict] = []
    records, cands = run_questions(
        rt, index, [fx], texts, {qid: fresh_oracle}, repeats=k, repeat_rows=fresh_repeats
    )

    diff = RerunDiff(arm, qid, phase, fresh=records[0], devices=_device_change(entry, rt))
    _compare_record(recorded[0] if recorded else {}, records[0], diff)
    _compare_candidates(recorded_cands, cands.rows(), diff)
    if k > 1:
        recorded_repeats = _read_rows(layout.table_file(ledger, "repeats", arm, phase), qid)
        _compare_repeats(recorded_repeats, fresh_repeats, diff)
    if recorded_oracle:
        _compare_oracle(recorded_oracle[0], fresh_oracle, diff)
    return diff


def _target(ledger: Path, manifest: dict, fixtures: list, arm: str, qid: str, phase: str) -> _Target:
    """The arm, phase and question asked for, checked in that order; then the partition's commit marker
    and the stored configuration against its digest. Each missing piece is an input error."""
    where = str(ledger / "manifest.json")
    if arm not in manifest["arms"]:
        raise InputError(Problem(where, None, "arm", f"no arm {arm!r}; arms: {', '.join(manifest['arms'])}"))
    entry = manifest["arms"][arm]
    phases = {p["label"]: Phase(p["label"], p["offset"]) for p in entry["phases"]}
    if phase not in phases:
        raise InputError(
            Problem(
                where,
                None,
                "phase",
                f"no phase {phase!r} in arm {arm!r}; phases: {', '.join(phases)}",
            )
        )
    fx = next((f for f in fixtures if f.qid == qid), None)
    if fx is None:
        raise InputError(Problem(str(ledger / "fixtures.jsonl"), None, "qid", f"no question {qid!r}"))
    layout = layout_for(manifest)
    marker = layout.marker_path(ledger, arm, phase)
    if not marker.is_file():
        raise InputError(Problem(str(marker), None, "partition", "this partition was never completed"))
    cfg = arm_from_dict(entry["config"], where)
    if cfg.digest() != entry.get("config_digest"):
        raise InputError(
            Problem(where, None, "config_digest", "stored configuration does not match its digest")
        )
    return _Target(entry, phases[phase], fx, layout, marker, cfg)


def _compare_oracle(old: dict, new: dict, diff: RerunDiff) -> None:
    """The oracle's answer side (answer, verdict, feasibility, context) against the recorded one."""
    for key in ("answer", "answer_verdict", "feasible", "context"):
        if old.get(key) != new.get(key):
            diff.differences.append(
                {"field": f"oracle.{key}", "recorded": old.get(key), "fresh": new.get(key)}
            )


def _device_change(entry: dict, rt) -> tuple[str, str] | None:
    """The recorded and current embedding device types, when they differ (older ledgers: cpu)."""
    recorded = (entry.get("components", {}).get("embedding", {}).get("device") or {}).get("type", "cpu")
    now = (getattr(rt.encoder, "device_info", None) or {}).get("type", "cpu")
    return (recorded, now) if recorded != now else None


def _read_rows(path: Path, qid: str) -> list[dict]:
    """One question's rows of a ledger table (checked by :func:`verify_ledger` before)."""
    if not path.is_file():
        raise InputError(Problem(str(path), None, "file", "missing from a finished partition"))
    try:
        return pq.read_table(path, filters=[("qid", "=", qid)]).to_pylist()
    except (pa.ArrowException, OSError) as exc:
        raise InputError(Problem(str(path), None, "parquet", f"cannot be read: {exc}")) from None


def _close(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=SCORE_TOLERANCE, abs_tol=SCORE_TOLERANCE)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def _compare_record(old: dict, new: dict, diff: RerunDiff) -> None:
    if not old:
        diff.differences.append({"field": "record", "recorded": None, "fresh": "present"})
        return
    for key, value in new.items():
        before = old.get(key)
        if key.endswith("_json"):
            same = _close(json.loads(before or "null"), json.loads(value or "null"))
        else:
            same = _close(before, value)
        if not same:
            diff.differences.append({"field": key, "recorded": before, "fresh": value})


def _compare_repeats(old: list[dict], new: list[dict], diff: RerunDiff) -> None:
    """Each repeat's answer side against the recorded one (latency is the machine's, not compared)."""
    recorded = {r["repeat"]: r for r in old}
    for row in new:
        before = recorded.get(row["repeat"], {})
        for key, value in row.items():
            if key != "latency_s" and not _close(before.get(key), value):
                diff.differences.append(
                    {"field": f"repeats[{row['repeat']}].{key}", "recorded": before.get(key), "fresh": value}
                )


def _compare_candidates(old: list[dict], new: list[dict], diff: RerunDiff) -> None:
    def by_stage(rows):
        out: dict[str, list[dict]] = {}
        for r in sorted(rows, key=lambda r: (r["stage"], r["rank"])):
            out.setdefault(r["stage"], []).append(r)
        return out

    a, b = by_stage(old), by_stage(new)
    for stage in sorted(set(a) | set(b)):
        ra, rb = a.get(stage, []), b.get(stage, [])
        ids_a = [r["unit_id"] for r in ra]
        ids_b = [r["unit_id"] for r in rb]
        if ids_a != ids_b:
            diff.differences.append({"field": f"candidates.{stage}", "recorded": ids_a, "fresh": ids_b})
            continue
        for x, y in zip(ra, rb, strict=True):
            sa, sb = x["score"], y["score"]
            if (sa is None) != (sb is None) or (sa is not None and not _close(float(sa), float(sb))):
                diff.differences.append(
                    {"field": f"candidates.{stage}.score[{x['rank']}]", "recorded": sa, "fresh": sb}
                )
