"""Peak memory of a sweep over about 10 x the bench corpus (issue 16, Speed).

The bench corpus is 28 ContractNLI documents (310,484 characters). Ten times that is, here, every
real document the project ships: all of ContractNLI's dev split (61 documents) and all of COVID-QA
(98 articles), about 3.04 M characters with their questions, imported by ledgerscope's own
importers. The sweep is the bench's (2 arms x 4 phases, capacity 96, overlaps 0 and 24) run as one
``ledgerscope sweep`` process with a fresh embedding cache directory; its peak resident memory is
the kernel's (``getrusage(RUSAGE_CHILDREN).ru_maxrss``), and a sampler records RSS over time.

    .venv/bin/python scripts/bench_memory.py [--phases 4] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data"


def build_inputs(work: Path) -> dict:
    """Both datasets imported, merged into one corpus.jsonl and one fixtures.jsonl."""
    from ledgerscope.inputs.importers.contractnli import import_contractnli
    from ledgerscope.inputs.importers.squad import import_squad

    import_contractnli(DATA / "contractnli" / "dev.json", work / "nli")
    import_squad(DATA / "covidqa" / "200423_covidQA.json", work / "covid", repair=True)
    chars = docs = questions = 0
    with (work / "corpus.jsonl").open("w") as corpus, (work / "fixtures.jsonl").open("w") as fixtures:
        for part in ("nli", "covid"):
            for line in (work / part / "corpus.jsonl").open():
                chars += len(json.loads(line)["text"])
                docs += 1
                corpus.write(line)
            for line in (work / part / "fixtures.jsonl").open():
                questions += 1
                fixtures.write(line)
    return {"documents": docs, "characters": chars, "questions": questions}


def sample_rss(pid: int, samples: list[tuple[float, int]], stop: threading.Event) -> None:
    """RSS of ``pid`` every second (kB), until ``stop``."""
    t0 = time.perf_counter()
    status = Path(f"/proc/{pid}/status")
    while not stop.wait(1.0):
        try:
            for line in status.read_text().splitlines():
                if line.startswith("VmRSS:"):
                    samples.append((time.perf_counter() - t0, int(line.split()[1])))
        except OSError:
            return


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--phases", type=int, default=4)
    ap.add_argument("--capacity", type=int, default=96)
    ap.add_argument("--keep", help="work directory to use and keep (default: a fresh temp dir)")
    args = ap.parse_args()
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench_memory_"))
    work.mkdir(parents=True, exist_ok=True)
    sizes = build_inputs(work)
    arms = []
    for name, overlap in (("candidate", 0), ("baseline", args.capacity // 4)):
        path = work / f"{name}.toml"
        path.write_text(
            f'name = "{name}"\ncapacity = {args.capacity}\noverlap = {overlap}\n'
            f'phases = "auto:{args.phases}"\n'
        )
        arms += ["--arm", str(path)]
    print(
        f"corpus: {sizes['documents']} documents, {sizes['characters']:,} characters, "
        f"{sizes['questions']:,} questions; work {work}",
        flush=True,
    )
    env = {
        **os.environ,
        "LEDGERSCOPE_EMBEDDING_CACHE": str(work / "cache"),
        "HF_HUB_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }
    argv = [
        sys.executable,
        "-m",
        "ledgerscope.cli",
        "sweep",
        "--quiet",
        "--fixtures",
        str(work / "fixtures.jsonl"),
        "--corpus",
        str(work / "corpus.jsonl"),
        *arms,
        "--out",
        str(work / "ledger"),
    ]
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    samples: list[tuple[float, int]] = []
    stop = threading.Event()
    sampler = threading.Thread(target=sample_rss, args=(proc.pid, samples, stop), daemon=True)
    sampler.start()
    out, _ = proc.communicate()
    stop.set()
    seconds = time.perf_counter() - t0
    peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    if proc.returncode:
        print(out[-3000:])
        return proc.returncode
    print(out.strip()[-1500:])
    result = {
        **sizes,
        "seconds": seconds,
        "peak_rss_mb": peak_kb / 1024,
        "rss_mb_by_minute": [round(kb / 1024) for t, kb in samples if int(t) % 60 == 0],
    }
    (work / "memory.json").write_text(json.dumps(result, indent=2))
    print(
        f"sweep {seconds:.0f} s; peak RSS {peak_kb / 1024:,.0f} MB (kernel's maxrss of the sweep "
        f"process); RSS by minute (MB): {result['rss_mb_by_minute']}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
