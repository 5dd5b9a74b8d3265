"""``sweep --estimate`` and the caps (``--max-cost``, ``--max-requests``): reading the options and
printing what the plan says (:mod:`ledgerscope.pipeline.run.costs.estimate`)."""

from __future__ import annotations

from pathlib import Path

from ledgerscope.cli.shared.output import console, say
from ledgerscope.common.errors import InputError, Problem
from ledgerscope.common.safe_text import json_text


def caps_from(prices: Path | None, max_cost: float | None, max_requests: int | None):
    """The caps the options ask for (with the price table loaded), checked."""
    from ledgerscope.pipeline.run.costs.estimate import Caps
    from ledgerscope.pipeline.run.costs.prices import load_prices

    if max_cost is not None and max_cost < 0:
        raise InputError(Problem("--max-cost", None, "max_cost", "must be a non-negative amount"))
    if max_requests is not None and max_requests < 0:
        raise InputError(Problem("--max-requests", None, "max_requests", "must be a non-negative number"))
    if max_cost is not None and prices is None:
        raise InputError(Problem("--max-cost", None, "prices", "a cost cap needs --prices (a price table)"))
    return Caps(max_cost, max_requests, load_prices(prices) if prices is not None else None)


def print_estimate(fixtures, corpus, arms, out: Path, caps, json_out: bool, repeats: int = 1) -> None:
    """The plan (after the caches) and a calibrated time; no endpoint is called."""
    from ledgerscope.pipeline.run.costs.calibrate import estimate_seconds, process_age
    from ledgerscope.pipeline.run.costs.estimate import plan_sweep, summary
    from ledgerscope.pipeline.run.sweep import check_arm_names

    startup = process_age()  # the sweep command's own start (imports, the inputs read) is this one's
    check_arm_names(arms)
    plan = plan_sweep(fixtures, corpus, arms, out, repeats=repeats)
    from ledgerscope.pipeline.embedding.encoder import shared_encoder

    seconds = estimate_seconds(plan, arms, fixtures, corpus, shared_encoder, startup)
    result = summary(plan, caps.prices, seconds)
    if json_out:
        print(json_text(result))
        return
    shown = console()
    cost, r = result["cost"], result
    money = (
        "no price table (--prices)"
        if caps.prices is None
        else f"unpriced: {', '.join(r['unpriced'])}"
        if cost is None
        else f"{cost:.6f} {r['currency']}"
    )
    took = r["seconds"] if r["seconds"] is not None else "?"
    say(
        shown,
        f"estimate for {out}: {r['partitions']} partition(s) to run, {r['texts_to_encode']} texts "
        f"to encode ({r['embedding_tokens']} tokens), {r['requests']} endpoint requests (embedding "
        f"{r['embedding_requests']}, rerank {r['rerank_requests']}, "
        f"generation {r['generator_requests']}), "
        f"{r['prompt_tokens']} prompt + {r['completion_tokens']} completion tokens at most; "
        f"cost {money}; about {took} s",
    )
    for note in result["notes"] + seconds.get("notes", []):
        say(shown, note)


def print_stopped(result) -> None:
    say(console(), result.stopped)
