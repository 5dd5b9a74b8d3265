"""The persistent embedding cache and the batch-shape invariant encoder it relies on.

* The same texts give the same bits in any order, and from the cache.
* Two sweeps racing on one cache, a corrupted entry, an entry under the wrong key, another model
  under the same name, and a full disk (a real 64 KiB tmpfs) while writing.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ledgerscope.ledger.read import connect
from ledgerscope.pipeline.embedding.cache import CacheError, EmbeddingCache, entries, info, prune
from ledgerscope.pipeline.embedding.encoder import Encoder, resolve_model_path, shared_encoder

_PHRASE = (
    "the party shall not disclose confidential information to third parties without prior "
    "written consent of the disclosing party except as required by law"
)
WORDS = tuple(_PHRASE.split())


def _texts(n: int, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, size=int(rng.integers(2, 40)))) for _ in range(n)]


def _bytes(enc) -> bytes:
    return enc.vector.tobytes() + enc.tokens.tobytes() + enc.offsets.tobytes()


@pytest.fixture(scope="module")
def encoder() -> Encoder:
    return shared_encoder()


def _with_store(encoder: Encoder, root: Path) -> Encoder:
    """The loaded model with empty memory and a store at ``root`` (no second model load)."""
    encoder.forget()
    encoder.store = EmbeddingCache(root, encoder.model_id(), {"name": encoder.name})
    encoder.forward_texts = 0
    return encoder


def test_the_same_texts_encode_to_the_same_bits_in_any_order(encoder):
    """The same set of texts in another order: the same bits."""
    texts = _texts(24)
    encoder.forget()
    encoder.encode(texts)
    first = {t: _bytes(encoder.get(t)) for t in texts}
    encoder.forget()
    encoder.encode(list(reversed(texts)))
    assert {t: _bytes(encoder.get(t)) for t in texts} == first


def test_a_texts_bits_do_not_depend_on_what_is_encoded_with_it(encoder):
    """Alone, in a subset, among other texts of its token count or padded among longer ones in the
    old rule's sense: one token count per batch, at least two rows, so the bits are the text's own.
    This is what lets an arm read vectors another arm's sweep cached, and a resumed sweep re-encode
    a subset, and still write an uncached sweep's bytes."""
    texts = _texts(80, seed=3)
    encoder.forget()
    encoder.encode(texts)
    together = {t: _bytes(encoder.get(t)) for t in texts}
    for pick in (texts[:1], texts[5:6], texts[::7], texts[40:], [*texts[10:30], *_texts(30, seed=9)]):
        encoder.forget()
        encoder.encode(pick)
        mine = [t for t in pick if t in together]
        assert {t: _bytes(encoder.get(t)) for t in mine} == {t: together[t] for t in mine}
    small = Encoder(encoder.name, batch_size=3, cache=False)  # other cuts of the same counts
    small.encode(texts[:24])
    assert {t: _bytes(small.get(t)) for t in texts[:24]} == {t: together[t] for t in texts[:24]}


def test_token_vectors_hold_float16_values(encoder):
    """The precision the cache stores, on the uncached path too (so both write the same bytes)."""
    encoder.forget()
    enc = encoder.get(_texts(1, seed=4)[0])
    assert np.array_equal(enc.tokens, enc.tokens.astype(np.float16).astype(np.float32))
    assert enc.vector.dtype == np.float32 and enc.tokens.dtype == np.float32


def test_cached_vectors_are_the_fresh_bits(encoder, tmp_path):
    texts = _texts(12, seed=1)
    enc = _with_store(encoder, tmp_path / "cache")
    enc.encode(texts)
    fresh = {t: _bytes(enc.get(t)) for t in texts}
    assert enc.forward_texts == len(set(texts)) and enc.store.hits == 0
    enc = _with_store(encoder, tmp_path / "cache")
    enc.encode(texts)
    assert enc.forward_texts == 0 and enc.store.hits == len(set(texts))
    assert {t: _bytes(enc.get(t)) for t in texts} == fresh
    assert info(tmp_path / "cache")[0]["entries"] == len(set(texts))


