"""What ``ledgerscope ingest`` reports: records written, how every chunk was located, what was recorded."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from ledgerscope.ingest.derive.resolve import RESOLVED, UNRESOLVED, ResolutionReport


@dataclass
class IngestReport:
    out: Path
    traces: int
    records: dict[tuple[str, str], int]
    resolution: ResolutionReport
    recorded: dict[str, list[str]]
    not_recorded: dict[str, list[str]]
    chunked: dict[str, str]
    oracle: str
    claims: Counter = field(default_factory=Counter)
    context_mismatches: int = 0
    #: per config, requests that failed (recorded as infrastructure failures, never judged)
    failed: dict[str, int] = field(default_factory=dict)
    #: traces of the input that hold no request, skipped, by why
    skipped: dict[str, int] = field(default_factory=dict)
    #: records with a stage whose verdict rests on an unplaced chunk
    unverifiable: int = 0

    def to_json(self) -> dict:
        return {
            "ledger": str(self.out),
            "traces": self.traces,
            "records": [{"arm": a, "phase": p, "records": n} for (a, p), n in sorted(self.records.items())],
            "chunks": self.resolution.to_json(),
            "stages_recorded": self.recorded,
            "tree_stages_not_recorded": self.not_recorded,
            "chunked": self.chunked,
            "oracle": self.oracle,
            "claims": [{"claim": k, "agrees": a, "records": n} for (k, a), n in sorted(self.claims.items())],
            "context_text_lacks_a_chunk": self.context_mismatches,
            "failed": self.failed,
            "skipped": self.skipped,
            "records_unverifiable": self.unverifiable,
        }

    def lines(self) -> list[str]:
        """The report for a terminal."""
        arms = sorted({a for a, _ in self.records})
        out = [
            f"ledger {self.out}: {self.traces} trace(s) -> {sum(self.records.values())} record(s); "
            + "; ".join(f"{a}: {sum(1 for b, _ in self.records if b == a)} phase(s)" for a in arms)
        ]
        if self.failed:
            out.append(
                "failed requests (recorded as infrastructure failures, never judged): "
                + ", ".join(f"{a} {n}" for a, n in sorted(self.failed.items()))
            )
        if self.skipped:
            out.append("skipped: " + ", ".join(f"{n} {why}" for why, n in sorted(self.skipped.items())))
        counts = self.resolution.counts
        out.append("chunks: " + ", ".join(f"{k} {counts[k]}" for k in (*RESOLVED, *UNRESOLVED) if counts[k]))
        for status, examples in sorted(self.resolution.examples.items()):
            if status in UNRESOLVED:  # listed per document below (unlocated_lines)
                continue
            docs = {d: c[status] for d, c in self.resolution.per_doc.items() if c[status]}
            out.append(
                f"  {status} in {len(docs)} document(s): "
                + ", ".join(f"{d} {n}" for d, n in sorted(docs.items())[:8])
            )
            out.extend(f"    e.g. {e}" for e in examples)
        out.extend(unlocated_lines(self.resolution, self.unverifiable))
        for arm in arms:
            out.append(f"{arm}: recorded {', '.join(self.recorded[arm])}; chunker output {self.chunked[arm]}")
            if self.not_recorded[arm]:
                out.append(
                    f"  not recorded: {', '.join(self.not_recorded[arm])} (the diagnosis walk "
                    "names them and collapses their steps into the recorded transitions)"
                )
        out.append(
            f"oracle: {self.oracle}"
            + (" (name a generator with --oracle-arm)" if self.oracle == "not run" else "")
        )
        disagree = {k: n for (k, a), n in self.claims.items() if a == "false"}
        if self.claims:
            agree = sum(n for (_, a), n in self.claims.items() if a == "true")
            out.append(
                f"producer claims: {agree} agree with ledgerscope's derivation, "
                f"{sum(disagree.values())} disagree"
                + (": " + ", ".join(f"{k} {n}" for k, n in sorted(disagree.items())) if disagree else "")
            )
        if self.context_mismatches:
            out.append(
                f"context_text: {self.context_mismatches} record(s) whose literal context lacks a "
                "context chunk's text (named in each record's detail)"
            )
        return out


def unlocated_lines(resolution: ResolutionReport, unverifiable: int | None = None) -> list[str]:
    """The unplaced chunks per document with examples, and the records they leave unverifiable."""
    per_doc = resolution.unlocated_per_document()
    if not per_doc:
        return []
    n, total = resolution.n_unlocated, resolution.total
    out = [
        f"unlocated chunks: {n} of {total} ({n / total:.2%}) lie nowhere in the corpus: units without "
        f"an interval, in {len(per_doc)} document(s)"
        + (
            ""
            if unverifiable is None
            else f"; {unverifiable} record(s) have a stage unverifiable (its verdict rests on one)"
        )
    ]
    for doc, entry in sorted(per_doc.items(), key=lambda kv: (-kv[1]["unlocated"], kv[0]))[:8]:
        out.append(f"  {doc}: {entry['unlocated']}")
        out.extend(f"    e.g. {e}" for e in entry["examples"][:2])
    return out
