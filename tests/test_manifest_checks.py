"""What the ledger readers check in a manifest before they rely on it (ledger.verify.manifest_problems)."""

from __future__ import annotations

import pytest

from ledgerscope.ledger.verify import manifest_problems

_ARM = {"config": {}, "phases": [{"label": "0", "offset": 0}, {"label": "p5", "offset": 5}]}


def _fields(manifest: dict) -> list[str]:
    return [p.field for p in manifest_problems(manifest, "m.json")]


def test_a_well_formed_manifest_has_no_problem() -> None:
    assert _fields({"arms": {"candidate": _ARM}, "sources": {"a.md": "sha256:00"}}) == []


@pytest.mark.parametrize(
    ("phases", "field"),
    [
        (None, "arms.a.phases"),
        ([], "arms.a.phases"),
        ([{"label": "0", "offset": True}], "arms.a.phases[0]"),
        ([{"label": "../x", "offset": 0}], "arms.a.phases[0]"),
        ([{"label": "0", "offset": 0}, {"label": "0", "offset": 3}], "arms.a.phases[1]"),
    ],
)
def test_each_bad_phase_list_is_named(phases, field) -> None:
    assert _fields({"arms": {"a": {"config": {}, "phases": phases}}}) == [field]


def test_bad_arms_and_keys_are_named() -> None:
    assert _fields({"arms": {}}) == ["arms"]
    assert _fields({"arms": {"a/b": _ARM}, "created": 3}) == ["created", "arms.a/b"]
