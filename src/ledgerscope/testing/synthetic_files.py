"""The files of a synthetic ledger around its rows: sources, fixtures, manifest, partitions and oracle.

Shared by :mod:`.synthetic` (a ledger of any size) and :mod:`.multidoc` (multi-document questions), so
both write what a sweep writes, in the same layout, and pass the checks ``ledgerscope open`` runs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ledgerscope.inputs.sources import text_version
from ledgerscope.ledger import schema
from ledgerscope.ledger.write import oracle_path, sources_path, write_partition, write_table


def phase_list_of(labels: Sequence[str], unit_chars: int) -> list[dict]:
    """The manifest's phases: each label with its offset, the unit length split evenly among them."""
    return [
        {"label": label, "offset": p * (unit_chars // max(1, len(labels)))} for p, label in enumerate(labels)
    ]


def write_inputs(out: Path, docs: dict[str, str], fixtures: Sequence[dict], manifest: dict) -> None:
    """What a sweep writes before its partitions: the sources table, the fixtures and the manifest."""
    write_sources(out, docs)
    (out / "fixtures.jsonl").write_text("\n".join(json.dumps(f) for f in fixtures) + "\n", encoding="utf-8")
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2))


def write_synthetic_partition(
    out: Path, arm: str, p: dict, units: list[dict], bounds: list[dict], recs: list[dict], cands: pa.Table
) -> None:
    """One (arm, phase) partition of synthetic rows, with one offset repair (:func:`repairs`)."""
    write_partition(
        out,
        arm,
        p["label"],
        {
            "units": units,
            "boundaries": bounds,
            "candidates": cands,
            "records": recs,
            "repairs": repairs(units[:1]),
        },
        {"arm": arm, "phase": p["label"], "synthetic": True},
    )


def write_sources(out: Path, docs: dict[str, str]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    rows = [
        {"doc_id": k, "version": text_version(v), "text": v, "observed": None, "access": []}
        for k, v in docs.items()
    ]
    write_table(sources_path(out), rows, schema.SOURCES)


def manifest(
    docs: Mapping[str, str],
    arms: Sequence[str],
    phase_list: list[dict],
    unit_chars: int,
    questions: int,
    phases: int,
    seed: int,
) -> dict:
    """The ledger's manifest: every arm with the same synthetic config over the same phases."""
    manifest = {
        "format": schema.FORMAT,
        "ledgerscope_version": "synthetic",
        "created": "synthetic",
        "identity": f"synthetic:{questions}:{phases}:{seed}",
        "fixtures_digest": "synthetic",
        "fixture_count": questions,
        "sources": {k: text_version(v) for k, v in docs.items()},
        "arms": {
            arm: {
                "config": {
                    "name": arm,
                    "capacity": unit_chars,
                    "overlap": 0,
                    "budget_tokens": 320,
                    "rerank_depth": 12,
                    "retrieval": {"bm25_top_n": 8, "dense_top_n": 8, "ann_top_n": 8},
                    "rerank": {"selection_depth": 10},
                },
                "config_digest": f"synthetic:{arm}",
                "phases": phase_list,
                "stride": unit_chars,
                "edge_policy": "keep-short",
                "components": {},
            }
            for arm in arms
        },
        "stages": list(schema.STAGES),
    }
    return manifest


def write_oracle(
    out: Path, arm: str, verdicts: Mapping[str, str], *, evidence_tokens: int, budget_tokens: int, answer: str
) -> None:
    """The arm's oracle table: per question (qid -> its answer verdict) one feasible support set."""
    rows = [
        {
            "arm": arm,
            "qid": qid,
            "support_set": 0,
            "feasible": True,
            "evidence_tokens": evidence_tokens,
            "budget_tokens": budget_tokens,
            "context": "",
            "answer": answer,
            "abstained": False,
            "answer_verdict": verdict,
            "answer_reason": "synthetic",
            "generator_error": None,
            "attempts": 1,
        }
        for qid, verdict in verdicts.items()
    ]
    path = oracle_path(out, arm)
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=schema.ORACLE), path)


def repairs(units: list[dict]) -> list[dict]:
    """One offset repair per partition (the first unit, as if an external chunker had returned it
    one code point off), so every ledger table has rows."""
    return [
        {
            "arm": u["arm"],
            "phase": u["phase"],
            "doc_id": u["doc_id"],
            "version": u["version"],
            "position": 0,
            "side": "whole",
            "status": "repaired",
            "text": u["text"],
            "given_start": u["start"] + 1,
            "given_end": u["end"] + 1,
            "start": u["start"],
            "end": u["end"],
            "note": "synthetic",
        }
        for u in units
    ]
