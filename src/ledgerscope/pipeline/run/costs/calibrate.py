"""``sweep --estimate``'s time: a short calibration run of the real cascade, scaled to the plan.

For an arm whose stages all run here (no endpoint: those are never called before the sweep), one
small partition is run for real: the first pending phase over the documents of the first few
questions, those questions down the whole cascade (:mod:`.cascade`, the resource record's clock).
It gives the index builds' seconds per unit and each stage's seconds per question; the plan's
unit and question counts scale them (the searches by the corpus's units over the sample's, the
rest per question). The model's time follows the shape of its forward passes, not its tokens: a
batch holds texts of one token count, and a short batch runs copies of its rows, so a small
sample's passes (a few rows each) cost several times a sweep's per token (6 x measured, issue 30).
So the model is timed on two shapes after a warm-up pass, a full batch and a short one, giving
seconds per token position and per pass; the plan's passes and positions
(:func:`.estimate.forward_shape`) scale them. Query embedding is in those passes, not in the
per-question stages. The model's load is counted once.
Endpoint stages' time is not estimated (their latency is the server's) and the result says so.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from ledgerscope.pipeline.run.costs.estimate import Plan
from ledgerscope.pipeline.run.resources import BATCHED, Laps

#: questions and documents the calibration partition runs
SAMPLE_QUESTIONS = 8
SAMPLE_DOCUMENTS = 8


def _endpoint_free(cfg: Any) -> bool:
    sections = ("embedding", "rerank", "generator", "judge")
    return all(getattr(cfg, s).get("kind") != "endpoint" for s in sections)


def _repeat(batch: Any, rows: int) -> Any:
    """``batch``'s first row ``rows`` times: a full pass of that token count."""
    import numpy as np

    from ledgerscope.pipeline.embedding.encoder import ForwardBatch

    count = batch.offsets.shape[1]
    feats = {k: np.repeat(v[:1], rows, axis=0) for k, v in batch.features.items()}
    offsets = np.repeat(batch.offsets[:1], rows, axis=0).reshape(rows, count, 2)
    return ForwardBatch([batch.texts[0]] * rows, feats, offsets)


def _timed_pass(enc: Any, batch: Any, repeats: int = 1) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        enc.encode_batch(batch)
        best = min(best, time.perf_counter() - t0)
    return best


def model_rates(enc: Any, calls: Sequence[Sequence[str]], model_s: float) -> dict[str, float] | None:
    """A local model's time in three parts, measured after the calibration's passes warmed it: per
    token position (one full batch of the sample's longest text, ``batch_size`` rows), per pass (the
    shortest text's padded pass, best of three, less its positions), and the first passes' one-time
    set-up (what the calibration's own passes, ``calls`` taking ``model_s``, took beyond the other
    two: paid once per process, like the load)."""
    from ledgerscope.pipeline.embedding.encoder import min_rows

    if not (callable(getattr(enc, "batches", None)) and callable(getattr(enc, "encode_batch", None))):
        return None
    shapes = [(b.offsets.shape[0], b.offsets.shape[1]) for texts in calls for b in enc.batches(texts)]
    texts = [t for c in calls for t in c]
    if not shapes:
        return None
    full = _repeat(enc.batches([max(texts, key=len)])[0], int(enc.batch_size))
    per_position = _timed_pass(enc, full) / (full.offsets.shape[0] * full.offsets.shape[1])
    short = enc.batches([min(texts, key=len)])[0]
    count = short.offsets.shape[1]
    per_pass = max(0.0, _timed_pass(enc, short, 3) - per_position * min_rows(count) * count)
    positions = sum(max(n, min_rows(c)) * c for n, c in shapes)
    warmup = max(0.0, model_s - per_position * positions - per_pass * len(shapes))
    return {"seconds_per_position": per_position, "seconds_per_pass": per_pass, "warmup_seconds": warmup}


