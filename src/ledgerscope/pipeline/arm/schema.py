"""Every arm setting, defined once: its type, default, allowed range or choices and what it does.

The pydantic models below are the single definition. :mod:`.config` validates an arm against them
(strict: no coercion, unknown keys refused) and merges the arm over :func:`defaults`;
:mod:`.schema_text` renders ``ledgerscope config default`` and the key table in docs/config.md
from them. A key's metadata says how the ledger treats it:

* ``optional``: absent from an arm's configuration unless the arm sets it (the code then uses the
  default given here). Keys added after ledger format 2 are optional or ``later``, so an arm that
  does not use them keeps its configuration digest and a recorded ledger still reruns and resumes.
* ``later``: written into every configuration, but left out of the digest while it holds its
  default (the manifests of older ledgers lack it).
* ``digest = False``: never part of the digest (where the model runs is not what the arm is).
* ``seam``: the allowed values are the kinds registered for that seam (:mod:`.kinds`, plugins
  included), checked when the arm is read.

The values the user writes are kept as written (an integer stays an integer where a number is
allowed): the schema checks them, it does not convert them, so digests do not move.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from ledgerscope.pipeline.arm.chunker_spec import ECOSYSTEMS, EXTERNAL_KINDS
from ledgerscope.pipeline.contracts.prompt import (
    CONTEXT_FIELDS,
    DEFAULT_CONTEXT_FORMAT,
    DEFAULT_QUESTION_FORMAT,
    INSTRUCTIONS,
    QUESTION_FIELDS,
    template_problems,
)

#: the largest integer any setting may hold (the ledger stores counts and offsets as int32)
MAX_INT = 2**31 - 1
BUNDLED_MODEL = "bundled:all-MiniLM-L6-v2"
DEVICES = ("cpu", "auto", "cuda", "mps")


def key(
    default: Any,
    doc: str,
    *,
    ge: float | None = None,
    le: float | None = None,
    optional: bool = False,
    later: bool | float = False,
    digest: bool = True,
    seam: str | None = None,
    example: Any = None,
    shown: str | None = None,
    kinds: str | None = None,
    type_message: str | None = None,
    item_message: str | None = None,
    allowed: str | None = None,
) -> Any:
    """One setting: ``default`` is what the code uses when the key is absent; ``example`` is the value
    ``config default`` shows for an optional key (its default when None); ``shown`` replaces a long
    default in the docs; ``seam`` names the table of kinds (:mod:`.kinds`) the value must be one of;
    ``kinds`` says which stage kinds read the key; ``type_message`` / ``item_message`` replace the
    generic message for a value (or a list item) of the wrong type; ``allowed`` says in words what a
    checked value may be."""
    given = {
        "optional": optional,
        "later": later,
        "seam": seam,
        "example": example,
        "shown": shown,
        "kinds": kinds,
        "type_message": type_message,
        "item_message": item_message,
        "allowed": allowed,
    }
    extra = {"digest": digest, **{k: v for k, v in given.items() if v not in (None, False)}}
    return Field(default, description=doc, ge=ge, le=le, json_schema_extra=extra)


def table(model: type[BaseModel], doc: str, **meta: Any) -> Any:
    """A sub-table whose keys take their own defaults (``inline``: written ``{ k = v }`` in
    ``config default``; ``optional``, ``later`` as for :func:`key`)."""
    return Field(default_factory=model, description=doc, json_schema_extra={"digest": True, **meta})


# --- checks of a single value (their messages are what the user reads) -----------------------------

#: what each single-value check allows, in words (the docs table's "allowed" column)
ALLOWED: dict[Any, str] = {}


def _checked(why: Any, allowed: str) -> Any:
    """A pydantic validator raising ``why(value)``'s reason (the message the user reads)."""

    def check(value: Any) -> Any:
        reason = why(value)
        if reason:
            raise ValueError(reason)
        return value

    validator = AfterValidator(check)
    ALLOWED[validator] = allowed
    return validator


def _name_problem(value: str) -> str | None:
    return None if re.fullmatch(r"[A-Za-z0-9_.-]+", value) else "must be letters, digits, '_', '.', '-'"


def url_problem(base_url: str) -> str | None:
    """Why ``base_url`` cannot be an endpoint's root ("" is unset, not a problem)."""
    if not base_url:
        return None
    if not base_url.startswith(("http://", "https://")):
        return "must start with http:// or https://"
    try:
        userinfo = "@" in (urlsplit(base_url).netloc or "")
    except ValueError as exc:
        return f"is not a URL ({exc})"
    if userinfo:
        return (
            "must not carry credentials (user:key@); put the key in the environment variable "
            "named by api_key_env"
        )
    return None


