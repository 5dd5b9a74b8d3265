"""``sweep --estimate``'s time model, without a model: the rates fitted from timed passes, and the plan's
steps and fixed costs summed at given rates (the calibration that measures the rates runs the real
cascade; it is exercised by the benchmark in docs/benchmarks.md, not here: a model load is seconds)."""

from __future__ import annotations

import pytest

from ledgerscope.pipeline.run.costs.calibrate import fit_rates, plan_seconds, process_age
from ledgerscope.pipeline.run.costs.estimate import Plan, Step, Usage


def test_rates_are_medians_so_a_slowed_pass_moves_nothing():
    per_pass, per_position = 0.05, 0.0005
    shapes = [64, 96, 128, 70, 200, 3200, 90, 3200, 2400, 64]
    passes = [(n, per_pass + per_position * n) for n in shapes]
    passes[0] = (3200, 3.0)  # the first pass: the warm-up
    passes[4] = (200, 4.0)  # a neighbour's burst slows one short pass
    passes[7] = (3200, 9.0)  # and one long one
    rates = fit_rates(passes)
    assert rates["seconds_per_pass"] == pytest.approx(per_pass, rel=0.05)
    assert rates["seconds_per_position"] == pytest.approx(per_position, rel=0.05)
    assert rates["warmup_seconds"] == pytest.approx(3.0 - per_pass - per_position * 3200, rel=0.05)
    assert fit_rates([(3200, 1.0), (3200, 1.0)]) is None  # no short pass: the fixed part is unknown


def _rates(load: float = 5.0) -> dict:
    return {
        "load_seconds": load,
        "forward": {"seconds_per_position": 0.001, "seconds_per_pass": 0.1, "warmup_seconds": 1.0},
        "chunk_seconds_per_unit": 0.01,
        "index_seconds_per_unit": 0.02,
        "sample_units": 10,
        "plans_last_use": True,
        "per_question": {"embed_query": 9.0, "bm25": 0.5, "pack": 0.25, "other": 0.25},
    }


def test_the_plan_is_priced_step_by_step_with_the_load_once():
    part = Usage(texts=20, emb_batches=3, emb_forward_tokens=1000)
    oracle = Usage(texts=4, emb_batches=2, emb_forward_tokens=200)
    plan = Plan(
        [
            Step("a", "oracle", oracle, questions=2),
            Step("a", "0", part, units=20, questions=4),
            Step("b", "0", part, units=20, questions=4),
        ]
    )
    shared = _rates()
    # a partition: 1 s positions + 0.3 s passes + 20 units x (2 x 0.01 chunking, planned twice, + 0.02)
    # + 4 questions x (0.5 bm25 x 20/10 units + 0.25 + 0.25; query embedding is in the passes)
    partition = 1.0 + 0.3 + 20 * 0.04 + 4 * (1.0 + 0.5)
    oracle_s = 0.2 + 0.2  # its passes; the extractive reader's "generate" is not in these rates
    assert plan_seconds(plan, {"a": shared, "b": shared}, startup=2.0) == pytest.approx(
        2.0 + 5.0 + 1.0 + oracle_s + 2 * partition
    )
    # arms on two models load two; a plan that encodes nothing (all cached) loads none
    two = plan_seconds(plan, {"a": _rates(), "b": _rates()})
    assert two == pytest.approx(12.0 + oracle_s + 2 * partition)
    cached = Plan([Step("a", "0", Usage(), units=20, questions=4)])
    assert plan_seconds(cached, {"a": shared}) == pytest.approx(20 * 0.04 + 4 * 1.5)


def test_the_start_up_is_this_process_age():
    age = process_age()
    assert age is None or age > 0