def test_a_corrupted_entry_is_re_encoded_and_said(encoder, tmp_path):
    texts = _texts(5, seed=2)
    enc = _with_store(encoder, tmp_path / "c")
    enc.encode(texts)
    want = _bytes(enc.get(texts[0]))
    path = enc.store.path(
        __import__("ledgerscope.pipeline.embedding.entries", fromlist=["x"]).text_digest(texts[0])
    )
    blob = bytearray(path.read_bytes())
    blob[-7] ^= 0x01  # one flipped bit in a token vector
    path.write_bytes(bytes(blob))
    enc = _with_store(encoder, tmp_path / "c")
    enc.encode(texts)
    assert enc.forward_texts == 1 and enc.store.hits == 4
    assert _bytes(enc.get(texts[0])) == want
    assert any("corrupt entry re-encoded" in m and "checksum" in m for m in enc.cache_report()["messages"])


def test_an_entry_under_another_texts_key_is_an_error(encoder, tmp_path):
    from ledgerscope.pipeline.embedding.entries import text_digest

    a, b = _texts(2, seed=3)
    enc = _with_store(encoder, tmp_path / "c")
    enc.encode([a, b])
    shutil.copyfile(enc.store.path(text_digest(a)), enc.store.path(text_digest(b)))
    enc = _with_store(encoder, tmp_path / "c")
    with pytest.raises(CacheError, match="another text"):
        enc.encode([b])
    assert prune(tmp_path / "c", 1 << 40, verify=True)["invalid"] == 1


def test_another_model_with_the_same_name_never_hits(tmp_path):
    """The same path, other weights (one layer's feed-forward scaled): another model id, no hits."""
    from safetensors.numpy import load_file, save_file

    model = tmp_path / "minilm"
    shutil.copytree(resolve_model_path("bundled:all-MiniLM-L6-v2"), model)
    texts = _texts(6, seed=4)
    first = Encoder(str(model))
    first.store = EmbeddingCache(tmp_path / "c", first.model_id())
    first.encode(texts)
    weights = load_file(str(model / "model.safetensors"))
    name = next(k for k in weights if k.endswith("intermediate.dense.weight"))
    weights[name] = weights[name] * np.float32(1.5)
    save_file(weights, str(model / "model.safetensors"), metadata={"format": "pt"})
    second = Encoder(str(model))
    assert second.model_id() != first.model_id()
    second.store = EmbeddingCache(tmp_path / "c", second.model_id())
    second.encode(texts)
    assert second.store.hits == 0 and second.forward_texts == len(set(texts))
    assert not np.array_equal(first.get(texts[0]).vector, second.get(texts[0]).vector)


def test_prune_evicts_least_recently_used_first(encoder, tmp_path):
    texts = _texts(10, seed=5)
    enc = _with_store(encoder, tmp_path / "c")
    enc.encode(texts)
    found = sorted(entries(tmp_path / "c"), key=lambda e: e.path.name)
    for i, e in enumerate(found):
        os.utime(e.path, (1000 + i, 1000 + i))
    limit = sum(e.size for e in found[5:])
    done = prune(tmp_path / "c", limit)
    assert done["evicted"] == 5
    assert sorted(e.path for e in entries(tmp_path / "c")) == sorted(e.path for e in found[5:])


def test_with_the_cache_a_reused_text_leaves_memory_and_comes_back_from_disk(encoder, tmp_path):
    """About a third of an arm's unit texts recur in another arm's partitions. With the persistent
    cache they leave memory after each partition anyway (memory stays one partition's) and come
    back from disk, not the model, counted once; without it the sweep keeps them until last use."""
    from ledgerscope.pipeline.run.sweep import drop_phase_texts

    text, kept = _texts(2, seed=11)
    enc = _with_store(encoder, tmp_path / "c")
    enc.encode([text, kept])
    before = _bytes(enc.get(text))
    needed_later = {(id(enc), text): 5}
    drop_phase_texts([enc], {text, kept}, {kept}, needed_later, position=1)
    assert text not in enc._cache and kept in enc._cache
    enc.encode([text])
    assert (enc.forward_texts, enc.store.hits) == (2, 0)  # read back: not encoded, not a hit
    assert _bytes(enc.get(text)) == before
    enc.store = None  # the cache off: nothing to read it back from
    drop_phase_texts([enc], {text}, set(), needed_later, position=1)
    assert text in enc._cache
    drop_phase_texts([enc], {text}, set(), needed_later, position=5)
    assert text not in enc._cache


