#!/usr/bin/env python
"""Per-stage costs of one (arm, phase) partition, the units docs/scaling.md extrapolates from.

Imports the ContractNLI dev split (../shared/data/contractnli/dev.json), takes documents until
--min-chars characters, and times, in one process on the model the sweep uses by default:

  encode   the phase's unique unit texts, one forward pass each       -> s per 1,000 tokens
  bm25     the lexical index over the phase's units                   -> s per 10,000 units
  hnsw     the ANN index (M=16, ef_construction=200) over them        -> s per 10,000 units
  cascade  every question down retrieve..judge..support (questions
           encoded and the reader's texts included)                   -> s per question
  write    one partition's tables, candidates repeated to --rows      -> s per 1,000,000 candidate rows

    .venv/bin/python scripts/bench_stages.py [--min-chars 300000] [--capacity 96] [--rows 500000]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ["LEDGERSCOPE_EMBEDDING_CACHE"] = "off"  # measure encoding, not a read of the cache

ROOT = Path(__file__).resolve().parent.parent


def load_inputs(data: Path, min_chars: int, work: Path):
    """The first documents of the ContractNLI dev split up to ``min_chars``, and their questions."""
    from ledgerscope.inputs.fixtures import load_fixtures
    from ledgerscope.inputs.importers.contractnli import import_contractnli
    from ledgerscope.inputs.sources import Corpus, load_corpus

    import_contractnli(data, work / "import")
    full = load_corpus(work / "import" / "corpus.jsonl")
    corpus, chars = Corpus(), 0
    for src in full:
        if chars >= min_chars:
            break
        corpus.add(src)
        chars += len(src.text)
    fixtures, _ = load_fixtures(work / "import" / "fixtures.jsonl", full)
    keep = set(corpus.sources)
    fixtures = [f for f in fixtures if f.doc_ids and set(f.doc_ids) <= keep]
    return fixtures, corpus


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def write_cost(index, cands, records, rows: int, work: Path) -> tuple[int, float]:
    """Seconds to write one partition whose candidates table is repeated to about ``rows`` rows."""
    import pyarrow as pa

    from ledgerscope.ledger.write import write_partition
    from ledgerscope.pipeline.run.partition import unit_table

    table = cands.table()
    reps = max(1, rows // max(1, table.num_rows))
    big = pa.concat_tables([table] * reps)
    out = work / "write-ledger"
    tables = {
        "units": unit_table("a", "0", index),
        "boundaries": [],
        "candidates": big,
        "records": records,
        "repairs": [],
    }
    _, seconds = timed(lambda: write_partition(out, "a", "0", tables, {"arm": "a", "phase": "0"}))
    return big.num_rows, seconds


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(ROOT.parent / "shared" / "data" / "contractnli" / "dev.json"))
    ap.add_argument("--min-chars", type=int, default=300_000)
    ap.add_argument("--capacity", type=int, default=96)
    ap.add_argument("--rows", type=int, default=500_000, help="candidate rows for the write figure")
    args = ap.parse_args()

    from ledgerscope.pipeline.arm.config import arm_from_dict
    from ledgerscope.pipeline.contracts.stages import PhaseIndex, build_index_or_failure
    from ledgerscope.pipeline.embedding.encoder import shared_encoder
    from ledgerscope.pipeline.run.cascade import chunk_phase, run_questions
    from ledgerscope.pipeline.run.runtime import build_runtime

    work = Path(tempfile.mkdtemp(prefix="bench_stages_"))
    fixtures, corpus = load_inputs(Path(args.data), args.min_chars, work)
    cfg = arm_from_dict({"name": "a", "capacity": args.capacity, "overlap": 0, "phases": [0]})
    rt, load_s = timed(lambda: build_runtime(cfg, shared_encoder))
    phase = cfg.phase_list()[0]
    (units, bounds), chunk_s = timed(lambda: chunk_phase(rt, phase, list(corpus)))
    unique = sorted({u.text for u in units})
    tokens = sum(rt.chunk_counter.count(t) for t in unique)
    _, encode_s = timed(lambda: rt.encoder.encode(unique))
    r = rt.retrievers
    bm25, bm25_s = timed(lambda: build_index_or_failure(r.bm25, units))
    ann, hnsw_s = timed(lambda: build_index_or_failure(r.dense_ann, units))
    exact = build_index_or_failure(r.dense_exact, units)
    by_doc: dict = {}
    for u in units:
        by_doc.setdefault(u.doc_id, []).append(u)
    index = PhaseIndex(cfg.name, phase, units, bounds, by_doc, bm25, exact, ann, cfg.digest())
    texts = {s.doc_id: s.text for s in corpus}
    (records, cands), cascade_s = timed(lambda: run_questions(rt, index, fixtures, texts, {}))
    rows, write_s = write_cost(index, cands, records, args.rows, work)
    shutil.rmtree(work, ignore_errors=True)
    out = {
        "corpus": {
            "documents": len(corpus),
            "chars": corpus.total_chars(),
            "units": len(units),
            "unique_unit_texts": len(unique),
            "unit_tokens": tokens,
            "questions": len(fixtures),
            "candidate_rows_per_question": round(len(cands) / max(1, len(fixtures)), 1),
        },
        "model_load_s": round(load_s, 2),
        "chunk_s_per_million_chars": round(chunk_s / corpus.total_chars() * 1e6, 3),
        "encode_s_per_1k_tokens": round(encode_s / tokens * 1000, 4),
        "bm25_build_s_per_10k_units": round(bm25_s / len(units) * 1e4, 3),
        "hnsw_build_s_per_10k_units": round(hnsw_s / len(units) * 1e4, 3),
        "cascade_s_per_question": round(cascade_s / len(fixtures), 4),
        "write_s_per_million_candidate_rows": round(write_s / rows * 1e6, 3),
        "write_rows": rows,
        "threads": os.cpu_count(),
    }
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
