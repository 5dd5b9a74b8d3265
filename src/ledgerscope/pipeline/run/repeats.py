"""``--repeats K``: the generator asked K times per record, every answer kept (the ``repeats`` table).

A sampling generator (an endpoint with ``temperature > 0``, an LLM judge that samples) answers a
question differently run to run; a comparison that reads one answer per record takes that noise for
an effect of the arms. With K > 1 the sweep runs generation and judging K times on the same packed
context (retrieval, reranking and packing are deterministic and run once) and writes one row per
repeat. Repeat 0 is the record's own answer, generated exactly as with K = 1 (the generator's
configured seed), so the ``records`` table and everything that reads it are unchanged; repeats
1..K-1 each get a seed of their own, derived from (the configured seed, arm, phase, question,
repeat), so a rerun asks the same questions with the same seeds (a server that honours seeds gives
the same answers) while the repeats of one record still sample differently. A generator without a
``seed`` (the embedded reader, a callable) is asked as it is: the embedded reader is deterministic
and gives K identical answers.

The manifest records ``repeats`` (only when K > 1: a K = 1 ledger is byte for byte what it was), so a
resumed sweep, ``rerun`` and the Ray workers run the same K.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ledgerscope.common.errors import InputError, Problem

#: the manifest key (absent: 1)
MANIFEST_KEY = "repeats"


def check_repeats(repeats: int, where: str = "--repeats") -> int:
    """K must be a whole number >= 1 (exit 2 otherwise)."""
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise InputError(Problem(where, None, "repeats", f"must be a whole number >= 1, got {repeats!r}"))
    return repeats


def manifest_repeats(ledger: Path) -> int:
    """K as the ledger's manifest records it (1 when absent or unreadable: the reader checks it)."""
    try:
        manifest = json.loads((Path(ledger) / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return 1
    value = manifest.get(MANIFEST_KEY, 1) if isinstance(manifest, dict) else 1
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else 1


def repeat_seed(base: int | None, arm: str, phase: str, qid: str, repeat: int) -> int | None:
    """The seed of one repeat: the configured one for repeat 0 (the record), else a 31-bit number
    derived from all five values (None stays None: the server samples unseeded)."""
    if base is None or repeat == 0:
        return base
    blob = json.dumps([base, arm, phase, qid, repeat], ensure_ascii=False).encode()
    return int.from_bytes(hashlib.sha256(blob).digest()[:4], "big") & 0x7FFFFFFF


@contextlib.contextmanager
def seeded(generator: Any, seed: int | None) -> Iterator[None]:
    """The generator asked with ``seed`` (and, for an LLM judge sharing it, nothing else changed);
    a generator without a ``seed`` attribute is left alone."""
    if not hasattr(generator, "seed") or seed is None:
        yield
        return
    before = generator.seed
    generator.seed = seed
    try:
        yield
    finally:
        generator.seed = before


def repeat_row(arm: str, phase: str, qid: str, repeat: int, seed: int | None, trace: Any) -> dict:
    """One ``repeats`` row from a finished question trace (the answer side only)."""
    gen, verdicts = trace.generated.result, trace.verdicts
    latency = (gen.detail or {}).get("latency_s")
    return {
        "arm": arm,
        "phase": phase,
        "qid": qid,
        "repeat": repeat,
        "seed": seed,
        "answer": gen.answer,
        "abstained": gen.abstained,
        "citations_json": json.dumps(trace.generated.citations, ensure_ascii=False),
        "cited_unit_ids": [u.unit_id for u in trace.generated.cited],
        "answer_verdict": verdicts.answer,
        "answer_reason": verdicts.answer_reason,
        "citation_verdict": verdicts.citation,
        "citation_reason": verdicts.citation_reason,
        "generator_error": gen.error,
        "latency_s": float(latency) if isinstance(latency, int | float) else None,
    }


def run_repeats(finish_one: Any, rt: Any, phase: str, first: Any, k: int) -> list[dict]:
    """The ``repeats`` rows of one record at ``phase``: ``first`` (its trace) as repeat 0, then
    ``finish_one()`` (generation and judging on the same packed views) under each further repeat's
    seed; ``rt``: the arm's runtime (its name and generator)."""
    generator, arm, qid = rt.generator, rt.config.name, first.fixture.qid
    base = getattr(generator, "seed", None)
    rows = [repeat_row(arm, phase, qid, 0, base, first)]
    for r in range(1, k):
        seed = repeat_seed(base, arm, phase, qid, r)
        with seeded(generator, seed):
            rows.append(repeat_row(arm, phase, qid, r, seed, finish_one()))
    return rows
