"""One (arm, phase) partition from start to finish: index, questions, rows, one atomic write.

Shared by the executors (:mod:`.sweep`'s local loop, :mod:`.ray_executor`'s Ray tasks), so a
partition is the same rows whichever machine computes it. The write is
:func:`ledgerscope.ledger.write.write_partition`: its table files, then its commit marker, so an
attempt killed at any point leaves either the committed partition or files no reader takes, and a
retried attempt replaces, never appends.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ledgerscope.common.blas import single_threaded_blas
from ledgerscope.inputs.fixtures import Fixture
from ledgerscope.inputs.sources import Corpus
from ledgerscope.ledger import schema
from ledgerscope.ledger.write import oracle_path, oracle_resources_path, write_partition, write_table
from ledgerscope.pipeline.contracts.stages import PhaseIndex
from ledgerscope.pipeline.contracts.units import Phase, Unit
from ledgerscope.pipeline.run.cascade import build_phase, doc_offset, run_questions
from ledgerscope.pipeline.run.oracle import prepare_oracle, run_oracle
from ledgerscope.pipeline.run.repeats import manifest_repeats
from ledgerscope.pipeline.run.resources import (
    Laps,
    StageMarks,
    partition_resources,
    usage_delta,
    usage_snapshot,
    write_oracle_resources,
)
from ledgerscope.pipeline.run.runtime import ArmRuntime
from ledgerscope.pipeline.run.scope import scope_record

if TYPE_CHECKING:
    import pyarrow as pa

#: seconds to pause after each partition (env LEDGERSCOPE_PARTITION_PAUSE_S); used by the
#: kill-and-resume tests to interrupt a sweep at a chosen point. Zero by default.
_PAUSE_S = float(os.environ.get("LEDGERSCOPE_PARTITION_PAUSE_S", "0") or 0)


def pause_after_partition() -> None:
    """A throttle for interruption tests and demos; off unless the variable is set."""
    if _PAUSE_S:
        time.sleep(_PAUSE_S)


def run_partition(
    out: Path,
    rt: ArmRuntime,
    phase: Phase,
    fixtures: Sequence[Fixture],
    corpus: Corpus,
    oracle: dict[str, dict],
    on_stage: Callable[[str], None] = lambda stage: None,
    on_question: Callable[[], None] = lambda: None,
) -> PhaseIndex:
    """Build this phase's index, run every question, write the partition; the index is returned
    so the caller can drop the phase's cached vectors."""
    cfg = rt.config
    sources = list(corpus)
    before = usage_snapshot(rt)
    marks = StageMarks(on_stage)
    index = build_phase(rt, phase, sources, on_stage=marks)
    texts = {s.doc_id: s.text for s in sources}
    laps = Laps(len(fixtures))
    repeats, repeat_rows = manifest_repeats(out), []
    records, cands = run_questions(
        rt,
        index,
        fixtures,
        texts,
        oracle,
        on_question=on_question,
        laps=laps,
        repeats=repeats,
        repeat_rows=repeat_rows,
    )
    resources = partition_resources(
        rt, index, fixtures, laps, usage_delta(before, usage_snapshot(rt)), marks.seconds
    )
    scope = scope_record(rt, phase, len(index.boundaries))
    resources["phase_scope"] = {k: v for k, v in scope.items() if k != "phased_documents"}
    on_stage("retrieve+generate")
    tables = {
        "units": unit_table(cfg.name, phase.label, index.units),
        "boundaries": boundary_table(rt, phase, corpus, index.boundaries),
        "candidates": cands.table(),
        "records": records,
        "repairs": repair_table(cfg.name, phase.label, corpus, index.boundaries),
    }
    if repeats > 1:  # written only with --repeats K > 1: a K = 1 partition is what it always was
        tables["repeats"] = repeat_rows
    counts = {"candidates": len(cands), "offsets_checked": sum(b.checked for b in index.boundaries)}
    meta = partition_meta(rt, phase, tables, counts, resources, scope)
    write_partition(out, cfg.name, phase.label, tables, meta)
    on_stage("write")
    return index


