"""A small sweep-free ledger of multi-document questions: support in two documents, each document's
spans lost at its own step.

Every question's sufficient set is three spans: two in one document and one in another (the
shape of a multi-hop question over two Wikipedia paragraphs). Per (question, phase) each document
has its own losing stage of the funnel: its gold units are in every ranked list before that stage
and in none from it on, so the span fates differ by document while the record's support flags say
the set is lost at the earlier of the two. Document ids are opaque (``wiki/<hex>``), their text
opens with a Markdown title, question ids are opaque too. Built on :mod:`.synthetic`'s writers,
so the ledger passes the integrity checks ``ledgerscope open`` runs.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pyarrow as pa

from ledgerscope.inputs.sources import text_version
from ledgerscope.ledger import schema
from ledgerscope.testing.synthetic import (
    FUNNEL,
    STAGE_SIZES,
    WORDS,
    answer_fields,
    funnel_of,
    record_constants,
    support_flags,
    units_of,
)
from ledgerscope.testing.synthetic_files import (
    manifest,
    phase_list_of,
    write_inputs,
    write_oracle,
    write_synthetic_partition,
)

TITLES = (
    "Sergio Pérez",
    "Force India",
    "Monaco Grand Prix",
    "Racing Point",
    "Guadalajara",
    "Sauber",
    "Circuit de Monaco",
    "Formula One",
    "Lance Stroll",
    "Silverstone Circuit",
)
#: per question (by number, cycling) and phase: the funnel index at which each document's spans go
#: (len(FUNNEL): kept to packing); never the chunker (index 0: the units always cover the text) nor
#: production (2: BM25, whose list goes with the exact stage, would still cover it)
LOSSES = (((3, 6), (4, 7)), ((1, 5), (6, 3)), ((5, 7), (3, 4)), ((6, 4), (7, 1)))


def make_multidoc_ledger(
    out: str | Path, questions: int = 6, phases: int = 2, unit_chars: int = 60, seed: int = 0
) -> dict[str, dict]:
    """Write the ledger; returns per qid its documents (``docs``) and per phase the step at which
    each document's spans go (``steps``: phase -> (step of the first, of the second; None: kept))."""
    out = Path(out)
    rng = np.random.default_rng(seed)
    docs = {}
    for d in range(2 * questions):
        doc_id = "wiki/" + hashlib.sha256(f"doc{d}".encode()).hexdigest()[:10]
        body = " ".join(rng.choice(WORDS, size=70))
        docs[doc_id] = f"# {TITLES[d % len(TITLES)]} {d // len(TITLES) or ''}".rstrip() + "\n\n" + body + "."
    doc_ids = sorted(docs)
    plan = _plan(questions, phases, list(docs))
    labels = [str(p) for p in range(phases)]
    phase_list = phase_list_of(labels, unit_chars)
    arms = ("candidate", "baseline")
    write_inputs(
        out,
        docs,
        [_fixture(qid, p, docs) for qid, p in plan.items()],
        manifest(docs, arms, phase_list, unit_chars, questions, phases, seed),
    )
    for arm in arms:
        for i, p in enumerate(phase_list):
            units, bounds, index = units_of(docs, doc_ids, arm, p, unit_chars)
            recs, cands = _records(rng, arm, p, i, plan, docs, index)
            write_synthetic_partition(out, arm, p, units, bounds, recs, cands)
        write_oracle(
            out,
            arm,
            dict.fromkeys(plan, "correct"),
            evidence_tokens=40,
            budget_tokens=320,
            answer="Force India",
        )
    return {
        qid: {
            "docs": p["docs"],
            "steps": {
                labels[i]: tuple(None if x >= len(FUNNEL) else x + 2 for x in p["lose"][i])
                for i in range(phases)
            },
        }
        for qid, p in plan.items()
    }


def _plan(questions: int, phases: int, doc_ids: list[str]) -> dict[str, dict]:
    """Per question: its two documents, its three spans (two in the first, one in the second) and
    per phase each document's losing funnel index."""
    plan = {}
    for q in range(questions):
        qid = hashlib.sha256(f"q{q}".encode()).hexdigest()[:12]
        first, second = doc_ids[2 * q], doc_ids[2 * q + 1]
        lose = [LOSSES[q % len(LOSSES)][i % 2] for i in range(phases)]
        plan[qid] = {"q": q, "docs": (first, second), "lose": lose}
    return plan


