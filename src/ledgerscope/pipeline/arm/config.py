"""Arm configuration: one TOML file per arm, its ``name`` is the arm's name in the ledger.

The keys users type most sit at the top level; everything else is grouped by
stage. :data:`DEFAULT_TOML` is the documented default (``ledgerscope config
default`` prints it) and every key has the value the code uses when it is
absent.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import math
import re
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ledgerscope.common.errors import InputError, Problem
from ledgerscope.pipeline.arm import chunker_spec
from ledgerscope.pipeline.contracts.units import Phase

DEFAULT_TOML = """\
# ledgerscope arm configuration. One file per arm; `name` labels the arm in the ledger.
name = "candidate"

# --- the keys you will type most -------------------------------------------
capacity = 96            # tokens per unit (embedding tokenizer), interior units have exactly this
overlap = 0              # tokens each unit extends into the next core; stride = capacity - overlap
phases = "auto:8"        # "auto:N" = N labels evenly spread over the stride, or a list of offsets
edge_policy = "keep-short"   # keep-short: shorter edge units are kept | merge-short: folded into a neighbour
budget_tokens = 320      # evidence budget (generator tokens, labels and separators included)
top_k = 4                # the secondary view: a fixed number of reranked units
rerank_depth = 30        # fused candidates handed to the reranker
phase_scope = "all"      # all: every document re-chunked at every phase | evidence: only documents
                         # with gold support or reaching a candidate list at the base phase (the
                         # first); the rest chunked and embedded once, shared by every phase

[chunker]
kind = "token"           # token | sentence (structural: whole sentences packed up to `capacity`)
                         # | langchain | llamaindex | chonkie | python (external splitters)
# sentence chunker perturbation rule: phase k puts the first k sentences in a unit of their own
# External splitters (optional keys, absent unless set; see docs/pipelines.md, "Chunkers"):
# splitter = "RecursiveCharacterTextSplitter"   # the class (llamaindex: SentenceSplitter, TokenTextSplitter;
#                                               # chonkie: TokenChunker, SentenceChunker, RecursiveChunker)
# options = { chunk_size = 400, chunk_overlap = 40 }   # its keyword arguments
# length = "library"     # what chunk_size counts: library (its default) | characters | tokens (the arm's)
# callable = "package.module:function"   # kind = "python": (text) -> list of (start, end) code points
# phase_span_tokens = 0  # auto:N spreads the forced cut over this many tokens (default: chunk_size)
# Their perturbation rule: phase p forces one cut at token p and splits each side separately.
# (plugin chunkers, an entry point in `ledgerscope.stages`, take their keyword arguments in options too)

[embedding]
model = "bundled:all-MiniLM-L6-v2"   # any sentence-transformers name or path (endpoint: the server's model)
batch_size = 64
# Optional keys (absent unless set; see docs/pipelines.md):
# kind = "sentence-transformers"     # or "endpoint": an OpenAI-compatible POST /v1/embeddings server
# base_url = "http://127.0.0.1:8080" # endpoint: the server (no credentials in the URL)
# path = "/v1/embeddings"            # endpoint: the request path under base_url
# api_key_env = "EMBEDDINGS_KEY"     # endpoint: NAME of the environment variable holding the key
# timeout = 60.0                     # endpoint: seconds per request
# retries = 2                        # endpoint: retries of a failed batch (backoff 0.5 s x attempt)
# backoff = 0.5
# dimensions = 0                     # endpoint: expected vector size (0: learnt from a probe request)
# tokenizer = ""                     # chunk offsets and budget counting: a Hugging Face tokenizer name
#                                    # or path ("": the model's own; with an endpoint, the bundled MiniLM's)

[retrieval]
bm25_top_n = 50          # exact BM25 depth
dense_top_n = 50         # exact (numpy) dense depth, recorded for the exact-vs-ANN diagnosis
ann_top_n = 50           # production dense depth (hnswlib)
bm25_k1 = 1.5
bm25_b = 0.75

[retrieval.hnsw]
M = 16
ef_construction = 200
ef_search = 64
seed = 0
# [retrieval.lexical] / [retrieval.ann]: the production lexical (BM25) and dense (HNSW) slots, each
# replaceable: kind = "python" with callable = "package.module:function", or a plugin kind;
# options = {} are passed to it. Exact dense search stays the reference the ANN slot is judged by.

[fusion]
method = "rrf"           # rrf | combsum | combmnz
rrf_k = 60
weights = { bm25 = 1.0, dense = 1.0 }

