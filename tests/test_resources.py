"""What a sweep costs: the resource record, price tables, the estimate, the caps and the resource rule.

The sweeps here go through a real HTTP embeddings server on loopback (tests/endpoint_servers.py's
bag-of-words server, no model) with a Python generator, so they load no model; the test against
ledgerscope's model server and llama.cpp is in test_resources_servers.py.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ledgerscope.analysis.resources import arm_resources, compare_resources
from ledgerscope.analysis.stats.release import decide, load_rule
from ledgerscope.common.errors import InputError
from ledgerscope.inputs.fixtures import load_fixtures
from ledgerscope.inputs.sources import load_corpus
from ledgerscope.ledger.digest import table_digests
from ledgerscope.pipeline.arm.config import arm_from_dict
from ledgerscope.pipeline.run.costs.estimate import Caps, plan_sweep, summary
from ledgerscope.pipeline.run.costs.prices import load_prices
from ledgerscope.pipeline.run.resources import Laps, hnsw_bytes
from ledgerscope.pipeline.run.runs import read_runs
from ledgerscope.pipeline.run.sweep import sweep
from ledgerscope.testing.ledger_files import marker_path, marker_paths

from .endpoint_servers import FaultyServer

PRICES = """format = "ledgerscope-prices/1"
currency = "EUR"
[embedding.bow]
per_million_tokens = 1000.0
per_request = 0.001
[generator."*"]
per_million_prompt_tokens = 0.0
"""


def _arm(url: str, name: str = "remote", batch: int = 4) -> object:
    return arm_from_dict(
        {
            "name": name,
            "capacity": 16,
            "phases": [0, 5, 9],
            "budget_tokens": 40,
            "top_k": 1,
            "embedding": {"kind": "endpoint", "base_url": url, "model": "bow", "batch_size": batch},
            "generator": {"kind": "python", "callable": "tests.endpoint_servers:first_block"},
        }
    )


@pytest.fixture(scope="module")
def server():
    with FaultyServer() as srv:
        yield srv


@pytest.fixture(scope="module")
def prices(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("prices") / "prices.toml"
    path.write_text(PRICES, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def inputs(rule_exception_inputs):
    return load_fixtures(rule_exception_inputs["fixtures"], load_corpus(rule_exception_inputs["corpus"]))


@pytest.fixture(scope="module")
def uncapped(server, inputs, tmp_path_factory):
    """One uncapped sweep through the server, with the requests the server saw and the plan before it."""
    fixtures, corpus = inputs
    out = tmp_path_factory.mktemp("uncapped") / "ledger"
    plan = plan_sweep(fixtures, corpus, [_arm(server.base_url)], out)
    seen_before = dict(server.seen)
    result = sweep(fixtures, corpus, [_arm(server.base_url)], out)
    served = {k: v - seen_before.get(k, 0) for k, v in server.seen.items()}
    return {"ledger": out, "plan": plan, "result": result, "served": served}


def test_the_plan_predicts_the_texts_and_requests_the_sweep_sends(uncapped):
    plan, result, served = uncapped["plan"], uncapped["result"], uncapped["served"]
    total = plan.total()
    assert result.encoded_texts == total.texts > 0
    assert served["/v1/embeddings"] == total.emb_requests  # the probe included
    run = read_runs(uncapped["ledger"])[-1]
    (emb,) = [c for c in run["components"] if c["role"] == "embedding"]
    assert emb["requests"] == served["/v1/embeddings"] and emb["token_source"] == "tokenizer"


def test_each_partition_records_its_resources(uncapped):
    ledger = uncapped["ledger"]
    marker = json.loads(marker_path(ledger, "remote", "5").read_text())
    res = marker["resources"]
    assert res["index"]["units"] > 0 and res["index"]["overlap_factor"] == pytest.approx(1.0)
    assert res["index"]["bytes"]["vectors"] == res["index"]["units"] * 32 * 4  # the server's 32 dimensions
    assert res["embedding"]["kind"] == "endpoint" and res["embedding"]["token_source"] == "tokenizer"
    lat = res["latency_ms"]
    assert set(lat) >= {"embed_query", "bm25", "dense_ann", "fuse", "rerank", "pack", "generate", "query"}
    assert lat["query"]["p50"] <= lat["query"]["p95"] <= lat["query"]["p99"]
    per_q = res["latency_per_query_ms"]["generate"]
    assert len(per_q) == res["questions"] == 3
    # every partition's encoded texts add up to the sweep's (the first partition encodes the questions)
    parts = [p for p in marker_paths(ledger) if "arm=remote" in p.as_posix()]
    encoded = sum(json.loads(p.read_text())["resources"]["embedding"]["encoded"] for p in parts)
    assert encoded == uncapped["result"].encoded_texts


def test_arm_summary_prices_indexing_queries_and_the_sweep(uncapped, prices):
    table = load_prices(prices)
    res = arm_resources(uncapped["ledger"], "remote", table)
    assert res["recorded"] and res["phases"] == 3
    cost = res["cost"]
    assert cost["priced"] and cost["currency"] == "EUR" and not cost["unpriced"]
    use = res["usage"]["embedding"]
    # the sweep's cost: every token and request it sent at the table's rates (the probe is in runs/)
    assert cost["sweep"] == pytest.approx(use["tokens"] * 1000.0 / 1e6 + use["requests"] * 0.001)
    assert cost["indexing"] > 0 and cost["per_1000_queries"] > 0
    diff = compare_resources(res, res)["difference"]
    assert diff["cost"]["per_1000_queries"] == 0 and diff["latency_ms"]["query"]["p95"] == 0


def test_max_cost_below_the_estimate_stops_and_a_higher_cap_completes_identically(
    server, inputs, prices, uncapped, tmp_path
):
    fixtures, corpus = inputs
    table = load_prices(prices)
    out = tmp_path / "capped"
    estimate = summary(plan_sweep(fixtures, corpus, [_arm(server.base_url)], out), table)
    assert estimate["cost"] > 0 and estimate["texts_to_encode"] > 0
    first = sweep(
        fixtures, corpus, [_arm(server.base_url)], out, caps=Caps(max_cost=estimate["cost"] / 2, prices=table)
    )
    assert first.stopped and "--max-cost" in first.stopped
    assert 0 < len(first.written) < 3 and not (out / "_SWEEP_DONE.json").exists()
    spent = read_runs(out)[-1]["cost"]
    assert spent <= estimate["cost"] / 2
    second = sweep(
        fixtures, corpus, [_arm(server.base_url)], out, caps=Caps(max_cost=estimate["cost"] * 2, prices=table)
    )
    assert second.stopped is None and len(second.skipped) == len(first.written)
    assert (out / "_SWEEP_DONE.json").is_file()
    assert table_digests(out) == table_digests(uncapped["ledger"])


def test_max_requests_stops_before_the_partition_that_would_pass_it(server, inputs, tmp_path):
    fixtures, corpus = inputs
    arms = [_arm(server.base_url, batch=2)]
    result = sweep(fixtures, corpus, arms, tmp_path / "l", caps=Caps(max_requests=2))
    assert result.stopped and "--max-requests 2" in result.stopped and not result.written
    assert read_runs(tmp_path / "l")[-1]["components"][0]["requests"] <= 2


def test_a_cost_cap_needs_every_paid_model_priced(server, inputs, tmp_path):
    fixtures, corpus = inputs
    other = tmp_path / "p.toml"
    other.write_text('[embedding."other"]\nper_million_tokens = 1.0\n', encoding="utf-8")
    with pytest.raises(InputError, match="no price for embedding 'bow'"):
        sweep(
            fixtures,
            corpus,
            [_arm(server.base_url)],
            tmp_path / "l",
            caps=Caps(max_cost=1.0, prices=load_prices(other)),
        )


# --- the release rule's cost boundary and latency allowance ------------------------------------


def _comparison(cand_cost: float, cand_p95: float, base_p95: float) -> dict:
    def arm(name, cost, p95):
        return {
            "arm": name,
            "recorded": True,
            "questions": 40,
            "latency_ms": {"query": {"p50": p95 / 2, "p95": p95, "p99": p95}},
            "cost": {
                "priced": True,
                "currency": "USD",
                "per_1000_queries": cost,
                "indexing": 1.0,
                "unpriced": [],
            },
        }

    cand, base = arm("cand", cand_cost, cand_p95), arm("base", 0.1, base_p95)
    return {
        "settings": {"confidence": 0.95, "n_resamples": 10000, "seed": 0},
        "candidate": {"arm": "cand"},
        "baseline": {"arm": "base"},
        "stress_sets": {},
        "resources": compare_resources(cand, base),
    }


def test_a_cost_boundary_the_candidate_exceeds_rejects_it_naming_the_cost(tmp_path):
    rule = tmp_path / "rule.toml"
    rule.write_text(
        "[max_cost]\nper_1000_queries = 0.50\nindexing = 2.0\n[max_latency_vs_baseline]\nquery = 1.2\n",
        encoding="utf-8",
    )
    decision = decide(load_rule(rule), _comparison(0.73, 100.0, 90.0))
    assert decision.outcome == "reject"
    (cost,) = [c for c in decision.checks if c.tolerance == "max_cost.per_1000_queries"]
    assert cost.status == "violates" and "0.73 USD" in cost.reason and "0.5 USD" in cost.reason
    statuses = {c.tolerance: c.status for c in decision.checks}
    assert statuses["max_cost.indexing"] == "pass" and statuses["max_latency_vs_baseline.query"] == "pass"
    accepted = decide(load_rule(rule), _comparison(0.40, 100.0, 90.0))
    assert {c.tolerance: c.status for c in accepted.checks}["max_cost.per_1000_queries"] == "pass"


def test_latency_allowance_absolute_and_relative(tmp_path):
    rule = tmp_path / "rule.toml"
    rule.write_text("[max_latency]\nquery = 50\n[max_latency_vs_baseline]\nquery = 1.1\n", encoding="utf-8")
    decision = decide(load_rule(rule), _comparison(0.1, 60.0, 50.0))
    statuses = {c.tolerance: c for c in decision.checks}
    absolute = statuses["max_latency.query"]
    assert absolute.status == "violates" and "60 ms" in absolute.reason
    assert statuses["max_latency_vs_baseline.query"].status == "violates"
    assert decision.outcome == "reject"


def test_no_price_table_or_no_record_is_no_evidence(tmp_path):
    rule = tmp_path / "rule.toml"
    rule.write_text("[max_cost]\nper_1000_queries = 0.5\n", encoding="utf-8")
    comparison = _comparison(0.1, 1.0, 1.0)
    comparison["resources"]["candidate"]["cost"] = {"priced": False}
    decision = decide(load_rule(rule), comparison)
    assert decision.outcome == "collect-more-evidence"
    assert any("no price table" in r for r in decision.reasons)


@pytest.mark.parametrize(
    "body, field",
    [
        ("[max_cost]\nper_query = 1\n", "max_cost.per_query"),
        ("[max_latency]\nreranker = 10\n", "max_latency.reranker"),
        ("[max_latency_vs_baseline]\nquery = -1\n", "max_latency_vs_baseline.query"),
    ],
)
def test_bad_resource_limits_are_located(tmp_path, body, field):
    rule = tmp_path / "rule.toml"
    rule.write_text(body, encoding="utf-8")
    with pytest.raises(InputError) as err:
        load_rule(rule)
    assert any(p.field == field for p in err.value.problems)


def test_price_tables_are_checked_and_unpriced_models_are_none(tmp_path, prices):
    table = load_prices(prices)
    assert table.cost("embedding", "bow", {"tokens": 2e6, "requests": 10}) == pytest.approx(2000.01)
    assert table.cost("embedding", "other", {"tokens": 1}) is None
    assert table.cost("generator", "anything", {"prompt_tokens": 5}) == 0.0
    bad = tmp_path / "bad.toml"
    bad.write_text("[embedding.m]\nper_million_token = 1\n[rerank.r]\nper_request = -1\n", encoding="utf-8")
    with pytest.raises(InputError) as err:
        load_prices(bad)
    fields = {p.field for p in err.value.problems}
    assert fields == {"embedding.m.per_million_token", "rerank.r.per_request"}
    example = Path(__file__).resolve().parents[1] / "docs" / "prices.example.toml"
    assert load_prices(example).cost("embedding", "bundled:all-MiniLM-L6-v2", {"tokens": 1e9}) == 0.0


def test_latency_quantiles_and_hnsw_bytes():
    laps = Laps(4)
    laps.share("bm25", 0.004)
    for i, s in enumerate((0.001, 0.002, 0.003, 0.010)):
        laps.add(i, {"generate": s})
    q = laps.quantiles()
    assert q["bm25"]["p50"] == q["bm25"]["p99"] == pytest.approx(1.0)
    assert q["generate"]["p50"] == pytest.approx(2.5) and q["generate"]["p99"] > 9.0
    assert q["query"]["p50"] == pytest.approx(3.5)
    assert hnsw_bytes(0, 384, 16) == 0 and hnsw_bytes(1000, 384, 16) > 1000 * 384 * 4


def test_diagnose_and_compare_print_the_resources(uncapped, prices, tmp_path):
    from typer.testing import CliRunner

    from ledgerscope.cli.main import app

    copy = tmp_path / "ledger"
    shutil.copytree(uncapped["ledger"], copy)
    runner = CliRunner()
    done = runner.invoke(app, ["diagnose", str(copy), "--prices", str(prices)], env={"COLUMNS": "200"})
    assert done.exit_code == 0, done.output
    assert "latency per query" in done.output and "cost: indexing" in done.output and "EUR" in done.output
    rule = tmp_path / "rule.toml"
    rule.write_text(f'[max_cost]\nper_1000_queries = 0.0\nprices = "{prices}"\n', encoding="utf-8")
    done = runner.invoke(
        app,
        [
            "compare",
            str(copy),
            "--candidate",
            "remote",
            "--baseline",
            "remote",
            "--rule",
            str(rule),
            "--json",
        ],
    )
    assert done.exit_code == 3, done.output  # reject
    out = json.loads(done.output)
    assert out["comparison"]["resources"]["difference"]["cost"]["per_1000_queries"] == 0
    assert out["decision"]["outcome"] == "reject"
    assert any("cost per 1,000 queries" in r and "EUR" in r for r in out["decision"]["reasons"])


def test_the_report_and_the_stats_pane_show_the_resources(uncapped, prices, tmp_path):
    from rich.console import Console
    from typer.testing import CliRunner

    from ledgerscope.analysis.resources import attach
    from ledgerscope.cli.main import app
    from ledgerscope.tui.render import make_palette
    from ledgerscope.tui.render_summary import _resources_tail

    copy = tmp_path / "ledger"
    shutil.copytree(uncapped["ledger"], copy)
    page = tmp_path / "report.html"
    done = CliRunner().invoke(
        app,
        [
            "report",
            str(copy),
            "--candidate",
            "remote",
            "--baseline",
            "remote",
            "--out",
            str(page),
            "--prices",
            str(prices),
            "--n-resamples",
            "200",
        ],
    )
    assert done.exit_code == 0, done.output
    html = page.read_text(encoding="utf-8")
    assert '<section id="resources">' in html and "per 1,000 queries" in html and "p95 ms" in html
    comparison = attach({}, copy, "remote", None, "remote", load_prices(prices))
    console = Console(width=200, record=True)
    console.print(_resources_tail(comparison["resources"], make_palette()))
    shown = console.export_text()
    assert "resources" in shown and "latency ms p50/p95" in shown and "cost per 1,000 queries" in shown


# --- phase_scope = "evidence" --------------------------------------------------------------------


def test_evidence_scope_moves_only_gold_and_retrieved_documents(server, inputs, tmp_path):
    from ledgerscope.ledger.read import connect
    from ledgerscope.pipeline.run import scope as scope_mod
    from ledgerscope.pipeline.run.rerun import rerun_record

    fixtures, corpus = inputs
    arm = _arm(server.base_url)
    arm = arm_from_dict(
        {
            **arm.to_dict(),
            "phase_scope": "evidence",
            "retrieval": {"bm25_top_n": 1, "ann_top_n": 1, "dense_top_n": 1},
        }
    )
    assert arm.digest() != _arm(server.base_url).digest()
    out = tmp_path / "scoped"
    sweep(fixtures, corpus, [arm], out)
    meta = json.loads(marker_path(out, "remote", "5").read_text())
    scope = meta["phase_scope"]
    assert scope["scope"] == "evidence" and scope["base_phase"] == "0" and scope["reach"] == "packed"
    gold = {s.doc_id for f in fixtures for s in f.spans}
    phased, every = set(scope["phased_documents"]), {s.doc_id for s in corpus}
    assert gold <= phased < every
    con = connect(out)
    cuts = {
        (p, d): tuple(c)
        for p, d, c in con.execute("SELECT phase, doc_id, cut_tokens FROM boundaries").fetchall()
    }
    for doc in every - phased:  # cut once, at the base phase, shared by every phase
        assert cuts[("5", doc)] == cuts[("9", doc)] == cuts[("0", doc)]
    assert any(cuts[("5", d)] != cuts[("0", d)] for d in phased)
    # the unphased documents' base units are embedded once (the cache is off here: the sweep keeps
    # them for the later phases): a later phase encodes only the phased documents' new unit texts
    seen = {t for (t,) in con.execute("SELECT text FROM units WHERE phase = '0'").fetchall()}
    for label in ("5", "9"):
        texts = {t for (t,) in con.execute("SELECT text FROM units WHERE phase = ?", [label]).fetchall()}
        marker = marker_path(out, "remote", label)
        part = json.loads(marker.read_text())
        assert part["resources"]["embedding"]["encoded"] == len(texts - seen)
        seen |= texts
    # the criteria are nested: what the reader saw, within what the reranker kept, within its input
    nested = [scope_mod.phased_documents(out, arm, "0", fixtures, c) for c in ("packed", "reranked", "fused")]
    assert gold <= nested[0] <= nested[1] <= nested[2] and nested[0] == phased
    summary = arm_resources(out, "remote")
    assert summary["phase_scope"] == {
        "scope": "evidence",
        "base_phase": "0",
        "phased": len(phased),
        "documents": len(every),
    }
    qid = fixtures[0].qid
    diff = rerun_record(out, "remote", qid, "9")
    assert diff.identical, diff.differences
    # with the base phase on disk, --estimate's plan cuts the later phases as the sweep did
    counts = dict(con.execute("SELECT phase, count(*) FROM units GROUP BY phase").fetchall())
    con.close()
    for label in ("5", "9"):
        marker_path(out, "remote", label).unlink()  # the partition no longer counts as written
    plan = plan_sweep(fixtures, corpus, [arm], out)
    planned = {s.phase: s.units for s in plan.steps if s.phase in ("5", "9")}
    assert planned == {"5": counts["5"], "9": counts["9"]}
    assert not any("upper bound" in n for n in plan.notes)
    fresh = plan_sweep(fixtures, corpus, [arm], tmp_path / "fresh")
    assert any("upper bound" in n for n in fresh.notes)


def test_phase_scope_is_validated_and_listed_by_config_default():
    from ledgerscope.pipeline.arm.config import DEFAULT_TOML

    assert 'phase_scope = "all"' in DEFAULT_TOML
    plain = arm_from_dict({"name": "x"}).digest()
    assert plain == arm_from_dict({"name": "x", "phase_scope": "all"}).digest()
    with pytest.raises(InputError) as err:
        arm_from_dict({"name": "x", "phase_scope": "gold"})
    assert any(p.field == "phase_scope" for p in err.value.problems)


def test_forward_shape_follows_the_encoders_batching():
    """--estimate's model time follows passes and token positions: one token count a batch, at most
    batch_size rows, a short batch run with copies of its rows (Encoder.batches, min_rows)."""
    from ledgerscope.pipeline.embedding.encoder import min_rows
    from ledgerscope.pipeline.run.costs.estimate import forward_shape

    assert min_rows(10) == 7 and min_rows(100) == 2
    assert forward_shape([10] * 130, 64) == (3, 64 * 10 * 2 + 7 * 10)
    assert forward_shape([100], 64) == (1, 2 * 100)
    assert forward_shape([10, 11, 12], 64) == (3, 7 * 10 + 6 * 11 + 6 * 12)
    assert forward_shape([], 64) == (0, 0)
