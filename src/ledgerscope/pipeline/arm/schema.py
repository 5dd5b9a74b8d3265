"""Every arm setting, defined once: its type, default, allowed range or choices and what it does.

The pydantic models are the single definition: :class:`Arm` here, its stage tables in
:mod:`.schema_tables`, the way a key is declared and a single value checked in :mod:`.schema_keys`
(this module re-exports what other modules read, so ``schema.Chunker`` and ``schema.MAX_INT`` stay
where they were). :mod:`.config` validates an arm against them
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

from typing import Any, Literal

from pydantic import BaseModel

from ledgerscope.pipeline.arm.schema_keys import (
    ALLOWED,
    BUNDLED_MODEL,
    COUNT,
    DEVICES,
    MAX_INT,
    Name,
    StrictTable,
    key,
    table,
    url_problem,
)
from ledgerscope.pipeline.arm.schema_tables import (
    Access,
    Chunker,
    Embedding,
    Fusion,
    Generator,
    Hnsw,
    Judge,
    Rerank,
    Retrieval,
    Selection,
    Slot,
    Weights,
)

#: what other modules read from here (defined here or in .schema_keys and .schema_tables)
__all__ = [
    "ALLOWED",
    "BUNDLED_MODEL",
    "DEVICES",
    "MAX_INT",
    "Access",
    "Arm",
    "Chunker",
    "Embedding",
    "Fusion",
    "Generator",
    "Hnsw",
    "Judge",
    "Rerank",
    "Retrieval",
    "Selection",
    "Slot",
    "Weights",
    "applies",
    "default_of",
    "defaults",
    "digest_neutral",
    "field_info",
    "key",
    "keys_where",
    "meta",
    "submodel",
    "table",
    "url_problem",
]


class Arm(StrictTable):
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
        type_message=COUNT,
    )
    overlap: int = key(
        0,
        "tokens each unit extends into the next core; stride = capacity - overlap",
        ge=0,
        type_message=COUNT,
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
        320, "evidence budget (generator tokens, labels and separators included)", ge=0, type_message=COUNT
    )
    top_k: int = key(4, "the secondary view: a fixed number of reranked units", ge=1, type_message=COUNT)
    rerank_depth: int = key(30, "fused candidates handed to the reranker", ge=1, type_message=COUNT)
    phase_scope: Literal["all", "evidence"] = key(
        "all",
        "which documents are re-chunked per phase: all, or only those holding gold support plus "
        "the distractors the reader saw (packed context and top-k view) at the base phase",
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
