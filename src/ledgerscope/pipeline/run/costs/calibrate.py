"""``sweep --estimate``'s time: a short calibration run of the real cascade, scaled to the plan.

For an arm whose stages all run here (no endpoint: those are never called before the sweep), one
small partition is run for real: the first pending phase over the documents of the first few
questions, those questions down the whole cascade (:mod:`.cascade`, the resource record's clock).
It gives the model's seconds per token, the index builds' seconds per unit and each stage's
seconds per question; the plan's token, unit and question counts scale them (the searches by the
corpus's units over the sample's, the rest per question). The model's load is counted once.
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

    index = build_phase(rt, phase, docs, on_stage=mark)
    laps = Laps(len(sample_q))
    run_questions(rt, index, sample_q, {s.doc_id: s.text for s in corpus}, {}, laps=laps)
    tokens = getattr(enc, "forward_tokens", 0) - tokens0
    model_s = getattr(enc, "forward_seconds", 0.0) - seconds0
    n_units = max(1, len(index.units))
    per_q = {stage: sum(v) / max(1, len(sample_q)) for stage, v in laps.seconds.items()}
    return {
        "load_seconds": round(load_s, 3),
        "seconds_per_token": (model_s / tokens) if tokens else None,
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
        arm_s = r["load_seconds"] if fresh else 0.0
        for s in plan.steps:
            if s.arm != cfg.name:
                continue
            arm_s += (r["seconds_per_token"] or 0.0) * s.usage.emb_tokens
            if s.phase in ("setup", "oracle"):
                arm_s += r["per_question"].get("generate", 0.0) * s.questions if s.phase == "oracle" else 0.0
                continue
            arm_s += r["index_seconds_per_unit"] * s.units
            scale = s.units / r["sample_units"]
            arm_s += s.questions * sum(
                v * (scale if stage in BATCHED[1:] else 1.0) for stage, v in r["per_question"].items()
            )
        total += arm_s
    return {"total": round(total, 1), "calibration": {f"{k[0]}": v for k, v in rates.items()}, "notes": notes}
