"""What ``phase_scope = "evidence"`` saves and what it changes; how good ``sweep --estimate`` is;
what recording the resources costs.

    .venv/bin/python scripts/bench_scope.py [--distractor-chars 150000] [--phases 4] [--dataset sample]
    .venv/bin/python scripts/bench_scope.py --dataset contractnli --phases 8      # ContractNLI dev

``sample``: the Quillstack sample's 56 questions over its 22 documents plus ContractNLI dev's
documents as distractors, up to ``--distractor-chars`` characters of them (460000 makes the
corpus ten times the sample's). ``contractnli``: ContractNLI dev's own questions and documents.
Three sweeps of the default arm, in this process, the persistent embedding cache off: one phase
(the base), ``--phases`` phases over every document (scope "all"), the same phases with scope
"evidence". Printed as JSON: wall seconds and texts encoded of each, the cost ratios against
the one-phase sweep, per phase the share of records whose diagnosis step and answer verdict agree
between the two multi-phase sweeps (and which steps differ), each sweep's estimate against what
it did, and the resource record's own cost.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import timeit
from collections import Counter
from pathlib import Path

os.environ["LEDGERSCOPE_EMBEDDING_CACHE"] = "off"
ROOT = Path(__file__).resolve().parent.parent
DATA = next(
    (p for p in (ROOT.parent / "shared" / "data", ROOT.parents[1] / "shared" / "data") if p.is_dir()),
    ROOT.parent / "shared" / "data",
)


def build_inputs(work: Path, dataset: str, distractor_chars: int) -> tuple[Path, Path, dict]:
    from ledgerscope.inputs.importers.contractnli import import_contractnli

    import_contractnli(DATA / "contractnli" / "dev.json", work / "nli")
    if dataset == "contractnli":
        return work / "nli" / "fixtures.jsonl", work / "nli" / "corpus.jsonl", {}
    corpus = work / "corpus.jsonl"
    chars = {"sample": 0, "distractors": 0}
    with corpus.open("w", encoding="utf-8") as out:
        for path in sorted((ROOT / "sample_ledgers" / "corpus").rglob("*")):
            if path.is_file():
                text = path.read_text(encoding="utf-8")
                chars["sample"] += len(text)
                rel = path.relative_to(ROOT / "sample_ledgers" / "corpus").as_posix()
                out.write(json.dumps({"doc_id": rel, "text": text}) + "\n")
        for line in (work / "nli" / "corpus.jsonl").open(encoding="utf-8"):
            doc = json.loads(line)
            if chars["distractors"] >= distractor_chars:
                break
            chars["distractors"] += len(doc["text"])
            out.write(json.dumps({"doc_id": "nli/" + doc["doc_id"], "text": doc["text"]}) + "\n")
    return ROOT / "sample_ledgers" / "fixtures.jsonl", corpus, chars


def one_sweep(name: str, fixtures, corpus, cfg, out: Path) -> dict:
    from ledgerscope.pipeline.embedding.encoder import shared_encoder
    from ledgerscope.pipeline.run.costs.calibrate import estimate_seconds
    from ledgerscope.pipeline.run.costs.estimate import plan_sweep
    from ledgerscope.pipeline.run.sweep import sweep
    from ledgerscope.testing.ledger_files import marker_paths

    shared_encoder(cfg.embedding["model"], 64).forget()  # every sweep encodes from nothing
    plan = plan_sweep(fixtures, corpus, [cfg], out)
    t0 = time.perf_counter()
    seconds = estimate_seconds(plan, [cfg], fixtures, corpus, shared_encoder)
    calibration = time.perf_counter() - t0
    shared_encoder(cfg.embedding["model"], 64).forget()
    result = sweep(fixtures, corpus, [cfg], out)
    recording = 0.0
    for marker in marker_paths(out):
        recording += json.loads(marker.read_text())["resources"]["recording_seconds"]
    return {
        "sweep": name,
        "seconds": round(result.seconds, 1),
        "encoded_texts": result.encoded_texts,
        "model_seconds": round(result.encode_seconds, 1),
        "estimate": {
            "texts_to_encode": plan.total().texts,
            "seconds": seconds["total"],
            "calibration_seconds": round(calibration, 1),
        },
        "recording_seconds": round(recording, 4),
    }


def read_back(name: str, out: Path) -> dict:
    """A finished sweep's figures from its run record and resource records (no estimate)."""
    from ledgerscope.ledger.layout import ledger_layout
    from ledgerscope.testing.ledger_files import marker_paths

    run = json.loads(sorted(out.glob("runs/*.json"))[-1].read_text())
    parts = [json.loads(m.read_text())["resources"] for m in marker_paths(out)]
    layout = ledger_layout(out)
    oracle = [
        json.loads(layout.oracle_resources_path(out, arm).read_text())
        for arm, _ in layout.oracle_files(out)
        if layout.oracle_resources_path(out, arm).is_file()
    ]
    return {
        "sweep": name,
        "seconds": run["seconds"],
        "reused": True,
        "encoded_texts": sum(p["embedding"]["encoded"] for p in parts)
        + sum(o["embedding"]["encoded"] for o in oracle),
        "recording_seconds": round(sum(p["recording_seconds"] for p in parts), 4),
        "phased": [p.get("phase_scope") for p in parts],
    }


