"""``sweep --estimate``'s time: a short calibration run of the real cascade, scaled to the plan.

For an arm whose stages all run here (no endpoint: those are never called before the sweep), one
small partition is run for real: the first pending phase over the documents of the first few
questions, those questions down the whole cascade (:mod:`.cascade`, the resource record's clock).
It gives chunking's and the index builds' seconds per unit and each stage's seconds per question
(with what no stage clock covers, the records' assembly and judging, as ``other``); the plan's unit
and question counts scale them (the searches by the corpus's units over the sample's, the rest per
question).

The model's time follows the shape of its forward passes, not its tokens: a batch holds texts of
one token count, and a short batch runs copies of its rows, so a pass costs a fixed part (its
operators' dispatch and, on a busy machine, its threads' waits, which grow with the load) plus a
part per token position. Every pass of the calibration is timed, two full batches of the units'
commonest token count are added, and :func:`fit_rates` takes the medians: the fixed part from the
short passes, the positional part from the long ones, the first pass's excess as the warm-up. The
plan's passes and positions (:func:`.estimate.forward_shape`) scale them; query embedding is in
those passes, not in the per-question stages.

Fixed costs, each paid once by the sweep command: its process's start (imports, reading the
inputs: this process's own, measured the same way) and the model's load (when the plan encodes
anything with it). Endpoint stages' time is not estimated (their latency is the server's) and the
result says so. The estimate is only as good as the machine is steady: the rates are this
machine's at the time of the calibration.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from statistics import median
from typing import Any

from ledgerscope.pipeline.run.costs.estimate import Plan
from ledgerscope.pipeline.run.resources import BATCHED, Laps

#: questions and documents the calibration partition runs
SAMPLE_QUESTIONS = 8
SAMPLE_DOCUMENTS = 8
#: extra full batches timed for the positional rate
FULL_PASSES = 2
#: a pass of at most this many token positions is "short": its time is mostly the fixed part
SHORT_POSITIONS = 256


def _endpoint_free(cfg: Any) -> bool:
    sections = ("embedding", "rerank", "generator", "judge")
    return all(getattr(cfg, s).get("kind") != "endpoint" for s in sections)


def process_age() -> float | None:
    """Seconds since this process started (Linux ``/proc``; None elsewhere): a command's start-up."""
    try:
        with open("/proc/self/stat", encoding="ascii") as f:
            ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime", encoding="ascii") as f:
            uptime = float(f.read().split()[0])
        import os

        return max(0.0, uptime - ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError, AttributeError):
        return None


class PassLog:
    """Times every forward pass of ``enc`` while open: (token positions run, seconds)."""

    def __init__(self, enc: Any):
        self.enc, self.passes = enc, []

    def __enter__(self) -> PassLog:
        from ledgerscope.pipeline.embedding.encoder import min_rows

        run = self.enc.encode_batch

        def timed(batch: Any) -> Any:
            n, count = batch.offsets.shape[:2]
            t0 = time.perf_counter()
            out = run(batch)
            self.passes.append((max(n, min_rows(count)) * count, time.perf_counter() - t0))
            return out

        self.enc.encode_batch = timed  # the instance's, over the class's method
        return self

    def __exit__(self, *exc: object) -> None:
        del self.enc.encode_batch


def fit_rates(passes: Sequence[tuple[int, float]]) -> dict[str, float] | None:
    """Per pass, per token position and warm-up from timed passes, in order (the first is the
    warm-up's): medians, so that one pass slowed by a neighbour's burst moves nothing. The fixed part
    is the short passes' median less their positions' share; the positional rate is the long passes'
    median of (seconds less the fixed part) per position; two rounds settle both."""
    rest = passes[1:]
    short = [p for p in rest if p[0] <= SHORT_POSITIONS]
    long = [p for p in rest if p[0] > SHORT_POSITIONS]
    if not short or not long:
        return None
    per_pass, per_position = median(t for _, t in short), 0.0
    for _ in range(3):
        per_position = median(max(0.0, t - per_pass) / n for n, t in long)
        per_pass = max(0.0, median(t - per_position * n for n, t in short))
    first_n, first_t = passes[0]
    warmup = max(0.0, first_t - per_pass - per_position * first_n)
    return {"seconds_per_position": per_position, "seconds_per_pass": per_pass, "warmup_seconds": warmup}


def _full_passes(enc: Any, texts: Sequence[str]) -> None:
    """``FULL_PASSES`` full batches of the texts' commonest token count (a sweep's bulk passes)."""
    import numpy as np

    from ledgerscope.pipeline.embedding.encoder import ForwardBatch

    batches = enc.batches(texts)
    if not batches:
        return
    counts = Counter(b.offsets.shape[1] for b in batches for _ in range(b.offsets.shape[0]))
    batch = next(b for b in batches if b.offsets.shape[1] == counts.most_common(1)[0][0])
    rows, count = int(enc.batch_size), batch.offsets.shape[1]
    feats = {k: np.repeat(v[:1], rows, axis=0) for k, v in batch.features.items()}
    offsets = np.repeat(batch.offsets[:1], rows, axis=0).reshape(rows, count, 2)
    for _ in range(FULL_PASSES):
        enc.encode_batch(ForwardBatch([batch.texts[0]] * rows, feats, offsets))


