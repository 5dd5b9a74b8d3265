"""``ledgerscope ingest``: traces, a chunk store and fixtures in; a standard ledger (format 2) out.

Order: every input is read and checked first (fixtures and corpus, the chunk
store, the traces, the ids the traces name, the chunks they name located in
the sources) and any problem stops the ingest before anything is written. Then
the derivation runs in DuckDB (:mod:`.derive`), the ledger is written into a
staging directory beside ``--out`` through :mod:`ledgerscope.ledger.write`,
read back by :func:`ledgerscope.ledger.read.connect`, and renamed into place
whole: an interrupted ingest leaves no ledger (a later run clears the
staging directory it left). The same inputs give the same ledger bytes: no
time, path or process id is written.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from ledgerscope import __version__
from ledgerscope.common.atomic import clear_stale
from ledgerscope.common.errors import InputError, Problem
from ledgerscope.ingest import derive, verdicts
from ledgerscope.ingest.chunkstore import Chunk, read_chunks
from ledgerscope.ingest.resolve import RESOLVED, UNRESOLVED, Resolution, ResolutionReport, resolve_chunks
from ledgerscope.ingest.spec import FORMAT, STAGE_ORDER, virtual_recorded
from ledgerscope.ingest.tables import chunk_table, fixture_tables, trace_tables
from ledgerscope.ingest.traceformat import Traces, read_traces, unknown_ids
from ledgerscope.inputs.fixtures import Fixture, load_fixtures
from ledgerscope.inputs.sources import Corpus, load_corpus
from ledgerscope.ledger import schema
from ledgerscope.pipeline.encoder import BUNDLED_MINILM

#: the written_at of every partition marker (an ingest writes no time)
WRITTEN_AT = "ingested"
#: the tree's support stages, in order, as the manifest lists them recorded or not
TREE_STAGES = ("chunked", "exact", "production", "union", "fused", "reranked", "packed")


@dataclass
class IngestOptions:
    traces: list[Path]
    chunks: Path
    fixtures: Path
    out: Path
    corpus: Path | None = None
    config: str | None = None
    coordinates: str | None = None
    tokenizer: str = BUNDLED_MINILM
    chunks_partial: bool = False
    oracle_arm: Path | None = None
    source: str = FORMAT
    #: why the chunk store is partial, when it is (the report and the manifest say so)
    partial_reason: str = "the chunk store is declared partial (--chunks-partial)"


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

    def to_json(self) -> dict:
        return {
            "ledger": str(self.out), "traces": self.traces,
            "records": [{"arm": a, "phase": p, "records": n} for (a, p), n in sorted(self.records.items())],
            "chunks": self.resolution.to_json(), "stages_recorded": self.recorded,
            "tree_stages_not_recorded": self.not_recorded, "chunked": self.chunked, "oracle": self.oracle,
            "claims": [{"claim": k, "agrees": a, "records": n} for (k, a), n in sorted(self.claims.items())],
            "context_text_lacks_a_chunk": self.context_mismatches,
        }

    def lines(self) -> list[str]:
        """The report for a terminal."""
        arms = sorted({a for a, _ in self.records})
        out = [f"ledger {self.out}: {self.traces} trace(s) -> {sum(self.records.values())} record(s); "
               + "; ".join(f"{a}: {sum(1 for b, _ in self.records if b == a)} phase(s)" for a in arms)]
        counts = self.resolution.counts
        out.append("chunks: " + ", ".join(f"{k} {counts[k]}" for k in (*RESOLVED, *UNRESOLVED) if counts[k]))
        for status, examples in sorted(self.resolution.examples.items()):
            docs = {d: c[status] for d, c in self.resolution.per_doc.items() if c[status]}
            out.append(f"  {status} in {len(docs)} document(s): "
                       + ", ".join(f"{d} {n}" for d, n in sorted(docs.items())[:8]))
            out.extend(f"    e.g. {e}" for e in examples)
        for arm in arms:
            out.append(f"{arm}: recorded {', '.join(self.recorded[arm])}; chunker output {self.chunked[arm]}")
            if self.not_recorded[arm]:
                out.append(f"  not recorded: {', '.join(self.not_recorded[arm])} (the diagnosis walk "
                           "names them and collapses their steps into the recorded transitions)")
        out.append(f"oracle: {self.oracle}" + (" (name a generator with --oracle-arm)"
                                                if self.oracle == "not run" else ""))
        disagree = {k: n for (k, a), n in self.claims.items() if a == "false"}
        if self.claims:
            agree = sum(n for (_, a), n in self.claims.items() if a == "true")
            out.append(f"producer claims: {agree} agree with ledgerscope's derivation, "
                       f"{sum(disagree.values())} disagree"
                       + (": " + ", ".join(f"{k} {n}" for k, n in sorted(disagree.items()))
                          if disagree else ""))
        if self.context_mismatches:
            out.append(f"context_text: {self.context_mismatches} record(s) whose literal context lacks a "
                       "context chunk's text (named in each record's detail)")
        return out


def _digest(path: Path) -> str:
    with path.open("rb") as fh:
        return "sha256:" + hashlib.file_digest(fh, "sha256").hexdigest()


def check_out(out: Path, inputs: list[Path]) -> None:
    if out.exists() or out.is_symlink():
        raise InputError(Problem(str(out), None, "out", "already exists; choose a new ledger directory"))
    dst = out.resolve()
    for p in inputs:
        if p.resolve() == dst or dst in p.resolve().parents:
            raise InputError(Problem(str(out), None, "out", f"would replace the input {p}"))


@dataclass
class Checked:
    """Inputs read and checked: what the derivation may rely on."""

    fixtures: list[Fixture]
    corpus: Corpus
    chunks: list[Chunk]
    traces: Traces
    #: the manifest's record of the inputs (names and digests)
    inputs: dict
    chunks_file: str


def read_fixtures_and_corpus(opts: IngestOptions) -> tuple[list[Fixture], Corpus]:
    base = load_corpus(opts.corpus) if opts.corpus else None
    return load_fixtures(opts.fixtures, base)


def check_names(traces: Traces, chunks: list[Chunk], fixtures: list[Fixture], fixtures_path: Path) -> None:
    """Every chunk id a trace names is in the store, every question in the fixtures."""
    problems = unknown_ids(traces, {c.chunk_id for c in chunks})
    known = {f.qid for f in fixtures}
    seen: set[str] = set()
    for i, qid in enumerate(traces.qid):
        if qid not in known and qid not in seen:
            seen.add(qid)
            problems.append(Problem(traces.file[i], traces.line[i], "qid",
                                    f"{qid[:80]!r} is not in the fixtures ({fixtures_path})"))
    if problems:
        raise InputError(problems[:200])


def read_inputs(opts: IngestOptions) -> Checked:
    """Fixtures (resolved against the corpus), the chunk store and the traces, all checked."""
    fixtures, corpus = read_fixtures_and_corpus(opts)
    chunks, problems = read_chunks(opts.chunks, opts.coordinates)
    traces, trace_problems = read_traces(opts.traces, opts.config)
    problems += trace_problems
    if problems:
        raise InputError(problems)
    check_names(traces, chunks, fixtures, opts.fixtures)
    inputs = {
        "traces": [{"name": p.name, "sha256": _digest(p)} for p in opts.traces],
        "chunks": {"name": opts.chunks.name, "sha256": _digest(opts.chunks), "partial": opts.chunks_partial},
        "fixtures": {"name": opts.fixtures.name, "sha256": _digest(opts.fixtures)},
    }
    return Checked(fixtures, corpus, chunks, traces, inputs, str(opts.chunks))


def _unresolved_problems(resolutions: list[Resolution], traces: Traces, path: str) -> list[Problem]:
    """A chunk a trace names that lies nowhere: the ingest stops (never a guessed interval)."""
    named = set(traces.s_chunk)
    return [Problem(path, r.chunk.line, "text", f"chunk {r.chunk.chunk_id[:80]!r} ({r.status}): {r.note}")
            for r in resolutions if not r.resolved and r.chunk.chunk_id in named][:200]


def _arms(traces: Traces) -> dict[str, list[str]]:
    arms: dict[str, set[str]] = {}
    for a, p in zip(traces.config, traces.phase, strict=True):
        arms.setdefault(a, set()).add(p)
    return {a: sorted(ps) for a, ps in sorted(arms.items())}


def _recorded(traces: Traces) -> dict[str, list[str]]:
    """Per arm, the lists its traces record (in cascade order; declared ones after)."""
    out: dict[str, set[str]] = {}
    for a, rec in zip(traces.config, traces.recorded, strict=True):
        out.setdefault(a, set()).update(rec)
    order = {s: i for i, s in enumerate(STAGE_ORDER)}
    return {a: sorted(s, key=lambda n: (order.get(n, 99), n)) for a, s in sorted(out.items())}


def _chunked(arms: list[str], resolutions: list[Resolution], partial: str | None) -> dict[str, str]:
    """Per arm: 'recorded', or why the chunker's output (step 2) is not recorded."""
    out = {}
    for arm in arms:
        bad = [r for r in resolutions
               if not r.resolved and (r.chunk.configs is None or arm in r.chunk.configs)]
        out[arm] = (f"not recorded: {partial}" if partial else
                    f"not recorded: {len(bad)} chunk(s) of the store lie nowhere" if bad else "recorded")
    return out


