"""The boundary-phase sweep: every arm x every preregistered phase, into a ledger.

The manifest (arm configs, their digests, the phase list with labels and
offsets, model ids, tokenizer, source digests, fixtures digest) is written
before any retrieval runs. Each (arm, phase) partition is then written
atomically; rerunning the same command skips finished partitions, so an
interrupted sweep resumes without redoing or losing work.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ledgerscope import __version__
from ledgerscope.common.atomic import atomic_write_text
from ledgerscope.inputs.fixtures import Fixture, write_fixtures
from ledgerscope.inputs.sources import Corpus
from ledgerscope.ledger import schema
from ledgerscope.ledger.sources import source_rows
from ledgerscope.ledger.write import (
    check_out,
    clear_staging,
    is_done,
    oracle_path,
    sources_path,
    write_or_check_manifest,
    write_table,
)
from ledgerscope.pipeline.arm.config import ArmConfig
from ledgerscope.pipeline.contracts.units import Phase
from ledgerscope.pipeline.embedding.encoder import shared_encoder
from ledgerscope.pipeline.run.cascade import chunk_phase
from ledgerscope.pipeline.run.partition import (
    count_offsets,
    oracle_for_arm,
    pause_after_partition,
    run_partition,
)
from ledgerscope.pipeline.run.runtime import ArmRuntime, build_runtime
from ledgerscope.pipeline.run.scope import apply_scope
from ledgerscope.rules.judge import with_inferred_default


class Progress:
    """Callbacks a front end implements (the CLI draws Rich bars); all optional."""

    def start(self, plan: dict) -> None: ...
    def stage(self, arm: str, phase: str, stage: str) -> None: ...
    def question(self, arm: str, phase: str) -> None: ...
    def partition_skipped(self, arm: str, phase: str) -> None: ...
    def partition_done(self, arm: str, phase: str) -> None: ...


@dataclass
class SweepResult:
    ledger: Path
    written: list[tuple[str, str]] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    seconds: float = 0.0
    encoded_texts: int = 0
    #: wall seconds the sweep's models spent encoding those texts (the rest is the cascade's)
    encode_seconds: float = 0.0
    #: texts the persistent embedding cache served
    cached_texts: int = 0
    #: what the cache refused or could not write (corrupt entries re-encoded, a full disk)
    cache_messages: list[str] = field(default_factory=list)
    #: external chunkers' units per arm: "checked" (all returned), and each status not verified
    offsets: dict[str, Counter] = field(default_factory=dict)
    #: why the sweep stopped before its last partition (a --max-cost or --max-requests cap), or None
    stopped: str | None = None
    #: this run's record of everything it sent (``runs/*.json``)
    run_record: Path | None = None


@dataclass
class SweepJob:
    """What an executor needs to run a sweep's pending partitions (the manifest is already written)."""

    out: Path
    arms: list[ArmConfig]
    runtimes: dict[str, ArmRuntime]
    fixtures: list[Fixture]
    corpus: Corpus
    progress: Progress
    #: the caps' check before each partition (:class:`.estimate.Guard`), or None
    guard: Any = None

    def pending(self, cfg: ArmConfig) -> list[Phase]:
        return [p for p in cfg.phase_list() if not is_done(self.out, cfg.name, p.label)]


#: runs every pending partition of a job, recording them in the result (written, skipped, offsets)
Executor = Callable[[SweepJob, SweepResult], None]


def fixtures_digest(fixtures: Sequence[Fixture]) -> str:
    blob = "\n".join(json.dumps(f.to_json(), sort_keys=True, ensure_ascii=False) for f in fixtures)
    return "sha256:" + hashlib.sha256(blob.encode()).hexdigest()


def build_manifest(
    arms: Sequence[ArmConfig],
    runtimes: dict[str, ArmRuntime],
    fixtures: Sequence[Fixture],
    corpus: Corpus,
    repeats: int = 1,
) -> dict:
    arm_entries = {}
    for cfg in arms:
        arm_entries[cfg.name] = {
            "config": cfg.to_dict(),
            "config_digest": cfg.digest(),
            "phases": [{"label": p.label, "offset": p.offset} for p in cfg.phase_list()],
            "stride": cfg.stride if cfg.chunker_kind == "token" else None,
            "edge_policy": cfg.edge_policy,
            "components": runtimes[cfg.name].describe(),
        }
    sources = {s.doc_id: s.version for s in corpus}
    return {
        "format": schema.FORMAT,
        "ledgerscope_version": __version__,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "identity": sweep_identity(arms, fixtures, corpus, repeats),
        # --repeats K > 1 only (a K = 1 manifest is what it always was): resume, rerun, Ray read it
        **({"repeats": repeats} if repeats > 1 else {}),
        "fixtures_digest": fixtures_digest(fixtures),
        "fixture_count": len(fixtures),
        "sources": sources,
        "arms": arm_entries,
        "stages": list(schema.STAGES),
    }


