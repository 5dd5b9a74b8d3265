"""A tiny cross-encoder for tests and offline demos: no cross-encoder with bundled weights exists
offline, so this one is made from MiniLM's tokenizer and random (seeded) weights. Real forward
passes, random scores: it proves the loading, serving and scoring code, not ranking quality."""

from __future__ import annotations

from pathlib import Path


def write_tiny_cross_encoder(path: Path) -> Path:
    """A randomly initialised (seed 0) 2-layer BERT cross-encoder with MiniLM's tokenizer, saved to
    ``path`` (reused when already there): the only cross-encoder one can make offline."""
    import shutil

    if (path / "config.json").is_file():
        return path
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    from ledgerscope.pipeline.embedding.encoder import resolve_model_path

    torch.manual_seed(0)
    path.mkdir(parents=True, exist_ok=True)
    bundled = Path(resolve_model_path("bundled:all-MiniLM-L6-v2"))
    for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        if (bundled / name).is_file():
            shutil.copy(bundled / name, path / name)
    config = BertConfig(
        vocab_size=30522,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=512,
        num_labels=1,
    )
    BertForSequenceClassification(config).save_pretrained(path)
    return path