def partition_meta(
    rt: ArmRuntime,
    phase: Phase,
    tables: dict[str, list[dict] | pa.Table],
    counts: dict[str, int],
    resources: dict,
    scope: dict,
) -> dict:
    """The partition's commit-marker fields: row counts (``repeats`` first, and only when its table
    is written), the configuration digest, resources and evidence scope."""
    more = {"repeats": len(tables["repeats"])} if "repeats" in tables else {}
    return {
        **more,
        "arm": rt.config.name,
        "phase": phase.label,
        "phase_offset": phase.offset,
        "config_digest": rt.config.digest(),
        "units": len(tables["units"]),
        "records": len(tables["records"]),
        "candidates": counts["candidates"],
        "repairs": len(tables["repairs"]),
        "offsets_checked": counts["offsets_checked"],
        "resources": resources,
        "phase_scope": scope,
    }


def boundary_table(rt: ArmRuntime, phase: Phase, corpus: Corpus, boundaries: Sequence) -> list[dict]:
    """The ``boundaries`` rows of one partition: each document's chunk cuts, in tokens and characters."""
    return [
        {
            "arm": rt.config.name,
            "phase": phase.label,
            "phase_offset": doc_offset(rt, phase, b.doc_id),
            "doc_id": b.doc_id,
            "version": corpus.sources[b.doc_id].version,
            "n_tokens": b.n_tokens,
            "cut_tokens": list(b.cut_tokens),
            "cut_chars": list(b.cut_chars),
        }
        for b in boundaries
    ]


def unit_table(arm: str, phase: str, units: Iterable[Unit]) -> list[dict]:
    """The units table's rows of one partition (the sample check builds its expected rows here too)."""
    return [
        {
            "arm": arm,
            "phase": phase,
            "unit_id": u.unit_id,
            "doc_id": u.doc_id,
            "version": u.version,
            "ordinal": u.ordinal,
            "start": u.start,
            "end": u.end,
            "core_start": u.core_start,
            "core_end": u.core_end,
            "token_start": u.token_start,
            "token_end": u.token_end,
            "n_tokens": u.token_end - u.token_start,
            "text": u.text,
            "access": list(u.access),
            # placement is an ingest's question: a swept unit is sliced from its source, so NULL
            **dict.fromkeys(schema.OPTIONAL_COLUMNS["units"]),
        }
        for u in units
    ]


def repair_table(arm: str, phase: str, corpus: Corpus, boundaries: Sequence) -> list[dict]:
    """The ``repairs`` rows of one partition: every unit its chunker did not return verified."""
    return [
        {
            "arm": arm,
            "phase": phase,
            "doc_id": b.doc_id,
            "version": corpus.sources[b.doc_id].version,
            "position": r.position,
            "side": r.side,
            "status": r.status,
            "text": r.text,
            "given_start": r.given_start,
            "given_end": r.given_end,
            "start": r.start,
            "end": r.end,
            "note": r.note,
        }
        for b in boundaries
        for r in b.repairs
    ]


def count_offsets(counts: Counter, boundaries: Sequence) -> None:
    """Add one partition's external-chunker offset statuses to the arm's tally."""
    for b in boundaries:
        if b.checked:
            counts["checked"] += b.checked
            counts.update(r.status for r in b.repairs)


def oracle_for_arm(out: Path, rt: ArmRuntime, fixtures: Sequence[Fixture]) -> dict[str, dict]:
    """Run (or load) the per-arm oracle table; it is written atomically like a partition."""
    import pyarrow.parquet as pq

    path = oracle_path(out, rt.config.name)
    if path.is_file():
        return {r["qid"]: r for r in pq.read_table(path).to_pylist()}
    before = usage_snapshot(rt)
    prepare_oracle(rt, fixtures)
    with single_threaded_blas():
        rows = [run_oracle(rt, fx) for fx in fixtures]
    write_table(path, rows, schema.ORACLE)
    delta = usage_delta(before, usage_snapshot(rt))
    write_oracle_resources(oracle_resources_path(out, rt.config.name), rt, delta, len(fixtures))
    return {r["qid"]: r for r in rows}
