"""The Ray executor: embedding on a Ray Data actor pool, each (arm, phase) partition a Ray task.

``ledgerscope sweep ... --executor ray [--ray-address ADDR]``. The driver (:func:`.sweep.sweep`)
writes the manifest, sources and fixtures before this runs and ``_SWEEP_DONE.json`` after it, as
with the local executor; here the driver also writes each arm's oracle table. Then:

1. every unique unit text of every pending partition, per embedding model, goes through
   ``map_batches`` on an actor pool (one GPU each when the cluster has GPUs; otherwise one CPU
   each, leaving one CPU free: actors that claim every CPU starve the dataset's read task and the
   pipeline deadlocks on a small machine);
2. each pending partition is a task (``max_retries``: a worker that dies is replaced and the task
   runs again) reading those blocks from the object store and writing its partition to the ledger
   directory, which every node must reach at the same path. The write is staged and renamed whole
   (:func:`ledgerscope.ledger.write.write_partition`), so a retried task neither duplicates nor
   loses a record.

Without an address a local cluster is started on 127.0.0.1 with the dashboard off and usage
statistics disabled; docs/scaling.md says what a real cluster needs.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass
from typing import Any

from ledgerscope.ledger.write import clear_staging, is_done
from ledgerscope.pipeline.embedding.encoder import Encoder
from ledgerscope.pipeline.run.cascade import chunk_phase
from ledgerscope.pipeline.run.partition import oracle_for_arm
from ledgerscope.pipeline.run.ray_tasks import EncodeBatch, partition_task
from ledgerscope.pipeline.run.sweep import SweepJob, SweepResult

#: the environment a local cluster is started with (its processes inherit it): no usage statistics,
#: and RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0, without which Ray 2.60 on Linux binds its GCS, raylet,
#: object manager and worker gRPC servers to [::] and its runtime-env agent to the host's address
#: even when the node address is 127.0.0.1 (measured with /proc/net/tcp*; tests/test_ray_executor.py)
LOCAL_ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
LOOPBACK = "127.0.0.1"


@dataclass(frozen=True)
class PoolPlan:
    """How many embedding actors, and what each claims."""

    actors: int
    num_cpus: float
    num_gpus: float

    @property
    def device(self) -> str:
        return "cuda" if self.num_gpus else "cpu"


def pool_plan(resources: dict[str, float]) -> PoolPlan:
    """One actor per GPU when there are GPUs; else one per CPU but one, at least one."""
    gpus = int(resources.get("GPU", 0))
    if gpus:
        return PoolPlan(gpus, 1.0, 1.0)
    return PoolPlan(max(1, int(resources.get("CPU", 1)) - 1), 1.0, 0.0)


def connect(address: str | None) -> bool:
    """Join the cluster at ``address``, or start a local one bound to 127.0.0.1; True if started here."""
    if not address:  # before ray is imported: it reads RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER on import
        for key, value in LOCAL_ENV.items():
            os.environ.setdefault(key, value)
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    import ray

    if ray.is_initialized():
        return False
    if address:
        ray.init(address=address, log_to_driver=False)
        return True
    # A private module (no public setting exists): Ray reads ENABLE_RAY_CLUSTER at import time, so
    # the environment variable set above comes too late once ray is imported; pinned by ray[data]>=2.40.
    from ray._private import ray_constants

    # imported before this call (a test, a notebook): the import-time value would bind [::]
    ray_constants.ENABLE_RAY_CLUSTER = os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] != "0"
    # "local": a new cluster here, never one that ray_current_cluster or RAY_ADDRESS points at
    ray.init(address="local", _node_ip_address=LOOPBACK, include_dashboard=False, log_to_driver=False)
    return True


class RayExecutor:
    """An :data:`.sweep.Executor` running the pending partitions on a Ray cluster."""

    def __init__(self, address: str | None = None, max_retries: int = 3):
        self.address = address
        self.max_retries = max_retries

    def __call__(self, job: SweepJob, result: SweepResult) -> None:
        from ledgerscope.common.errors import InputError, Problem

        scoped = [cfg.name for cfg in job.arms if getattr(cfg, "phase_scope", "all") == "evidence"]
        if scoped:  # its phases run side by side; the evidence scope needs the base phase first
            raise InputError(
                Problem(
                    "--executor",
                    None,
                    "executor",
                    f'arm(s) {", ".join(scoped)}: phase_scope = "evidence" needs the local executor',
                )
            )
        import ray

        started = connect(self.address)
        try:
            self._run(job, result)
        finally:
            if started:
                ray.shutdown()

    def _run(self, job: SweepJob, result: SweepResult) -> None:
        import ray

        pending = []
        for cfg in job.arms:
            for phase in cfg.phase_list():
                if is_done(job.out, cfg.name, phase.label):
                    result.skipped.append((cfg.name, phase.label))
                    job.progress.partition_skipped(cfg.name, phase.label)
                else:
                    pending.append((cfg, phase))
        if not pending:
            return
        oracles = {c.name: oracle_for_arm(job.out, job.runtimes[c.name], job.fixtures) for c in job.arms}
        blocks, encoded = embed_unit_texts(job, pending, pool_plan(ray.cluster_resources()))
        result.encoded_texts += encoded
        task = ray.remote(partition_task).options(
            num_cpus=1, max_retries=self.max_retries, retry_exceptions=False
        )
        fixtures, corpus = ray.put(job.fixtures), ray.put(job.corpus)
        from ledgerscope.ledger.storage import bound_url, publish_run_level

        publish_run_level(job.out)  # a bucket gets the manifest before any worker's partition
        target = bound_url(job.out) or str(job.out)  # a bucket's URL: workers write to it directly
        refs = [
            task.remote(
                target,
                cfg,
                phase,
                fixtures,
                corpus,
                oracles[cfg.name],
                blocks.get(model_key(job.runtimes[cfg.name].encoder), []),
            )
            for cfg, phase in pending
        ]
        waiting = list(refs)
        while waiting:
            ready, waiting = ray.wait(waiting, num_returns=1)
            report = _report(ready[0])
            result.encoded_texts += report["encoded"]
            result.offsets.setdefault(report["arm"], Counter()).update(report["offsets"])
            job.progress.partition_done(report["arm"], report["phase"])
            result.written.append((report["arm"], report["phase"]))
        clear_staging(job.out)  # what an attempt killed mid-write left behind


def _report(ref: Any) -> dict:
    """A finished task's report; a task that failed on its input raises that error, not Ray's wrapper."""
    import ray

    from ledgerscope.common.errors import LedgerscopeError

    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as exc:
        if isinstance(exc.cause, LedgerscopeError):
            raise exc.cause from None
        raise


def model_key(encoder: Any) -> tuple[str, int] | None:
    """Which embedding blocks an arm reads: its local model's (name, batch size); None for an endpoint."""
    if not isinstance(encoder, Encoder):
        return None
    return (encoder.name, encoder.batch_size)


