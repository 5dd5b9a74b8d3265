"""A schema-valid synthetic ledger of any size, for benchmarks and load tests.

The rows are random but consistent where it matters: every record's support
flags form a funnel that loses support at one stage (so the diagnosis lands
on every step), verdicts follow the flags, candidate units are real intervals
of real (generated) sources, and gold spans are real slices of them. Built
column by column with numpy, so a million candidate rows take seconds.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa

from ledgerscope.inputs.fixtures import SEGMENTS
from ledgerscope.inputs.sources import text_version
from ledgerscope.ledger import schema
from ledgerscope.testing.synthetic_files import (
    manifest,
    phase_list_of,
    repairs,
    write_inputs,
    write_oracle,
    write_synthetic_partition,
)

#: (stage, list length) per record: about 67 candidate rows per record
STAGE_SIZES = (
    ("bm25", 8),
    ("dense_exact", 8),
    ("dense_ann", 8),
    ("union", 12),
    ("fused", 12),
    ("reranked", 10),
    ("selected", 4),
    ("packed", 3),
    ("topk", 2),
)
FUNNEL = (
    "support_chunked",
    "support_exact",
    "support_production",
    "support_union",
    "support_fused",
    "support_reranked",
    "support_packed",
)
WORDS = (
    "retention",
    "limit",
    "requests",
    "temporary",
    "plan",
    "audit",
    "region",
    "export",
    "token",
    "workspace",
    "owner",
    "days",
    "hours",
    "seats",
    "backup",
    "policy",
    "section",
    "except",
    "unless",
)


def rows_per_record() -> int:
    return sum(n for _, n in STAGE_SIZES)


def make_synthetic_ledger(
    out: str | Path,
    questions: int = 1000,
    phases: int = 8,
    arms: tuple[str, ...] = ("candidate", "baseline"),
    unit_chars: int = 80,
    doc_chars: int = 2400,
    seed: int = 0,
    phase_labels: Sequence[str] | None = None,
    question_texts: Mapping[int, str] | None = None,
) -> dict:
    """Write a ledger directory; returns counts (records, candidate rows, units).

    ``phase_labels``: the labels of the phases (their number replaces ``phases``);
    by default ``"0"`` .. ``phases - 1``. ``question_texts``: question number -> its text
    (by default ``"question N?"``), in the fixtures and every record.
    """
    out = Path(out)
    labels = list(phase_labels) if phase_labels is not None else [str(p) for p in range(phases)]
    phases = len(labels)
    rng = np.random.default_rng(seed)
    texts = {q: f"question {q}?" for q in range(questions)} | dict(question_texts or {})
    n_docs = max(1, questions // 4)
    docs = _documents(rng, n_docs, doc_chars)
    doc_ids = sorted(docs)
    q_doc = np.array([doc_ids[q % n_docs] for q in range(questions)], dtype=object)
    q_seg = np.array([SEGMENTS[q % len(SEGMENTS)] for q in range(questions)], dtype=object)
    fixtures, spans_of = _fixtures(rng, q_doc, q_seg, docs, texts)
    phase_list = phase_list_of(labels, unit_chars)
    write_inputs(out, docs, fixtures, manifest(docs, arms, phase_list, unit_chars, questions, phases, seed))

    totals = {"records": 0, "candidates": 0, "units": 0}
    for arm in arms:
        for p in phase_list:
            units, bounds, unit_index = _units(docs, doc_ids, arm, p, unit_chars)
            recs, cands = _records(rng, arm, p, questions, q_doc, q_seg, spans_of, docs, unit_index, texts)
            write_synthetic_partition(out, arm, p, units, bounds, recs, cands)
            totals["candidates"] += cands.num_rows
            totals["records"] += len(recs)
            totals["units"] += len(units)
        write_oracle(
            out,
            arm,
            {f"q{q:06d}": "correct" if q % 3 else "wrong" for q in range(questions)},
            evidence_tokens=40,
            budget_tokens=320,
            answer="7 days",
        )
    return totals


def _documents(rng, n_docs: int, doc_chars: int) -> dict[str, str]:
    """``n_docs`` documents of random policy words, about ``doc_chars`` long, each ending in a period."""
    docs = {}
    for d in range(n_docs):
        words = rng.choice(WORDS, size=doc_chars // 7)
        text = " ".join(words)[:doc_chars]
        docs[f"docs/d{d:05d}.md"] = text.rstrip() + "."
    return docs


def _fixtures(
    rng, q_doc, q_seg, docs: Mapping[str, str], texts: Mapping[int, str]
) -> tuple[list[dict], dict]:
    """Canonical fixtures, one per question, and each answerable one's two spans (a rule and its
    qualifier, both needed) at random places in its document."""
    questions = len(q_doc)
    fixtures = []
    spans_of = {}
    for q in range(questions):
        doc = q_doc[q]
        text = docs[doc]
        if q_seg[q] == "unanswerable":
            fixtures.append(
                {
                    "format": "ledgerscope-fixture/1",
                    "qid": f"q{q:06d}",
                    "question": texts[q],
                    "segment": "unanswerable",
                    "answerable": False,
                    "answer": {"expected": None},
                    "spans": [],
                    "sufficient_sets": [],
                }
            )
            continue
        a = int(rng.integers(0, len(text) - 200))
        b = a + int(rng.integers(60, 150))
        spans = [(a, a + 40), (b, b + 40)]
        spans_of[q] = spans
        fixtures.append(
            {
                "format": "ledgerscope-fixture/1",
                "qid": f"q{q:06d}",
                "question": texts[q],
                "segment": q_seg[q],
                "answer": {"expected": "7 days", "default": "30 days"},
                "spans": [
                    {
                        "id": "rule",
                        "doc_id": doc,
                        "start": s,
                        "end": e,
                        "quote": text[s:e],
                        "version": text_version(text),
                        "dependency": dep,
                    }
                    for (s, e), dep in zip(spans, ("primary", "exception"), strict=True)
                ],
                "sufficient_sets": [["rule", "qualifier"]],
            }
        )
        fixtures[-1]["spans"][1]["id"] = "qualifier"
    return fixtures, spans_of


def record_constants(config_digest: str) -> dict:
    """The record columns every synthetic record shares: nothing overflowed or dropped, one
    generator attempt, reasons that say ``synthetic``, an oracle that answered correctly."""
    return {
        "repeated_source_tokens": 0,
        "overflow_json": "[]",
        "expansion_dropped_json": "[]",
        "answer_reason": "synthetic",
        "citation_reason": "synthetic",
        "generator_error": None,
        "attempts": 1,
        "generator_detail_json": "{}",
        "oracle_verdict": "correct",
        "oracle_feasible": True,
        "config_digest": config_digest,
    }


def _units(docs, doc_ids, arm, p, unit_chars):
    rows, bounds, index = [], [], {}
    for doc in doc_ids:
        text = docs[doc]
        cuts = list(range(p["offset"] or unit_chars, len(text), unit_chars))
        edges = [0, *cuts, len(text)]
        doc_units = []
        for i, (s, e) in enumerate(itertools.pairwise(edges)):
            uid = f"{doc}@{s}-{e}"
            rows.append(
                {
                    "arm": arm,
                    "phase": p["label"],
                    "unit_id": uid,
                    "doc_id": doc,
                    "version": text_version(text),
                    "ordinal": i,
                    "start": s,
                    "end": e,
                    "core_start": s,
                    "core_end": e,
                    "token_start": s // 5,
                    "token_end": e // 5,
                    "n_tokens": (e - s) // 5,
                    "text": text[s:e],
                    "access": [],
                }
            )
            doc_units.append((uid, s, e))
        index[doc] = doc_units
        bounds.append(
            {
                "arm": arm,
                "phase": p["label"],
                "phase_offset": p["offset"],
                "doc_id": doc,
                "version": text_version(text),
                "n_tokens": len(text) // 5,
                "cut_tokens": [c // 5 for c in cuts],
                "cut_chars": cuts,
            }
        )
    return rows, bounds, index


def _records(rng, arm, p, questions, q_doc, q_seg, spans_of, docs, unit_index, texts):
    """Each question's record and candidate rows for one (arm, phase); ``lose`` picks the funnel
    stage where support goes (past the end: kept), so every diagnosis step gets records."""
    cols: dict[str, list] = {name: [] for name in schema.CANDIDATES.names}
    recs = []
    lose = rng.integers(0, len(FUNNEL) + 2, size=questions)  # >= len(FUNNEL): support kept
    for q in range(questions):
        qid = f"q{q:06d}"
        doc = q_doc[q]
        units = unit_index[doc]
        answerable = q_seg[q] != "unanswerable"
        gold_units = [
            u for u in units if q in spans_of and any(u[1] < e and s < u[2] for s, e in spans_of[q])
        ]
        for stage, n in STAGE_SIZES:
            picks = [units[i] for i in rng.choice(len(units), size=min(n, len(units)), replace=False)]
            keeps = answerable and FUNNEL.index(_funnel_of(stage)) < lose[q]
            if keeps:  # a stage that keeps support lists the gold-covering units first
                picks = (gold_units + [u for u in picks if u not in gold_units])[:n]
            _add_candidates(cols, rng, picks, arm=arm, phase=p["label"], qid=qid, stage=stage, doc=doc)
        flags = _support_flags(answerable, lose[q])
        packed = bool(flags.get("support_packed"))
        verdict = _verdict(q, answerable, packed)
        recs.append(
            {
                "arm": arm,
                "phase": p["label"],
                "phase_offset": p["offset"],
                "qid": qid,
                "question": texts[q],
                "segment": q_seg[q],
                "answerable": answerable,
                "support_only": False,
                "stress_set": "representative",
                "doc_ids": [doc],
                "gold_status": "ok",
                **flags,
                **_answer_fields(doc, docs[doc], units, packed, verdict),
                **record_constants(f"synthetic:{arm}"),
            }
        )
    return recs, pa.Table.from_pydict(cols, schema=schema.CANDIDATES)


def _add_candidates(cols: dict[str, list], rng, picks, *, arm, phase, qid, stage, doc) -> None:
    """Append one ranked list's rows (rank order, descending random scores) to ``cols``."""
    k = len(picks)
    cols["arm"] += [arm] * k
    cols["phase"] += [phase] * k
    cols["qid"] += [qid] * k
    cols["stage"] += [stage] * k
    cols["rank"] += list(range(1, k + 1))
    cols["unit_id"] += [u[0] for u in picks]
    cols["score"] += sorted(rng.random(k).tolist(), reverse=True)
    cols["doc_id"] += [doc] * k
    cols["start"] += [u[1] for u in picks]
    cols["end"] += [u[2] for u in picks]
    cols["lineage"] += [["bm25"] if stage == "union" else []] * k


