"""The CLI's outputs on the committed sample ledger stay what they were: ``diagnose --json``,
``compare --json`` with the sample's rule, and one export per format, held against the content
digests in ``tests/data/golden_outputs.json`` (a refactor must not change a record).

A deliberate change of what the outputs hold regenerates the digests, in the same commit:

    python scripts/golden_outputs.py capture /tmp/g --subset
    python scripts/golden_outputs.py digests /tmp/g > tests/data/golden_outputs.json

and ``golden_outputs.py compare BEFORE AFTER`` names the files that differ.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _script():
    spec = importlib.util.spec_from_file_location("golden_outputs", ROOT / "scripts" / "golden_outputs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_the_sample_outputs_equal_the_committed_digests(tmp_path: Path) -> None:
    golden = _script()
    golden.capture(tmp_path / "out", golden.SAMPLE, subset=True)
    want = json.loads((ROOT / "tests" / "data" / "golden_outputs.json").read_text())
    got = golden.digests(tmp_path / "out")
    assert sorted(got) == sorted(want)
    changed = sorted(name for name in want if got[name] != want[name])
    assert not changed, f"outputs changed: {changed} (see this module's docstring)"