def manifest_for(opts: IngestOptions, inputs: dict, arms: dict[str, list[str]],
                 recorded: dict[str, list[str]], chunked: dict[str, str], corpus: Corpus,
                 fixtures_digest: str, n_fixtures: int, report: ResolutionReport, oracle: str) -> dict:
    """The ledger's manifest: each config an arm, and how the ledger was ingested."""
    entries, not_recorded = {}, {}
    for arm, phases in arms.items():
        have = set(recorded[arm])
        tree = [s for s in TREE_STAGES if (chunked[arm] == "recorded" if s == "chunked"
                                           else virtual_recorded(s, have))]
        not_recorded[arm] = [s for s in TREE_STAGES if s not in tree]
        config = {"name": arm, "kind": "ingested", "recorded_lists": recorded[arm],
                  "tree_stages_recorded": tree, "tree_stages_not_recorded": not_recorded[arm]}
        digest = "sha256:" + hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()
        entries[arm] = {
            "config": config, "config_digest": digest,
            "phases": [{"label": p, "offset": 0} for p in phases],
            "components": {"tokenizer": {"kind": "huggingface-tokenizers", "model": opts.tokenizer},
                           "generator": {"kind": "external", "oracle": oracle}},
        }
    inputs = {**inputs, "chunks": {**inputs["chunks"], "resolution": report.to_json()}}
    manifest = {
        "format": schema.FORMAT,
        "ledgerscope_version": __version__,
        "fixture_count": n_fixtures,
        "fixtures_digest": fixtures_digest,
        "sources": {s.doc_id: s.version for s in corpus},
        "arms": entries,
        "ingested": {
            "format": FORMAT, "source": opts.source, "inputs": inputs, "tokenizer": opts.tokenizer,
            "stages_recorded": recorded, "tree_stages_not_recorded": not_recorded,
            "chunked": chunked, "oracle": oracle,
        },
    }
    manifest["identity"] = "sha256:" + hashlib.sha256(
        json.dumps(manifest, sort_keys=True, ensure_ascii=False).encode()).hexdigest()
    return manifest