[rerank]
kind = "maxsim"          # maxsim (late interaction over the embedding model's tokens) | cross-encoder | none
                         # | endpoint (POST /v1/rerank) | python | a plugin kind
                         # (with [embedding] kind = "endpoint" the default is "none": maxsim needs
                         # token vectors)
model = ""               # cross-encoder name or path (kind = "cross-encoder"); endpoint: the server's model
selection_depth = 10     # the reranked list is cut here before selection
# endpoint: base_url, path = "/v1/rerank", api_key_env, timeout, retries, backoff (as [embedding]);
# python: callable = "package.module:function"; options = {} for python and plugin kinds

[selection]
mode = "budget"          # budget (primary view) | top-k; the other view is recorded too
expansion = "none"       # none | neighbours (adds adjacent units of the same source version)
neighbours = 1
dedup = true             # identical source intervals are packed once

[generator]
kind = "extractive"      # extractive (embedded, no server) | endpoint (OpenAI-compatible HTTP)
abstain_threshold = 0.3  # extractive reader: abstain when the best sentence scores below this
abstain_margin = 0.06    # ... or when it leads the next best by less than this (a merely topical context)
base_url = ""            # endpoint: e.g. http://127.0.0.1:8080
model = ""               # endpoint: model name
api_key_env = ""         # endpoint: NAME of the environment variable holding the key (never the key)
max_tokens = 128
temperature = 0.0
# Optional keys (absent unless set):
# system = "..."          # the prompt's instructions (default: the built-in ones); an endpoint sends
#                         # it as the system message
# context_format = "[{label}] ({doc_id})\\n{text}"   # one packed unit: {label} {doc_id} {unit_id} {text}
# question_format = "Sources:\\n{context}\\n\\nQuestion: {question}\\nAnswer:"   # the user turn
# timeout = 60.0, retries = 1, backoff = 0.5    # endpoint requests
# callable = "package.module:function"           # kind = "python"; options = {} for python and plugin kinds
# reader_model = "bundled:all-MiniLM-L6-v2"      # the extractive reader's model with endpoint embeddings

[judge]
kind = "deterministic"   # deterministic (the rules in pipeline/judge.py) | endpoint (an LLM with a fixed
                         # rubric, pipeline/judge_llm.py; never the default: calibrate it first with
                         # `ledgerscope judge calibrate`)
base_url = ""            # endpoint: e.g. http://127.0.0.1:8080
model = ""               # endpoint: model name
api_key_env = ""         # endpoint: NAME of the environment variable holding the key (never the key)
max_tokens = 16
temperature = 0.0

