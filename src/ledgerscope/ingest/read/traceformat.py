"""Trace files (``ledgerscope-trace/1``): every line checked, every problem ``file:line: field: reason``.

One JSON object per request, in seed 002's shape (``qid``, ``retrieved_ids``,
``context_ids``, ``context_text``, ``answer`` and optional fields) or staged
(``stages``: named ranked lists in cascade order). :func:`read_traces` is the
reference reader: it checks each line (:func:`line_problems`) and across lines
(one trace per config, phase and question) and returns the traces as columns
(:class:`Traces`) for the derivation, which never sees an unchecked value.
Chunk ids are checked against the chunk store later (:mod:`.checks`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ledgerscope.common.errors import Problem
from ledgerscope.ingest.read.lines import (
    MAX_PROBLEMS,
    ids_problem,
    kind_of,
    read_objects,
    scores_problem,
    string_problem,
)
from ledgerscope.ledger.layout import ARM_NAME, PHASE_LABEL
from ledgerscope.trace import spec

DEFAULT_PHASE = "0"


@dataclass
class Traces:
    """Checked traces as columns (one entry per trace, in file order) and their stage rows."""

    file: list[str] = field(default_factory=list)
    line: list[int | None] = field(default_factory=list)  # None: a position in one JSON document
    qid: list[str] = field(default_factory=list)
    config: list[str] = field(default_factory=list)
    phase: list[str] = field(default_factory=list)
    question: list[str | None] = field(default_factory=list)
    answer: list[str | None] = field(default_factory=list)
    abstained: list[bool | None] = field(default_factory=list)
    error: list[str | None] = field(default_factory=list)
    prompt: list[str | None] = field(default_factory=list)
    context_text: list[str | None] = field(default_factory=list)
    context_items: list[list[str] | None] = field(default_factory=list)
    citations: list[list[str] | None] = field(default_factory=list)
    claims_json: list[str | None] = field(default_factory=list)
    recorded: list[list[str]] = field(default_factory=list)
    declared: list[list[str]] = field(default_factory=list)
    #: where trace's fused list came from (``retrieved_ids``, ``stages.retrieved.ids``, ...), for messages
    fused_from: list[str | None] = field(default_factory=list)
    #: stage rows: trace index, canonical stage name, rank (from 1), chunk id, score
    s_trace: list[int] = field(default_factory=list)
    s_stage: list[str] = field(default_factory=list)
    s_rank: list[int] = field(default_factory=list)
    s_chunk: list[str] = field(default_factory=list)
    s_score: list[float | None] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.qid)

    def add_stage(self, trace: int, stage: str, ids: list[str], scores: list | None) -> None:
        n = len(ids)
        self.s_trace.extend([trace] * n)
        self.s_stage.extend([stage] * n)
        self.s_rank.extend(range(1, n + 1))
        self.s_chunk.extend(ids)
        self.s_score.extend(
            [None] * n if scores is None else [None if x is None else float(x) for x in scores]
        )


def without_nulls(obj: dict, fields: dict[str, tuple[str, bool]]) -> dict:
    """An optional field given as null is as if it were absent (``answer``, required, may be null)."""
    if not any(v is None for v in obj.values()):
        return obj
    return {k: v for k, v in obj.items() if v is not None or k not in fields or fields[k][1]}


class _Line:
    """Problems of one line, each located at the line and named by field."""

    def __init__(self, file: str, line: int | None, problems: list[Problem]):
        self.file, self.line, self.problems = file, line, problems
        self.ok = True

    def bad(self, fieldname: str, reason: str) -> None:
        self.problems.append(Problem(self.file, self.line, fieldname, reason))
        self.ok = False


def _check_kind(v: _Line, name: str, value: Any, kind: str) -> None:
    if kind == "string":
        why = string_problem(value, empty_ok=name not in ("qid",))
        if why:
            v.bad(name, why)
    elif kind == "string-or-null":
        if value is not None and (why := string_problem(value)):
            v.bad(name, why.replace("a string", "a string or null"))
    elif kind == "boolean":
        if not isinstance(value, bool):
            v.bad(name, f"must be true or false, not {kind_of(value)}")
    elif kind == "strings":
        if not isinstance(value, list):
            v.bad(name, f"must be a list of strings, not {kind_of(value)}")
            return
        for i, item in enumerate(value):
            if why := string_problem(item, empty_ok=False):
                v.bad(f"{name}[{i}]", why)
                return
    elif kind == "ids":
        if (found := ids_problem(value)) is not None:
            v.bad(name + found[0], found[1])
    elif kind == "string-or-strings":
        if isinstance(value, list):
            for i, item in enumerate(value):
                if why := string_problem(item):
                    v.bad(f"{name}[{i}]", why)
                    return
        elif why := string_problem(value):
            v.bad(name, why.replace("a string", "a string or a list of strings"))


def line_problems(
    obj: dict, file: str, line: int | None, default_config: str | None, problems: list[Problem]
) -> bool:
    """Check one trace object; append its problems; True when it is usable."""
    v = _Line(file, line, problems)
    unknown = [k for k in obj if k not in spec.TRACE_FIELDS]
    if unknown:
        v.bad(unknown[0][:60], f"unknown field (known: {', '.join(spec.TRACE_FIELDS)})")
    if "format" in obj and obj["format"] != spec.FORMAT:
        shown = obj["format"] if isinstance(obj["format"], str) else kind_of(obj["format"])
        v.bad("format", f"unknown format version {str(shown)[:60]!r} (this version reads {spec.FORMAT})")
    for name, (kind, required) in spec.TRACE_FIELDS.items():
        if name not in obj:
            if required:
                v.bad(name, "missing (required)")
            continue
        if kind in ("scores", "stages", "claims"):
            continue
        _check_kind(v, name, obj[name], kind)
    if not v.ok:
        return False
    _check_names(v, obj, default_config)
    if "scores" in obj:
        if "retrieved_ids" not in obj:
            v.bad("scores", "given without retrieved_ids (the scores of that list)")
        elif (found := scores_problem(obj["scores"], len(obj["retrieved_ids"]), nulls=True)) is not None:
            v.bad("scores" + found[0], found[1])
    items = obj["context_text"]
    if isinstance(items, list) and len(items) != len(obj["context_ids"]):
        v.bad("context_text", f"holds {len(items)} text(s) for {len(obj['context_ids'])} context id(s)")
    if "claims" in obj:
        _check_claims(v, obj["claims"])
    if "stages" in obj:
        _check_stages(v, obj)
    elif "stage_order" in obj:
        _check_order(v, obj["stage_order"], set())
    return v.ok


def _check_names(v: _Line, obj: dict, default_config: str | None) -> None:
    config = obj.get("config", default_config)
    if config is None:
        v.bad("config", "missing: the trace names no config and no --config was given")
    elif ARM_NAME.fullmatch(config) is None:
        v.bad("config", f"{config[:60]!r} names a directory: only letters, digits, '_', '.', '-'")
    phase = obj.get("phase", DEFAULT_PHASE)
    if PHASE_LABEL.fullmatch(phase) is None:
        v.bad(
            "phase", f"{phase[:60]!r} names a directory: only letters, digits, '_', '.', '-' (not '.' first)"
        )


def _check_claims(v: _Line, claims: Any) -> None:
    if not isinstance(claims, dict):
        v.bad("claims", f"must be an object, not {kind_of(claims)}")
        return
    for key, value in claims.items():
        where = f"claims.{key[:60]}"
        if key not in spec.CLAIM_KEYS:
            v.bad(where, f"unknown claim (known: {', '.join(sorted(spec.CLAIM_KEYS))})")
        elif key in spec.CLAIM_FLAGS:
            if value is not None and not isinstance(value, bool):
                v.bad(where, f"must be true, false or null, not {kind_of(value)}")
        elif key in spec.CLAIM_VERDICTS:
            if why := string_problem(value, empty_ok=False):
                v.bad(where, why)
        elif isinstance(value, bool) or not isinstance(value, int) or value < 0:
            v.bad(where, f"must be a non-negative integer, not {kind_of(value)}")


def _check_stages(v: _Line, obj: dict) -> None:
    stages = obj["stages"]
    if not isinstance(stages, dict):
        v.bad("stages", f"must be an object of stage name: {{ids, scores}}, not {kind_of(stages)}")
        return
    declared = obj.get("stage_order")
    names = set(declared) if isinstance(declared, list) else set()
    canonical: dict[str, str] = {}
    for name, body in stages.items():
        where = f"stages.{name[:60]}"
        if name not in spec.KNOWN_STAGES and name not in names:
            v.bad(
                where,
                "unknown stage name: a stage of the trace's own is listed in stage_order "
                f"(standard: {', '.join(spec.STAGE_ORDER)}, retrieved)",
            )
            continue
        if name not in spec.KNOWN_STAGES and spec.STAGE_NAME.fullmatch(name) is None:
            v.bad(where, "a stage name is lower-case letters, digits and '_' (at most 40)")
            continue
        same = canonical.setdefault(spec.canonical_stage(name), name)
        if same != name:
            v.bad(where, f"names the same stage as stages.{same} (retrieved is fused)")
            continue
        _check_stage_body(v, where, body)
    if "fused" in canonical and "retrieved_ids" in obj:
        v.bad("retrieved_ids", f"given with stages.{canonical['fused']}: the same stage twice")
    packed = stages.get("packed")
    if (
        isinstance(packed, dict)
        and isinstance(packed.get("ids"), list)
        and packed["ids"] != obj["context_ids"]
    ):
        v.bad("stages.packed.ids", "differs from context_ids (what reached the model)")
    if declared is not None:
        _check_order(v, declared, {n for n in stages if n not in spec.KNOWN_STAGES})


def _check_stage_body(v: _Line, where: str, body: Any) -> None:
    if not isinstance(body, dict):
        v.bad(where, f"must be an object {{ids, scores}}, not {kind_of(body)}")
        return
    extra = [k for k in body if k not in ("ids", "scores")]
    if extra:
        v.bad(f"{where}.{extra[0][:40]}", "unknown field (known: ids, scores)")
        return
    if "ids" not in body:
        v.bad(f"{where}.ids", "missing (required)")
        return
    if (found := ids_problem(body["ids"])) is not None:
        v.bad(f"{where}.ids{found[0]}", found[1])
        return
    scores = body.get("scores")
    if scores is not None and (found := scores_problem(scores, len(body["ids"]), nulls=True)):
        v.bad(f"{where}.scores{found[0]}", found[1])


def _check_order(v: _Line, order: list[str], custom: set[str]) -> None:
    """``stage_order``: distinct names, standard ones in cascade order, every custom stage listed."""
    seen: set[str] = set()
    last = -1
    for i, name in enumerate(order):
        where = f"stage_order[{i}]"
        canon = spec.canonical_stage(name)
        if canon in seen:
            v.bad(where, f"{name[:40]!r} listed twice")
            return
        seen.add(canon)
        if canon in spec.STAGE_ORDER:
            pos = spec.STAGE_ORDER.index(canon)
            if pos < last:
                v.bad(where, f"{name!r} is out of cascade order ({', '.join(spec.STAGE_ORDER)})")
                return
            last = pos
        elif spec.STAGE_NAME.fullmatch(name) is None:
            v.bad(where, "a stage name is lower-case letters, digits and '_' (at most 40)")
            return
    missing = sorted(custom - seen)
    if missing:
        v.bad("stage_order", f"does not place stage {missing[0]!r}")


def _add_trace(out: Traces, obj: dict, file: str, line: int | None, config: str) -> None:
    """A checked object into the columns."""
    t = len(out)
    out.file.append(file)
    out.line.append(line)
    out.qid.append(obj["qid"])
    out.config.append(config)
    out.phase.append(obj.get("phase", DEFAULT_PHASE))
    out.question.append(obj.get("question"))
    out.answer.append(obj["answer"])
    out.abstained.append(obj.get("abstained"))
    out.error.append(obj.get("error"))
    out.prompt.append(obj.get("prompt"))
    text = obj["context_text"]
    out.context_text.append(text if isinstance(text, str) else None)
    out.context_items.append(text if isinstance(text, list) else None)
    out.citations.append(obj.get("citations"))
    claims = obj.get("claims")
    out.claims_json.append(None if claims is None else json.dumps(claims, sort_keys=True, ensure_ascii=False))
    recorded: list[str] = []
    fused_from = None
    if "retrieved_ids" in obj:
        out.add_stage(t, "fused", obj["retrieved_ids"], obj.get("scores"))
        recorded.append("fused")
        fused_from = "retrieved_ids"
    for name, body in (obj.get("stages") or {}).items():
        canon = spec.canonical_stage(name)
        if canon == "packed":
            continue
        if canon == "fused":
            fused_from = f"stages.{name}.ids"
        out.add_stage(t, canon, body["ids"], body.get("scores"))
        recorded.append(canon)
    out.add_stage(t, "packed", obj["context_ids"], None)
    recorded.append("packed")
    order = [spec.canonical_stage(n) for n in obj.get("stage_order", [])]
    out.recorded.append(sorted(recorded, key=cascade_key(order)))
    out.declared.append([n for n in order if n not in spec.STAGE_ORDER])
    out.fused_from.append(fused_from)


def cascade_key(order: list[str]):
    """Sort key placing standard stages in cascade order and a declared one after the standard stage
    ``stage_order`` lists before it."""
    pos: dict[str, float] = {}
    anchor, k = -1.0, 0
    for name in order:
        if name in spec.STAGE_ORDER:
            anchor, k = float(spec.STAGE_ORDER.index(name)), 0
        else:
            k += 1
            pos[name] = anchor + k / 100
    return lambda n: float(spec.STAGE_ORDER.index(n)) if n in spec.STAGE_ORDER else pos.get(n, 99.0)


def read_traces(paths: list[Path], default_config: str | None = None) -> tuple[Traces, list[Problem]]:
    """Every trace of ``paths`` checked; (the traces, the problems). Any problem: nothing is usable."""
    problems: list[Problem] = []

    def objects() -> Iterator[tuple[str, int | None, dict]]:
        for path in paths:
            for line, obj in read_objects(path, problems, "traces"):
                yield str(path), line, obj

    out = traces_from_objects(objects(), default_config, problems)
    if not problems and not len(out):
        problems.append(Problem(", ".join(map(str, paths)), None, "traces", "no traces in the file(s)"))
    return out, _capped(problems)


def traces_from_objects(
    items: Iterable[tuple[str, int | None, dict]], default_config: str | None, problems: list[Problem]
) -> Traces:
    """Trace objects (each with where it came from) checked into columns; problems appended."""
    out = Traces()
    first: dict[tuple[str, str, str], tuple[str, int | None]] = {}
    for file, line, obj in items:
        if len(problems) > MAX_PROBLEMS:
            break
        obj = without_nulls(obj, spec.TRACE_FIELDS)
        if not line_problems(obj, file, line, default_config, problems):
            continue
        config = obj.get("config", default_config)
        key = (config, obj.get("phase", DEFAULT_PHASE), obj["qid"])
        if key in first:
            f, n = first[key]
            problems.append(
                Problem(
                    file,
                    line,
                    "qid",
                    f"a second trace for config {key[0]!r}, "
                    f"phase {key[1]!r}, qid {key[2][:60]!r} (first at "
                    f"{f if n is None else f'{f}:{n}'})",
                )
            )
            continue
        first[key] = (file, line)
        _add_trace(out, obj, file, line, config)
    return out


def _capped(problems: list[Problem]) -> list[Problem]:
    if len(problems) <= MAX_PROBLEMS:
        return problems
    rest = len(problems) - MAX_PROBLEMS
    last = problems[MAX_PROBLEMS - 1]
    return [
        *problems[:MAX_PROBLEMS],
        Problem(last.file, None, "traces", f"{rest}+ more problem(s) not listed"),
    ]


def traces_from_bytes(
    raw: bytes, file: str, default_config: str | None = None
) -> tuple[Traces, list[Problem]]:
    """:func:`read_traces` of one file's bytes (the fuzzers call it in process, no file written)."""
    from ledgerscope.ingest.read.lines import objects_of

    problems: list[Problem] = []
    out = traces_from_objects(
        ((file, line, obj) for line, obj in objects_of(raw, file, problems)), default_config, problems
    )
    if not problems and not len(out):
        problems.append(Problem(file, None, "traces", "no traces in the file(s)"))
    return out, _capped(problems)