def agreement(full: Path, scoped: Path) -> dict:
    from ledgerscope.analysis.diagnosis import ledger_heads
    from ledgerscope.ledger.read import connect

    def rows(ledger: Path) -> dict:
        con = connect(ledger)
        heads = {(r["phase"], r["qid"]): r["step"] for r in ledger_heads(con)}
        verdicts = dict(
            ((p, q), v)
            for p, q, v in con.execute(
                "SELECT CAST(phase AS VARCHAR), qid, answer_verdict FROM records"
            ).fetchall()
        )
        return {k: (heads[k], verdicts[k]) for k in heads}

    a, b = rows(full), rows(scoped)
    per_phase: dict[str, list[int]] = {}
    differs: Counter = Counter()
    for key, value in a.items():
        same = b.get(key) == value
        per_phase.setdefault(key[0], []).append(int(same))
        if not same:
            differs[f"step {value[0]} -> {b.get(key, (None,))[0]}"] += 1
    return {
        "per_phase": {p: round(sum(v) / len(v), 4) for p, v in per_phase.items()},
        "overall": round(sum(sum(v) for v in per_phase.values()) / max(1, len(a)), 4),
        "records": len(a),
        "differences": dict(differs.most_common(10)),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", choices=("sample", "contractnli"), default="sample")
    ap.add_argument("--distractor-chars", type=int, default=150_000)
    ap.add_argument("--phases", type=int, default=4)
    ap.add_argument("--work", type=Path, default=Path("/tmp/ledgerscope-bench-scope"))
    ap.add_argument(
        "--reuse",
        action="store_true",
        help="keep finished sweeps in --work (their figures are read back); rerun the others",
    )
    args = ap.parse_args()
    import shutil

    from ledgerscope.inputs.fixtures import load_fixtures
    from ledgerscope.inputs.sources import load_corpus
    from ledgerscope.pipeline.arm.config import arm_from_dict
    from ledgerscope.pipeline.run.resources import timed

    if not args.reuse:
        shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True, exist_ok=True)
    fx_path, corpus_path, chars = build_inputs(args.work, args.dataset, args.distractor_chars)
    fixtures, corpus = load_fixtures(fx_path, load_corpus(corpus_path))
    phases = f"auto:{args.phases}"
    single = arm_from_dict({"name": "default", "phases": [0]})
    full = arm_from_dict({"name": "default", "phases": phases})
    scoped = arm_from_dict({"name": "default", "phases": phases, "phase_scope": "evidence"})
    runs = [
        read_back(n, args.work / n)
        if args.reuse and (args.work / n / "_SWEEP_DONE.json").is_file()
        else one_sweep(n, fixtures, corpus, c, args.work / n)
        for n, c in (("single", single), ("all", full), ("evidence", scoped))
    ]
    by = {r["sweep"]: r for r in runs}
    per_call = min(timeit.repeat(lambda: timed({}, "x").__enter__(), number=10_000, repeat=3)) / 10_000
    timers = len(fixtures) * 10 * args.phases * per_call  # ~10 timed blocks per question
    report = {
        "dataset": args.dataset,
        "documents": len(list(corpus)),
        "characters": chars,
        "questions": len(fixtures),
        "phases": args.phases,
        "sweeps": runs,
        "cost_ratio_vs_single": {
            k: round(by[k]["seconds"] / by["single"]["seconds"], 2) for k in ("all", "evidence")
        },
        "encoded_ratio_vs_single": {
            k: round(by[k]["encoded_texts"] / max(1, by["single"]["encoded_texts"]), 2)
            for k in ("all", "evidence")
        },
        "agreement_evidence_vs_all": agreement(args.work / "all", args.work / "evidence"),
        "recording_share": {
            r["sweep"]: round((r["recording_seconds"] + timers) / r["seconds"], 5) for r in runs
        },
        "timer_seconds_per_call": per_call,
    }
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
