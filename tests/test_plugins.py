"""Plugin stages: a real installed distribution registers stages under ``ledgerscope.stages``, a sweep
uses them; ``kind = "python"`` callables; the plugin protocols' checks and failures.

The distribution (tests/plugins/ledgerscope_testplugin) is installed once per session with pip
into a temporary target directory put on ``sys.path``: importlib.metadata finds its dist-info and
entry points exactly as it does in site-packages (nothing is patched). The dense retrievers use a
model-free bag-of-words embedder, so nothing here loads a model.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ledgerscope.common.errors import InputError
from ledgerscope.inputs.fixtures import load_fixtures
from ledgerscope.inputs.sources import load_corpus
from ledgerscope.ledger.read import connect
from ledgerscope.ledger.verify import load_manifest
from ledgerscope.pipeline.arm import plugins
from ledgerscope.pipeline.arm.config import arm_from_dict, load_arm
from ledgerscope.pipeline.contracts.stages import StageFailure
from ledgerscope.pipeline.run.sweep import sweep

from .test_stages import BagOfWords as _BagOfWords

ROOT = Path(__file__).resolve().parents[1]
PLUGIN_SRC = ROOT / "tests" / "plugins" / "ledgerscope_testplugin"


class BagOfWords(_BagOfWords):
    """The model-free embedder with the cache interface a sweep calls."""

    forward_texts = 0

    def drop(self, texts) -> None:
        pass


@pytest.fixture(scope="session")
def installed_plugin(tmp_path_factory):
    """pip-installs the test plugin (no dependencies, no build isolation) into a target on sys.path."""
    work = tmp_path_factory.mktemp("plugin")
    src = work / "src"
    shutil.copytree(PLUGIN_SRC, src)  # the build writes build/ and *.egg-info next to the sources
    target = work / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--target",
            str(target),
            str(src),
        ],
        check=True,
        timeout=300,
    )
    sys.path.insert(0, str(target))
    plugins.refresh()
    yield target
    sys.path.remove(str(target))
    for name in [m for m in sys.modules if m.startswith("ledgerscope_testplugin")]:
        del sys.modules[name]
    plugins.refresh()


def _sweep(paths, arms, out):
    fixtures, corpus = load_fixtures(paths["fixtures"], load_corpus(paths["corpus"]))
    return sweep(fixtures, corpus, arms, out, encoder_factory=lambda name, batch: BagOfWords())


PLUGIN_ARM = {
    "name": "plugged",
    "phases": [0, 7],
    "budget_tokens": 60,
    "chunker": {"kind": "fixed-codepoints", "options": {"size": 50}},
    "retrieval": {"ann": {"kind": "word-overlap"}},
    "rerank": {"kind": "shortest-first"},
    "generator": {"kind": "first-sentence"},
}


def test_config_stages_lists_installed_plugins_and_refused_entry_points(installed_plugin):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(installed_plugin), str(ROOT / "src")])}
    out = subprocess.run(
        [sys.executable, "-m", "ledgerscope.cli", "config", "stages", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=True,
    ).stdout
    data = json.loads(out)
    rows = {(r["seam"], r["kind"]): r for r in data["stages"]}
    assert rows[("chunker", "fixed-codepoints")]["source"] == "ledgerscope-testplugin 0.1.0"
    assert rows[("generator", "first-sentence")]["target"] == "ledgerscope_testplugin:first_sentence"
    assert ("reranker", "shortest-first") in rows and ("retriever", "word-overlap") in rows
    assert rows[("generator", "extractive")]["source"] == "built-in"  # never shadowed
    assert len(data["refused"]) == 2
    assert "'generator:extractive'" in data["refused"][0] and "built-in" in data["refused"][0]
    assert "'not-a-seam'" in data["refused"][1] and "SEAM:KIND" in data["refused"][1]
    plain = subprocess.run(
        [sys.executable, "-m", "ledgerscope.cli", "config", "stages"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=True,
    ).stdout
    assert any(line.split()[:2] == ["chunker", "fixed-codepoints"] for line in plain.splitlines())


def test_a_sweep_uses_the_plugin_chunker_retriever_reranker_and_generator(
    installed_plugin, rule_exception_inputs, tmp_path
):
    _sweep(rule_exception_inputs, [arm_from_dict(PLUGIN_ARM)], tmp_path / "ledger")
    con = connect(tmp_path / "ledger")
    # the chunker: units of at most 50 code points; phase 7 cuts first at code point 7
    units = con.execute(
        'SELECT phase, doc_id, start, "end", text FROM units ORDER BY phase, doc_id, start'
    ).fetchall()
    assert units and all(e - s <= 50 for _, _, s, e, _ in units)
    starts = {(p, d): sorted(s for p2, d2, s, _, _ in units if (p2, d2) == (p, d)) for p, d, *_ in units}
    assert all(v[1] == 50 for (p, _), v in starts.items() if p == "0" and len(v) > 1)
    assert all(v[1] == 7 for (p, _), v in starts.items() if p == "7" and len(v) > 1)
    texts = {s.doc_id: s.text for s in load_corpus(rule_exception_inputs["corpus"])}
    assert all(texts[d][s:e] == t for _, d, s, e, t in units)
    # the retriever's lists are the plugin's (word overlap: every hit shares a word with the question)
    ann = con.execute("SELECT qid, score FROM candidates WHERE stage = 'dense_ann'").fetchall()
    assert ann and all(score >= 1.0 and float(score).is_integer() for _, score in ann)
    # the reranker put shorter units first; the generator answered with the first block's sentence
    reranked = con.execute(
        "SELECT phase, qid, rank, u.text FROM candidates c JOIN units u "
        "USING (arm, phase, unit_id) WHERE stage = 'reranked' ORDER BY phase, qid, rank"
    ).fetchall()
    by = {}
    for phase, qid, _, text in reranked:
        by.setdefault((phase, qid), []).append(len(text))
    assert all(v == sorted(v) for v in by.values())
    records = con.execute(
        "SELECT answer, citations_json, generator_detail_json, answer_verdict FROM records"
    ).fetchall()
    for answer, cites, detail, _ in records:
        if json.loads(detail).get("plugin"):
            assert answer.endswith("[1]") and json.loads(cites)[0]["label"] == "1"
    assert any(json.loads(d).get("plugin") == "first-sentence" for _, _, d, _ in records)
    components = load_manifest(tmp_path / "ledger")["arms"]["plugged"]["components"]
    assert components["chunker"] == {"name": "fixed code points", "size": 50}
    assert components["generator"]["kind"] == "first-sentence"
    assert components["generator"]["plugin"] == {"distribution": "ledgerscope-testplugin", "version": "0.1.0"}
    assert components["reranker"]["callable"] == "ledgerscope_testplugin:shortest_first"
    assert components["retrievers"]["ann"]["callable"] == "ledgerscope_testplugin:word_overlap"


def test_rerun_executes_the_same_plugin_stages(installed_plugin, rule_exception_inputs, tmp_path):
    from ledgerscope.pipeline.run import rerun

    _sweep(rule_exception_inputs, [arm_from_dict(PLUGIN_ARM)], tmp_path / "ledger")
    diff = rerun.rerun_record(tmp_path / "ledger", "plugged", "temp-retention", "7")
    # rerun builds its own runtime with the bundled model for the dense slots; the plugin slots match
    changed = {d["field"] for d in diff.differences}
    assert not changed & {
        "answer",
        "packed_unit_ids",
        "candidates.reranked",
        "candidates.dense_ann",
        "candidates.bm25",
        "generator_detail_json",
    }


def test_python_callables_name_the_same_functions_without_installing(
    installed_plugin, rule_exception_inputs, tmp_path
):
    arm = arm_from_dict(
        {
            "name": "py",
            "phases": [0],
            "rerank": {"kind": "python", "callable": "ledgerscope_testplugin:shortest_first"},
            "generator": {"kind": "python", "callable": "tests.endpoint_servers:first_block"},
        }
    )
    _sweep(rule_exception_inputs, [arm], tmp_path / "ledger")
    components = load_manifest(tmp_path / "ledger")["arms"]["py"]["components"]
    assert components["reranker"] == {
        "kind": "python",
        "callable": "ledgerscope_testplugin:shortest_first",
        "options": {},
    }
    assert components["generator"]["callable"] == "tests.endpoint_servers:first_block"


def failing_generator(request):
    raise StageFailure(
        "generation",
        f"vendor API down (asked with {len(request.blocks)} block(s))",
        ["network: refused", "network: refused"],
    )


def wrong_length_reranker(request):
    return [1.0]


def test_a_plugin_that_raises_stage_failure_records_an_infrastructure_failure(
    rule_exception_inputs, tmp_path
):
    arm = arm_from_dict(
        {
            "name": "down",
            "phases": [0],
            "rerank": {"kind": "none"},
            "generator": {"kind": "python", "callable": "tests.test_plugins:failing_generator"},
        }
    )
    _sweep(rule_exception_inputs, [arm], tmp_path / "ledger")
    con = connect(tmp_path / "ledger")
    rows = con.execute("SELECT answer_verdict, generator_error, attempts FROM records").fetchall()
    assert rows and all(v == "infrastructure-failure" for v, _, _ in rows)
    assert all(e.startswith("generation: vendor API down") and n == 2 for _, e, n in rows)
    oracle = con.execute("SELECT answer_verdict FROM oracle WHERE support_set IS NOT NULL").fetchall()
    assert oracle and all(v == "infrastructure-failure" for (v,) in oracle)


def test_a_plugin_answering_in_the_wrong_shape_stops_the_sweep_naming_it(rule_exception_inputs, tmp_path):
    from ledgerscope.pipeline.arm.plugin_stages import PluginError

    arm = arm_from_dict(
        {
            "name": "bad",
            "phases": [0],
            "rerank": {"kind": "python", "callable": "tests.test_plugins:wrong_length_reranker"},
        }
    )
    with pytest.raises(
        PluginError,
        match=r"tests.test_plugins:wrong_length_reranker: 1 score\(s\) for \d+ "
        r"candidate\(s\)",
    ):
        _sweep(rule_exception_inputs, [arm], tmp_path / "ledger")


@pytest.mark.parametrize(
    ("body", "field", "reason"),
    [
        (
            '[generator]\nkind = "python"\ncallable = "no_such_module_xyz:fn"\n',
            "generator.callable",
            "cannot import module 'no_such_module_xyz': ModuleNotFoundError",
        ),
        (
            '[rerank]\nkind = "python"\ncallable = "tests.test_plugins:no_such_function"\n',
            "rerank.callable",
            "module 'tests.test_plugins' has no attribute 'no_such_function'",
        ),
        (
            '[rerank]\nkind = "python"\ncallable = "not a callable name"\n',
            "rerank.callable",
            "must name a callable as 'package.module:function'",
        ),
        (
            '[generator]\nkind = "python"\n',
            "generator.callable",
            'needs callable = "package.module:function"',
        ),
        (
            '[generator]\nkind = "first-sentence-not-installed"\n',
            "generator.kind",
            "must be one of extractive",
        ),
        (
            '[retrieval.ann]\nkind = "faiss"\n',
            "retrieval.ann.kind",
            "must be one of bm25, hnsw, exact, python",
        ),
        ('[chunker]\nkind = "python"\ncallable = "x:y"\noptions = 3\n', "chunker.options", "must be a table"),
    ],
)
def test_bad_plugin_configuration_names_the_arm_file_and_key(tmp_path, body, field, reason):
    path = tmp_path / "arm.toml"
    path.write_text(body, encoding="utf-8")
    with pytest.raises(InputError) as err:
        load_arm(path)
    hits = [p for p in err.value.problems if p.field == field]
    assert hits and hits[0].file == str(path) and reason in hits[0].reason, err.value.problems
