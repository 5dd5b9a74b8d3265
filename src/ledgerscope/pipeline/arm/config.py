"""Arm configuration: one TOML file per arm, its ``name`` is the arm's name in the ledger.

Every key is defined once, in :mod:`.schema` (type, default, range or choices, what it does);
:data:`DEFAULT_TOML` (``ledgerscope config default``) is rendered from it. This module reads an arm
over those defaults, checks it against the schema and the rules that relate several keys, and
names each problem with its key and its line in the arm's file.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import re
import tomllib
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ledgerscope.common.errors import InputError, LedgerscopeError, Problem
from ledgerscope.common.toml_lines import key_lines, line_of
from ledgerscope.pipeline.arm import chunker_spec, schema
from ledgerscope.pipeline.arm.schema_text import default_toml
from ledgerscope.pipeline.arm.validate import number_problems, schema_problems
from ledgerscope.pipeline.contracts.units import Phase

#: the documented default arm (``ledgerscope config default``), rendered from the schema
DEFAULT_TOML = default_toml()
#: the stage tables an endpoint kind may configure
_ENDPOINT_TABLES = ("embedding", "rerank", "generator", "judge")
#: at most this many phases per arm (each is a full pass over the corpus)
MAX_PHASES = 1024
MAX_INT = schema.MAX_INT


@functools.cache
def _default_table() -> dict:
    return schema.defaults()


def _default(key: str) -> Any:
    """The schema's default for a top-level key, a fresh copy each time (tables are mutable)."""
    return lambda: copy.deepcopy(_default_table()[key])


@dataclass
class ArmConfig:
    """An arm as read: every key that is not optional, at its value or its default (see :mod:`.schema`)."""

    name: str = field(default_factory=_default("name"))
    capacity: int = field(default_factory=_default("capacity"))
    overlap: int = field(default_factory=_default("overlap"))
    phases: Any = field(default_factory=_default("phases"))
    edge_policy: str = field(default_factory=_default("edge_policy"))
    budget_tokens: int = field(default_factory=_default("budget_tokens"))
    top_k: int = field(default_factory=_default("top_k"))
    rerank_depth: int = field(default_factory=_default("rerank_depth"))
    phase_scope: str = field(default_factory=_default("phase_scope"))
    chunker: dict = field(default_factory=_default("chunker"))
    embedding: dict = field(default_factory=_default("embedding"))
    retrieval: dict = field(default_factory=_default("retrieval"))
    fusion: dict = field(default_factory=_default("fusion"))
    rerank: dict = field(default_factory=_default("rerank"))
    selection: dict = field(default_factory=_default("selection"))
    generator: dict = field(default_factory=_default("generator"))
    judge: dict = field(default_factory=_default("judge"))
    access: dict = field(default_factory=_default("access"))
    #: the file (or manifest) this arm was read from, for error messages; not a field (no digest)
    where = "<config>"
    #: the line of each key in that file (:func:`.toml_lines.key_lines`; empty for a manifest); like
    #: ``where``, an attribute and not a field (unannotated), so never part of the configuration
    lines = MappingProxyType({})

    @property
    def stride(self) -> int:
        return self.capacity - self.overlap

    def to_dict(self) -> dict:
        return asdict(self)

    def digest(self) -> str:
        data = self.to_dict()
        # settings added after ledgers were written are left out while they hold their default, so
        # older ledgers (whose manifests lack them) keep their digests and stay re-runnable
        for path in schema.keys_where("later"):
            *parents, key = path
            table = data
            for name in parents:
                table = table.get(name, {})
            if key in table and table[key] == schema.digest_neutral(tuple(path)):
                del table[key]
        # where the model runs is recorded in the manifest, not part of what the arm is: the same arm
        # on a GPU resumes and reuses its CPU partitions, and rerun reports device differences
        for *parents, key in schema.keys_where("digest"):
            table = data
            for name in parents:
                table = table.get(name, {})
            table.pop(key, None)
        blob = json.dumps(data, sort_keys=True, ensure_ascii=False).encode()
        return "sha256:" + hashlib.sha256(blob).hexdigest()

    def setting(self, path: str) -> Any:
        """The value of ``path`` (``"embedding.timeout"``): as the arm sets it, else the schema's default
        (KeyError for a key the schema does not define)."""
        first, *rest = path.split(".")
        value = getattr(self, first) if first in self.__dataclass_fields__ else None
        for name in rest:
            if not isinstance(value, dict) or name not in value:
                return schema.default_of(path)
            value = value[name]
        return value if first in self.__dataclass_fields__ else schema.default_of(path)

    def line_of(self, field: str) -> int | None:
        """The line of ``field`` (or of its table) in the arm's file; None when not known."""
        return line_of(self.lines, field)

    # convenience accessors ---------------------------------------------
    @property
    def chunker_kind(self) -> str:
        return self.chunker.get("kind", "token")

    @property
    def clearance(self) -> frozenset[str]:
        return frozenset(self.access.get("clearance", []))

    def phase_list(self) -> list[Phase]:
        kind = self.chunker_kind
        if chunker_spec.is_external(kind):
            span = chunker_spec.span_tokens(kind, self.chunker)
            if span is None and isinstance(self.phases, str):
                raise ValueError(chunker_spec.needs_span(kind))
            return resolve_phases(self.phases, span)
        return resolve_phases(self.phases, self.stride if kind == "token" else None)


