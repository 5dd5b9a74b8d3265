#!/usr/bin/env python
"""Sweep wall time against its floor: one batch encode of exactly the unique unit texts.

Imports the ContractNLI dev split (../shared/data/contractnli/dev.json), takes
documents until at least --min-chars characters of real text, and runs a
sweep of 2 arms x --phases phases over them with the embedded defaults. In the
same process it then measures the floor: a fresh model instance encoding
exactly the unique unit texts that sweep needed, in one
``SentenceTransformer.encode`` call. Target: sweep <= 1.3 x floor.

With ``--embedding endpoint`` the arms embed through an OpenAI-compatible server
(ledgerscope's model server, started first in its own process with the bundled
MiniLM, as a team's embedding service would already be running) and the floor is
that same server's time to embed the sweep's unique texts (units + questions) in
batches of 64 over HTTP, measured right after the sweep. The reranker is then the
declared alternative (``none``: MaxSim needs token vectors). The default extractive reader needs
token vectors too, which no embeddings API returns, so it reads with a local model of its own:
the script records every text that local model encoded and also measures *its* floor (a fresh
model, one encode call over exactly those texts, load included as the sweep's is), and prints the
ratio against both floors together. ``--generator first-block`` (a python-callable generator
that answers with the first packed block, no model) isolates the endpoint path.

    .venv/bin/python scripts/bench_sweep.py [--min-chars 300000] [--phases 4]
        [--embedding endpoint [--generator extractive|first-block]]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# Every figure here is against an encoding floor: a persistent embedding cache (the sweep's, or the
# model server's, which inherits this environment) would serve the floor's texts from disk and
# measure a read. The cache's own figures are measured with it on, explicitly.
os.environ["LEDGERSCOPE_EMBEDDING_CACHE"] = "off"

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(ROOT.parent / "shared" / "data" / "contractnli" / "dev.json"))
    ap.add_argument("--min-chars", type=int, default=300_000)
    ap.add_argument("--phases", type=int, default=4)
    ap.add_argument("--capacity", type=int, default=96)
    ap.add_argument("--profile", action="store_true", help="cProfile the sweep, print the top functions")
    ap.add_argument(
        "--embedding",
        choices=("local", "endpoint"),
        default="local",
        help="in-process model (default) or an OpenAI-compatible embeddings server",
    )
    ap.add_argument(
        "--generator",
        choices=("extractive", "first-block"),
        default="extractive",
        help="with --embedding endpoint: the default reader, or a model-free first-block answer",
    )
    ap.add_argument(
        "--cache-figures",
        action="store_true",
        help="the embedding cache's figures: cold first sweep against the floor, a "
        "knobs-only second sweep against the first, an added arm against its new texts",
    )
    ap.add_argument(
        "--device",
        default="cpu",
        help="with --cache-figures: the arms' [embedding] device and the floor's "
        "(cpu, cuda, mps, auto): the GPU figure on a machine that has one",
    )
    args = ap.parse_args()

    from ledgerscope.inputs.fixtures import load_fixtures, write_fixtures
    from ledgerscope.inputs.importers.contractnli import import_contractnli
    from ledgerscope.inputs.sources import Corpus, load_corpus
    from ledgerscope.ledger.read import connect
    from ledgerscope.pipeline.arm.config import arm_from_dict
    from ledgerscope.pipeline.run.sweep import sweep

    work = Path(tempfile.mkdtemp(prefix="bench_sweep_"))
    import_contractnli(Path(args.data), work / "import")
    full = load_corpus(work / "import" / "corpus.jsonl")
    corpus, chars = Corpus(), 0
    for src in full:
        if chars >= args.min_chars:
            break
        corpus.add(src)
        chars += len(src.text)
    fixtures, corpus = load_fixtures(work / "import" / "fixtures.jsonl", full)
    fixtures = [f for f in fixtures if all(d in corpus.sources for d in f.doc_ids) or not f.doc_ids]
    keep_docs = set()
    chars = 0
    for src in corpus:
        if chars >= args.min_chars:
            break
        keep_docs.add(src.doc_id)
        chars += len(src.text)
    corpus = Corpus({d: s for d, s in corpus.sources.items() if d in keep_docs})
    fixtures = [
        f
        for f in fixtures
        if set(f.doc_ids) <= keep_docs
        and (f.doc_ids or f.origin.split(":")[1] in {d.split("/", 1)[1] for d in keep_docs})
    ]
    write_fixtures(fixtures, work / "fixtures.jsonl")
    if args.cache_figures:
        return _cache_figures(work, keep_docs, fixtures, args)
    server = None
    reader_texts: list[str] = []
    extra: dict = {}
    if args.embedding == "endpoint":
        from ledgerscope.pipeline.servers.model_server import start_model_server

        server, base_url = start_model_server(embedding="bundled:all-MiniLM-L6-v2", name="minilm")
        extra = {"embedding": {"kind": "endpoint", "base_url": base_url, "model": "minilm", "batch_size": 64}}
        if args.generator == "first-block":
            extra["generator"] = {"kind": "python", "callable": "bench_sweep:first_block"}
        reader_texts = _record_reader_texts() if args.generator == "extractive" else []
        print(f"embedding server: {base_url} (ledgerscope's model server, bundled MiniLM)", flush=True)
    arms = [
        arm_from_dict(
            {
                "name": "candidate",
                "capacity": args.capacity,
                "overlap": 0,
                "phases": f"auto:{args.phases}",
                **extra,
            }
        ),
        arm_from_dict(
            {
                "name": "baseline",
                "capacity": args.capacity,
                "overlap": args.capacity // 4,
                "phases": f"auto:{args.phases}",
                **extra,
            }
        ),
    ]
    print(
        f"corpus: {len(corpus)} documents, {corpus.total_chars():,} characters; "
        f"{len(fixtures)} questions; 2 arms x {args.phases} phases",
        flush=True,
    )

    # the sweep, model load included (it is part of what a user waits for)
    t0 = time.perf_counter()
    if args.profile:
        import cProfile
        import pstats

        prof = cProfile.Profile()
        prof.enable()
    result = sweep(fixtures, corpus, arms, work / "ledger")
    if args.profile:
        prof.disable()
    sweep_s = time.perf_counter() - t0

    con = connect(work / "ledger")
    unique = [r[0] for r in con.execute("SELECT DISTINCT text FROM units").fetchall()]
    questions = sorted({f.question for f in fixtures})
    texts = unique + [q for q in questions if q not in set(unique)]

    if server is not None:
        _endpoint_floor(server, base_url, texts, result, sweep_s, con, reader_texts)
        if args.profile:
            pstats.Stats(prof).sort_stats(os.environ.get("SORT", "tottime")).print_stats(
                os.environ.get("FILTER", ""), 40
            )
        return 0

    # the floor: a fresh model, one encode call over exactly the unique texts the sweep needed
    load_s, encodes = minilm_floor(texts)
    encode_s = min(encodes)
    floor_s = load_s + encode_s

    n_records = con.execute("SELECT count(*) FROM records").fetchone()[0]
    n_cands = con.execute("SELECT count(*) FROM candidates").fetchone()[0]
    print(
        f"unique texts encoded (units + questions): {len(texts):,} (sweep forward passes: "
        f"{result.encoded_texts:,})"
    )
    print(f"records: {n_records:,}; candidate rows: {n_cands:,}")
    print(
        f"floor: model load {load_s:.1f} s + encode {encode_s:.1f} s = {floor_s:.1f} s "
        f"(encodes: {', '.join(f'{e:.1f} s' for e in encodes)})"
    )
    print(f"sweep: {sweep_s:.1f} s  ->  ratio {sweep_s / floor_s:.2f} x floor (target <= 1.30)")
    if args.profile:
        pstats.Stats(prof).sort_stats(os.environ.get("SORT", "tottime")).print_stats(
            os.environ.get("FILTER", ""), 40
        )
    return 0


def _cache_figures(work: Path, keep_docs: set[str], fixtures, args) -> int:
    """``--cache-figures``: the bench corpus written as JSONL, then scripts/bench_cache_figures.py."""
    import json

    from bench_cache_figures import cache_figures

    corpus = work / "corpus.jsonl"
    with (work / "import" / "corpus.jsonl").open() as src, corpus.open("w") as dst:
        dst.writelines(line for line in src if json.loads(line)["doc_id"] in keep_docs)
    print(
        f"bench corpus: {len(keep_docs)} documents, {len(fixtures)} questions; cache {work / 'cache'}",
        flush=True,
    )
    fixture_texts = {f.question for f in fixtures} | {s.quote for f in fixtures for s in f.spans if s.quote}
    cache_figures(work, corpus, sorted(fixture_texts), args.capacity, args.phases, args.device)
    return 0


def first_block(request):
    """``--generator first-block``: the first packed block, cited (abstains without one); no model."""
    from ledgerscope.pipeline.contracts.prompt import ABSTAIN_TEXT, GenerationResult

    if not request.blocks:
        return ABSTAIN_TEXT
    block = request.blocks[0]
    return GenerationResult(f"{block.text} [{block.label}]", [block.label])


def _record_reader_texts() -> list[str]:
    """Every text a local model sends through a forward pass during the sweep (with endpoint
    embeddings the only local model is the reader's), in order: a text encoded twice is there
    twice. Patched on the class, so recording loads no model before the sweep's clock starts."""
    from ledgerscope.pipeline.embedding.encoder import Encoder

    seen: list[str] = []
    encode = Encoder.encode

    def recording(self, texts, progress=None):
        texts = list(texts)
        seen.extend(sorted({t for t in texts if t not in self._cache}))
        return encode(self, texts, progress)

    Encoder.encode = recording
    return seen


def minilm_floor(texts: list[str]) -> tuple[float, list[float]]:
    """Load seconds of a fresh bundled MiniLM, then the seconds of two ``encode`` calls over exactly
    ``texts`` (batch 64): these machines are noisy, and the faster run is the stricter floor."""
    from sentence_transformers import SentenceTransformer

    from ledgerscope.pipeline.embedding.encoder import resolve_model_path

    t0 = time.perf_counter()
    model = SentenceTransformer(resolve_model_path("bundled:all-MiniLM-L6-v2"), device="cpu")
    load_s = time.perf_counter() - t0
    runs = []
    for _ in range(2):
        t1 = time.perf_counter()
        model.encode(texts, batch_size=64, show_progress_bar=False)
        runs.append(time.perf_counter() - t1)
    return load_s, runs


def _endpoint_floor(
    server, base_url: str, texts: list[str], result, sweep_s: float, con, reader_texts: list[str]
) -> None:
    """The same server embedding exactly the sweep's unique texts, batches of 64 (faster of 2 runs);
    with the local reader, also that model's floor over the texts it read."""
    from ledgerscope.pipeline.embedding.endpoint import EndpointEmbedder

    encodes = []
    for _ in range(2):
        client = EndpointEmbedder(base_url, "minilm", batch_size=64)
        t0 = time.perf_counter()
        client.encode(texts)
        encodes.append(time.perf_counter() - t0)
        assert client.forward_texts == len(texts)
    server.close()
    floor_s = min(encodes)
    n_records = con.execute("SELECT count(*) FROM records").fetchone()[0]
    infra = con.execute(
        "SELECT count(*) FROM records WHERE answer_verdict = 'infrastructure-failure'"
    ).fetchone()[0]
    print(
        f"unique texts (units + questions): {len(texts):,} "
        f"(encoded by the sweep, every model it ran: {result.encoded_texts:,})"
    )
    print(f"records: {n_records:,} ({infra} infrastructure failures)")
    runs = ", ".join(f"{e:.1f} s" for e in encodes)
    print(f"floor: the server embeds them in {floor_s:.1f} s (runs: {runs})")
    print(f"sweep: {sweep_s:.1f} s  ->  ratio {sweep_s / floor_s:.2f} x the server's floor (target <= 1.30)")
    if reader_texts:
        unique = sorted(set(reader_texts))
        load_s, reader_runs = minilm_floor(unique)
        encode_s = min(reader_runs)
        chars = sum(map(len, unique)) / max(1, sum(map(len, texts)))
        print(
            f"reader: its local model encoded {len(reader_texts):,} texts ({len(unique):,} unique, "
            f"{chars:.0%} of the server's characters); its floor: load {load_s:.1f} s + encode "
            f"{encode_s:.1f} s"
        )
        both = floor_s + load_s + encode_s
        print(f"sweep: {sweep_s:.1f} s  ->  ratio {sweep_s / both:.2f} x both floors ({both:.1f} s)")


if __name__ == "__main__":
    sys.exit(main())
