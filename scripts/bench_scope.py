"""What ``phase_scope = "evidence"`` saves and what it changes; how good ``sweep --estimate`` is;
what recording the resources costs.

    .venv/bin/python scripts/bench_scope.py [--distractor-chars 150000] [--phases 4] [--dataset sample]
    .venv/bin/python scripts/bench_scope.py --dataset contractnli --phases 8      # ContractNLI dev
    .venv/bin/python scripts/bench_scope.py ... --sweeps evidence --reach packed,reranked --reuse

``sample``: the Quillstack sample's 56 questions over its 22 documents plus ContractNLI dev's
documents as distractors, up to ``--distractor-chars`` characters of them (460000 makes the
corpus ten times the sample's). ``contractnli``: ContractNLI dev's own questions and documents.
Sweeps of the default arm, in this process, the persistent embedding cache off: one phase (the
base), ``--phases`` phases over every document (scope "all"), and the same phases with scope
"evidence", once per ``--reach`` criterion (:data:`ledgerscope.pipeline.run.scope.REACH`).
Printed as JSON: wall seconds, texts encoded and tokens embedded of each (the cost figures: the
default arm's only model is the embedding model), the ratios against the one-phase sweep, the
gold documents' share of the corpus and the lower bound it puts on any evidence sweep, each
criterion's phased documents and predicted cost from the full sweep's base phase (no sweep
needed), per phase the share of records whose diagnosis step and answer verdict agree between an
evidence sweep and the full sweep (and which steps differ), each sweep's estimate against what
it did, and the resource record's own cost. ``--reuse`` reads finished sweeps back from ``--work``.
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


def usage(out: Path) -> dict:
    """Texts encoded and tokens embedded by a finished sweep, from its resource records (the
    partitions' and the oracle's), and the record's own seconds."""
    from ledgerscope.ledger.layout import ledger_layout
    from ledgerscope.testing.ledger_files import marker_paths

    parts = [json.loads(m.read_text())["resources"] for m in marker_paths(out)]
    layout = ledger_layout(out)
    oracle = [
        json.loads(layout.oracle_resources_path(out, arm).read_text())
        for arm, _ in layout.oracle_files(out)
        if layout.oracle_resources_path(out, arm).is_file()
    ]
    return {
        "encoded_texts": sum(p["embedding"]["encoded"] for p in parts)
        + sum(o["embedding"]["encoded"] for o in oracle),
        "embedded_tokens": sum(p["embedding"]["tokens"] for p in parts),
        "recording_seconds": round(sum(p["recording_seconds"] for p in parts), 4),
        "phased": sorted({(p.get("phase_scope") or {}).get("phased", -1) for p in parts} - {-1}),
    }


def one_sweep(name: str, fixtures, corpus, cfg, out: Path) -> dict:
    from ledgerscope.pipeline.embedding.encoder import shared_encoder
    from ledgerscope.pipeline.run.costs.calibrate import estimate_seconds
    from ledgerscope.pipeline.run.costs.estimate import plan_sweep
    from ledgerscope.pipeline.run.sweep import sweep

    shared_encoder(cfg.embedding["model"], 64).forget()  # every sweep encodes from nothing
    plan = plan_sweep(fixtures, corpus, [cfg], out)
    t0 = time.perf_counter()
    seconds = estimate_seconds(plan, [cfg], fixtures, corpus, shared_encoder)
    calibration = time.perf_counter() - t0
    # the sweep below runs in this process, whose model is loaded and warm: the CLI's estimate
    # charges the load and warm-up to a sweep command that starts from nothing
    rates = next(iter(seconds["calibration"].values()), {})
    in_process = seconds["total"] - rates.get("load_seconds", 0.0)
    in_process -= (rates.get("forward") or {}).get("warmup_seconds", 0.0)
    shared_encoder(cfg.embedding["model"], 64).forget()
    load = os.getloadavg()[0]
    result = sweep(fixtures, corpus, [cfg], out)
    return {
        "sweep": name,
        "seconds": round(result.seconds, 1),
        "load_average": [round(load, 2), round(os.getloadavg()[0], 2)],
        "model_seconds": round(result.encode_seconds, 1),
        "estimate": {
            "texts_to_encode": plan.total().texts,
            "seconds": round(in_process, 1),
            "calibration_seconds": round(calibration, 1),
        },
        **usage(out),
    }