[access]
clearance = []           # labels this reader holds; a source is visible when all its labels are held
"""

# The kinds of the replaceable stages (chunker, rerank, generator) are the keys of their factory
# tables in .kinds, read by check_arm: a new kind is added there only.

_ENDPOINT_KEYS = {"base_url": "", "path": "", "api_key_env": "", "timeout": 60.0, "retries": 2,
                  "backoff": 0.5}
_PLUGIN_KEYS = {"callable": "", "options": {}}
#: Keys a stage table may hold that are absent unless an arm sets them (their values here give the
#: type only). Keys added after ledger format 2 live here, not in DEFAULT_TOML, so an arm that does
#: not use them keeps its configuration digest (a recorded ledger still reruns and resumes).
OPTIONAL_KEYS: dict[str, dict] = {
    "chunker": {**_PLUGIN_KEYS, **chunker_spec.KEYS},
    "embedding": {"kind": "", **_ENDPOINT_KEYS, "dimensions": 0, "tokenizer": "", "device": ""},
    "retrieval": {"lexical": {"kind": "", **_PLUGIN_KEYS}, "ann": {"kind": "", **_PLUGIN_KEYS}},
    "rerank": {**_ENDPOINT_KEYS, **_PLUGIN_KEYS},
    "generator": {"system": "", "context_format": "", "question_format": "", "timeout": 60.0, "retries": 1,
                  "backoff": 0.5, "reader_model": "", **_PLUGIN_KEYS},
}
#: tables whose contents are the user's (keyword arguments for a splitter or a plugin): only their
#: type is checked
_FREE_TABLES = frozenset({"options"})
EMBEDDING_KINDS = ("sentence-transformers", "endpoint")
#: the stage tables an endpoint kind may configure, with the kind value that makes them one
_ENDPOINT_TABLES = ("embedding", "rerank", "generator", "judge")
_EDGE = ("keep-short", "merge-short")
_FUSION = ("rrf", "combsum", "combmnz")
_SELECTION = ("budget", "top-k")
_EXPANSION = ("none", "neighbours")
_JUDGES = ("deterministic", "endpoint")



@dataclass
class ArmConfig:
    name: str = "candidate"
    capacity: int = 96
    overlap: int = 0
    phases: Any = "auto:8"
    edge_policy: str = "keep-short"
    budget_tokens: int = 320
    top_k: int = 4
    rerank_depth: int = 30
    phase_scope: str = "all"
    chunker: dict = field(default_factory=lambda: {"kind": "token"})
    embedding: dict = field(default_factory=lambda: {"model": "bundled:all-MiniLM-L6-v2", "batch_size": 64})
    retrieval: dict = field(default_factory=dict)
    fusion: dict = field(default_factory=dict)
    rerank: dict = field(default_factory=dict)
    selection: dict = field(default_factory=dict)
    generator: dict = field(default_factory=dict)
    judge: dict = field(default_factory=dict)
    access: dict = field(default_factory=dict)
    #: the file (or manifest) this arm was read from, for error messages; not a field (no digest)
    where = "<config>"

    @property
    def stride(self) -> int:
        return self.capacity - self.overlap

    def to_dict(self) -> dict:
        return asdict(self)

    def digest(self) -> str:
        data = self.to_dict()
        # settings added after ledgers were written are left out while they hold their default, so
        # older ledgers (whose manifests lack them) keep their digests and stay re-runnable
        defaults = _default_table()
        for path in _LATER_KEYS:
            *parents, key = path
            table, default = data, defaults
            for name in parents:
                table, default = table.get(name, {}), default.get(name, {})
            if key in table and table[key] == default.get(key):
                del table[key]
        # where the model runs is recorded in the manifest, not part of what the arm is: the same arm
        # on a GPU resumes and reuses its CPU partitions, and rerun reports device differences
        data.get("embedding", {}).pop("device", None)
        blob = json.dumps(data, sort_keys=True, ensure_ascii=False).encode()
        return "sha256:" + hashlib.sha256(blob).hexdigest()

    # convenience accessors with defaults --------------------------------
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


#: keys added to the configuration after the first ledgers were written (see ArmConfig.digest)
_LATER_KEYS = (("judge",), ("generator", "abstain_margin"), ("phase_scope",))
PHASE_SCOPES = ("all", "evidence")


@functools.cache
def _default_table() -> dict:
    return tomllib.loads(DEFAULT_TOML)


def _defaults() -> dict:
    return copy.deepcopy(_default_table())


def _merge(base: dict, over: dict) -> dict:
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _merge(out[k], v)
        else:
            out[k] = v
    return out


def load_arm(path: str | Path) -> ArmConfig:
    """Read one arm's TOML over the defaults and validate it (all problems at once)."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(Problem(str(path), None, "arm", "no such file")) from None
    except OSError as exc:  # a directory, no permission, ...
        raise InputError(Problem(str(path), None, "arm", f"cannot be read: {exc.strerror or exc}")) from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InputError(Problem(str(path), None, "toml", str(exc))) from None
    return arm_from_dict(data, str(path))


def _type_name(value: Any) -> str:
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
            list: "a list", dict: "a table"}.get(type(value), type(value).__name__)


def _shape_problems(data: dict, defaults: dict, prefix: str, where: str) -> list[Problem]:
    """Unknown keys and wrongly typed values inside the stage tables, against the defaults."""
    out: list[Problem] = []
    for key, value in data.items():
        name = f"{prefix}{key}"
        if key not in defaults:
            out.append(Problem(where, None, name, "unknown key"))
            continue
        want = defaults[key]
        if key in _FREE_TABLES and isinstance(want, dict):
            if not isinstance(value, dict):
                out.append(Problem(where, None, name, f"must be a table, not {_type_name(value)}"))
            continue
        if isinstance(want, dict) and isinstance(value, dict):
            out.extend(_shape_problems(value, want, name + ".", where))
            continue
        if isinstance(want, (bool, str, list, dict)):
            ok = isinstance(value, type(want))
        else:  # an integer, or a number (an integer is accepted where a float is the default)
            numeric = int if isinstance(want, int) else (int, float)
            ok = isinstance(value, numeric) and not isinstance(value, bool)
        if not ok:
            out.append(Problem(where, None, name, f"must be {_type_name(want)}, not {_type_name(value)}"))
    return out


