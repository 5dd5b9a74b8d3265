"""``ledgerscope ingest``: traces, a chunk store and fixtures in; a standard ledger (format 2) out.

Order: every input is read and checked first (fixtures and corpus, the chunk
store, the traces, the ids the traces name, the chunks they name located in
the sources) and any problem stops the ingest before anything is written. The
traces go straight into DuckDB (:mod:`.fastread` when it can prove them valid,
else :mod:`.traceformat` line by line), and the derivation runs there
(:mod:`.derive`); the ledger is written into a staging directory beside
``--out`` through :mod:`ledgerscope.ledger.write`, read back by
:func:`ledgerscope.ledger.read.connect`, and renamed into place whole: an
interrupted ingest leaves no ledger (a later run clears the staging directory
it left). The same inputs give the same ledger bytes: no time, path or process
id is written.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import weakref
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ledgerscope import __version__
from ledgerscope.common.atomic import clear_stale
from ledgerscope.common.errors import InputError
from ledgerscope.ingest.derive import checks, rows, verdicts
from ledgerscope.ingest.derive.resolve import Resolution, ResolutionReport, resolve_chunks
from ledgerscope.ingest.derive.tables import chunk_table, fixture_tables, trace_tables
from ledgerscope.ingest.read.chunkstore import Chunk, read_chunks
from ledgerscope.ingest.read.traceformat import Traces, read_traces
from ledgerscope.ingest.report import IngestReport
from ledgerscope.inputs.fixtures import Fixture, load_fixtures
from ledgerscope.inputs.sources import Corpus, load_corpus
from ledgerscope.ledger import schema
from ledgerscope.pipeline.embedding.encoder import BUNDLED_MINILM
from ledgerscope.trace.spec import FORMAT, virtual_recorded

#: the tree's support stages, in order, as the manifest lists them recorded or not
TREE_STAGES = ("chunked", "exact", "production", "union", "fused", "reranked", "packed")
#: the default --max-unlocated: a tenth of the store unplaceable is more than stray chunks
DEFAULT_MAX_UNLOCATED = 0.1
#: DuckDB's share of the machine: an ingest stays within a gigabyte
MEMORY_LIMIT = "450MB"
#: the in-memory database the ingest's tables live in, compressed: the traces' texts (framework traces
#: carry their literal prompts) and ids otherwise outgrow MEMORY_LIMIT and spill to disk
DATABASE = "ingest"

__all__ = ["IngestOptions", "IngestReport", "ingest"]


@dataclass
class IngestOptions:
    traces: list[Path]
    chunks: Path | None
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
    #: read the traces line by line even where DuckDB could (tests compare the two)
    line_by_line: bool = False
    #: traces of the input that hold no request, skipped, by why (the report counts them)
    skipped: dict[str, int] | None = None
    #: stop at the first chunk a trace names that cannot be placed (the behaviour before unplaced
    #: chunks became units without an interval)
    strict: bool = False
    #: the largest share of the store's chunks that may lie nowhere before the ingest stops (a larger
    #: share says the corpus is probably not the one the index was built from)
    max_unlocated: float = DEFAULT_MAX_UNLOCATED
    #: a user's normalisation (``module:function``), tried after the built-in ones
    normalise: str | None = None


@dataclass
class Checked:
    """Inputs read and checked, the traces already in ``con``: what the derivation may rely on."""

    con: object
    fixtures: list[Fixture]
    corpus: Corpus
    chunks: list[Chunk]
    #: the manifest's record of the inputs (names and digests)
    inputs: dict
    chunks_file: str


def file_digest(path: Path) -> str:
    with path.open("rb") as fh:
        return "sha256:" + hashlib.file_digest(fh, "sha256").hexdigest()


def check_out(out: Path, inputs: list[Path]) -> None:
    from ledgerscope.common.errors import Problem

    if out.exists() or out.is_symlink():
        raise InputError(Problem(str(out), None, "out", "already exists; choose a new ledger directory"))
    dst = out.resolve()
    for p in inputs:
        if p.resolve() == dst or dst in p.resolve().parents:
            raise InputError(Problem(str(out), None, "out", f"would replace the input {p}"))


def connection():
    """The ingest's DuckDB connection (bounded memory, spilling to a temporary directory), using a
    compressed in-memory database (:data:`DATABASE`; a cursor must ``USE`` it too)."""
    import tempfile

    import duckdb

    con = duckdb.connect()
    spill = tempfile.mkdtemp(prefix="ledgerscope-ingest-duckdb-")
    weakref.finalize(con, shutil.rmtree, spill, True)
    con.execute(f"SET memory_limit = '{MEMORY_LIMIT}'")
    con.execute("SET temp_directory = ?", [spill])
    con.execute(f"ATTACH ':memory:' AS {DATABASE} (COMPRESS)")
    con.execute(f"USE {DATABASE}")
    return con


def read_fixtures_and_corpus(opts: IngestOptions) -> tuple[list[Fixture], Corpus]:
    base = load_corpus(opts.corpus) if opts.corpus else None
    return load_fixtures(opts.fixtures, base)


def file_names(paths: list[Path]) -> dict[str, str]:
    """How each trace file is named in the ledger: its name (its index too when two share one)."""
    names = [p.name for p in paths]
    return {str(p): (p.name if names.count(p.name) == 1 else f"{i}:{p.name}") for i, p in enumerate(paths)}


def load_traces(con, opts: IngestOptions) -> None:
    """``_ig_trace`` and ``_ig_stage``: DuckDB's bulk read when it proves the files valid, else the
    line-by-line reader (whose problems, if any, are raised)."""
    from ledgerscope.ingest.read.fastread import read_fast

    names = file_names(opts.traces)
    if not opts.line_by_line and read_fast(con, opts.traces, opts.config, names):
        return
    traces, problems = read_traces(opts.traces, opts.config)
    if problems:
        raise InputError(problems)
    trace_tables(con, traces, names)


def check_names(con, chunks: list[Chunk], fixtures: list[Fixture], fixtures_path: Path) -> None:
    """Every chunk id a trace names is in the store, every question in the fixtures."""
    problems = checks.unknown_ids(con, (c.chunk_id for c in chunks))
    problems += checks.unknown_qids(con, (f.qid for f in fixtures), fixtures_path)
    if problems:
        raise InputError(problems[:200])


def read_inputs(opts: IngestOptions) -> Checked:
    """Fixtures (resolved against the corpus), the chunk store and the traces, all checked."""
    fixtures, corpus = read_fixtures_and_corpus(opts)
    chunks, problems = read_chunks(opts.chunks, opts.coordinates)
    con = connection()
    try:
        load_traces(con, opts)
    except InputError as exc:
        problems += exc.problems
    if problems:
        raise InputError(problems)
    check_names(con, chunks, fixtures, opts.fixtures)
    inputs = {
        "traces": [{"name": p.name, "sha256": file_digest(p)} for p in opts.traces],
        "chunks": {
            "name": opts.chunks.name,
            "sha256": file_digest(opts.chunks),
            "partial": opts.chunks_partial,
        },
        "fixtures": {"name": opts.fixtures.name, "sha256": file_digest(opts.fixtures)},
    }
    return Checked(con, fixtures, corpus, chunks, inputs, str(opts.chunks))


def checked_from_traces(
    opts: IngestOptions,
    traces: Traces,
    fixtures: list[Fixture],
    corpus: Corpus,
    chunks: list[Chunk],
    inputs: dict,
    chunks_file: str,
) -> Checked:
    """:class:`Checked` from traces already checked in Python (the OpenInference mapping)."""
    con = connection()
    trace_tables(con, traces, file_names(opts.traces))
    check_names(con, chunks, fixtures, opts.fixtures)
    return Checked(con, fixtures, corpus, chunks, inputs, chunks_file)


def _chunked(
    arms: list[str], resolutions: list[Resolution], partial: str | None, strict: bool = True
) -> dict[str, str]:
    """Per arm: 'recorded', or why the chunker's output (step 2) is not recorded. Unplaced chunks
    leave it unrecorded only with ``strict``; otherwise they are units without an interval and each
    record whose step 2 rests on one is marked unverifiable."""
    out = {}
    for arm in arms:
        mine = [r for r in resolutions if r.chunk.configs is None or arm in r.chunk.configs]
        bad = [r for r in mine if strict and not r.resolved]
        declared = sum(1 for r in mine if arm in r.chunk.partial or "*" in r.chunk.partial)
        out[arm] = (
            f"not recorded: {partial}"
            if partial
            else f"not recorded: the chunk store declares itself partial ({declared} chunk(s) recorded "
            "because a request retrieved them, not the whole index)"
            if declared
            else f"not recorded: {len(bad)} chunk(s) of the store lie nowhere"
            if bad
            else "recorded"
        )
    return out


def _arm_entry(
    arm: str, phases: list[str], recorded: list[str], chunked: str, tokenizer: str, oracle: str
) -> dict[str, Any]:
    """One config's manifest entry as an arm: the lists its traces recorded, the tree stages that
    follows for (and those it does not), its digest, its phases."""
    have = set(recorded)
    tree = [
        s for s in TREE_STAGES if (chunked == "recorded" if s == "chunked" else virtual_recorded(s, have))
    ]
    config = {
        "name": arm,
        "kind": "ingested",
        "recorded_lists": recorded,
        "tree_stages_recorded": tree,
        "tree_stages_not_recorded": [s for s in TREE_STAGES if s not in tree],
    }
    digest = "sha256:" + hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()
    return {
        "config": config,
        "config_digest": digest,
        "phases": [{"label": p, "offset": 0} for p in phases],
        "components": {
            "tokenizer": {"kind": "huggingface-tokenizers", "model": tokenizer},
            "generator": {"kind": "external", "oracle": oracle},
        },
    }


def manifest_for(
    opts: IngestOptions,
    inputs: dict,
    arms: dict[str, list[str]],
    recorded: dict[str, list[str]],
    chunked: dict[str, str],
    corpus: Corpus,
    fixtures_digest: str,
    n_fixtures: int,
    report: ResolutionReport,
    oracle: str,
) -> dict:
    """The ledger's manifest: each config an arm, and how the ledger was ingested."""
    entries = {
        arm: _arm_entry(arm, phases, recorded[arm], chunked[arm], opts.tokenizer, oracle)
        for arm, phases in arms.items()
    }
    not_recorded = {arm: entry["config"]["tree_stages_not_recorded"] for arm, entry in entries.items()}
    inputs = {**inputs, "chunks": {**inputs["chunks"], "resolution": report.to_json()}}
    manifest = {
        "format": schema.FORMAT,
        "ledgerscope_version": __version__,
        "fixture_count": n_fixtures,
        "fixtures_digest": fixtures_digest,
        "sources": {s.doc_id: s.version for s in corpus},
        "arms": entries,
        "ingested": {
            "format": FORMAT,
            "source": opts.source,
            "inputs": inputs,
            "tokenizer": opts.tokenizer,
            "stages_recorded": recorded,
            "tree_stages_not_recorded": not_recorded,
            "chunked": chunked,
            "oracle": oracle,
        },
    }
    manifest["identity"] = (
        "sha256:"
        + hashlib.sha256(json.dumps(manifest, sort_keys=True, ensure_ascii=False).encode()).hexdigest()
    )
    return manifest


