"""Record what a running RAG pipeline did, per request, as ``ledgerscope-trace/1`` lines.

Seed 002: a pipeline's ``answer()`` should return ``retrieved_ids``,
``context_ids`` and ``context_text`` beside the answer; none of them cost
anything to record and all of them are irrecoverable after the fact. This
module writes them, and the chunk store they refer to, for ``ledgerscope
ingest``::

    from ledgerscope.trace import Recorder

    rec = Recorder("traces.jsonl", chunks="chunks.jsonl", config="baseline")
    rec.chunk("c17", "docs/plans/team.md", text, start=880, end=1090)   # once per chunk of the index
    rec.record(qid="q-0143", retrieved=[("c17", 0.82), ("c9", 0.80)],
               context=[("c17", text)], answer="30 days [1]", citations=["1"])

It imports only the standard library (a pipeline should not pay for
ledgerscope's analysis stack to record a line), appends one line per call under
a lock (threads may share a recorder) and flushes it, so a crashed pipeline
leaves every line it recorded. A value that would make an invalid trace (a
non-finite score, a chunk id that is not a non-empty string) raises
``ValueError`` at the call, where the pipeline can see it.
"""

from __future__ import annotations

import json
import math
import os
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ledgerscope.trace.spec import FORMAT

CODEPOINT = "codepoint-half-open"

__all__ = ["FORMAT", "Recorder"]


def _ids_scores(items: Iterable[Any], what: str) -> tuple[list[str], list[float | None] | None]:
    """Chunk ids (strings) or (id, score) pairs or {"id", "score"} objects -> ids and scores."""
    ids: list[str] = []
    scores: list[float | None] = []
    scored = False
    for item in items:
        if isinstance(item, Mapping):
            cid, score = item.get("id"), item.get("score")
        elif isinstance(item, tuple | list):
            cid, score = (item[0], item[1] if len(item) > 1 else None)
        else:
            cid, score = item, None
        if not isinstance(cid, str) or not cid:
            raise ValueError(f"{what}: a chunk id must be a non-empty string, not {cid!r}")
        if score is not None:
            try:
                score = float(score)
            except OverflowError:
                score = math.inf
            if not math.isfinite(score):
                raise ValueError(f"{what}: score {score} of {cid!r} is not finite")
            scored = True
        ids.append(cid)
        scores.append(score)
    if len(set(ids)) != len(ids):
        raise ValueError(f"{what}: a chunk id appears twice")
    return ids, (scores if scored else None)


def _refuse_to_append(path: str | os.PathLike) -> None:
    """A non-empty file is yesterday's run: appending would duplicate its traces (ingest stops on them)."""
    try:
        size = os.path.getsize(path)
    except OSError:
        return
    if size:
        raise ValueError(
            f"{os.fspath(path)} already holds {size} bytes: a re-run would append a second "
            "trace of every request. Choose a new file, remove it, or open the recorder with "
            "mode='a' (add to it: another config's traces) or mode='w' (replace it)"
        )


