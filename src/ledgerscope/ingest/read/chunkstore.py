"""The chunk store: one JSON line per chunk the pipeline's index holds, checked like a trace file.

Each line names ``chunk_id``, ``doc_id`` and ``text`` and, when the pipeline
knows them, ``start``/``end`` in a declared ``coordinate_system`` (or the
``--coordinates`` default). ``config`` limits a chunk to the index of one or
more configs (two configs that chunk differently share one store). Offsets are
not trusted here: :mod:`.resolve` verifies them by slicing.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ledgerscope.common.errors import Problem
from ledgerscope.ingest.read.lines import MAX_PROBLEMS, kind_of, read_objects, string_problem
from ledgerscope.ingest.read.traceformat import without_nulls
from ledgerscope.inputs.coords import SYSTEMS
from ledgerscope.ledger.layout import ARM_NAME
from ledgerscope.trace import spec


@dataclass(frozen=True)
class Chunk:
    """One chunk as the pipeline described it (offsets unchecked)."""

    chunk_id: str
    doc_id: str
    text: str
    line: int
    start: int | None = None
    end: int | None = None
    system: str | None = None
    version: str | None = None
    prefix: str = ""
    suffix: str = ""
    configs: tuple[str, ...] | None = None  # None: in every config's index
    #: the configs whose store declared itself partial on this chunk's line(s) ("*": every config): the
    #: chunk was recorded because a request retrieved it, so the store is only part of their index
    partial: tuple[str, ...] = ()


def _field_problems(obj: dict[str, Any]) -> list[tuple[str, str]]:
    """(field, reason) for an unknown field, another format version, a missing required field and
    each field of the wrong kind, in that order."""
    out: list[tuple[str, str]] = []
    unknown = [k for k in obj if k not in spec.CHUNK_FIELDS]
    if unknown:
        out.append((unknown[0][:60], f"unknown field (known: {', '.join(spec.CHUNK_FIELDS)})"))
    if "format" in obj and obj["format"] != spec.FORMAT:
        out.append(
            (
                "format",
                f"unknown format version {str(obj['format'])[:60]!r} (this version reads {spec.FORMAT})",
            )
        )
    for name, (kind, required) in spec.CHUNK_FIELDS.items():
        if name not in obj:
            if required:
                out.append((name, "missing (required)"))
            continue
        value = obj[name]
        if kind == "string" and name != "format":
            if why := string_problem(value, empty_ok=name in ("prefix", "suffix")):
                out.append((name, why))
        elif kind == "offset" and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            out.append((name, f"must be a non-negative integer, not {kind_of(value)}"))
        elif kind == "boolean" and not isinstance(value, bool):
            out.append((name, f"must be true or false, not {kind_of(value)}"))
    return out


def _chunk_problems(
    obj: dict, file: str, line: int, coordinates: str | None, problems: list[Problem]
) -> Chunk | None:
    n0 = len(problems)

    def bad(fieldname: str, reason: str) -> None:
        problems.append(Problem(file, line, fieldname, reason))

    for fieldname, reason in _field_problems(obj):
        bad(fieldname, reason)
    configs = obj.get("config")
    if isinstance(configs, str):
        configs = [configs]
    if configs is not None:
        if not isinstance(configs, list) or not configs:
            bad("config", f"must be a config name or a non-empty list of them, not {kind_of(obj['config'])}")
        elif any(not isinstance(c, str) or ARM_NAME.fullmatch(c) is None for c in configs):
            bad("config", "a config name is letters, digits, '_', '.', '-'")
    if len(problems) > n0:
        return None
    has = ("start" in obj, "end" in obj)
    if has[0] != has[1]:
        bad("end" if has[0] else "start", "start and end are given together or not at all")
        return None
    system = obj.get("coordinate_system", coordinates if all(has) else None)
    if all(has):
        if obj["start"] > obj["end"]:
            bad("start", f"{obj['start']} is after end {obj['end']}")
            return None
        if system is None:
            bad(
                "coordinate_system",
                "missing: offsets need their coordinate system "
                f"({', '.join(SYSTEMS)}), on the line or with --coordinates",
            )
            return None
    if system is not None and system not in SYSTEMS:
        bad("coordinate_system", f"unknown system {system[:60]!r}; known: {', '.join(SYSTEMS)}")
        return None
    return Chunk(
        obj["chunk_id"],
        obj["doc_id"],
        obj["text"],
        line,
        obj.get("start"),
        obj.get("end"),
        system,
        obj.get("version"),
        obj.get("prefix", ""),
        obj.get("suffix", ""),
        None if configs is None else tuple(configs),
        (tuple(configs) if configs is not None else ("*",)) if obj.get("partial") else (),
    )


def read_chunks(path: Path, coordinates: str | None = None) -> tuple[list[Chunk], list[Problem]]:
    """Every line of the chunk store checked; (chunks in file order, problems)."""
    problems: list[Problem] = []
    if coordinates is not None and coordinates not in SYSTEMS:
        return [], [
            Problem(
                "--coordinates",
                None,
                "coordinate_system",
                f"unknown system {coordinates!r}; known: {', '.join(SYSTEMS)}",
            )
        ]
    items = ((str(path), line, obj) for line, obj in read_objects(path, problems, "chunks"))
    chunks = chunks_from_objects(items, coordinates, problems)
    if not chunks and not problems:
        problems.append(Problem(str(path), None, "chunks", "no chunks in the file"))
    return chunks, problems


def chunks_from_objects(
    items: Iterable[tuple[str, int, dict]], coordinates: str | None, problems: list[Problem]
) -> list[Chunk]:
    """Chunk objects (each with where it came from) checked; problems appended."""
    chunks: list[Chunk] = []
    first: dict[str, tuple[int, int]] = {}  # id -> (line, index in chunks)
    for file, line, obj in items:
        if len(problems) > MAX_PROBLEMS:
            problems.append(Problem(file, None, "chunks", "more problems not listed"))
            break
        chunk = _chunk_problems(without_nulls(obj, spec.CHUNK_FIELDS), file, line, coordinates, problems)
        if chunk is None:
            continue
        if chunk.chunk_id in first:
            at = first[chunk.chunk_id]
            merged = _same_chunk_other_configs(chunks[at[1]], chunk)
            if merged is None:
                problems.append(
                    Problem(
                        file,
                        line,
                        "chunk_id",
                        f"duplicate id {chunk.chunk_id[:80]!r} (first at line {at[0]})",
                    )
                )
            else:
                chunks[at[1]] = merged
            continue
        first[chunk.chunk_id] = (line, len(chunks))
        chunks.append(chunk)
    return chunks


def _same_chunk_other_configs(first: Chunk, again: Chunk) -> Chunk | None:
    """The same chunk written again for other configs (two recorders sharing one store, each with its
    config): one chunk in the index of all of them. Anything else under a repeated id is None."""
    if first.configs is None or again.configs is None:
        return None
    same = (
        first.doc_id,
        first.text,
        first.start,
        first.end,
        first.system,
        first.version,
        first.prefix,
        first.suffix,
    ) == (
        again.doc_id,
        again.text,
        again.start,
        again.end,
        again.system,
        again.version,
        again.prefix,
        again.suffix,
    )
    if not same:
        return None
    configs = tuple(dict.fromkeys((*first.configs, *again.configs)))
    return replace(first, configs=configs, partial=tuple(dict.fromkeys((*first.partial, *again.partial))))


def chunks_from_bytes(
    raw: bytes, file: str, coordinates: str | None = None
) -> tuple[list[Chunk], list[Problem]]:
    """:func:`read_chunks` of a store's bytes (the fuzzers call it in process, no file written)."""
    from ledgerscope.ingest.read.lines import objects_of

    problems: list[Problem] = []
    chunks = chunks_from_objects(
        ((file, line, obj) for line, obj in objects_of(raw, file, problems)), coordinates, problems
    )
    if not chunks and not problems:
        problems.append(Problem(file, None, "chunks", "no chunks in the file"))
    return chunks, problems
