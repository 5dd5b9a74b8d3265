"""The 1M-candidate-row ledger ``scripts/bench_tui.py`` opens, written straight to Parquet.

2 arms x 8 phases x 2,000 questions x 32 candidate rows = 1,024,000 candidate rows by default, schema
valid, each partition's commit marker recording its files' sizes and SHA-256 digests as the sweep's
writer does (so the integrity checks ``ledgerscope open`` runs have the same work as on a real ledger).
"""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

WORDS = (
    "request",
    "retention",
    "policy",
    "limit",
    "days",
    "temporary",
    "backup",
    "snapshot",
    "region",
    "export",
    "session",
    "token",
    "audit",
    "attachment",
    "workspace",
    "support",
    "period",
    "deleted",
    "entry",
    "schedule",
    "primary",
    "weekly",
    "nightly",
    "restore",
    "portal",
    "hours",
    "status",
    "rejected",
    "expired",
    "revoked",
    "service",
    "plan",
    "seats",
    "enterprise",
    "contract",
    "clause",
    "party",
    "notice",
)
STAGE_SIZES = (
    ("bm25", 5),
    ("dense_exact", 5),
    ("dense_ann", 5),
    ("union", 6),
    ("fused", 6),
    ("reranked", 3),
    ("selected", 1),
    ("packed", 1),
)  # 32 rows per record
VERDICTS = (
    "correct",
    "correct",
    "correct",
    "wrong",
    "critical-condition-error",
    "abstained",
    "infrastructure-failure",
)
SEGMENTS = ("rule-exception", "definition-referent", "number-scope", "cross-reference", "joint-evidence")


def _doc_text(rng: random.Random, n_sentences: int = 24) -> str:
    sentences = []
    for _ in range(n_sentences):
        words = [rng.choice(WORDS) for _ in range(rng.randint(8, 16))]
        sentences.append(" ".join(words).capitalize() + ".")
    return " ".join(sentences)