class Recorder:
    """Append traces (and, optionally, the chunk store) for ``ledgerscope ingest``.

    ``config`` and ``phase`` are the defaults of every record (the arm name the
    ledger shows, and a label for a variant of it); each ``record`` call may
    override them. ``path`` may be None for a recorder that writes only the chunk store (the
    LlamaIndex helper's). ``mode``: ``"x"`` (the default) refuses a file that already
    holds lines (a re-run would append duplicates), ``"a"`` appends (a second
    config into the same files), ``"w"`` replaces.
    """

    def __init__(
        self,
        path: str | os.PathLike | None,
        chunks: str | os.PathLike | None = None,
        config: str | None = None,
        phase: str | None = None,
        mode: str = "x",
    ):
        if mode not in ("x", "a", "w"):
            raise ValueError(
                f"mode must be 'x' (new or empty files), 'a' (append) or 'w' (replace), not {mode!r}"
            )
        self.config, self.phase = config, phase
        self._lock = threading.Lock()
        paths = [p for p in (path, chunks) if p is not None]
        if mode == "x":
            for p in paths:
                _refuse_to_append(p)
        how = "w" if mode == "w" else "a"
        self._out = None if path is None else open(path, how, encoding="utf-8")  # noqa: SIM115 - close()
        self._chunks = None if chunks is None else open(chunks, how, encoding="utf-8")  # noqa: SIM115
        self._seen: set[str] = set()

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            for fh in (self._out, self._chunks):
                if fh is not None and not fh.closed:
                    fh.close()

    def _write(self, fh, obj: dict) -> None:
        line = json.dumps(obj, ensure_ascii=False, allow_nan=False) + "\n"
        with self._lock:
            fh.write(line)
            fh.flush()

    def chunk(
        self,
        chunk_id: str,
        doc_id: str,
        text: str,
        *,
        start: int | None = None,
        end: int | None = None,
        coordinate_system: str = CODEPOINT,
        config: str | Sequence[str] | None = None,
        partial: bool = False,
    ) -> None:
        """One chunk of the pipeline's index (recorded once per id; later calls with it are ignored).

        ``config`` defaults to the recorder's (two configs that share a store each write their own
        chunks; the same chunk written by both is one chunk of both indexes). ``partial``: the chunk
        is recorded because a request retrieved it, so the store is not the whole index and the
        chunker's output (step 2) is not diagnosed for its configs."""
        if self._chunks is None:
            raise ValueError("this recorder was opened without a chunk store (chunks=...)")
        if not isinstance(chunk_id, str) or not chunk_id:
            raise ValueError(f"chunk id must be a non-empty string, not {chunk_id!r}")
        if chunk_id in self._seen:
            return
        self._seen.add(chunk_id)
        obj: dict[str, Any] = {"chunk_id": chunk_id, "doc_id": doc_id, "text": text}
        if start is not None or end is not None:
            obj.update(start=start, end=end, coordinate_system=coordinate_system)
        config = self.config if config is None else config
        if config is not None:
            obj["config"] = config if isinstance(config, str) else list(config)
        if partial:
            obj["partial"] = True
        self._write(self._chunks, obj)

    def record(
        self,
        *,
        qid: str,
        retrieved: Iterable[Any],
        context: Iterable[Any],
        answer: str | None,
        context_text: str | Sequence[str] | None = None,
        citations: Sequence[str] | None = None,
        config: str | None = None,
        phase: str | None = None,
        question: str | None = None,
        stages: Mapping[str, Iterable[Any]] | None = None,
        stage_order: Sequence[str] | None = None,
        abstained: bool | None = None,
        error: str | None = None,
        prompt: str | None = None,
        claims: Mapping[str, Any] | None = None,
    ) -> dict:
        """One request: ``retrieved`` the ranked candidates the reranker read (ids or (id, score);
        with ``stages`` it may be empty: not recorded), ``context`` what reached the model in prompt
        order (ids with ``context_text``, or (id, text) pairs), ``answer`` the model's answer.
        Returns the line written (as a dict)."""
        ret_ids, ret_scores = _ids_scores(retrieved, "retrieved")
        ctx_ids, texts = _context(context, context_text)
        obj: dict[str, Any] = {"format": FORMAT, "qid": qid}
        for key, value in (
            ("config", config or self.config),
            ("phase", phase or self.phase),
            ("question", question),
        ):
            if value is not None:
                obj[key] = value
        if ret_ids or not stages:
            obj["retrieved_ids"] = ret_ids
            if ret_scores is not None:
                obj["scores"] = ret_scores
        obj.update(context_ids=ctx_ids, context_text=texts, answer=answer)
        if stages:
            obj["stages"] = _stage_lists(stages)
        for key, value in (
            ("stage_order", None if stage_order is None else list(stage_order)),
            ("citations", None if citations is None else list(citations)),
            ("abstained", abstained),
            ("error", error),
            ("prompt", prompt),
            ("claims", None if claims is None else dict(claims)),
        ):
            if value is not None:
                obj[key] = value
        if self._out is None:
            raise ValueError("this recorder was opened without a trace file (only a chunk store)")
        self._write(self._out, obj)
        return obj


def _context(
    context: Iterable[Any], context_text: str | Sequence[str] | None
) -> tuple[list[str], str | list[str]]:
    """The context's ids and its text: (id, text) pairs, or ids with ``context_text``."""
    ctx = list(context)
    if ctx and all(isinstance(c, tuple | list) and len(c) == 2 and isinstance(c[1], str) for c in ctx):
        ids = _ids_scores([c[0] for c in ctx], "context")[0]
        return ids, [c[1] for c in ctx] if context_text is None else context_text
    ids = _ids_scores(ctx, "context")[0]
    if context_text is None:
        raise ValueError("context_text: give the literal context, or context as (id, text) pairs")
    return ids, context_text if isinstance(context_text, str) else list(context_text)


def _stage_lists(stages: Mapping[str, Iterable[Any]]) -> dict[str, dict[str, Any]]:
    """Each recorded stage's list as ``{"ids": [...]}`` (with ``"scores"`` when given)."""
    body = {}
    for name, items in stages.items():
        ids, scores = _ids_scores(items, f"stages.{name}")
        body[name] = {"ids": ids} if scores is None else {"ids": ids, "scores": scores}
    return body