def _support_flags(answerable: bool, lose: int) -> dict:
    """The support columns: kept before the funnel stage ``lose``, lost from it on; the stages
    outside the funnel copy the funnel stage they follow (None for an unanswerable question)."""
    flags = {c: None for c in schema.SUPPORT_COLUMNS}
    if answerable:
        kept = {c: FUNNEL.index(c) < lose for c in FUNNEL}
        flags.update({c: True for c in schema.SUPPORT_COLUMNS})
        flags.update(kept)
        flags["support_bm25"] = flags["support_dense_exact"] = flags["support_exact"]
        flags["support_dense_ann"] = flags["support_production"]
        flags["support_selected"] = flags["support_reranked"]
        flags["support_cited"] = flags["support_topk"] = flags["support_packed"]
    return flags


def _verdict(q: int, answerable: bool, packed: bool) -> str:
    """A verdict mix by question number: mostly correct when support was packed, some critical
    errors without it, and both control outcomes for unanswerable questions."""
    verdict = (
        ("correct" if packed and q % 4 else "wrong")
        if answerable
        else ("abstained" if q % 2 else "false-assertion")
    )
    if answerable and not packed and q % 5 == 0:
        verdict = "critical-condition-error"
    return verdict


def _answer_fields(doc: str, text: str, units, packed: bool, verdict: str) -> dict:
    """The packing, budget and answer columns, fixed apart from what support and verdict imply."""
    return {
        "covered_set": 0 if packed else None,
        "single_unit_complete": False,
        "packed_context": "[1] (" + doc + ")\n" + text[:160],
        "packed_unit_ids": [units[0][0]],
        "evidence_tokens": 40,
        "prompt_tokens": 90,
        "budget_tokens": 320,
        "rerank_depth": 12,
        "selection_depth": 10,
        "topk_tokens": 30,
        "answer": "7 days [1]" if verdict == "correct" else "30 days [1]",
        "abstained": verdict == "abstained",
        "citations_json": "[]",
        "answer_verdict": verdict,
        "citation_verdict": "supported" if packed else "unsupported",
    }


def _funnel_of(stage: str) -> str:
    return {
        "bm25": "support_exact",
        "dense_exact": "support_exact",
        "dense_ann": "support_production",
        "union": "support_union",
        "fused": "support_fused",
        "reranked": "support_reranked",
        "selected": "support_reranked",
        "packed": "support_packed",
        "topk": "support_packed",
    }[stage]


# the parts other builders of small ledgers reuse (:mod:`.multidoc`); the files around the rows
# (manifest, repairs, write_oracle, ...) are :mod:`.synthetic_files`'s, importable from here too
__all__ = [
    "FUNNEL",
    "STAGE_SIZES",
    "WORDS",
    "answer_fields",
    "funnel_of",
    "make_synthetic_ledger",
    "manifest",
    "phase_list_of",
    "record_constants",
    "repairs",
    "rows_per_record",
    "support_flags",
    "units_of",
    "write_inputs",
    "write_oracle",
    "write_synthetic_partition",
]
units_of = _units
support_flags = _support_flags
answer_fields = _answer_fields
funnel_of = _funnel_of