def arm_from_dict(data: dict, where: str = "<config>") -> ArmConfig:
    """An arm from a parsed TOML table over the defaults, validated (all problems at once)."""
    defaults = _defaults()
    shapes = _merge(OPTIONAL_KEYS, defaults)
    known = set(ArmConfig.__dataclass_fields__)
    problems = [Problem(where, None, k, "unknown key") for k in data if k not in known]
    for key, value in data.items():
        if key in known and isinstance(defaults.get(key), dict):
            if isinstance(value, dict):
                problems.extend(_shape_problems(value, shapes[key], key + ".", where))
            else:
                problems.append(Problem(where, None, key, f"must be a table, not {_type_name(value)}"))
    bad_tables = {pr.field for pr in problems if "." not in pr.field}
    merged = _merge(defaults, {k: v for k, v in data.items() if k in known and k not in bad_tables})
    _endpoint_embedding_defaults(data, merged)
    cfg = ArmConfig(**merged)
    cfg.where = where
    try:
        check_arm(cfg, where)
    except InputError as exc:
        seen = {pr.field for pr in problems}
        problems.extend(pr for pr in exc.problems if pr.field not in seen)
    if problems:
        raise InputError(problems)
    return cfg


def _endpoint_embedding_defaults(data: dict, merged: dict) -> None:
    """With endpoint embeddings there are no token vectors, so MaxSim cannot be the default reranker:
    an arm that names no reranker gets ``none`` (the fused order), written into its configuration."""
    embedding, rerank = data.get("embedding"), data.get("rerank")
    named = isinstance(rerank, dict) and "kind" in rerank
    if isinstance(embedding, dict) and embedding.get("kind") == "endpoint" and not named \
            and isinstance(merged.get("rerank"), dict):
        merged["rerank"] = {**merged["rerank"], "kind": "none"}


def check_arm(cfg: ArmConfig, where: str) -> None:
    """Validate an arm; every problem found is reported in one InputError."""
    from ledgerscope.pipeline.arm import kinds

    # tuples, not the tables: a wrongly typed (unhashable) kind is a problem to report, not a TypeError
    chunkers, rerankers, generators = (tuple(kinds.available(seam)) for seam in ("chunker", "reranker",
                                                                                  "generator"))
    p: list[Problem] = []

    def need(cond: bool, key: str, reason: str) -> None:
        if not cond:
            p.append(Problem(where, None, key, reason))

    need(isinstance(cfg.name, str) and re.fullmatch(r"[A-Za-z0-9_.-]+", cfg.name or "") is not None,
         "name", "must be letters, digits, '_', '.', '-'")
    ints = {}
    for key in ("capacity", "overlap", "budget_tokens", "top_k", "rerank_depth"):
        v = getattr(cfg, key)
        if isinstance(v, int) and not isinstance(v, bool) and v >= 0:
            ints[key] = v
        else:
            need(False, key, "must be a non-negative integer")
    tables = {}
    for key in ("chunker", "embedding", "retrieval", "fusion", "rerank", "selection", "generator", "judge",
                "access"):
        v = getattr(cfg, key)
        need(isinstance(v, dict), key, "must be a table")
        tables[key] = v if isinstance(v, dict) else {}
    if "capacity" in ints:
        need(ints["capacity"] >= 1, "capacity", "must be at least 1")
    if ints.get("capacity", 0) >= 1 and "overlap" in ints:
        need(ints["overlap"] < ints["capacity"], "overlap", "must be smaller than capacity")
    if "top_k" in ints:
        need(ints["top_k"] >= 1, "top_k", "must be at least 1")
    if "rerank_depth" in ints:
        need(ints["rerank_depth"] >= 1, "rerank_depth", "must be at least 1")
    chunker_ok = tables["chunker"].get("kind", "token") in chunkers
    need(chunker_ok, "chunker.kind", f"must be one of {', '.join(chunkers)}")
    if chunker_ok and chunker_spec.is_external(tables["chunker"].get("kind")):
        found = chunker_spec.problems(tables["chunker"], where)
        p.extend(found)
        chunker_ok = not found
    need(cfg.edge_policy in _EDGE, "edge_policy", f"must be one of {', '.join(_EDGE)}")
    need(cfg.phase_scope in PHASE_SCOPES, "phase_scope", f"must be one of {', '.join(PHASE_SCOPES)}")
    fusion, rerank, selection, generator = (tables[k] for k in ("fusion", "rerank", "selection", "generator"))
    need(fusion.get("method") in _FUSION, "fusion.method", f"must be one of {', '.join(_FUSION)}")
    need(rerank.get("kind") in rerankers, "rerank.kind", f"must be one of {', '.join(rerankers)}")
    need(rerank.get("kind") != "cross-encoder" or bool(rerank.get("model")),
         "rerank.model", "a cross-encoder needs a model name or path")
    need(selection.get("mode") in _SELECTION, "selection.mode", f"must be one of {', '.join(_SELECTION)}")
    need(selection.get("expansion") in _EXPANSION, "selection.expansion",
         f"must be one of {', '.join(_EXPANSION)}")
    need(generator.get("kind") in generators, "generator.kind",
         f"must be one of {', '.join(generators)}")
    judge = tables["judge"]
    need(judge.get("kind", "deterministic") in _JUDGES, "judge.kind", f"must be one of {', '.join(_JUDGES)}")
    p.extend(_stage_problems(cfg, tables, where))
    clearance = tables["access"].get("clearance", [])
    need(isinstance(clearance, list) and all(isinstance(c, str) for c in clearance), "access.clearance",
         "must be a list of labels")
    p.extend(_range_problems(cfg, tables, where))
    if chunker_ok and "capacity" in ints and "overlap" in ints and ints["overlap"] < ints["capacity"]:
        try:
            cfg.phase_list()
        except ValueError as exc:
            p.append(Problem(where, None, "phases", str(exc)))
    if p:
        raise InputError(p)


