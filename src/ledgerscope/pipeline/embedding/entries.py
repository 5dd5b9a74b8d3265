"""One embedding cache entry as bytes: what the cascade needs for one text, checked on every read.

An entry holds the pooled vector (float32), the token vectors (float16) and their code point
offsets (int32) exactly as the encoder produced them: the encoder rounds token vectors to float16
on every path, so storing them at that precision loses nothing and a cached sweep writes the same
bytes as an uncached one, at half the size of float32 (a 96-token MiniLM unit: 75 KB, not 149 KB).
The header names the model identity and the text's SHA-256 the entry was written for, and a
SHA-256 of the payload follows it, so a truncated or flipped file is detected (:class:`CorruptEntry`)
and a file that answers for another key is refused (:class:`MismatchedEntry`) instead of becoming a
silent wrong vector.
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass

import numpy as np

MAGIC = b"LSEMB2\n"
_HEAD = struct.Struct("<32s32sII")  # model id digest, text digest, dim, n tokens


@dataclass
class Encoded:
    vector: np.ndarray  # (d,) float32, L2-normalised pooled embedding
    tokens: np.ndarray  # (n, d) float32 holding float16 values, L2-normalised, special tokens removed
    offsets: np.ndarray  # (n, 2) int32 code point offsets into the text


class CorruptEntry(ValueError):
    """The file is not a whole, intact entry (truncated, flipped bits, not an entry at all)."""


class MismatchedEntry(ValueError):
    """An intact entry written for another model or another text than the key it was read under."""


def text_digest(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


def pack(model_id: bytes, text_key: bytes, enc: Encoded) -> bytes:
    dim = int(enc.vector.shape[0])
    n = int(enc.tokens.shape[0])
    payload = (
        _HEAD.pack(model_id, text_key, dim, n)
        + np.ascontiguousarray(enc.vector, dtype="<f4").tobytes()
        + np.ascontiguousarray(enc.tokens, dtype="<f2").tobytes()
        + np.ascontiguousarray(enc.offsets, dtype="<i4").tobytes()
    )
    return MAGIC + hashlib.sha256(payload).digest() + payload


def unpack(blob: bytes, model_id: bytes, text_key: bytes) -> Encoded:
    """The entry in ``blob``, which must be intact and written for exactly this model and text."""
    start = len(MAGIC) + 32
    if len(blob) < start + _HEAD.size or not blob.startswith(MAGIC):
        raise CorruptEntry("not a ledgerscope embedding entry (or truncated)")
    payload = blob[start:]
    if hashlib.sha256(payload).digest() != blob[len(MAGIC) : start]:
        raise CorruptEntry("checksum mismatch (truncated or altered)")
    got_model, got_text, dim, n = _HEAD.unpack_from(payload)
    if got_model != model_id or got_text != text_key:
        raise MismatchedEntry(
            "the entry was written for another "
            + ("model" if got_model != model_id else "text")
            + " than the key it is stored under"
        )
    body = payload[_HEAD.size :]
    if len(body) != 4 * dim + 2 * n * dim + 8 * n:
        raise CorruptEntry("sizes in the header do not match the payload")
    vec = np.frombuffer(body, dtype="<f4", count=dim).astype(np.float32)
    tok = np.frombuffer(body, dtype="<f2", count=n * dim, offset=4 * dim).astype(np.float32)
    offs = np.frombuffer(body, dtype="<i4", count=2 * n, offset=4 * dim + 2 * n * dim).astype(np.int32)
    return Encoded(vec, tok.reshape(n, dim), offs.reshape(n, 2))