def _merge(base: dict, over: dict) -> dict:
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _merge(out[k], v)
        else:
            out[k] = v
    return out


def load_arm(path: str | Path) -> ArmConfig:
    """Read one arm's TOML over the defaults and validate it (all problems at once, each with its line)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
        data = tomllib.loads(text)
    except FileNotFoundError:
        raise InputError(Problem(str(path), None, "arm", "no such file")) from None
    except OSError as exc:  # a directory, no permission, ...
        raise InputError(Problem(str(path), None, "arm", f"cannot be read: {exc.strerror or exc}")) from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InputError(Problem(str(path), None, "toml", str(exc))) from None
    try:
        cfg = arm_from_dict(data, str(path))
    except InputError as exc:
        lines = key_lines(text)
        located = [
            replace(p, line=line_of(lines, p.field)) if p.file == str(path) else p for p in exc.problems
        ]
        # in the order of the file (problems of keys it does not write, without a line, last)
        located.sort(key=lambda p: (p.line is None, p.line or 0))
        raise InputError(located) from None
    cfg.lines = key_lines(text)  # a plain dict: an arm is pickled to Ray workers
    return cfg


def with_lines(exc: LedgerscopeError, arms: Sequence[ArmConfig]) -> LedgerscopeError:
    """``exc`` with the line of the key each problem names, when it names an arm's file (a problem
    found later than reading: an endpoint that does not answer, a chunker failing on a document)."""
    if not isinstance(exc, InputError):
        return exc
    by_file = {cfg.where: cfg for cfg in arms if cfg.lines}
    if not any(p.line is None and p.file in by_file for p in exc.problems):
        return exc
    return InputError(
        [
            replace(p, line=by_file[p.file].line_of(p.field)) if p.line is None and p.file in by_file else p
            for p in exc.problems
        ]
    )


def arm_from_dict(data: dict, where: str = "<config>") -> ArmConfig:
    """An arm from a parsed TOML table over the defaults, validated (all problems at once)."""
    wrong_type, wrong_value = schema_problems(data, where)
    tables = {k for k, info in schema.Arm.model_fields.items() if schema.submodel(info) is not None}
    # unknown keys and tables that are not tables stay out of the merge (their problem is reported)
    bad = {
        k for k in data if k not in schema.Arm.model_fields or (k in tables and not isinstance(data[k], dict))
    }
    merged = _merge(_default_table(), {k: v for k, v in data.items() if k not in bad})
    merged = copy.deepcopy(merged)
    _endpoint_embedding_defaults(data, merged)
    cfg = ArmConfig(**merged)
    cfg.where = where
    numbers = [
        p
        for key, info in schema.Arm.model_fields.items()
        if key in tables or info.annotation is int
        for p in number_problems(merged[key], key, where)
    ]
    problems: list[Problem] = []
    seen: set[str] = set()
    for found in (wrong_type, numbers, wrong_value, _cross_problems(cfg, where)):
        for problem in found:
            if problem.field not in seen:
                seen.add(problem.field)
                problems.append(problem)
    if problems:
        raise InputError(problems)
    return cfg


def _endpoint_embedding_defaults(data: dict, merged: dict) -> None:
    """With endpoint embeddings there are no token vectors, so MaxSim cannot be the default reranker:
    an arm that names no reranker gets ``none`` (the fused order), written into its configuration."""
    embedding, rerank = data.get("embedding"), data.get("rerank")
    named = isinstance(rerank, dict) and "kind" in rerank
    if (
        isinstance(embedding, dict)
        and embedding.get("kind") == "endpoint"
        and not named
        and isinstance(merged.get("rerank"), dict)
    ):
        merged["rerank"] = {**merged["rerank"], "kind": "none"}


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _cross_problems(cfg: ArmConfig, where: str) -> list[Problem]:
    """The rules that relate keys (each key's own type, range and choices are the schema's)."""
    from ledgerscope.pipeline.arm import kinds

    p: list[Problem] = []

    def need(cond: bool, key: str, reason: str) -> None:
        if not cond:
            p.append(Problem(where, None, key, reason))

    capacity, overlap = _count(cfg.capacity), _count(cfg.overlap)
    shaped = capacity is not None and capacity >= 1 and overlap is not None
    if shaped:
        need(overlap < capacity, "overlap", "must be smaller than capacity")
    chunker, rerank, generator = cfg.chunker, cfg.rerank, cfg.generator
    kind = chunker.get("kind", "token")
    chunker_ok = _seam_problem(p, where, "chunker.kind", kind, tuple(kinds.available("chunker")))
    if chunker_ok and chunker_spec.is_external(kind):
        found = chunker_spec.problems(chunker, where, schema.applies(schema.Chunker))
        p.extend(found)
        chunker_ok = not found
    _seam_problem(p, where, "rerank.kind", rerank.get("kind"), tuple(kinds.available("reranker")))
    need(
        rerank.get("kind") != "cross-encoder" or bool(rerank.get("model")),
        "rerank.model",
        "a cross-encoder needs a model name or path",
    )
    _seam_problem(p, where, "generator.kind", generator.get("kind"), tuple(kinds.available("generator")))
    p.extend(_stage_problems(cfg, where))
    if chunker_ok and shaped and overlap < capacity:
        try:
            cfg.phase_list()
        except ValueError as exc:
            p.append(Problem(where, None, "phases", str(exc)))
    return p


def _seam_problem(p: list[Problem], where: str, key: str, kind: Any, allowed: tuple[str, ...]) -> bool:
    """Whether ``kind`` is registered for its seam (built in or a plugin); a problem when not."""
    if isinstance(kind, str) and kind in allowed:
        return True
    p.append(Problem(where, None, key, f"must be one of {', '.join(allowed)}"))
    return False


def _stage_problems(cfg: ArmConfig, where: str) -> list[Problem]:
    """Endpoints that need their URL, MaxSim without token vectors, and the python/plugin stages."""
    from ledgerscope.pipeline.arm import kinds

    p: list[Problem] = []
    embedding, rerank = cfg.embedding, cfg.rerank
    if embedding.get("kind") == "endpoint" and rerank.get("kind") == "maxsim":
        p.append(
            Problem(
                where,
                None,
                "rerank.kind",
                "maxsim needs the embedding model's token vectors, which an embedding endpoint "
                "does not return: choose cross-encoder, endpoint or none",
            )
        )
    for section in _ENDPOINT_TABLES:
        table = getattr(cfg, section)
        if isinstance(table, dict) and table.get("kind") == "endpoint" and not table.get("base_url"):
            p.append(Problem(where, None, f"{section}.base_url", f"an endpoint {section} needs base_url"))
    retrieval = cfg.retrieval
    for slot in ("lexical", "ann"):
        table = retrieval.get(slot)
        if isinstance(table, dict) and "kind" in table:
            _seam_problem(
                p, where, f"retrieval.{slot}.kind", table["kind"], tuple(kinds.available("retriever"))
            )
    for key, table in _plugin_tables(cfg):
        p.extend(kinds.plugin_problems(key, table, where))
    return p


def _plugin_tables(cfg: ArmConfig) -> list[tuple[str, dict]]:
    """(config prefix, table) of every replaceable stage an arm configures."""
    out = [(k, getattr(cfg, k)) for k in ("chunker", "rerank", "generator")]
    for slot in ("lexical", "ann"):
        table = cfg.retrieval.get(slot)
        if isinstance(table, dict):
            out.append((f"retrieval.{slot}", table))
    return out


def resolve_phases(spec: Any, stride: int | None) -> list[Phase]:
    """Turn a phase spec into labelled offsets.

    ``"auto:N"``: labels ``"0"``..``"N-1"``, label k at ``round(k * stride / N)``
    (for the sentence chunker, label k means k leading sentences). A list of
    integers: each offset is its own label. A table ``{label = offset}``:
    explicit labels. Offsets must lie in ``[0, stride)``.
    """
    if isinstance(spec, str):
        m = re.fullmatch(r"auto:(\d+)", spec.strip())
        if not m or int(m.group(1)) < 1:
            raise ValueError(f"phase spec {spec!r}: expected 'auto:N' with N >= 1 or a list of offsets")
        n = int(m.group(1))
        if n > MAX_PHASES:
            raise ValueError(f"auto:{n} asks for more than {MAX_PHASES} phases")
        if stride is None:
            return [Phase(str(k), k) for k in range(n)]
        if n > stride:
            raise ValueError(f"auto:{n} asks for more phases than the stride ({stride}) has offsets")
        return [Phase(str(k), round(k * stride / n)) for k in range(n)]
    if isinstance(spec, list):
        pairs = [(str(o), o) for o in spec]
    elif isinstance(spec, dict):
        pairs = list(spec.items())
    else:
        raise ValueError("phases must be 'auto:N', a list of offsets or a table of label = offset")
    if len(pairs) > MAX_PHASES:
        raise ValueError(f"{len(pairs)} phases; at most {MAX_PHASES}")
    out = []
    for label, off in pairs:
        if re.fullmatch(r"[A-Za-z0-9_-][A-Za-z0-9_.-]*", str(label)) is None:
            raise ValueError(
                f"phase label {str(label)[:40]!r}: use letters, digits, '_', '.', '-' "
                "(it names a directory in the ledger)"
            )
        in_range = isinstance(off, int) and not isinstance(off, bool) and 0 <= off <= MAX_INT
        if not in_range or (stride is not None and off >= stride):
            raise ValueError(
                f"phase {label!r}: offset {off!r} must be an integer in "
                f"[0, {stride if stride is not None else MAX_INT + 1})"
            )
        out.append(Phase(str(label), off))
    if len({p.label for p in out}) != len(out):
        raise ValueError("phase labels must be unique")
    if not out:
        raise ValueError("at least one phase is needed")
    return out