def sweep_identity(
    arms: Sequence[ArmConfig], fixtures: Sequence[Fixture], corpus: Corpus, repeats: int = 1
) -> str:
    """What a resumed sweep must match: arm config digests, fixtures digest, source versions, and
    ``--repeats`` when above 1 (so a K = 1 identity is unchanged)."""
    ident: dict[str, Any] = {
        "arms": {cfg.name: cfg.digest() for cfg in arms},
        "fixtures": fixtures_digest(fixtures),
        "sources": {s.doc_id: s.version for s in corpus},
    }
    if repeats > 1:
        ident["repeats"] = repeats
    blob = json.dumps(ident, sort_keys=True)
    return "sha256:" + hashlib.sha256(blob.encode()).hexdigest()


def check_api_keys(arms: Sequence[ArmConfig]) -> None:
    """Every endpoint stage's key variable is set (its value is only ever read from the environment)."""
    from ledgerscope.common.errors import InputError, Problem

    problems = []
    for cfg in arms:
        for section in ("embedding", "rerank", "generator", "judge"):
            table = getattr(cfg, section)
            name = table.get("api_key_env")
            if table.get("kind") == "endpoint" and name and not os.environ.get(name):
                where = cfg.where if cfg.where != "<config>" else "--arm"
                problems.append(
                    Problem(
                        where,
                        None,
                        f"{section}.api_key_env",
                        f"arm {cfg.name!r}: environment variable {name!r} (the API key) is not set or empty",
                    )
                )
    if problems:
        raise InputError(problems)


def check_endpoints(arms: Sequence[ArmConfig]) -> None:
    """Something listens at every endpoint stage's address, before any model loads."""
    from ledgerscope.common.errors import InputError
    from ledgerscope.pipeline.run.runtime import unreachable_endpoints

    problems = [p for cfg in arms for p in unreachable_endpoints(cfg)]
    if problems:
        raise InputError(problems)


def check_arm_names(arms: Sequence[ArmConfig]) -> None:
    from ledgerscope.common.errors import InputError, Problem

    names = [a.name for a in arms]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise InputError(Problem("--arm", None, "name", f"arm names must be unique: {', '.join(dupes)}"))


def sweep(
    fixtures: Sequence[Fixture],
    corpus: Corpus,
    arms: Sequence[ArmConfig],
    out: str | Path,
    progress: Progress | None = None,
    encoder_factory: Callable[[str, int], object] = shared_encoder,
    executor: Executor | None = None,
    caps: Any = None,
    repeats: int = 1,
) -> SweepResult:
    """Run (or resume) a sweep into the ledger directory ``out``.

    The manifest, sources and fixtures are written here before any partition, and
    ``_SWEEP_DONE.json`` after the last; ``executor`` runs the pending partitions in between
    (:func:`run_local`, in this process, by default; :class:`.ray_executor.RayExecutor` on a cluster).
    ``caps`` (:class:`.estimate.Caps`) stops it cleanly before a partition that would exceed them;
    ``result.stopped`` says where, and rerunning resumes. ``repeats`` > 1 asks the generator that
    many times per record and keeps every answer (:mod:`.repeats`).
    """
    from ledgerscope.pipeline.run.repeats import check_repeats

    check_repeats(repeats)
    t0 = time.perf_counter()
    out = Path(out)
    progress = progress or Progress()
    # defaults the judge infers from rule spans are recorded in the ledger's answer contracts
    fixtures = [with_inferred_default(f) for f in fixtures]
    # before any model loads
    _check_inputs(arms, corpus, out, sweep_identity(arms, fixtures, corpus, repeats))
    embedders: dict[tuple, Any] = {}  # one endpoint embedder per server and model, for every arm
    runtimes = {cfg.name: build_runtime(cfg, encoder_factory, embedders) for cfg in arms}
    from ledgerscope.pipeline.run.runs import cache_totals, encoder_counts, start_counters, write_run_record

    before = encoder_counts(runtimes)
    run_start = start_counters(runtimes)
    manifest = build_manifest(arms, runtimes, fixtures, corpus, repeats)
    write_or_check_manifest(out, manifest)
    clear_staging(out)
    _write_inputs(out, corpus, fixtures)
    result = SweepResult(out)
    plan = {cfg.name: [p.label for p in cfg.phase_list()] for cfg in arms}
    progress.start({"arms": plan, "questions": len(fixtures)})
    job = SweepJob(
        out,
        list(arms),
        runtimes,
        list(fixtures),
        corpus,
        progress,
        _guard(caps, fixtures, corpus, arms, out, runtimes, encoder_factory, executor, repeats),
    )
    _run(job, result, executor, embedders)
    result.seconds = time.perf_counter() - t0
    cache_totals(result, runtimes, before)
    result.run_record = write_run_record(out, runtimes, run_start, result, getattr(caps, "prices", None))
    if result.stopped:
        return result
    _mark_done(out, manifest, plan)
    return result