def calibrate_arm(cfg: Any, fixtures: Sequence[Any], corpus: Any, encoder_factory: Any) -> dict[str, Any]:
    """Rates from one small real partition of ``cfg``."""
    from ledgerscope.pipeline.run.cascade import build_phase, run_questions
    from ledgerscope.pipeline.run.resources import StageMarks
    from ledgerscope.pipeline.run.runtime import build_runtime

    t0 = time.perf_counter()
    rt = build_runtime(cfg, encoder_factory)
    enc = rt.encoder
    # a cache that cannot read a dropped text back makes the sweep chunk every partition up front
    reads_back = [callable(getattr(c, "can_read_back", None)) and c.can_read_back() for c in rt.caches()]
    plans_last_use = not all(reads_back)
    if getattr(enc, "loaded", True) is False:
        _ = enc.model  # loaded here if the plan did not need it
    sample_q = list(fixtures)[:SAMPLE_QUESTIONS]
    wanted = {d for f in sample_q for d in f.doc_ids}
    docs = [s for s in corpus if s.doc_id in wanted][:SAMPLE_DOCUMENTS] or list(corpus)[:SAMPLE_DOCUMENTS]
    marks = StageMarks(lambda stage: None)
    # the calibration's vectors stay out of the persistent cache: the sweep must encode what the
    # plan says it will (the plan was made before, against the cache as it was)
    store = getattr(enc, "store", None)
    if store is not None:
        enc.store = None
    timed = callable(getattr(enc, "encode_batch", None)) and callable(getattr(enc, "batches", None))
    log = PassLog(enc) if timed else None
    try:
        if log is not None:
            log.__enter__()
        index = build_phase(rt, cfg.phase_list()[0], docs, on_stage=marks)
        laps = Laps(len(sample_q))
        t_q = time.perf_counter()
        run_questions(rt, index, sample_q, {s.doc_id: s.text for s in corpus}, {}, laps=laps)
        t_q = time.perf_counter() - t_q
        if log is not None:
            _full_passes(enc, [u.text for u in index.units])
    finally:
        if log is not None:
            log.__exit__()
        if store is not None:
            enc.store = store
    n_units, n_q = max(1, len(index.units)), max(1, len(sample_q))
    per_q = {stage: sum(v) / n_q for stage, v in laps.seconds.items()}
    per_q["other"] = max(0.0, t_q - sum(sum(v) for v in laps.seconds.values())) / n_q
    return {
        "load_seconds": round(float(getattr(enc, "load_seconds", 0.0) or 0.0), 3),
        "forward": fit_rates(log.passes) if log is not None else None,
        "passes_timed": len(log.passes) if log is not None else 0,
        "chunk_seconds_per_unit": marks.seconds.get("chunk", 0.0) / n_units,
        "index_seconds_per_unit": marks.seconds.get("index", 0.0) / n_units,
        "sample_units": n_units,
        "plans_last_use": plans_last_use,
        "per_question": per_q,
        "calibration_seconds": round(time.perf_counter() - t0, 3),
    }


def step_seconds(r: dict[str, Any], step: Any, rechunk: bool) -> float:
    """One planned step's seconds at the calibrated rates ``r``: its model passes, and for a
    partition its chunking (twice when the sweep plans the cache's last uses), index builds and
    questions; for the oracle, the reader per question."""
    fwd, u = r.get("forward"), step.usage
    seconds = 0.0
    if fwd is not None:
        seconds += fwd["seconds_per_position"] * u.emb_forward_tokens
        seconds += fwd["seconds_per_pass"] * u.emb_batches
    if step.phase == "oracle":
        return seconds + r["per_question"].get("generate", 0.0) * step.questions
    if step.phase == "setup":
        return seconds
    chunk = r["chunk_seconds_per_unit"] * (2 if rechunk else 1)
    seconds += (chunk + r["index_seconds_per_unit"]) * step.units
    scale = step.units / r["sample_units"]
    return seconds + step.questions * sum(
        v * (scale if stage in BATCHED[1:] else 1.0)
        for stage, v in r["per_question"].items()
        if stage != "embed_query" or fwd is None  # its passes are in the plan's
    )


def estimate_seconds(
    plan: Plan,
    arms: Sequence[Any],
    fixtures: Sequence[Any],
    corpus: Any,
    encoder_factory: Any,
    startup: float | None = None,
) -> dict[str, Any]:
    """The sweep command's estimated wall time: one calibration per local embedding model, then
    :func:`plan_seconds`."""
    rates: dict[tuple, dict] = {}
    by_arm: dict[str, dict] = {}
    notes = []
    for cfg in arms:
        if not any(s.arm == cfg.name and s.phase not in ("setup", "oracle") for s in plan.steps):
            continue
        if not _endpoint_free(cfg):
            notes.append(
                f"arm {cfg.name!r}: endpoint stages; their time (the servers' latency) is not estimated"
            )
            continue
        key = (cfg.embedding.get("model"), cfg.embedding.get("device"))
        if key not in rates:
            rates[key] = calibrate_arm(cfg, fixtures, corpus, encoder_factory)
        by_arm[cfg.name] = rates[key]
    return {
        "total": round(plan_seconds(plan, by_arm, startup), 1),
        "startup_seconds": None if startup is None else round(startup, 3),
        "calibration": {f"{k[0]}": v for k, v in rates.items()},
        "notes": notes,
    }


def plan_seconds(plan: Plan, rates: dict[str, dict[str, Any]], startup: float | None = None) -> float:
    """``startup``, each model's load and warm-up once (arms sharing a model share one ``rates``
    dict; paid only when the plan encodes something with it: the sweep loads a model to encode),
    and every step of the arms in ``rates`` at their rates."""
    total = startup or 0.0
    for r in {id(r): r for r in rates.values()}.values():
        arms = [a for a, x in rates.items() if x is r]
        if any(s.usage.texts for s in plan.steps if s.arm in arms):
            total += r["load_seconds"] + (r.get("forward") or {}).get("warmup_seconds", 0.0)
        total += sum(step_seconds(r, s, r.get("plans_last_use", False)) for s in plan.steps if s.arm in arms)
    return total