@pytest.mark.slow
def test_the_estimates_calibration_times_its_passes_and_writes_nothing_to_the_cache(encoder, tmp_path):
    """``sweep --estimate`` runs one small real partition: every forward pass is timed (both rates
    fitted), the model's load is the encoder's own figure (whoever loaded it), and the persistent
    cache gets none of its vectors (the sweep must encode what the plan said)."""
    from ledgerscope.inputs.fixtures import load_fixtures
    from ledgerscope.inputs.sources import load_corpus
    from ledgerscope.pipeline.arm.config import load_arm
    from ledgerscope.pipeline.run.costs.calibrate import calibrate_arm

    from .sweep_data import write_inputs

    paths = write_inputs(tmp_path / "in")
    fixtures, corpus = load_fixtures(paths["fixtures"], load_corpus(paths["corpus"]))
    enc = _with_store(encoder, tmp_path / "c")
    rates = calibrate_arm(load_arm(paths["candidate"]), fixtures, corpus, lambda *a, **k: enc)
    assert enc.store is not None and entries(tmp_path / "c") == [] and enc.forward_texts > 0
    assert rates["passes_timed"] >= 4 and rates["forward"]["seconds_per_position"] > 0
    assert rates["load_seconds"] == round(enc.load_seconds, 3) > 0
    assert rates["plans_last_use"] is False  # a cache that reads back: the sweep plans no last uses
    assert rates["per_question"]["other"] >= 0 and rates["sample_units"] > 0
    enc.store = None


# -- sweeps -------------------------------------------------------------------------------------


def _content(ledger: Path) -> list:
    con = connect(ledger)
    return (
        con.execute("SELECT * EXCLUDE (latency_ms) FROM records ORDER BY ALL").fetchall()
        if "latency_ms" in [c[0] for c in con.execute("DESCRIBE records").fetchall()]
        else con.execute("SELECT * FROM records ORDER BY ALL").fetchall()
    ) + con.execute("SELECT * FROM candidates ORDER BY ALL").fetchall()


#: said at exit by every sweep process: whether sentence-transformers (the model) was ever imported
_LOADED = (
    "import atexit, sys; atexit.register(lambda: print('model imported:', "
    "'sentence_transformers' in sys.modules)); from ledgerscope.cli.main import main; main()"
)


def _sweep_cmd(inputs: dict, out: Path, arm: str = "candidate") -> list[str]:
    return [
        sys.executable,
        "-c",
        _LOADED,
        "sweep",
        "--fixtures",
        str(inputs["fixtures"]),
        "--corpus",
        str(inputs["corpus"]),
        "--arm",
        str(inputs[arm]),
        "--out",
        str(out),
        "--quiet",
    ]


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    from tests.sweep_data import write_inputs

    root = tmp_path_factory.mktemp("cache_inputs")
    inputs = write_inputs(root, phases="[0, 5]")
    env = {**os.environ, "LEDGERSCOPE_EMBEDDING_CACHE": "off"}
    subprocess.run(_sweep_cmd(inputs, root / "uncached"), check=True, env=env, capture_output=True)
    return inputs, root / "uncached"