def _spans(docs: dict[str, str], first: str, second: str) -> list[tuple[str, str, int, int]]:
    """(span id, doc id, start, end): two spans in the first document's body, one in the second's."""
    a, b = docs[first], docs[second]
    body_a, body_b = a.index("\n\n") + 2, b.index("\n\n") + 2
    return [
        ("s0", first, body_a + 20, body_a + 60),
        ("s1", first, body_a + 150, body_a + 190),
        ("s2", second, body_b + 80, body_b + 120),
    ]


def _fixture(qid: str, p: dict, docs: dict[str, str]) -> dict:
    first, second = p["docs"]
    return {
        "format": "ledgerscope-fixture/1",
        "qid": qid,
        "segment": "joint-evidence",
        "question": f"Which team did the driver of question {p['q']} race for before it was renamed?",
        "answer": {"expected": "Force India"},
        "spans": [
            {
                "id": sid,
                "doc_id": d,
                "start": s,
                "end": e,
                "quote": docs[d][s:e],
                "version": text_version(docs[d]),
                "dependency": "primary",
            }
            for sid, d, s, e in _spans(docs, first, second)
        ],
        "sufficient_sets": [["s0", "s1", "s2"]],
    }


def _records(rng, arm: str, p: dict, i: int, plan: dict[str, dict], docs: dict[str, str], index: dict):
    """Each question's record and candidate rows for one (arm, phase)."""
    cols: dict[str, list] = {name: [] for name in schema.CANDIDATES.names}
    recs = []
    others = [(d, u) for d, us in index.items() for u in us]
    for qid, q in plan.items():
        first, second = q["docs"]
        lose = q["lose"][i]
        gold = {
            d: [
                (d, u)
                for u in index[d]
                if any(u[1] < e and s < u[2] for sid, dd, s, e in _spans(docs, first, second) if dd == d)
            ]
            for d in (first, second)
        }
        for stage, n in STAGE_SIZES:
            f = FUNNEL.index(funnel_of(stage))
            keep = [x for d, loses in zip((first, second), lose, strict=True) if f < loses for x in gold[d]]
            filler = [
                others[j]
                for j in rng.choice(len(others), size=n, replace=False)
                if others[j] not in gold[first] + gold[second]
            ]
            _candidates(cols, rng, (keep + filler)[: max(n, len(keep))], arm, p["label"], qid, stage)
        flags = support_flags(True, min(lose))
        packed = bool(flags.get("support_packed"))
        verdict = "correct" if packed else "wrong"
        recs.append(
            {
                "arm": arm,
                "phase": p["label"],
                "phase_offset": p["offset"],
                "qid": qid,
                "question": f"Which team did the driver of question {q['q']} race for before it was renamed?",
                "segment": "joint-evidence",
                "answerable": True,
                "support_only": False,
                "stress_set": "representative",
                "doc_ids": [first, second],
                "gold_status": "ok",
                **flags,
                **answer_fields(first, docs[first], index[first], packed, verdict),
                **record_constants(f"synthetic:{arm}"),
            }
        )
    return recs, pa.Table.from_pydict(cols, schema=schema.CANDIDATES)


def _candidates(cols: dict[str, list], rng, picks, arm: str, phase: str, qid: str, stage: str) -> None:
    """One ranked list's rows: (doc id, (unit id, start, end)) picks in rank order."""
    k = len(picks)
    for col, values in (
        ("arm", [arm] * k),
        ("phase", [phase] * k),
        ("qid", [qid] * k),
        ("stage", [stage] * k),
        ("rank", list(range(1, k + 1))),
        ("unit_id", [u[0] for _, u in picks]),
        ("score", sorted(rng.random(k).tolist(), reverse=True)),
        ("doc_id", [d for d, _ in picks]),
        ("start", [u[1] for _, u in picks]),
        ("end", [u[2] for _, u in picks]),
        ("lineage", [["bm25"] if stage == "union" else []] * k),
    ):
        cols[col] += values
