"""``ledgerscope ingest``: a running pipeline's traces (or OpenInference spans) into a standard ledger.

The command body lives here to keep :mod:`.main` short; input problems propagate
as :class:`~ledgerscope.common.errors.LedgerscopeError` (the app prints them
located and exits 2), machine conditions as exit 74.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ledgerscope.cli.shared.machine import writing
from ledgerscope.common.safe_text import json_text, safe_line


def ingest_command(
    traces: Annotated[
        list[Path],
        typer.Argument(
            help="Trace files (ledgerscope-trace/1 JSON lines), or with --from openinference span exports "
            "(Phoenix's span export, OTLP JSON)."
        ),
    ],
    out: Annotated[Path, typer.Option("--out", help="Ledger directory to write (must not exist).")],
    fixtures: Annotated[Path, typer.Option("--fixtures", help="Fixtures file (any accepted form).")],
    chunks: Annotated[
        Path | None,
        typer.Option(
            "--chunks",
            help="The chunk store (one JSON line per chunk of the pipeline's index); with --from "
            "openinference optional (the spans' documents, a partial store).",
        ),
    ] = None,
    corpus: Annotated[Path | None, typer.Option("--corpus", help="Corpus directory or JSONL.")] = None,
    config: Annotated[
        str | None, typer.Option("--config", help="The config (arm) name of traces that do not name one.")
    ] = None,
    source: Annotated[
        str, typer.Option("--from", help="ledgerscope (trace files) or openinference (spans).")
    ] = "ledgerscope",
    coordinates: Annotated[
        str | None,
        typer.Option(
            "--coordinates",
            help="Coordinate system of chunk offsets that do not declare one: "
            "utf8-byte-half-open, codepoint-half-open or utf16-half-open.",
        ),
    ] = None,
    tokenizer: Annotated[
        str,
        typer.Option(
            "--tokenizer",
            help="The tokenizer that counts prompt and evidence tokens (a Hugging Face "
            "tokenizer name or path).",
        ),
    ] = "bundled:all-MiniLM-L6-v2",
    chunks_partial: Annotated[
        bool,
        typer.Option(
            "--chunks-partial",
            help="The chunk store holds only some of the index: the chunker's output "
            "(step 2) is then not recorded.",
        ),
    ] = False,
    oracle_arm: Annotated[
        Path | None,
        typer.Option(
            "--oracle-arm",
            help="An arm TOML whose generator runs the oracle (otherwise the oracle is not run).",
        ),
    ] = None,
    qid_key: Annotated[
        str,
        typer.Option(
            "--qid-key", help="openinference: the span attribute or metadata key holding the question id."
        ),
    ] = "qid",
    doc_key: Annotated[
        str,
        typer.Option(
            "--doc-key", help="openinference: the document metadata key naming its source document."
        ),
    ] = "source",
    start_key: Annotated[
        str,
        typer.Option(
            "--start-key", help="openinference: the document metadata key holding its start offset."
        ),
    ] = "start_index",
    id_key: Annotated[
        str,
        typer.Option(
            "--id-key",
            help="openinference: the document metadata key holding its chunk id, for documents "
            "without document.id.",
        ),
    ] = "chunk_id",
    skip_unidentified: Annotated[
        bool,
        typer.Option(
            "--skip-unidentified",
            help="openinference: skip (and count) request-shaped traces that name no "
            "question id, instead of stopping on them.",
        ),
    ] = False,
    strict: Annotated[
        bool,
        typer.Option(
            "--strict",
            help="Stop at a chunk a trace names that cannot be placed (otherwise it becomes a "
            "unit without an interval and the stages resting on it are marked "
            "unverifiable).",
        ),
    ] = False,
    max_unlocated: Annotated[
        float,
        typer.Option(
            "--max-unlocated",
            min=0.0,
            max=1.0,
            help="Stop (exit 2) when more than this share of the store's chunks cannot be placed (the corpus "
            "is probably not the index's).",
        ),
    ] = 0.1,
    normalise: Annotated[
        str | None,
        typer.Option(
            "--normalise",
            help="A normalisation of your own, module:function, tried after the built-in ones "
            "(whitespace, NFKC, HTML entities, soft hyphens and ligatures, Markdown "
            "headers).",
        ),
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the ingest report as JSON.")] = False,
) -> None:
    """Ingest per-request traces into a standard ledger: every chunk located in its source, every support
    flag, verdict and token count derived by ledgerscope, the stages the traces do not record marked so.
    (Long only by its Typer options, one declaration each; the work is
    :func:`ledgerscope.ingest.build.ingest`.)"""
    from ledgerscope.ingest.build import IngestOptions, ingest

    if source not in ("ledgerscope", "openinference"):
        raise typer.BadParameter("--from must be ledgerscope or openinference")
    if oracle_arm is not None:  # the oracle runs the arm's generator
        from ledgerscope.cli.shared.extras import require_extra

        require_extra("sweep", "ledgerscope ingest --oracle-arm")
    opts = IngestOptions(
        traces=list(traces),
        chunks=chunks,
        fixtures=fixtures,
        out=out,
        corpus=corpus,
        config=config,
        coordinates=coordinates,
        tokenizer=tokenizer,
        chunks_partial=chunks_partial,
        oracle_arm=oracle_arm,
        strict=strict,
        max_unlocated=max_unlocated,
        normalise=normalise,
    )
    with writing(out):
        if source == "openinference":
            from ledgerscope.ingest.spans.openinference import SpanKeys, ingest_spans

            report = ingest_spans(opts, SpanKeys(qid_key, doc_key, start_key, id_key), skip_unidentified)
        else:
            if chunks is None:
                raise typer.BadParameter("--chunks is required for trace files")
            report = ingest(opts)
    if json_out:
        print(json_text(report.to_json()))
        return
    for line in report.lines():
        print(safe_line(line, 400))