def _key_env_problem(value: str) -> str | None:
    # secrets come from the environment only: never in the configuration (it is copied into the ledger)
    if value and not re.fullmatch(r"[A-Za-z_]\w{0,127}", value, re.ASCII):
        return "must be the NAME of an environment variable (letters, digits, '_'), never the key itself"
    return None


def _path_problem(value: str) -> str | None:
    return "must start with '/' (it follows base_url)" if value and not value.startswith("/") else None


def _context_problem(value: str) -> str | None:
    return template_problems(value, CONTEXT_FIELDS)


def _question_problem(value: str) -> str | None:
    return template_problems(value, QUESTION_FIELDS) or (
        None if "{context}" in value else "must hold {context} (where the packed sources go)"
    )


def _device_problem(value: str) -> str | None:
    return None if value.lower() in DEVICES else f"must be one of {', '.join(DEVICES)}"


Name = Annotated[str, _checked(_name_problem, "letters, digits, _ . -")]
Url = Annotated[str, _checked(url_problem, "an http:// or https:// URL without credentials")]
KeyEnv = Annotated[str, _checked(_key_env_problem, "an environment variable's name")]
UrlPath = Annotated[str, _checked(_path_problem, "starts with /")]
Device = Annotated[str, _checked(_device_problem, " | ".join(DEVICES))]
ContextFormat = Annotated[str, _checked(_context_problem, "fields {label} {doc_id} {unit_id} {text}")]
QuestionFormat = Annotated[str, _checked(_question_problem, "fields {context} {question} ({context} needed)")]
Labels = list[str]


_COUNT = "must be a non-negative integer"