def calibrate_arm(cfg: Any, fixtures: Sequence[Any], corpus: Any, encoder_factory: Any) -> dict[str, Any]:
    """Rates from one small real partition of ``cfg``."""
    from ledgerscope.pipeline.run.cascade import build_phase, run_questions
    from ledgerscope.pipeline.run.runtime import build_runtime

    t0 = time.perf_counter()
    rt = build_runtime(cfg, encoder_factory)
    enc = rt.encoder
    if getattr(enc, "loaded", True) is False:
        _ = enc.model  # the load, timed apart: the sweep pays it once
    load_s = time.perf_counter() - t0
    sample_q = list(fixtures)[:SAMPLE_QUESTIONS]
    wanted = {d for f in sample_q for d in f.doc_ids}
    docs = [s for s in corpus if s.doc_id in wanted][:SAMPLE_DOCUMENTS] or list(corpus)[:SAMPLE_DOCUMENTS]
    phase = cfg.phase_list()[0]
    tokens0, seconds0 = getattr(enc, "forward_tokens", 0), getattr(enc, "forward_seconds", 0.0)
    marks: dict[str, float] = {}
    last = [time.perf_counter()]

    def mark(stage: str) -> None:
        now = time.perf_counter()
        marks[stage] = now - last[0]
        last[0] = now

    # the calibration's vectors stay out of the persistent cache: the sweep must encode what the
    # plan says it will (the plan was made before, against the cache as it was)
    store = getattr(enc, "store", None)
    if store is not None:
        enc.store = None
    try:
        index = build_phase(rt, phase, docs, on_stage=mark)
        laps = Laps(len(sample_q))
        run_questions(rt, index, sample_q, {s.doc_id: s.text for s in corpus}, {}, laps=laps)
    finally:
        if store is not None:
            enc.store = store
    tokens = getattr(enc, "forward_tokens", 0) - tokens0
    model_s = getattr(enc, "forward_seconds", 0.0) - seconds0
    forward = model_rates(enc, [[u.text for u in index.units], [f.question for f in sample_q]], model_s)
    n_units = max(1, len(index.units))
    per_q = {stage: sum(v) / max(1, len(sample_q)) for stage, v in laps.seconds.items()}
    return {
        "load_seconds": round(load_s, 3),
        "seconds_per_token": (model_s / tokens) if tokens else None,
        "forward": forward,
        "index_seconds_per_unit": marks.get("index", 0.0) / n_units,
        "sample_units": n_units,
        "per_question": per_q,
        "calibration_seconds": round(time.perf_counter() - t0, 3),
    }


def estimate_seconds(
    plan: Plan, arms: Sequence[Any], fixtures: Sequence[Any], corpus: Any, encoder_factory: Any
) -> dict[str, Any]:
    """The sweep's estimated wall time from one calibration per local embedding model."""
    rates: dict[tuple, dict] = {}
    total, notes = 0.0, []
    for cfg in arms:
        steps = [s for s in plan.steps if s.arm == cfg.name and s.phase not in ("setup", "oracle")]
        if not steps:
            continue
        if not _endpoint_free(cfg):
            notes.append(
                f"arm {cfg.name!r}: endpoint stages; their time (the servers' latency) is not estimated"
            )
            continue
        key = (cfg.embedding.get("model"), cfg.embedding.get("device"))
        fresh = key not in rates
        if fresh:
            rates[key] = calibrate_arm(cfg, fixtures, corpus, encoder_factory)
        r = rates[key]
        arm_s = r["load_seconds"] + (r.get("forward") or {}).get("warmup_seconds", 0.0) if fresh else 0.0
        for s in plan.steps:
            if s.arm != cfg.name:
                continue
            fwd = r.get("forward")
            if fwd is not None:
                arm_s += fwd["seconds_per_position"] * s.usage.emb_forward_tokens
                arm_s += fwd["seconds_per_pass"] * s.usage.emb_batches
            else:
                arm_s += (r["seconds_per_token"] or 0.0) * s.usage.emb_tokens
            if s.phase in ("setup", "oracle"):
                arm_s += r["per_question"].get("generate", 0.0) * s.questions if s.phase == "oracle" else 0.0
                continue
            arm_s += r["index_seconds_per_unit"] * s.units
            scale = s.units / r["sample_units"]
            arm_s += s.questions * sum(
                v * (scale if stage in BATCHED[1:] else 1.0)
                for stage, v in r["per_question"].items()
                if stage != "embed_query" or r.get("forward") is None  # its passes are in the plan's
            )
        total += arm_s
    return {"total": round(total, 1), "calibration": {f"{k[0]}": v for k, v in rates.items()}, "notes": notes}