def derive_all(con, traces: Traces, resolutions: list[Resolution], fixtures: dict[str, Fixture],
               corpus: Corpus, opts: IngestOptions, arms: dict[str, list[str]], chunked: dict[str, str],
               digests: dict[str, str]) -> None:
    """Every derivation step, in order, into ``_ig_out``, ``_ig_cand``, ``_ig_units``, ``_ig_bounds``."""
    from ledgerscope.pipeline.encoder import TokenCounter

    names = _file_names(opts.traces)
    trace_tables(con, traces, names)
    chunk_table(con, resolutions, corpus)
    fixture_tables(con, fixtures, corpus)
    derive.candidates(con)
    derive.citations(con)
    derive.support(con, [a for a, how in chunked.items() if how == "recorded"])
    derive.units(con, arms)
    texts = {s.doc_id: s.text for s in corpus}
    verdicts.answer_table(con, fixtures)
    verdicts.citation_table(con, fixtures, texts)
    counter = TokenCounter(opts.tokenizer)
    verdicts.token_table(con, lambda xs: [len(e.ids) for e in counter.tokenizer.encode_batch(
        xs, add_special_tokens=False)])
    verdicts.context_table(con)
    verdicts.verdict_table(con)
    if not _has_table(con, "_ig_oracle"):
        con.execute("CREATE OR REPLACE TEMP TABLE _ig_oracle (arm VARCHAR, qid VARCHAR, "
                    "answer_verdict VARCHAR, feasible BOOLEAN)")
    derive.records(con, digests)
    verdicts.compare_claims(con)
    derive.finish(con)