class _Table(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", validate_default=False)


# --- the stage tables ---------------------------------------------------------------------------------

#: the kinds the external splitters' keys apply to (:mod:`.chunker_spec` checks it)
_EXTERNAL = ", ".join(ECOSYSTEMS)


class Chunker(_Table):
    """How documents are cut into units. Perturbation rule of the sentence chunker: phase k puts the
    first k sentences in a unit of their own; of the external splitters: phase p forces one cut at
    token p and splits each side separately (docs/pipelines.md, "Chunkers"). Plugin chunkers (an
    entry point in ``ledgerscope.stages``) take their keyword arguments in ``options`` too."""

    kind: str = key(
        "token",
        "token | sentence (whole sentences packed up to capacity) | langchain | "
        "llamaindex | chonkie | python (external splitters) | a plugin kind",
        seam="chunker",
    )
    splitter: str = key(
        "",
        "the splitter class (llamaindex: SentenceSplitter, TokenTextSplitter; chonkie: "
        "TokenChunker, SentenceChunker, RecursiveChunker)",
        optional=True,
        example="RecursiveCharacterTextSplitter",
        kinds=_EXTERNAL,
    )
    options: dict = key(
        {},
        "keyword arguments of the splitter class (or of a plugin chunker)",
        optional=True,
        example={"chunk_size": 400, "chunk_overlap": 40},
        kinds=_EXTERNAL,
    )
    length: Literal["library", "characters", "tokens"] = key(
        "library",
        "what chunk_size counts: library (its default) | characters | tokens (the arm's)",
        optional=True,
        kinds=_EXTERNAL,
    )
    callable: str = key(
        "",
        "(text) -> list of (start, end) code-point intervals",
        optional=True,
        example="package.module:function",
        kinds="python",
    )
    phase_span_tokens: int = key(
        None,
        "the tokens auto:N spreads the forced cut over (default: the chunk size)",
        ge=1,
        optional=True,
        example=200,
        shown="the chunk size",
        kinds=", ".join(EXTERNAL_KINDS),
    )


def _timeout() -> Any:
    return key(60.0, "endpoint: seconds per request", ge=0.001, optional=True, kinds="endpoint")


def _retries(default: int) -> Any:
    return key(
        default,
        "endpoint: retries of a failed request (network errors, timeouts, 408, 429, 5xx)",
        ge=0,
        le=100,
        optional=True,
        kinds="endpoint",
    )


def _backoff() -> Any:
    return key(
        0.5,
        "endpoint: seconds to wait times the attempt number between retries",
        ge=0,
        le=600,
        optional=True,
        kinds="endpoint",
    )


class Embedding(_Table):
    """The embedding model: dense retrieval, the MaxSim reranker, the extractive reader's sentences."""

    model: str = key(BUNDLED_MODEL, "any sentence-transformers name or path (endpoint: the server's model)")
    batch_size: int = key(64, "texts per forward batch (left at 64: a GPU gets a larger one)", ge=1)
    kind: Literal["sentence-transformers", "endpoint"] = key(
        "sentence-transformers",
        "sentence-transformers (in process) | endpoint (an OpenAI-compatible POST /v1/embeddings server)",
        optional=True,
    )
    base_url: Url = key(
        "",
        "endpoint: the server (no credentials in the URL)",
        optional=True,
        example="http://127.0.0.1:8080",
        kinds="endpoint",
    )
    path: UrlPath = key(
        "/v1/embeddings", "endpoint: the request path under base_url", optional=True, kinds="endpoint"
    )
    api_key_env: KeyEnv = key(
        "",
        "endpoint: NAME of the environment variable holding the key",
        optional=True,
        example="EMBEDDINGS_KEY",
        kinds="endpoint",
    )
    timeout: float = _timeout()
    retries: int = _retries(2)
    backoff: float = _backoff()
    dimensions: int = key(
        0,
        "endpoint: expected vector size (0: learnt from a probe request)",
        ge=0,
        optional=True,
        kinds="endpoint",
    )
    tokenizer: str = key(
        "",
        "chunk offsets and budget counting: a Hugging Face tokenizer name or path "
        "(\"\": the model's own; with an endpoint, the bundled MiniLM's)",
        optional=True,
    )
    device: Device = key(
        "cpu",
        "where the model runs: cpu | auto | cuda | mps (recorded in the manifest)",
        optional=True,
        digest=False,
    )


class Hnsw(_Table):
    """The production dense index (hnswlib)."""

    M: int = key(16, "graph degree", ge=2)
    ef_construction: int = key(200, "candidate list while building", ge=1)
    ef_search: int = key(64, "candidate list while searching", ge=1)
    seed: int = key(0, "the index's random seed", ge=0)


class Slot(_Table):
    """A production retriever slot, replaceable: ``kind = "python"`` with ``callable``, or a plugin kind."""

    kind: str = key(
        "",
        "bm25 | hnsw | exact | python | a plugin kind",
        optional=True,
        seam="retriever",
        example="python",
        shown="bm25 in lexical, hnsw in ann",
    )
    callable: str = key(
        "",
        'kind = "python": RetrievalRequest -> list of ScoredUnit',
        optional=True,
        example="package.module:function",
        kinds="python",
    )
    options: dict = key({}, "passed to the callable or plugin", optional=True)


class Retrieval(_Table):
    """The three retrievers: exact BM25, exact dense (numpy) and the production ANN index. Exact dense
    search stays the reference the ANN slot is judged by."""

    bm25_top_n: int = key(50, "exact BM25 depth", ge=0)
    dense_top_n: int = key(50, "exact (numpy) dense depth, recorded for the exact-vs-ANN diagnosis", ge=0)
    ann_top_n: int = key(50, "production dense depth (hnswlib)", ge=0)
    bm25_k1: float = key(1.5, "BM25 term-frequency saturation", ge=0)
    bm25_b: float = key(0.75, "BM25 length normalisation", ge=0, le=1)
    hnsw: Hnsw = table(Hnsw, "the production dense index (hnswlib)")
    lexical: Slot = table(Slot, "the production lexical slot (default: BM25)", optional=True)
    ann: Slot = table(Slot, "the production dense slot (default: HNSW)", optional=True)


class Weights(_Table):
    """Per-retriever weights of the fusion."""

    bm25: float = key(1.0, "weight of the lexical list")
    dense: float = key(1.0, "weight of the dense list")


class Fusion(_Table):
    """How the lexical and dense candidate lists are fused."""

    method: Literal["rrf", "combsum", "combmnz"] = key("rrf", "rrf | combsum | combmnz")
    rrf_k: int = key(60, "the RRF constant", ge=0)
    weights: Weights = table(Weights, "per-retriever weights", inline=True)


class Rerank(_Table):
    """The reranker of the fused candidates (with ``[embedding] kind = "endpoint"`` the default is
    ``none``: MaxSim needs the embedding model's token vectors)."""

    kind: str = key(
        "maxsim",
        "maxsim (late interaction over the embedding model's tokens) | cross-encoder "
        "| none | endpoint (POST /v1/rerank) | python | a plugin kind",
        seam="reranker",
    )
    model: str = key("", 'cross-encoder name or path (kind = "cross-encoder"); endpoint: the server\'s model')
    selection_depth: int = key(10, "the reranked list is cut here before selection", ge=0)
    base_url: Url = key(
        "", "endpoint: the server", optional=True, example="http://127.0.0.1:8080", kinds="endpoint"
    )
    path: UrlPath = key(
        "/v1/rerank", "endpoint: the request path under base_url", optional=True, kinds="endpoint"
    )
    api_key_env: KeyEnv = key(
        "",
        "endpoint: NAME of the environment variable holding the key",
        optional=True,
        example="RERANK_KEY",
        kinds="endpoint",
    )
    timeout: float = _timeout()
    retries: int = _retries(2)
    backoff: float = _backoff()
    callable: str = key(
        "",
        'kind = "python": RerankRequest -> one score per candidate',
        optional=True,
        example="package.module:function",
        kinds="python",
    )
    options: dict = key({}, "passed to the callable or plugin", optional=True)


class Selection(_Table):
    """What reaches the generator: the budget view (primary) and the top-k view, both recorded."""

    mode: Literal["budget", "top-k"] = key(
        "budget", "budget (primary view) | top-k; the other view is recorded too"
    )
    expansion: Literal["none", "neighbours"] = key(
        "none", "none | neighbours (adds adjacent units of the same source version)"
    )
    neighbours: int = key(1, "units added on each side with expansion = neighbours", ge=0)
    dedup: bool = key(True, "identical source intervals are packed once")


class Generator(_Table):
    """The answer: the embedded extractive reader, or any OpenAI-compatible chat server."""

    kind: str = key(
        "extractive",
        "extractive (embedded, no server) | endpoint (OpenAI-compatible HTTP) | python | a plugin kind",
        seam="generator",
    )
    # the reader's two abstention defaults come from the trade-off curve in docs/benchmarks.md
    # (scripts/bench_reader.py): oracle correct rate against false assertions on unanswerable controls
    abstain_threshold: float = key(
        0.1, "extractive reader: abstain when the best sentence scores below this", ge=0, le=1
    )
    # later=0.06: the default when the key was added; ledgers written then keep their digests (issue 26)
    abstain_margin: float = key(
        0.1,
        "... or when its answer leads the next best by less than this (a merely topical context)",
        ge=0,
        le=1,
        later=0.06,
    )
    base_url: Url = key("", "endpoint: e.g. http://127.0.0.1:8080")
    model: str = key("", "endpoint: model name")
    api_key_env: KeyEnv = key(
        "", "endpoint: NAME of the environment variable holding the key (never the key)"
    )
    max_tokens: int = key(128, "longest answer, in tokens", ge=1)
    temperature: float = key(0.0, "sampling temperature", ge=0)
    system: str = key(
        INSTRUCTIONS,
        "the prompt's instructions; an endpoint sends them as the system message",
        optional=True,
        example="...",
        shown="the built-in instructions",
    )
    context_format: ContextFormat = key(
        DEFAULT_CONTEXT_FORMAT, "one packed unit: {label} {doc_id} {unit_id} {text}", optional=True
    )
    question_format: QuestionFormat = key(
        DEFAULT_QUESTION_FORMAT, "the user turn: {context} (required) {question}", optional=True
    )
    timeout: float = _timeout()
    retries: int = _retries(1)
    backoff: float = _backoff()
    reader_model: str = key(
        BUNDLED_MODEL, "the extractive reader's model with endpoint embeddings", optional=True
    )
    callable: str = key(
        "",
        'kind = "python": GenerationRequest -> GenerationResult or the text',
        optional=True,
        example="package.module:function",
        kinds="python",
    )
    options: dict = key({}, "passed to the callable or plugin", optional=True)


class Judge(_Table):
    """Answer verdicts: deterministic rules (rules/judge.py), or an LLM with a fixed rubric
    (pipeline/judging/judge_llm.py; never the default: calibrate it first with ``ledgerscope judge
    calibrate``)."""

    kind: Literal["deterministic", "endpoint"] = key("deterministic", "deterministic | endpoint")
    base_url: Url = key("", "endpoint: e.g. http://127.0.0.1:8080")
    model: str = key("", "endpoint: model name")
    api_key_env: KeyEnv = key(
        "", "endpoint: NAME of the environment variable holding the key (never the key)"
    )
    max_tokens: int = key(16, "longest verdict, in tokens", ge=1)
    temperature: float = key(0.0, "sampling temperature", ge=0)


class Access(_Table):
    """What the reader of this arm may see."""

    clearance: Labels = key(
        [],
        "labels this reader holds; a source is visible when all its labels are held",
        item_message="must be a list of labels",
    )


class Arm(_Table):
    """One arm. The keys users type most sit at the top level; everything else is grouped by stage."""

    name: Name = key(
        "candidate",
        "labels the arm in the ledger (it names a directory there)",
        type_message="must be letters, digits, '_', '.', '-'",
    )
    capacity: int = key(
        96,
        "tokens per unit (embedding tokenizer); interior units have exactly this",
        ge=1,
        type_message=_COUNT,
    )
    overlap: int = key(
        0,
        "tokens each unit extends into the next core; stride = capacity - overlap",
        ge=0,
        type_message=_COUNT,
    )
    phases: Any = key(
        "auto:8",
        '"auto:N" = N labels evenly spread over the stride, or a list of offsets '
        "[0, 5, 11], or a table { a = 0, b = 5 }",
        allowed="auto:N (N <= 1024), or offsets in [0, stride) (a string, list or table)",
    )
    edge_policy: Literal["keep-short", "merge-short"] = key(
        "keep-short", "keep-short: shorter edge units are kept | merge-short: folded into a neighbour"
    )
    budget_tokens: int = key(
        320, "evidence budget (generator tokens, labels and separators included)", ge=0, type_message=_COUNT
    )
    top_k: int = key(4, "the secondary view: a fixed number of reranked units", ge=1, type_message=_COUNT)
    rerank_depth: int = key(30, "fused candidates handed to the reranker", ge=1, type_message=_COUNT)
    phase_scope: Literal["all", "evidence"] = key(
        "all",
        "which documents are re-chunked per phase: all, or only those holding gold support plus "
        "the distractors reaching candidate lists at the base phase",
        later=True,
    )
    chunker: Chunker = table(Chunker, "how documents are cut into units")
    embedding: Embedding = table(Embedding, "the embedding model")
    retrieval: Retrieval = table(Retrieval, "the three retrievers")
    fusion: Fusion = table(Fusion, "how the lexical and dense candidate lists are fused")
    rerank: Rerank = table(Rerank, "the reranker")
    selection: Selection = table(Selection, "what reaches the generator")
    generator: Generator = table(Generator, "the answer")
    judge: Judge = table(Judge, "answer verdicts", later=True)
    access: Access = table(Access, "what the reader of this arm may see")


# --- reading the definition ---------------------------------------------------------------------------


def meta(info: Any) -> dict:
    """A key's metadata (see :func:`key`)."""
    extra = info.json_schema_extra
    return extra if isinstance(extra, dict) else {}


def submodel(info: Any) -> type[BaseModel] | None:
    """The model of a sub-table key, None for a plain value."""
    kind = info.annotation
    return kind if isinstance(kind, type) and issubclass(kind, BaseModel) else None


def field_info(path: tuple[str, ...]) -> Any:
    """The definition of the key at ``path`` (``("retrieval", "hnsw", "M")``); None when unknown."""
    model: type[BaseModel] | None = Arm
    info = None
    for name in path:
        if model is None or name not in model.model_fields:
            return None
        info = model.model_fields[name]
        model = submodel(info)
    return info


def applies(model: type[BaseModel]) -> dict[str, tuple[str, ...]]:
    """The keys of a table that only some stage kinds read, with those kinds."""
    return {
        name: tuple(k.strip() for k in meta(info)["kinds"].split(","))
        for name, info in model.model_fields.items()
        if meta(info).get("kinds")
    }


def defaults(model: type[BaseModel] = Arm) -> dict:
    """The table an arm that sets nothing gets: every key that is not optional, at its default."""
    out: dict = {}
    for name, info in model.model_fields.items():
        if meta(info).get("optional"):
            continue
        sub = submodel(info)
        out[name] = defaults(sub) if sub is not None else _copy(info.default)
    return out


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    return list(value) if isinstance(value, list) else value


def default_of(path: str) -> Any:
    """The value the code uses for ``path`` (``"embedding.timeout"``) when an arm does not set it."""
    info = field_info(tuple(path.split(".")))
    if info is None:
        raise KeyError(path)
    sub = submodel(info)
    return defaults(sub) if sub is not None else _copy(info.default)


def digest_neutral(path: tuple[str, ...]) -> Any:
    """The value a ``later`` key is left out of the digest at: its default when it was added (a number
    given as ``later``), else its current default."""
    info = field_info(path)
    value = meta(info).get("later") if info is not None else None
    return default_of(".".join(path)) if value is True else value


def keys_where(
    flag: str, model: type[BaseModel] = Arm, prefix: tuple[str, ...] = ()
) -> list[tuple[str, ...]]:
    """The paths of every key whose metadata sets ``flag`` (``later``; ``digest`` is tested for False)."""
    out = []
    for name, info in model.model_fields.items():
        path = (*prefix, name)
        value = meta(info).get(flag)
        if (flag == "digest" and value is False) or (flag != "digest" and value):
            out.append(path)
        sub = submodel(info)
        if sub is not None:
            out.extend(keys_where(flag, sub, path))
    return out
