#!/usr/bin/env python
"""Rebuild the committed sample ledgers from their corpus, fixtures and arm configs.

    .venv/bin/python scripts/make_samples.py            # rebuild sample_ledgers/quillstack/ledger
    .venv/bin/python scripts/make_samples.py --check    # rebuild into a temp dir, compare digests

The ledger is swept into a temporary directory and swapped into place whole;
`sample_ledgers/quillstack/digests.json` records each table's content digest
(see ledgerscope.ledger.digest), which `--check` and the tests compare against.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_ledgers"
OUT = SAMPLES / "quillstack"
ARMS = ["candidate.toml", "baseline.toml"]


def build(target: Path) -> None:
    from ledgerscope.inputs.fixtures import load_fixtures
    from ledgerscope.inputs.sources import load_corpus
    from ledgerscope.pipeline.arm.config import load_arm
    from ledgerscope.pipeline.run.sweep import sweep

    fixtures, corpus = load_fixtures(SAMPLES / "fixtures.jsonl", load_corpus(SAMPLES / "corpus"))
    arms = [load_arm(SAMPLES / "arms" / name) for name in ARMS]
    sweep(fixtures, corpus, arms, target)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="rebuild in a temp dir and compare digests")
    args = ap.parse_args()
    from ledgerscope.ledger.digest import table_digests

    with tempfile.TemporaryDirectory(prefix="make_samples_") as tmp:
        fresh = Path(tmp) / "ledger"
        build(fresh)
        digests = table_digests(fresh)
        if args.check:
            committed = json.loads((OUT / "digests.json").read_text())
            bad = [t for t in digests if digests[t] != committed.get(t)]
            for t in digests:
                state = "differs" if t in bad else "matches"
                print(f"{t:<11} {digests[t]['rows']:>8} rows  {state}")
            return 1 if bad else 0
        OUT.mkdir(parents=True, exist_ok=True)
        staging = OUT / ".ledger.new"
        shutil.rmtree(staging, ignore_errors=True)
        shutil.copytree(fresh, staging)
        shutil.rmtree(OUT / "ledger", ignore_errors=True)
        staging.rename(OUT / "ledger")
        (OUT / "digests.json").write_text(json.dumps(digests, indent=2, sort_keys=True) + "\n")
        for t, d in digests.items():
            print(f"{t:<11} {d['rows']:>8} rows  sha256:{d['sha256'][:16]}")
        size = sum(p.stat().st_size for p in (OUT / "ledger").rglob("*") if p.is_file())
        print(f"sample ledger: {OUT / 'ledger'} ({size / 1e6:.1f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