def build_ledger(out: Path, questions: int = 2000, phases: int = 8, docs: int = 500, seed: int = 7) -> dict:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ledgerscope.ledger import schema

    rng = random.Random(seed)
    out.mkdir(parents=True, exist_ok=True)
    texts = {f"doc{d:04d}.md": _doc_text(rng) for d in range(docs)}
    versions = {d: "sha256:" + hashlib.sha256(t.encode()).hexdigest() for d, t in texts.items()}
    pq.write_table(
        pa.Table.from_pylist(
            [
                {"doc_id": d, "version": versions[d], "text": t, "observed": None, "access": []}
                for d, t in texts.items()
            ],
            schema=schema.SOURCES,
        ),
        _sources_path(out),
    )
    doc_ids = list(texts)
    # units: fixed 200-character windows with 40 characters of overlap, shifted per phase
    fixtures, gold = [], {}
    for q in range(questions):
        qid = f"q{q:05d}"
        doc = doc_ids[q % docs]
        text = texts[doc]
        start = text.find(". ", rng.randint(0, len(text) - 300)) + 2
        end = text.find(".", start) + 1
        gold[qid] = (doc, start, end)
        fixtures.append(
            {
                "format": "ledgerscope-fixture/1",
                "qid": qid,
                "question": f"What does the policy say about {rng.choice(WORDS)} {rng.choice(WORDS)} "
                f"({qid})?",
                "segment": SEGMENTS[q % len(SEGMENTS)],
                "answerable": True,
                "support_only": False,
                "answer": {"expected": "30 days", "missing_condition": "abstain"},
                "coordinate_system": "codepoint-half-open",
                "spans": [
                    {
                        "id": "s",
                        "doc_id": doc,
                        "version": versions[doc],
                        "start": start,
                        "end": end,
                        "quote": text[start:end],
                        "dependency": "primary",
                    }
                ],
                "sufficient_sets": [["s"]],
                "adjudication": {"state": "adjudicated"},
                "stress_set": "representative",
            }
        )
    (out / "fixtures.jsonl").write_text("\n".join(json.dumps(f) for f in fixtures) + "\n", encoding="utf-8")
    arms = {}
    n_cands = 0
    for arm in ("candidate", "baseline"):
        phase_list = [{"label": str(p), "offset": p * 20} for p in range(phases)]
        arms[arm] = {
            "phases": phase_list,
            "config": {"retrieval": {"bm25_top_n": 5, "dense_top_n": 5, "ann_top_n": 5}},
            "config_digest": "sha256:" + hashlib.sha256(arm.encode()).hexdigest(),
            "stride": 160,
        }
        for ph in phase_list:
            n_cands += _write_partition(
                out, arm, ph["label"], ph["offset"], texts, versions, gold, fixtures, rng
            )
        _write_oracle(out, arm, fixtures)
    manifest = {
        "format": schema.FORMAT,
        "arms": arms,
        "created": "2026-01-01T00:00:00Z",
        "fixture_count": questions,
        "sources": versions,
        "stages": list(schema.STAGES),
        "ledgerscope_version": "bench",
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    return {"questions": questions, "phases": phases, "arms": 2, "candidate_rows": n_cands}


def _units_for(text: str, offset: int) -> list[tuple[int, int]]:
    units = []
    first = offset if offset else 160
    cuts = [0, *range(first, len(text), 160)]
    for i, c in enumerate(cuts):
        end = min(len(text), (cuts[i + 1] if i + 1 < len(cuts) else len(text)) + 40)
        units.append((c, end))
    return units


def _write_partition(
    out: Path, arm: str, phase: str, offset: int, texts, versions, gold, fixtures, rng
) -> int:
    import pyarrow as pa

    from ledgerscope.ledger import schema
    from ledgerscope.ledger.write import write_partition

    units, bounds, unit_index = _units_and_bounds(arm, phase, offset, texts, versions)
    cand_cols: dict[str, list] = {f.name: [] for f in schema.CANDIDATES}
    doc_ids = list(texts)
    records = [
        _question(fx, arm, phase, offset, texts, gold[fx["qid"]], unit_index, doc_ids, cand_cols, rng)
        for fx in fixtures
    ]
    tables = {
        "units": pa.Table.from_pylist(units, schema=schema.UNITS),
        "boundaries": pa.Table.from_pylist(bounds, schema=schema.BOUNDARIES),
        "candidates": pa.Table.from_pydict(cand_cols, schema=schema.CANDIDATES),
        "records": pa.Table.from_pylist(records, schema=schema.RECORDS),
    }
    n = len(cand_cols["qid"])
    meta = {"arm": arm, "phase": phase, "candidates": n, "records": len(records), "units": len(units)}
    write_partition(out, arm, phase, tables, meta)  # files, then the commit marker recording them
    return n


def _units_and_bounds(arm: str, phase: str, offset: int, texts, versions) -> tuple[list, list, dict]:
    """Every document's units at this phase's offset and its boundary row; doc -> its unit intervals."""
    units, bounds, unit_index = [], [], {}
    for doc, text in texts.items():
        ivs = _units_for(text, offset)
        unit_index[doc] = ivs
        for i, (s, e) in enumerate(ivs):
            units.append(
                {
                    "arm": arm,
                    "phase": phase,
                    "unit_id": f"{doc}@{s}-{e}",
                    "doc_id": doc,
                    "version": versions[doc],
                    "ordinal": i,
                    "start": s,
                    "end": e,
                    "core_start": s,
                    "core_end": min(e, s + 160),
                    "token_start": i * 32,
                    "token_end": i * 32 + 40,
                    "n_tokens": 40,
                    "text": text[s:e],
                    "access": [],
                }
            )
        bounds.append(
            {
                "arm": arm,
                "phase": phase,
                "phase_offset": offset,
                "doc_id": doc,
                "version": versions[doc],
                "n_tokens": len(text) // 5,
                "cut_tokens": [i * 32 for i in range(1, len(ivs))],
                "cut_chars": [s for s, _ in ivs[1:]],
            }
        )
    return units, bounds, unit_index


def _question(
    fx,
    arm: str,
    phase: str,
    offset: int,
    texts,
    gold: tuple,
    unit_index: dict,
    doc_ids: list,
    cand_cols: dict[str, list],
    rng,
) -> dict:
    """One question's candidate rows (appended to ``cand_cols``) and its record: with probability 0.7
    the gold unit ranks first everywhere and the answer is drawn from every verdict, else support is
    lost at one stage and the answer is wrong, critical or abstained."""
    from ledgerscope.testing.synthetic import record_constants

    qid = fx["qid"]
    doc, gs, ge = gold
    ivs = unit_index[doc]
    hit = next((iv for iv in ivs if iv[0] <= gs and iv[1] >= ge), ivs[0])
    keep = rng.random() < 0.7
    _candidates(cand_cols, arm, phase, qid, (doc, hit) if keep else None, doc_ids, unit_index, rng)
    verdict = rng.choice(VERDICTS) if keep else rng.choice(("wrong", "critical-condition-error", "abstained"))
    context = f"[1] ({doc})\n{texts[doc][hit[0] : hit[1]]}" if keep else "[1] (other)\n..."
    flags = _support_flags(keep, rng)
    return {
        "arm": arm,
        "phase": phase,
        "phase_offset": offset,
        "qid": qid,
        "question": fx["question"],
        "segment": fx["segment"],
        "answerable": True,
        "support_only": False,
        "stress_set": "representative",
        "doc_ids": [doc],
        "gold_status": "ok",
        **flags,
        "covered_set": 0 if keep else None,
        "single_unit_complete": keep,
        "packed_context": context,
        "packed_unit_ids": [f"{doc}@{hit[0]}-{hit[1]}"],
        "evidence_tokens": 40,
        "prompt_tokens": 90,
        "budget_tokens": 64,
        "rerank_depth": 6,
        "selection_depth": 3,
        "topk_tokens": 40,
        "answer": "Requests may be retained for 30 days. [1]",
        "abstained": verdict == "abstained",
        "citations_json": json.dumps(
            [
                {
                    "label": "1",
                    "unit_id": f"{doc}@{hit[0]}-{hit[1]}",
                    "doc_id": doc,
                    "start": hit[0],
                    "end": hit[1],
                }
            ]
        ),
        "answer_verdict": verdict,
        "citation_verdict": "supported" if keep else "unsupported",
        **record_constants("sha256:bench"),
    }


def _candidates(
    cand_cols: dict[str, list],
    arm: str,
    phase: str,
    qid: str,
    first: tuple | None,
    doc_ids: list,
    unit_index: dict,
    rng,
) -> None:
    """Every stage's ranked list for one question: ``first`` (doc, unit) at rank 1 when the gold
    unit survives, random units of random documents everywhere else."""
    for stage, n in STAGE_SIZES:
        for rank in range(1, n + 1):
            if rank == 1 and first is not None:
                d, (s, e) = first
            else:
                d = rng.choice(doc_ids)
                s, e = rng.choice(unit_index[d])
            for k, v in (
                ("arm", arm),
                ("phase", phase),
                ("qid", qid),
                ("stage", stage),
                ("rank", rank),
                ("unit_id", f"{d}@{s}-{e}"),
                ("score", round(1.0 / rank, 4)),
                ("doc_id", d),
                ("start", s),
                ("end", e),
                ("lineage", ["bm25"] if stage == "union" else None),
            ):
                cand_cols[k].append(v)


def _support_flags(keep: bool, rng) -> dict[str, bool]:
    """Support at every stage, or lost from one random stage on (and at every later one)."""
    from ledgerscope.ledger import schema

    flags = {c: True for c in schema.SUPPORT_COLUMNS}
    if not keep:
        lose = rng.choice(("support_fused", "support_reranked", "support_packed", "support_union"))
        after = False
        for c in (
            "support_union",
            "support_fused",
            "support_reranked",
            "support_selected",
            "support_packed",
            "support_cited",
            "support_topk",
        ):
            after = after or c == lose
            if after:
                flags[c] = False
    return flags


def _sources_path(out: Path) -> Path:
    from ledgerscope.ledger.write import sources_path

    sources_path(out).parent.mkdir(parents=True, exist_ok=True)
    return sources_path(out)


def _file_records(part: Path) -> dict:
    """Each table file's size and digest, as format 2 recorded them in ``_SUCCESS.json``."""
    from ledgerscope.ledger.verify import file_record

    return {p.name: file_record(p) for p in sorted(part.glob("*.parquet"))}


def ensure_digests(out: Path) -> int:
    """Record the files of a (format 2) ledger built before the markers held digests; returns
    partitions updated (format 3 markers always record them)."""
    updated = 0
    for marker in sorted(out.glob("partitions/*/*/_SUCCESS.json")):
        meta = json.loads(marker.read_text())
        if "files" not in meta:
            marker.write_text(json.dumps({**meta, "files": _file_records(marker.parent)}))
            updated += 1
    return updated


def _write_oracle(out: Path, arm: str, fixtures) -> None:
    from ledgerscope.testing.synthetic import write_oracle

    write_oracle(
        out,
        arm,
        {f["qid"]: "correct" for f in fixtures},
        evidence_tokens=30,
        budget_tokens=64,
        answer="30 days",
    )
