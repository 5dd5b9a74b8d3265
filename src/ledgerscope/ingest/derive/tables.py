"""The checked inputs as DuckDB temp tables: traces, their stage rows, chunks, fixtures, gold spans.

Everything the derivation (:mod:`.derive`) reads is one of these tables, built
once from checked values (:mod:`.traceformat`, :mod:`.resolve`), so the
derivation is set operations over them and never a loop over records.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pyarrow as pa

from ledgerscope.ingest.derive.resolve import Resolution
from ledgerscope.ingest.read.traceformat import Traces
from ledgerscope.inputs.fixtures import Fixture
from ledgerscope.inputs.sources import Corpus

STR = pa.string()
STRS = pa.list_(pa.string())


def create_table(con, name: str, table: pa.Table) -> None:
    """Temp table ``name`` with the rows of an Arrow table.

    Through an uncompressed Parquet file in a temporary directory, not ``con.register``:
    DuckDB's scan of a Python object imports pandas (over a second), its list parameters
    convert a few hundred thousand nested values slower still."""
    import tempfile

    import pyarrow.parquet as pq

    with tempfile.TemporaryDirectory(prefix="ledgerscope-ingest-") as tmp:
        path = f"{tmp}/{name}.parquet"
        pq.write_table(table, path, compression="none")
        con.execute(f"CREATE OR REPLACE TABLE {name} AS SELECT * FROM read_parquet(?)", [path])


def trace_tables(con, traces: Traces, file_names: Mapping[str, str]) -> None:
    """``_ig_trace`` (one row per trace, ``tid`` its index) and ``_ig_stage`` (its ranked lists).

    ``file_names``: how each trace file is named in the ledger (its name, not its path, so the same
    traces give the same ledger wherever they lie)."""
    n = len(traces)
    create_table(
        con,
        "_ig_trace",
        pa.table(
            {
                "tid": pa.array(range(n), pa.int64()),
                "trace_file": pa.array([file_names[f] for f in traces.file], STR),
                "trace_path": pa.array(traces.file, STR),
                "trace_line": pa.array(traces.line, pa.int64()),
                "qid": pa.array(traces.qid, STR),
                "arm": pa.array(traces.config, STR),
                "phase": pa.array(traces.phase, STR),
                "trace_question": pa.array(traces.question, STR),
                "answer": pa.array(traces.answer, STR),
                "abstained": pa.array(traces.abstained, pa.bool_()),
                "error": pa.array(traces.error, STR),
                "prompt": pa.array(traces.prompt, STR),
                "context_text": pa.array(traces.context_text, STR),
                "context_items": pa.array(traces.context_items, STRS),
                "citations": pa.array(traces.citations, STRS),
                "claims_json": pa.array(traces.claims_json, STR),
                "recorded": pa.array(traces.recorded, STRS),
                "declared": pa.array(traces.declared, STRS),
                "fused_from": pa.array(traces.fused_from, STR),
            }
        ),
    )
    create_table(
        con,
        "_ig_stage",
        pa.table(
            {
                "tid": pa.array(traces.s_trace, pa.int64()),
                "stage": pa.array(traces.s_stage, STR),
                "rank": pa.array(traces.s_rank, pa.int32()),
                "chunk_id": pa.array(traces.s_chunk, STR),
                "score": pa.array(traces.s_score, pa.float64()),
            }
        ),
    )


def chunk_table(con, resolutions: Sequence[Resolution], corpus: Corpus) -> None:
    """``_ig_chunk``: every chunk of the store: a placed one with its source interval (code points),
    the source's text over it, version and access labels; an unplaced one (``located`` false) with
    no interval, its store text and why; how each was placed and its generated context (JSON); and
    the configs whose index holds it (NULL: every config)."""
    import json

    rows = list(resolutions)
    srcs = [corpus.sources.get(r.chunk.doc_id) for r in rows]

    def text(r: Resolution, s) -> str:
        return s.text[r.start : r.end] if r.resolved else r.chunk.text

    create_table(
        con,
        "_ig_chunk",
        pa.table(
            {
                "chunk_id": pa.array([r.chunk.chunk_id for r in rows], STR),
                "doc_id": pa.array([r.chunk.doc_id for r in rows], STR),
                "version": pa.array([None if s is None else s.version for s in srcs], STR),
                "start": pa.array([r.start for r in rows], pa.int64()),
                "end": pa.array([r.end for r in rows], pa.int64()),
                "text": pa.array([text(r, s) for r, s in zip(rows, srcs, strict=True)], STR),
                "store_text": pa.array([r.chunk.text for r in rows], STR),
                "configs": pa.array(
                    [None if r.chunk.configs is None else list(r.chunk.configs) for r in rows], STRS
                ),
                "access": pa.array([[] if s is None else list(s.access) for s in srcs], STRS),
                "located": pa.array([r.resolved for r in rows], pa.bool_()),
                "placement": pa.array([r.status for r in rows], STR),
                "placed_by": pa.array([r.how if r.resolved else None for r in rows], STR),
                "placement_note": pa.array([r.note or None for r in rows], STR),
                "context_json": pa.array(
                    [json.dumps(list(r.context), ensure_ascii=False) if r.context else None for r in rows],
                    STR,
                ),
            }
        ),
    )


def fixture_tables(con, fixtures: Mapping[str, Fixture], corpus: Corpus) -> None:
    """``_ig_fx`` (per question), ``_ig_span`` (gold spans of answerable questions with their text)
    and ``_ig_set`` (sufficient set members)."""
    fx = list(fixtures.values())
    texts = {s.doc_id: s.text for s in corpus}
    create_table(con, "_ig_fx", _question_table(fx, texts))
    create_table(con, "_ig_span", _span_table(fx, texts))
    create_table(con, "_ig_set", _set_table(fx))


def _question_table(fx: list[Fixture], texts: Mapping[str, str]) -> pa.Table:
    """One row per question: its fields, whether the tree walks it, and whether its gold is in the corpus."""
    gold_ok = [all(s.doc_id in texts for s in f.spans) for f in fx]
    missing = [sorted({s.doc_id for s in f.spans if s.doc_id not in texts}) for f in fx]
    return pa.table(
        {
            "qid": pa.array([f.qid for f in fx], STR),
            "question": pa.array([f.question for f in fx], STR),
            "segment": pa.array([f.segment for f in fx], STR),
            "fx_answerable": pa.array([f.answerable for f in fx], pa.bool_()),
            "walked": pa.array([f.answerable and bool(f.sufficient_sets) for f in fx], pa.bool_()),
            "support_only": pa.array([f.support_only for f in fx], pa.bool_()),
            "stress_set": pa.array([f.stress_set for f in fx], STR),
            "doc_ids": pa.array([list(f.doc_ids) for f in fx], STRS),
            "gold_status": pa.array(
                [
                    "ok" if ok else f"not in the corpus: {', '.join(m)}"
                    for ok, m in zip(gold_ok, missing, strict=True)
                ],
                STR,
            ),
        }
    )


def _span_table(fx: list[Fixture], texts: Mapping[str, str]) -> pa.Table:
    """The gold spans of the questions the tree walks, with their text (None outside the corpus)."""
    spans = [(f, s) for f in fx if f.answerable and f.sufficient_sets for s in f.spans]
    return pa.table(
        {
            "qid": pa.array([f.qid for f, _ in spans], STR),
            "span_id": pa.array([s.span_id for _, s in spans], STR),
            "doc_id": pa.array([s.doc_id for _, s in spans], STR),
            "s": pa.array([s.start for _, s in spans], pa.int64()),
            "e": pa.array([s.end for _, s in spans], pa.int64()),
            "span_text": pa.array(
                [texts[s.doc_id][s.start : s.end] if s.doc_id in texts else None for _, s in spans], STR
            ),
        }
    )


def _set_table(fx: list[Fixture]) -> pa.Table:
    """The members of every sufficient set of the answerable questions: (qid, set index, span id)."""
    members = [
        (f.qid, i, sid)
        for f in fx
        if f.answerable
        for i, sset in enumerate(f.sufficient_sets)
        for sid in sset
    ]
    return pa.table(
        {
            "qid": pa.array([m[0] for m in members], STR),
            "set_index": pa.array([m[1] for m in members], pa.int32()),
            "span_id": pa.array([m[2] for m in members], STR),
        }
    )