def _run(job: SweepJob, result: SweepResult, executor: Executor | None, embedders: dict[tuple, Any]) -> None:
    """The pending partitions, by ``executor`` (here by default); the endpoint embedders' connections
    closed after, whatever happens."""
    try:
        (executor or run_local)(job, result)
    finally:
        for embedder in embedders.values():
            embedder.client.close()


def _check_inputs(arms: Sequence[ArmConfig], corpus: Corpus, out: Path, identity: str) -> None:
    """Everything a sweep refuses with an input problem, before any model loads; ``identity`` is
    what a ledger already in ``out`` must have been swept as."""
    check_arm_names(arms)
    check_api_keys(arms)
    check_out(out, identity)
    check_chunkers(arms, list(corpus), out)
    check_endpoints(arms)


def _write_inputs(out: Path, corpus: Corpus, fixtures: Sequence[Fixture]) -> None:
    """The ledger's sources and fixtures, unless a resumed sweep already wrote them."""
    if not sources_path(out).is_file():
        write_table(
            sources_path(out),
            source_rows(corpus),
            schema.SOURCES,
        )
    if not (out / "fixtures.jsonl").is_file():
        write_fixtures(list(fixtures), out / "fixtures.jsonl")


def _mark_done(out: Path, manifest: dict[str, Any], plan: dict[str, list[str]]) -> None:
    """``_SWEEP_DONE.json`` after the last partition: the identity and the partition count."""
    atomic_write_text(
        out / "_SWEEP_DONE.json",
        json.dumps(
            {"identity": manifest["identity"], "partitions": sum(len(v) for v in plan.values())},
            indent=2,
        ),
    )


def _guard(
    caps: Any,
    fixtures: Sequence[Fixture],
    corpus: Corpus,
    arms: Sequence[ArmConfig],
    out: Path,
    runtimes: dict[str, ArmRuntime],
    encoder_factory: Any,
    executor: Any,
    repeats: int = 1,
) -> Any:
    """The caps' guard (the plan of every pending partition), or None without caps."""
    if caps is None or (caps.max_cost is None and caps.max_requests is None):
        return None
    from ledgerscope.common.errors import InputError, Problem
    from ledgerscope.pipeline.run.costs.estimate import Guard, plan_sweep
    from ledgerscope.pipeline.run.runs import start_counters

    if executor is not None:
        raise InputError(
            Problem(
                "--executor",
                None,
                "executor",
                "--max-cost and --max-requests need the "
                "local executor (they are checked before each partition)",
            )
        )
    start = start_counters(runtimes)
    plan = plan_sweep(fixtures, corpus, arms, out, encoder_factory, repeats)
    if caps.max_cost is not None:
        _, missing = plan.cost(caps.prices)
        if caps.prices is None or missing:
            why = "needs --prices" if caps.prices is None else f"has no price for {', '.join(missing)}"
            raise InputError(Problem("--max-cost", None, "prices", f"a cost cap {why}"))
    return Guard(caps, plan, runtimes, start)


def check_chunkers(arms: Sequence[ArmConfig], sources: Sequence, out: Path) -> None:
    """Every external chunker over every source at every pending phase, before any model loads or
    any partition is written: a splitter that rejects its options, raises, or (a callable) returns
    intervals out of range or overlapping stops the sweep here, naming the arm file and key.
    Only the tokenizer loads; the units are computed again when each phase runs."""
    from ledgerscope.common.errors import InputError
    from ledgerscope.pipeline.arm import chunker_spec
    from ledgerscope.pipeline.run.runtime import build_chunker, chunk_counter

    problems = []
    for cfg in arms:
        pending = [p for p in cfg.phase_list() if not is_done(out, cfg.name, p.label)]
        if not chunker_spec.is_external(cfg.chunker_kind) or not pending:
            continue
        try:
            counter = chunk_counter(cfg)
            rt = ArmRuntime(cfg, None, counter, build_chunker(cfg, None, counter), None, None, None)
            visible = [s for s in sources if set(s.access) <= cfg.clearance]
            for phase in pending:
                chunk_phase(rt, phase, visible)
        except InputError as exc:
            problems.extend(exc.problems)
    if problems:
        raise InputError(problems)


