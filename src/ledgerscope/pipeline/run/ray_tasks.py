"""What runs on the Ray cluster's workers: the embedding actor and the partition task.

Embeddings travel as Arrow blocks in Ray's object store, one row per unique unit text, its vectors
as raw float32/int32 bytes (``tokens`` is the token-vector matrix, ``n`` its rows), so a block is a
few columns of binary and costs no per-row Python objects to ship. A partition task reads the
blocks of its arm's model, keeps the rows of its own unit texts, and encodes only what is missing
(the question texts, and everything when the arm's embedding is an endpoint).
"""

from __future__ import annotations

import os
import shutil
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from ledgerscope.inputs.fixtures import Fixture
from ledgerscope.inputs.sources import Corpus
from ledgerscope.ledger.write import is_done
from ledgerscope.pipeline.arm.config import ArmConfig
from ledgerscope.pipeline.contracts.units import Phase
from ledgerscope.pipeline.embedding.encoder import Encoded, Encoder, shared_encoder
from ledgerscope.pipeline.run.cascade import chunk_phase
from ledgerscope.pipeline.run.partition import count_offsets, pause_after_partition, run_partition
from ledgerscope.pipeline.run.runtime import build_runtime


class EncodeBatch:
    """A Ray Data actor: one model loaded once, encoding batches of unit texts.

    Built by ``map_batches(EncodeBatch, compute=ActorPoolStrategy(...))``; on a GPU actor
    (``num_gpus=1``) the model runs on CUDA, elsewhere on the CPU (the reference device).
    """

    def __init__(self, model: str, batch_size: int, device: str = "cpu"):
        self.encoder = Encoder(model, batch_size, device=device)

    def __call__(self, batch: Any) -> dict[str, Any]:
        """Each input row is one call's texts (:func:`.ray_executor.batch_plan`); the encoder's
        batches make a text's bits independent of its neighbours, so they equal a local sweep's."""
        texts: list[str] = []
        for group in batch.column("texts").to_pylist():
            self.encoder.encode(group)
            texts.extend(group)
        rows = [self.encoder.get(t) for t in texts]
        self.encoder.drop(texts)  # the actor keeps nothing: every text is in exactly one batch
        return {
            "text": np.array(texts, dtype=object),
            "vector": np.array([e.vector.tobytes() for e in rows], dtype=object),
            "tokens": np.array([e.tokens.tobytes() for e in rows], dtype=object),
            "offsets": np.array([e.offsets.tobytes() for e in rows], dtype=object),
            "n": np.array([len(e.offsets) for e in rows], dtype=np.int64),
        }


def decode_rows(blocks: Iterable[Any], wanted: set[str], dim: int) -> list[tuple[str, Encoded]]:
    """The (text, Encoded) pairs of ``wanted`` texts found in these Arrow blocks."""
    out = []
    for table in blocks:
        cols = {name: table.column(name).to_pylist() for name in ("text", "vector", "tokens", "offsets", "n")}
        for i, text in enumerate(cols["text"]):
            if text not in wanted:
                continue
            n = cols["n"][i]
            out.append(
                (
                    text,
                    Encoded(
                        np.frombuffer(cols["vector"][i], dtype=np.float32).copy(),
                        np.frombuffer(cols["tokens"][i], dtype=np.float32).reshape(n, dim).copy(),
                        np.frombuffer(cols["offsets"][i], dtype=np.int32).reshape(n, 2).copy(),
                    ),
                )
            )
    return out


def partition_task(
    out: str,
    cfg: ArmConfig,
    phase: Phase,
    fixtures: list[Fixture],
    corpus: Corpus,
    oracle: dict[str, dict],
    blocks: list[Any],
) -> dict:
    """One (arm, phase) partition on a worker, the same code the local executor runs.

    Idempotent, so Ray may retry it after its worker dies: a partition already on disk (the
    attempt died after its rename) is left as it is, and one that is not is written whole by
    :func:`.partition.run_partition`. ``blocks`` are object references (Ray resolves none of
    them on the way in), fetched here only when the partition still has to be computed.
    """
    import ray

    from ledgerscope.ledger.storage import working_dir

    ledger = working_dir(out)  # a URL: a local directory whose partition uploads itself (no shared disk)
    report: dict[str, Any] = {
        "arm": cfg.name,
        "phase": phase.label,
        "pid": os.getpid(),
        "encoded": 0,
        "offsets": {},
        "skipped": False,
    }
    if is_done(ledger, cfg.name, phase.label):
        report["skipped"] = True
        if ledger != Path(out):
            shutil.rmtree(ledger, ignore_errors=True)
        return report
    rt = build_runtime(cfg, shared_encoder)
    before = rt.encoder.forward_texts
    if blocks and isinstance(rt.encoder, Encoder):
        visible = [s for s in corpus if set(s.access) <= cfg.clearance]
        units, _ = chunk_phase(rt, phase, visible)
        wanted = {u.text for u in units}
        found = decode_rows(ray.get(blocks), wanted, rt.encoder.dim)
        rt.encoder.preload(found)
        report["preloaded"] = len(found)
    index = run_partition(ledger, rt, phase, fixtures, corpus, oracle)
    if ledger != Path(out):  # uploaded, files then marker: nothing of it is needed here
        shutil.rmtree(ledger, ignore_errors=True)
    counts: Counter = Counter()
    count_offsets(counts, index.boundaries)
    report["offsets"] = dict(counts)
    report["encoded"] = rt.encoder.forward_texts - before
    for cache in rt.caches():  # a reused worker keeps its model, not this phase's vectors
        cache.drop({u.text for u in index.units})
    pause_after_partition()
    return report