def test_two_sweeps_racing_on_one_cache_write_the_uncached_ledger(small, tmp_path):
    inputs, uncached = small
    env = {**os.environ, "LEDGERSCOPE_EMBEDDING_CACHE": str(tmp_path / "cache")}
    procs = [
        subprocess.Popen(
            _sweep_cmd(inputs, tmp_path / f"l{i}"),
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for i in range(2)
    ]
    outs = [p.communicate(timeout=600)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert prune(tmp_path / "cache", 1 << 40, verify=True)["invalid"] == 0
    third = subprocess.run(
        _sweep_cmd(inputs, tmp_path / "l2"), env=env, capture_output=True, text=True, check=True
    )
    # and no "(N s in the model)": it ran none
    assert " 0 encoded, " in " ".join(third.stdout.split()), third.stdout
    assert "model imported: False" in third.stdout, "a sweep with every text cached loaded the model"
    for i in range(3):
        assert _content(tmp_path / f"l{i}") == _content(uncached)


def test_an_arm_reading_what_another_arm_cached_writes_the_uncached_ledger(small, tmp_path):
    """The added-arm case: the baseline (other overlap) fills the cache, then the candidate finds
    part of its texts there (questions, aligned units) and encodes the rest; its ledger is the
    uncached one byte for byte, because a text's bits do not depend on its batch."""
    inputs, uncached = small
    env = {**os.environ, "LEDGERSCOPE_EMBEDDING_CACHE": str(tmp_path / "cache")}
    subprocess.run(
        _sweep_cmd(inputs, tmp_path / "b", arm="baseline"), env=env, check=True, capture_output=True
    )
    run = subprocess.run(
        _sweep_cmd(inputs, tmp_path / "c"), env=env, capture_output=True, text=True, check=True
    )
    said = " ".join(run.stdout.split())
    found = re.search(
        r"texts: (\d+) from the embedding cache, (\d+) encoded "
        r"\(([\d.]+) s in the model\), ([\d.]+) s",
        said,
    )
    assert found and int(found.group(1)) > 0 and int(found.group(2)) > 0, run.stdout
    assert float(found.group(3)) < float(found.group(4)), said  # the model took part of the sweep
    assert _content(tmp_path / "c") == _content(uncached)


def test_a_full_disk_while_writing_the_cache_goes_on_uncached(small, tmp_path):
    inputs, uncached = small
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    if (
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)], capture_output=True
        ).returncode
        != 0
    ):
        pytest.skip("mounting a 64 KiB tmpfs needs root here; the write path is the same OSError")
    try:
        env = {**os.environ, "LEDGERSCOPE_EMBEDDING_CACHE": str(mnt / "cache")}
        run = subprocess.run(_sweep_cmd(inputs, tmp_path / "l"), env=env, capture_output=True, text=True)
        assert run.returncode == 0, run.stdout + run.stderr
        said = " ".join((run.stdout + run.stderr).split())
        assert "No space left on device" in said and "went on uncached" in said, said
        assert _content(tmp_path / "l") == _content(uncached)
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


def test_rerun_on_another_device_labels_its_differences_device_differences(encoder):
    from ledgerscope.pipeline.run.rerun import RerunDiff, _device_change

    rt = type("Rt", (), {"encoder": encoder})()
    assert _device_change({"components": {"embedding": {"device": {"type": "cpu"}}}}, rt) is None
    assert _device_change({"components": {}}, rt) is None  # older ledgers ran on CPU
    moved = _device_change({"components": {"embedding": {"device": {"type": "cuda"}}}}, rt)
    assert moved == ("cuda", "cpu")
    diff = RerunDiff("a", "q", "0", [{"field": "answer", "recorded": "x", "fresh": "y"}], devices=moved)
    assert "device differences: recorded on cuda, rerun on cpu" in diff.lines()[0]
    assert diff.to_json()["device_differences"] == {"recorded": "cuda", "now": "cpu"}


def test_device_auto_is_cpu_without_a_gpu_and_left_out_of_the_config_digest():
    import torch

    from ledgerscope.pipeline.arm.config import arm_from_dict
    from ledgerscope.pipeline.embedding.devices import batch_size_for, resolve_device

    want = "cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu"
    assert resolve_device("auto") == want
    assert batch_size_for("cuda", 64) == 256 and batch_size_for("cuda", 32) == 32
    plain = arm_from_dict({"name": "a"})
    auto = arm_from_dict({"name": "a", "embedding": {"device": "auto"}})
    assert plain.digest() == auto.digest()