#: texts per actor call: several forward batches, so the encoder's per-token-count batches fill up
TEXTS_PER_CALL_BATCHES = 8


def batch_plan(unit_texts: list[list[str]], batch_size: int) -> list[list[str]]:
    """The actor calls for these partitions' unit texts: every unique text once, longest first (so
    a call's texts have similar token counts and the encoder's one-count batches fill up), cut every
    ``TEXTS_PER_CALL_BATCHES * batch_size``. A text's vectors do not depend on its batch
    (:class:`ledgerscope.pipeline.embedding.encoder.Encoder`), so any cut gives the local executor's bits."""
    todo = sorted({t for texts in unit_texts for t in texts}, key=lambda t: (-len(t), t))
    step = TEXTS_PER_CALL_BATCHES * batch_size
    return [todo[i : i + step] for i in range(0, len(todo), step)]


def embed_unit_texts(job: SweepJob, pending: list, plan: PoolPlan) -> tuple[dict, int]:
    """Every unique unit text of the pending partitions through the actor pool, per model:
    ({model key: [object refs of Arrow blocks]}, texts encoded)."""
    import ray

    groups: dict[tuple[str, int], list[list[str]]] = {}
    for cfg, phase in pending:
        rt = job.runtimes[cfg.name]
        key = model_key(rt.encoder)
        if key is None:
            continue
        visible = [s for s in job.corpus if set(s.access) <= cfg.clearance]
        units, _ = chunk_phase(rt, phase, visible)
        groups.setdefault(key, []).append([u.text for u in units])
    ray.data.DataContext.get_current().enable_progress_bars = False
    out, encoded = {}, 0
    for (model, batch_size), texts in groups.items():
        rows = [{"texts": b} for b in batch_plan(texts, batch_size)]
        ds = ray.data.from_items(rows, override_num_blocks=max(1, min(len(rows), 4 * plan.actors)))
        ds = ds.map_batches(
            EncodeBatch,
            fn_constructor_kwargs={"model": model, "batch_size": batch_size, "device": plan.device},
            batch_size=1,  # one row is one forward batch
            batch_format="pyarrow",
            compute=ray.data.ActorPoolStrategy(size=plan.actors),
            num_cpus=plan.num_cpus,
            num_gpus=plan.num_gpus,
        )
        out[(model, batch_size)] = ds.materialize().to_arrow_refs()
        encoded += sum(len(r["texts"]) for r in rows)
    return out, encoded