def read_back(name: str, out: Path) -> dict:
    """A finished sweep's figures from its run record and resource records (no estimate)."""
    run = json.loads(sorted(out.glob("runs/*.json"))[-1].read_text())
    return {"sweep": name, "seconds": run["seconds"], "reused": True, **usage(out)}


def phase_units(cfg, corpus, phased: frozenset[str] | None = None) -> dict[str, list]:
    """Every phase's units, chunked as the sweep chunks them (the tokenizer alone, no model):
    with ``phased``, as an evidence sweep with those phased documents cuts them."""
    from ledgerscope.pipeline.run.cascade import chunk_phase
    from ledgerscope.pipeline.run.costs.estimate import _counter
    from ledgerscope.pipeline.run.runtime import ArmRuntime, build_chunker

    counter, _ = _counter(cfg)
    rt = ArmRuntime(cfg, None, counter, build_chunker(cfg, None, counter), None, None, None)
    phases = cfg.phase_list()
    if phased is not None:
        rt.phase_scope = (phases[0].offset, phased)
    visible = [s for s in corpus if set(s.access) <= cfg.clearance]
    return {p.label: chunk_phase(rt, p, visible)[0] for p in phases}


def gold_share(corpus, fixtures, units: dict[str, list], n_phases: int) -> dict:
    """The gold documents' share of the corpus (characters, base-phase units and tokens): every
    evidence sweep phases them, so ``1 + (phases - 1) x share`` bounds its cost from below."""
    gold = {s.doc_id for f in fixtures for s in f.spans}
    docs = list(corpus)
    chars = sum(len(d.text) for d in docs)
    gold_chars = sum(len(d.text) for d in docs if d.doc_id in gold)
    base = next(iter(units.values()))
    tokens = sum(u.token_end - u.token_start for u in base)
    share = {
        "characters": gold_chars / chars,
        "units": sum(u.doc_id in gold for u in base) / len(base),
        "tokens": sum(u.token_end - u.token_start for u in base if u.doc_id in gold) / tokens,
    }
    return {
        "gold_documents": len(gold & {d.doc_id for d in docs}),
        "documents": len(docs),
        "characters": [gold_chars, chars],
        "base_units": len(base),
        "base_tokens": tokens,
        "share": {k: round(v, 4) for k, v in share.items()},
        "lower_bound_ratio": {k: round(1 + (n_phases - 1) * v, 3) for k, v in share.items()},
    }


def distinct(units: dict[str, list]) -> tuple[int, int]:
    """Unit texts and their tokens a sweep over these phases embeds (a text seen before is served
    by the cache)."""
    seen: dict[str, int] = {}
    for phase in units.values():
        for u in phase:
            seen.setdefault(u.text, u.token_end - u.token_start)
    return len(seen), sum(seen.values())


def predicted(base: Path, cfg, fixtures, corpus, full: dict[str, list], criteria: list[str]) -> dict:
    """Each criterion's phased documents (from a finished base-phase partition) and the unit texts
    and tokens its evidence sweep embeds, against the full sweep's and one phase's."""
    from ledgerscope.pipeline.run import scope

    one = distinct({k: v for k, v in list(full.items())[:1]})
    every = distinct(full)
    out: dict = {"one_phase": one, "all": every}
    for crit in criteria:
        phased = scope.phased_documents(base, cfg, cfg.phase_list()[0].label, fixtures, crit)
        texts, tokens = distinct(phase_units(cfg, corpus, phased))
        out[crit] = {
            "phased_documents": len(phased & {d.doc_id for d in corpus}),
            "phased_non_gold": len(phased - {s.doc_id for f in fixtures for s in f.spans}),
            "unit_texts": texts,
            "unit_tokens": tokens,
            "ratio_vs_one_phase": {"texts": round(texts / one[0], 3), "tokens": round(tokens / one[1], 3)},
        }
    out["all"] = {
        "unit_texts": every[0],
        "unit_tokens": every[1],
        "ratio_vs_one_phase": {"texts": round(every[0] / one[0], 3), "tokens": round(every[1] / one[1], 3)},
    }
    return out


