"""The configured depth of each first-stage list of an arm, read from the ledger's manifest: the cutoff
steps 3 and 4 of the diagnosis report (a record's ``top_n``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: a first-stage list's name in the diagnosis -> its depth's key in an arm's ``retrieval`` config
FIRST_STAGE_DEPTH_KEYS = (("bm25", "bm25_top_n"), ("dense_exact", "dense_top_n"), ("dense_ann", "ann_top_n"))


def first_stage_depths(arm_entry: Mapping[str, Any] | None) -> dict[str, int]:
    """The configured depth of each first-stage list of one arm (its entry in the ledger's manifest):
    the cutoff steps 3 and 4 report (a record's ``top_n``)."""
    retrieval = ((arm_entry or {}).get("config") or {}).get("retrieval") or {}
    return {name: int(retrieval[key]) for name, key in FIRST_STAGE_DEPTH_KEYS if key in retrieval}


def depths_by_arm(manifest: Mapping[str, Any]) -> dict[str, dict[str, int]]:
    """:func:`first_stage_depths` of every arm of a ledger's manifest, by arm name."""
    return {name: first_stage_depths(arm) for name, arm in (manifest.get("arms") or {}).items()}