def derive_all(
    con,
    resolutions: list[Resolution],
    fixtures: dict[str, Fixture],
    corpus: Corpus,
    opts: IngestOptions,
    arms: dict[str, list[str]],
    chunked: dict[str, str],
    digests: dict[str, str],
) -> None:
    """Every derivation step, in order, into ``_ig_rec``, ``_ig_compared``, ``_ig_units``, ``_ig_bounds``
    (the writer joins them with ``_ig_trace`` and ``_ig_stage``); intermediate tables dropped."""
    from ledgerscope.ingest.derive import tokens
    from ledgerscope.pipeline.embedding.encoder import TokenCounter

    chunk_table(con, resolutions, corpus)
    fixture_tables(con, fixtures, corpus)
    rows.candidates(con)
    rows.citations(con)
    rows.support(con, [a for a, how in chunked.items() if how == "recorded"])
    rows.unverifiable(con, not all(r.resolved for r in resolutions))
    rows.drop(con, "_ig_over", "_ig_iv", "_ig_iv_chunked", "_ig_cs")
    rows.units(con, arms)
    texts = {s.doc_id: s.text for s in corpus}
    verdicts.answer_table(con, fixtures)
    verdicts.citation_table(con, fixtures, texts)
    tokenizer = TokenCounter(opts.tokenizer).tokenizer
    tokens.token_table(
        con, lambda texts: count_tokens(tokenizer, texts), tokens.additive_at_line_breaks(tokenizer)
    )
    verdicts.context_table(con)
    verdicts.verdict_table(con)
    if not _has_table(con, "_ig_oracle"):
        con.execute(
            "CREATE OR REPLACE TABLE _ig_oracle (arm VARCHAR, qid VARCHAR, "
            "answer_verdict VARCHAR, feasible BOOLEAN)"
        )
    rows.records(con, digests)
    verdicts.compare_claims(con)
    rows.drop(
        con,
        "_ig_kept",
        "_ig_chunked",
        "_ig_single",
        "_ig_need",
        "_ig_need_chunked",
        "_ig_count",
        "_ig_tokens",
        "_ig_answer",
        "_ig_citation",
        "_ig_unver",
    )