def _url_problem(base_url: str) -> str | None:
    from urllib.parse import urlsplit

    if not base_url.startswith(("http://", "https://")):
        return "must start with http:// or https://"
    try:
        userinfo = "@" in (urlsplit(base_url).netloc or "")
    except ValueError as exc:
        return f"is not a URL ({exc})"
    if userinfo:
        return ("must not carry credentials (user:key@); put the key in the environment variable "
                "named by api_key_env")
    return None


def _stage_problems(cfg: ArmConfig, tables: dict, where: str) -> list[Problem]:
    """Endpoints (URL, key variable, path), embedding kinds and the python/plugin stages."""
    from ledgerscope.pipeline.arm import kinds

    p: list[Problem] = []
    embedding, rerank = tables["embedding"], tables["rerank"]
    emb_kind = embedding.get("kind", "sentence-transformers")
    if emb_kind not in EMBEDDING_KINDS:
        p.append(Problem(where, None, "embedding.kind", f"must be one of {', '.join(EMBEDDING_KINDS)}"))
    if emb_kind == "endpoint" and rerank.get("kind") == "maxsim":
        p.append(Problem(where, None, "rerank.kind",
                         "maxsim needs the embedding model's token vectors, which an embedding endpoint "
                         "does not return: choose cross-encoder, endpoint or none"))
    for section in _ENDPOINT_TABLES:
        table = tables[section]
        if table.get("kind") == "endpoint" and not table.get("base_url"):
            p.append(Problem(where, None, f"{section}.base_url", f"an endpoint {section} needs base_url"))
        base_url = table.get("base_url")
        if isinstance(base_url, str) and base_url:
            why = _url_problem(base_url)
            if why:
                p.append(Problem(where, None, f"{section}.base_url", why))
        # secrets come from the environment only: never in the configuration (it is copied into the ledger)
        key_env = table.get("api_key_env")
        if isinstance(key_env, str) and key_env and not re.fullmatch(r"[A-Za-z_]\w{0,127}", key_env,
                                                                       re.ASCII):
            p.append(Problem(where, None, f"{section}.api_key_env",
                             "must be the NAME of an environment variable (letters, digits, '_'), "
                             "never the key itself"))
        path = table.get("path")
        if isinstance(path, str) and path and not path.startswith("/"):
            p.append(Problem(where, None, f"{section}.path", "must start with '/' (it follows base_url)"))
    p.extend(_template_problems(tables["generator"], where))
    retrieval = tables["retrieval"]
    for slot in ("lexical", "ann"):
        table = retrieval.get(slot)
        if isinstance(table, dict) and "kind" in table:
            allowed = tuple(kinds.available("retriever"))
            if table["kind"] not in allowed:
                p.append(Problem(where, None, f"retrieval.{slot}.kind",
                                 f"must be one of {', '.join(allowed)}"))
    for key, table in _plugin_tables(tables):
        p.extend(kinds.plugin_problems(key, table, where))
    return p


