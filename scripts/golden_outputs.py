"""Capture, and compare record for record, the outputs a refactor must not change.

    python scripts/golden_outputs.py capture OUT_DIR [--ledger L] [--subset]
    python scripts/golden_outputs.py compare BEFORE_DIR AFTER_DIR
    python scripts/golden_outputs.py digests OUT_DIR > tests/data/golden_outputs.json

``capture`` runs, through the installed CLI, the 20 export variants (4 formats x 5 predicates),
``diagnose --json`` and ``compare --json`` (with the sample's release rule) on a ledger (default:
the committed sample ledger). ``compare`` parses both captures and compares their content: JSON
documents as parsed values, JSON lines as parsed records, TREC files line by line. A ledger format
change may change bytes (file digests, paths) but never the records, so digests of ledger files are
the only fields it is allowed to ignore (``--ignore-key``). Exit 1 and a list of differences when
they differ.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "sample_ledgers" / "quillstack" / "ledger"
RULE = ROOT / "sample_ledgers" / "release_rule.toml"
FORMATS = ("fixtures", "label-studio", "trec", "jsonl")
PREDICATES = (
    "",
    "step > 0 OR NOT answerable",
    "answerable",
    "reversal AND arm = 'candidate'",
    "step = 0",
)


def _cli() -> list[str]:
    exe = Path(sys.executable).with_name("ledgerscope")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "ledgerscope.cli.main"]


def _run(args: list[str], out: Path | None = None) -> None:
    res = subprocess.run([*_cli(), *args], capture_output=True, text=True, check=False)
    if res.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(args)} exited {res.returncode}: {res.stderr[-2000:]}")
    if out is not None:
        out.write_text(res.stdout, encoding="utf-8")


#: what tests/test_golden_outputs.py captures (the whole capture writes 240 MB): one predicate per
#: format, the smaller outputs, plus diagnose and compare
SUBSET = {("fixtures", 1), ("label-studio", 1), ("trec", 1), ("jsonl", 4)}
#: keys that name where a ledger lies on the machine that captured, not what it holds
MACHINE_KEYS = frozenset({"path"})


def capture(out: Path, ledger: Path, subset: bool = False) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for i, where in enumerate(PREDICATES):
        for fmt in FORMATS:
            if subset and (fmt, i) not in SUBSET:
                continue
            target = out / f"export-{fmt}-{i}"
            _run(["export", str(ledger), "--where", where, "--format", fmt, "--out", str(target)])
    _run(["diagnose", str(ledger), "--json"], out / "diagnose.jsonl")
    _run(
        [
            "compare",
            str(ledger),
            "--candidate",
            "candidate",
            "--baseline",
            "baseline",
            "--rule",
            str(RULE),
            "--fail-on",
            "never",
            "--json",
        ],
        out / "compare.json",
    )
    print(f"captured {len(list(out.rglob('*')))} paths under {out}")


def _content(path: Path):
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json" or path.name.startswith("export-label-studio"):
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            pass
    lines = text.splitlines()
    try:
        return [json.loads(line) for line in lines if line.strip()]
    except json.JSONDecodeError:
        return lines


def _strip(value, ignore: set[str]):
    if isinstance(value, dict):
        return {k: _strip(v, ignore) for k, v in value.items() if k not in ignore}
    if isinstance(value, list):
        return [_strip(v, ignore) for v in value]
    return value


def digests(root: Path, ignore: set[str] = MACHINE_KEYS) -> dict[str, str]:
    """Each captured file's content (parsed, machine keys left out) as one SHA-256: what
    tests/test_golden_outputs.py holds a capture against, without committing 240 MB."""
    import hashlib

    return {
        name: hashlib.sha256(
            json.dumps(_strip(_content(path), ignore), sort_keys=True, ensure_ascii=False).encode()
        ).hexdigest()
        for name, path in _files(root).items()
    }


def _files(root: Path) -> dict[str, Path]:
    return {str(p.relative_to(root)): p for p in sorted(root.rglob("*")) if p.is_file()}


def compare(before: Path, after: Path, ignore: set[str]) -> int:
    a, b = _files(before), _files(after)
    problems = [f"only in {before}: {k}" for k in sorted(a.keys() - b.keys())]
    problems += [f"only in {after}: {k}" for k in sorted(b.keys() - a.keys())]
    for name in sorted(a.keys() & b.keys()):
        x, y = _strip(_content(a[name]), ignore), _strip(_content(b[name]), ignore)
        if x != y:
            problems.append(f"differs: {name}")
    for p in problems:
        print(p)
    print(f"{len(a.keys() & b.keys())} files compared, {len(problems)} difference(s)")
    return 1 if problems else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("capture")
    c.add_argument("out", type=Path)
    c.add_argument("--ledger", type=Path, default=SAMPLE)
    c.add_argument("--subset", action="store_true", help="only what the test captures")
    g = sub.add_parser("digests")
    g.add_argument("out", type=Path)
    d = sub.add_parser("compare")
    d.add_argument("before", type=Path)
    d.add_argument("after", type=Path)
    d.add_argument("--ignore-key", action="append", default=[])
    args = ap.parse_args()
    if args.cmd == "capture":
        capture(args.out, args.ledger, args.subset)
        return 0
    if args.cmd == "digests":
        print(json.dumps(digests(args.out), indent=1, sort_keys=True))
        return 0
    return compare(args.before, args.after, set(args.ignore_key))


if __name__ == "__main__":
    sys.exit(main())