def count_tokens(tokenizer, texts: list[str], threads: int = 2) -> list[int]:
    """Each text's token count (no special tokens), the batch split over threads (the tokenizer
    releases the GIL while it encodes)."""
    from concurrent.futures import ThreadPoolExecutor

    step = max(1, -(-len(texts) // threads))
    parts = [texts[i : i + step] for i in range(0, len(texts), step)]

    def one(part: list[str]) -> list[int]:
        return [len(e.ids) for e in tokenizer.encode_batch(part, add_special_tokens=False)]

    with ThreadPoolExecutor(max_workers=threads) as pool:
        return [n for counts in pool.map(one, parts) for n in counts]


def _plugin(spec: str | None):
    """The user's normalisation, loaded (a located input problem when it cannot be)."""
    if spec is None:
        return None
    from ledgerscope.common.errors import Problem
    from ledgerscope.inputs.normalise import load_plugin

    try:
        return load_plugin(spec)
    except ValueError as exc:
        raise InputError(Problem("--normalise", None, "normalise", str(exc))) from None


def _has_table(con, name: str) -> bool:
    rows = con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = ?", [name]).fetchall()
    return bool(rows[0][0])


def ingest(opts: IngestOptions) -> IngestReport:
    """Run the whole ingest of trace files (rules in the module docstring)."""
    check_out(opts.out, [*opts.traces, opts.chunks, opts.fixtures, *([opts.corpus] if opts.corpus else [])])
    return ingest_checked(opts, read_inputs(opts))


def _locate(opts: IngestOptions, checked: Checked) -> tuple[list[Resolution], ResolutionReport]:
    """Every chunk located in its source, and the report of how; refused (strict: any chunk named
    but not placed; else: more unplaced than ``--max-unlocated``) with the problems located."""
    con, corpus = checked.con, checked.corpus
    plugin = _plugin(opts.normalise)
    resolutions = resolve_chunks(
        checked.chunks, corpus, plugin=plugin and plugin[1], plugin_name=plugin[0] if plugin else "plugin"
    )
    report = ResolutionReport.of(resolutions)
    if opts.strict:
        problems = checks.unresolved_named(con, resolutions, checked.chunks_file, [s.doc_id for s in corpus])
        if problems:
            raise InputError(problems)
    else:
        checks.unlocated_share(report, opts.max_unlocated, checked.chunks_file, [s.doc_id for s in corpus])
    return resolutions, report


def _oracle(opts: IngestOptions, con: Any, arms: list[str], fixtures: dict[str, Fixture]) -> str:
    """Run the oracle of ``--oracle-arm`` into the ledger's tables; what its labels say, or "not run"."""
    if opts.oracle_arm is None:
        return "not run"
    from ledgerscope.ingest.derive.oracle import oracle_rows

    return oracle_rows(con, opts.oracle_arm, arms, list(fixtures.values()))


def ingest_checked(opts: IngestOptions, checked: Checked) -> IngestReport:
    """From checked inputs: locate the chunks, derive, write the ledger whole; the report."""
    con, corpus = checked.con, checked.corpus
    resolutions, report = _locate(opts, checked)
    used = checks.questions(con)
    fixtures = {f.qid: f for f in checked.fixtures if f.qid in used}
    arms = checks.arms(con)
    recorded = checks.recorded(con)
    chunked = _chunked(
        list(arms), resolutions, opts.partial_reason if opts.chunks_partial else None, opts.strict
    )
    if opts.strict:  # today's behaviour: the unplaced are no units at all
        resolutions = [r for r in resolutions if r.resolved]
    oracle = _oracle(opts, con, list(arms), fixtures)
    from ledgerscope.ingest.write import write_ledger
    from ledgerscope.inputs.fixtures import write_fixtures

    staging = opts.out.with_name(f".{opts.out.name}.{os.getpid()}.tmp")
    clear_stale(opts.out)
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        write_fixtures(list(fixtures.values()), staging / "fixtures.jsonl")
        fixtures_digest = file_digest(staging / "fixtures.jsonl")
        manifest = manifest_for(
            opts,
            checked.inputs,
            arms,
            recorded,
            chunked,
            corpus,
            fixtures_digest,
            len(fixtures),
            report,
            oracle,
        )
        digests = {a: e["config_digest"] for a, e in manifest["arms"].items()}
        derive_all(con, resolutions, fixtures, corpus, opts, arms, chunked, digests)
        counts = write_ledger(con, staging, manifest, arms, corpus)
        os.replace(staging, opts.out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return IngestReport(
        opts.out,
        checks.count(con),
        counts,
        report,
        recorded,
        manifest["ingested"]["tree_stages_not_recorded"],
        chunked,
        oracle,
        _claims(con),
        _mismatches(con),
        checks.failed(con),
        dict(opts.skipped or {}),
        _unverifiable(con),
    )


def _claims(con) -> Counter:
    out: Counter = Counter()
    for key, agrees, n in con.execute("""
            SELECT k, agrees, count(*) FROM (
                SELECT unnest(json_keys(compared)) AS k, compared FROM _ig_compared),
                LATERAL (SELECT CAST(json_extract(compared, '$."' || k || '".agrees') AS VARCHAR) AS agrees)
            GROUP BY ALL""").fetchall():
        out[(key, agrees)] += n
    return out


def _unverifiable(con) -> int:
    return con.execute("SELECT count(*) FROM _ig_rec WHERE unverifiable_stages IS NOT NULL").fetchall()[0][0]


def _mismatches(con) -> int:
    return con.execute("SELECT count(*) FROM _ig_context WHERE missing IS NOT NULL").fetchall()[0][0]