def _plugin_tables(tables: dict) -> list[tuple[str, dict]]:
    """(config prefix, table) of every replaceable stage an arm configures."""
    out = [(k, tables[k]) for k in ("chunker", "rerank", "generator")]
    for slot in ("lexical", "ann"):
        table = tables["retrieval"].get(slot)
        if isinstance(table, dict):
            out.append((f"retrieval.{slot}", table))
    return out


def _template_problems(generator: dict, where: str) -> list[Problem]:
    from ledgerscope.pipeline.contracts.prompt import CONTEXT_FIELDS, QUESTION_FIELDS, template_problems

    p: list[Problem] = []
    for key, allowed in (("context_format", CONTEXT_FIELDS), ("question_format", QUESTION_FIELDS)):
        value = generator.get(key)
        if isinstance(value, str):
            why = template_problems(value, allowed)
            if why:
                p.append(Problem(where, None, f"generator.{key}", why))
    question_format = generator.get("question_format")
    if isinstance(question_format, str) and "{context}" not in question_format:
        p.append(Problem(where, None, "generator.question_format",
                         "must hold {context} (where the packed sources go)"))
    return p


#: the largest integer any setting may hold (the ledger stores counts and offsets as int32)
MAX_INT = 2**31 - 1
#: at most this many phases per arm (each is a full pass over the corpus)
MAX_PHASES = 1024
#: stage settings with a lower bound (and, for floats, an upper one), checked before any model loads
_RANGES = {
    "embedding.batch_size": (1, None), "retrieval.bm25_top_n": (0, None), "retrieval.dense_top_n": (0, None),
    "retrieval.ann_top_n": (0, None), "retrieval.bm25_k1": (0, None), "retrieval.bm25_b": (0, 1),
    "retrieval.hnsw.M": (2, None), "retrieval.hnsw.ef_construction": (1, None),
    "retrieval.hnsw.ef_search": (1, None), "retrieval.hnsw.seed": (0, None), "fusion.rrf_k": (0, None),
    "rerank.selection_depth": (0, None), "selection.neighbours": (0, None), "generator.max_tokens": (1, None),
    "generator.temperature": (0, None), "generator.abstain_threshold": (0, 1),
    "generator.abstain_margin": (0, 1), "judge.max_tokens": (1, None), "judge.temperature": (0, None),
    "embedding.dimensions": (0, None),
    **{f"{t}.{k}": r for t in _ENDPOINT_TABLES
       for k, r in (("timeout", (0.001, None)), ("retries", (0, 100)), ("backoff", (0, 600)))},
}


def _range_problems(cfg: ArmConfig, tables: dict, where: str) -> list[Problem]:
    """Numbers the sweep would only trip over after loading models: out of range, too large, NaN."""
    out: list[Problem] = []

    def walk(value: Any, name: str) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, f"{name}.{k}" if name else str(k))
            return
        if isinstance(value, bool) or not isinstance(value, int | float):
            return
        if isinstance(value, float) and not math.isfinite(value):
            out.append(Problem(where, None, name, f"must be a finite number, not {value}"))
            return
        if abs(value) > MAX_INT:
            out.append(Problem(where, None, name, f"{value} is out of range (at most {MAX_INT})"))
            return
        lo, hi = _RANGES.get(name, (None, None))
        if lo is not None and value < lo:
            out.append(Problem(where, None, name, f"must be at least {lo}"))
        elif hi is not None and value > hi:
            out.append(Problem(where, None, name, f"must be at most {hi}"))

    for key in ("capacity", "overlap", "budget_tokens", "top_k", "rerank_depth"):
        walk(getattr(cfg, key), key)
    for key, table in tables.items():
        walk(table, key)
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
            raise ValueError(f"phase label {str(label)[:40]!r}: use letters, digits, '_', '.', '-' "
                             "(it names a directory in the ledger)")
        in_range = isinstance(off, int) and not isinstance(off, bool) and 0 <= off <= MAX_INT
        if not in_range or (stride is not None and off >= stride):
            raise ValueError(f"phase {label!r}: offset {off!r} must be an integer in "
                             f"[0, {stride if stride is not None else MAX_INT + 1})")
        out.append(Phase(str(label), off))
    if len({p.label for p in out}) != len(out):
        raise ValueError("phase labels must be unique")
    if not out:
        raise ValueError("at least one phase is needed")
    return out