def run_local(job: SweepJob, result: SweepResult) -> None:
    """The default executor: every partition in sweep order, in this process."""
    out, progress, fixtures = job.out, job.progress, job.fixtures
    keep_texts = {f.question for f in fixtures} | {s.quote for f in fixtures for s in f.spans if s.quote}
    # only a cache that cannot read a dropped text back needs to know when a text is last used
    caches = [c for rt in job.runtimes.values() for c in rt.caches()]
    last_use = (
        {}
        if all(_can_read_back(c) for c in caches)
        else _plan_last_use(out, job.arms, job.runtimes, list(job.corpus))
    )
    position = 0
    for cfg in job.arms:
        rt = job.runtimes[cfg.name]
        pending = job.pending(cfg)
        if (
            job.guard is not None
            and pending
            and not oracle_path(out, cfg.name).is_file()
            and (why := job.guard.before(cfg.name, pending[0].label, True))
        ):
            result.stopped = why
            return
        oracle = oracle_for_arm(out, rt, fixtures)
        if is_done(out, cfg.name, cfg.phase_list()[0].label) and apply_scope(out, rt, fixtures) and last_use:
            # a resumed sweep: the base phase is on disk (replanned as below)
            last_use = _plan_last_use(out, job.arms, job.runtimes, list(job.corpus), position)
        for phase in cfg.phase_list():
            if is_done(out, cfg.name, phase.label):
                result.skipped.append((cfg.name, phase.label))
                progress.partition_skipped(cfg.name, phase.label)
                continue
            if job.guard is not None and (why := job.guard.before(cfg.name, phase.label, False)):
                result.stopped = why
                return
            position += 1
            index = run_partition(
                out,
                rt,
                phase,
                fixtures,
                job.corpus,
                oracle,
                on_stage=lambda st, a=cfg.name, p=phase.label: progress.stage(a, p, st),
                on_question=lambda a=cfg.name, p=phase.label: progress.question(a, p),
            )
            count_offsets(result.offsets.setdefault(cfg.name, Counter()), index.boundaries)
            # phase_scope = "evidence": fixed once the base phase ran; the unphased documents' units
            # are now the base phase's in every later phase, so a cache that cannot read back keeps them
            if apply_scope(out, rt, fixtures) and last_use:
                last_use = _plan_last_use(out, job.arms, job.runtimes, list(job.corpus), position)
            drop_phase_texts(rt.caches(), {u.text for u in index.units}, keep_texts, last_use, position)
            progress.partition_done(cfg.name, phase.label)
            result.written.append((cfg.name, phase.label))
            pause_after_partition()


def drop_phase_texts(
    caches: Sequence, texts: set[str], keep: set[str], last_use: dict[tuple[int, str], int], position: int
) -> None:
    """Token vectors are large: after a partition, each cache drops its unit texts but the fixtures'.

    A cache that can read a text back from the persistent cache drops them all (a read is about a
    millisecond, an encode 15 ms, and memory stays one partition's). One that cannot (the cache is
    off) keeps a text a later partition reuses (about a third of an arm's units recur verbatim in
    another arm's, where cuts snap to the same sentences) until that partition. After a cache write
    fails mid-sweep, a text with no planned last use is dropped and, if reused, encoded again (to
    the same bits).
    """
    for cache in caches:
        read_back = _can_read_back(cache)
        cache.drop(
            t for t in texts if t not in keep and (read_back or last_use.get((id(cache), t), 0) <= position)
        )


def _can_read_back(cache: object) -> bool:
    check = getattr(cache, "can_read_back", None)
    return callable(check) and bool(check())


def _plan_last_use(
    out: Path, arms: Sequence[ArmConfig], runtimes: dict[str, ArmRuntime], sources: Sequence, done: int = 0
) -> dict[tuple[int, str], int]:
    """For each (cache, unit text), the last partition (1-based, in sweep order) that needs it.

    Chunking is cheap next to encoding, so the sweep chunks every pending partition
    up front to know when a unit text shared by several phases or arms (aligned
    cuts) can leave the cache without being encoded twice. A cache is an arm's encoder or its
    reader's model; several arms may share one (the process's loaded model, one endpoint
    embedder per server), so the key is the cache, not the arm.
    """
    last: dict[tuple[int, str], int] = {}
    position = done  # the partitions this run already wrote
    for cfg in arms:
        rt = runtimes[cfg.name]
        visible = [s for s in sources if set(s.access) <= cfg.clearance]
        for phase in cfg.phase_list():
            if is_done(out, cfg.name, phase.label):
                continue
            position += 1
            units, _ = chunk_phase(rt, phase, visible)
            for cache in rt.caches():
                for u in units:
                    last[(id(cache), u.text)] = position
    return last
