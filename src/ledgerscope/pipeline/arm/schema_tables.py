"""The stage tables of an arm's settings, one model per TOML table (``[chunker]``, ``[embedding]``,
``[retrieval]`` and its slots, ``[fusion]``, ``[rerank]``, ``[selection]``, ``[generator]``,
``[judge]``, ``[access]``); :mod:`.schema` gathers them under :class:`.schema.Arm`."""

from __future__ import annotations

from typing import Any, Literal

from ledgerscope.pipeline.arm.chunker_spec import ECOSYSTEMS, EXTERNAL_KINDS
from ledgerscope.pipeline.arm.schema_keys import (
    BUNDLED_MODEL,
    ContextFormat,
    Device,
    KeyEnv,
    Labels,
    QuestionFormat,
    StrictTable,
    Url,
    UrlPath,
    key,
    table,
)
from ledgerscope.pipeline.contracts.prompt import (
    DEFAULT_CONTEXT_FORMAT,
    DEFAULT_QUESTION_FORMAT,
    INSTRUCTIONS,
)

#: the kinds the external splitters' keys apply to (:mod:`.chunker_spec` checks it)
_EXTERNAL = ", ".join(ECOSYSTEMS)


class Chunker(StrictTable):
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


def _request_path(default: str) -> Any:
    return key(default, "endpoint: the request path under base_url", optional=True, kinds="endpoint")


def _key_env(example: str) -> Any:
    return key(
        "",
        "endpoint: NAME of the environment variable holding the key",
        optional=True,
        example=example,
        kinds="endpoint",
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


class Embedding(StrictTable):
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
    path: UrlPath = _request_path("/v1/embeddings")
    api_key_env: KeyEnv = _key_env("EMBEDDINGS_KEY")
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


class Hnsw(StrictTable):
    """The production dense index (hnswlib)."""

    M: int = key(16, "graph degree", ge=2)
    ef_construction: int = key(200, "candidate list while building", ge=1)
    ef_search: int = key(64, "candidate list while searching", ge=1)
    seed: int = key(0, "the index's random seed", ge=0)


class Slot(StrictTable):
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


class Retrieval(StrictTable):
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


class Weights(StrictTable):
    """Per-retriever weights of the fusion."""

    bm25: float = key(1.0, "weight of the lexical list")
    dense: float = key(1.0, "weight of the dense list")


class Fusion(StrictTable):
    """How the lexical and dense candidate lists are fused."""

    method: Literal["rrf", "combsum", "combmnz"] = key("rrf", "rrf | combsum | combmnz")
    rrf_k: int = key(60, "the RRF constant", ge=0)
    weights: Weights = table(Weights, "per-retriever weights", inline=True)


class Rerank(StrictTable):
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
    path: UrlPath = _request_path("/v1/rerank")
    api_key_env: KeyEnv = _key_env("RERANK_KEY")
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


class Selection(StrictTable):
    """What reaches the generator: the budget view (primary) and the top-k view, both recorded."""

    mode: Literal["budget", "top-k"] = key(
        "budget", "budget (primary view) | top-k; the other view is recorded too"
    )
    expansion: Literal["none", "neighbours"] = key(
        "none", "none | neighbours (adds adjacent units of the same source version)"
    )
    neighbours: int = key(1, "units added on each side with expansion = neighbours", ge=0)
    dedup: bool = key(True, "identical source intervals are packed once")


class Generator(StrictTable):
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


class Judge(StrictTable):
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


class Access(StrictTable):
    """What the reader of this arm may see."""

    clearance: Labels = key(
        [],
        "labels this reader holds; a source is visible when all its labels are held",
        item_message="must be a list of labels",
    )