def agreement(full: Path, scoped: Path) -> dict:
    from ledgerscope.analysis.diagnosis import ledger_heads
    from ledgerscope.ledger.read import connect

    def rows(ledger: Path) -> dict:
        con = connect(ledger)
        heads = {(r["phase"], r["qid"]): (r["step"], r["step_name"]) for r in ledger_heads(con)}
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
    which: list[str] = []
    common = {k[0] for k in a} & {k[0] for k in b}  # phases both sweeps have written
    for key, (step, verdict) in a.items():
        if key[0] not in common:
            continue
        other = b.get(key)
        same = other is not None and other[0][0] == step[0] and other[1] == verdict
        per_phase.setdefault(key[0], []).append(int(same))
        if not same:
            got = other or ((None, None), None)
            differs[f"step {step[0]} {step[1]} -> {got[0][0]} {got[0][1]}; {verdict} -> {got[1]}"] += 1
            which.append(f"{key[0]}/{key[1]}")
    n = sum(len(v) for v in per_phase.values())
    return {
        "per_phase": {p: f"{sum(v)}/{len(v)} = {sum(v) / len(v):.4f}" for p, v in per_phase.items()},
        "overall": round(sum(sum(v) for v in per_phase.values()) / max(1, n), 4),
        "records": n,
        "differences": dict(differs.most_common(20)),
        "records_differing": which[:40],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", choices=("sample", "contractnli"), default="sample")
    ap.add_argument("--distractor-chars", type=int, default=150_000)
    ap.add_argument("--phases", type=int, default=4)
    ap.add_argument("--work", type=Path, default=Path("/tmp/ledgerscope-bench-scope"))
    ap.add_argument("--sweeps", default="single,all,evidence", help="which sweeps to run or read back")
    ap.add_argument("--reach", default="reranked", help="evidence criteria to sweep (comma-separated)")
    ap.add_argument(
        "--predict",
        default=",".join(("fused", "reranked", "packed")),
        help="criteria whose cost is predicted from the full sweep",
    )
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
    from ledgerscope.pipeline.run import scope
    from ledgerscope.pipeline.run.resources import timed

    if not args.reuse:
        shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True, exist_ok=True)
    fx_path, corpus_path, chars = build_inputs(args.work, args.dataset, args.distractor_chars)
    fixtures, corpus = load_fixtures(fx_path, load_corpus(corpus_path))
    phases = f"auto:{args.phases}"
    wanted = args.sweeps.split(",")
    plan = [("single", arm_from_dict({"name": "default", "phases": [0]}), None)] * ("single" in wanted)
    full = arm_from_dict({"name": "default", "phases": phases})
    plan += [("all", full, None)] * ("all" in wanted)
    scoped = arm_from_dict({"name": "default", "phases": phases, "phase_scope": "evidence"})
    plan += [(f"evidence-{r}", scoped, r) for r in args.reach.split(",") if "evidence" in wanted]
    runs = []
    for name, cfg, reach in plan:
        out = args.work / name
        scope.reach = reach or scope.reach
        done = args.reuse and (out / "_SWEEP_DONE.json").is_file()
        runs.append(read_back(name, out) if done else one_sweep(name, fixtures, corpus, cfg, out))
        print(json.dumps(runs[-1]), file=sys.stderr, flush=True)
    by = {r["sweep"]: r for r in runs}
    per_call = min(timeit.repeat(lambda: timed({}, "x").__enter__(), number=10_000, repeat=3)) / 10_000
    timers = len(fixtures) * 10 * args.phases * per_call  # ~10 timed blocks per question
    report: dict = {
        "dataset": args.dataset,
        "documents": len(list(corpus)),
        "characters": chars,
        "questions": len(fixtures),
        "phases": args.phases,
        "sweeps": runs,
        "recording_share": {
            r["sweep"]: round((r["recording_seconds"] + timers) / r["seconds"], 5) for r in runs
        },
        "timer_seconds_per_call": per_call,
    }
    if "single" in by:
        report["ratio_vs_single"] = {
            k: {
                f: round(v[f] / max(1, by["single"][f]), 3)
                for f in ("encoded_texts", "embedded_tokens", "seconds")
            }
            for k, v in by.items()
        }
    full_units = phase_units(full, corpus)
    report["gold"] = gold_share(corpus, fixtures, full_units, args.phases)
    swept = [args.work / n for n in ("all", "single") if (args.work / n / "manifest.json").is_file()]
    base = swept[0] if swept else None
    if base is not None:
        report["predicted"] = predicted(base, full, fixtures, corpus, full_units, args.predict.split(","))
    if (args.work / "all" / "manifest.json").is_file():  # per phase over the phases both have written
        report["agreement_vs_all"] = {
            k: agreement(args.work / "all", args.work / k) for k in by if k.startswith("evidence-")
        }
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