def _has_table(con, name: str) -> bool:
    rows = con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = ?", [name]).fetchall()
    return bool(rows[0][0])


def _file_names(paths: list[Path]) -> dict[str, str]:
    names = [p.name for p in paths]
    return {str(p): (p.name if names.count(p.name) == 1 else f"{i}:{p.name}") for i, p in enumerate(paths)}


def ingest(opts: IngestOptions, con=None) -> IngestReport:
    """Run the whole ingest of trace files (rules in the module docstring)."""
    check_out(opts.out, [*opts.traces, opts.chunks, opts.fixtures, *([opts.corpus] if opts.corpus else [])])
    return ingest_checked(opts, read_inputs(opts), con)


def ingest_checked(opts: IngestOptions, checked: Checked, con=None) -> IngestReport:
    """From checked inputs: locate the chunks, derive, write the ledger whole; the report."""
    import duckdb

    traces, corpus = checked.traces, checked.corpus
    resolutions = resolve_chunks(checked.chunks, corpus)
    report = ResolutionReport.of(resolutions)
    problems = _unresolved_problems(resolutions, traces, checked.chunks_file)
    if problems:
        raise InputError(problems)
    used = set(traces.qid)
    fixtures = {f.qid: f for f in checked.fixtures if f.qid in used}
    arms = _arms(traces)
    recorded = _recorded(traces)
    chunked = _chunked(list(arms), resolutions, opts.partial_reason if opts.chunks_partial else None)
    con = con or duckdb.connect()
    oracle = "not run"
    if opts.oracle_arm is not None:
        from ledgerscope.ingest.oracle import oracle_rows

        oracle = oracle_rows(con, opts.oracle_arm, list(arms), list(fixtures.values()))
    from ledgerscope.ingest.write import write_ledger
    from ledgerscope.inputs.fixtures import write_fixtures

    staging = opts.out.with_name(f".{opts.out.name}.{os.getpid()}.tmp")
    clear_stale(opts.out)
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        write_fixtures(list(fixtures.values()), staging / "fixtures.jsonl")
        fixtures_digest = _digest(staging / "fixtures.jsonl")
        manifest = manifest_for(opts, checked.inputs, arms, recorded, chunked, corpus, fixtures_digest,
                                len(fixtures), report, oracle)
        digests = {a: e["config_digest"] for a, e in manifest["arms"].items()}
        derive_all(con, traces, resolutions, fixtures, corpus, opts, arms, chunked, digests)
        counts = write_ledger(con, staging, manifest, arms, corpus)
        os.replace(staging, opts.out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return IngestReport(opts.out, len(traces), counts, report, recorded, manifest["ingested"][
        "tree_stages_not_recorded"], chunked, oracle, _claims(con), _mismatches(con))


def _claims(con) -> Counter:
    out: Counter = Counter()
    for key, agrees, n in con.execute("""
            SELECT k, agrees, count(*) FROM (
                SELECT unnest(json_keys(compared)) AS k, compared FROM _ig_compared),
                LATERAL (SELECT CAST(json_extract(compared, '$."' || k || '".agrees') AS VARCHAR) AS agrees)
            GROUP BY ALL""").fetchall():
        out[(key, agrees)] += n
    return out


def _mismatches(con) -> int:
    return con.execute("SELECT count(*) FROM _ig_context WHERE missing IS NOT NULL").fetchall()[0][0]
