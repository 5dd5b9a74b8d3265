"""Re-judge a ledger against a new fixture version without re-sweeping it.

Gold is offsets, so a ledger's recorded lists can be judged again (seed 002: span-to-chunk
resolution happens at evaluation time). For every record: the support flags are recomputed from the
recorded candidate lists (``fused`` down to the record's ``rerank_depth``, ``reranked`` down to its
``selection_depth``, ``chunked`` over the partition's units, ``cited`` from the recorded citations)
with the sweep's own :mod:`ledgerscope.rules.support`; the recorded answer and citations are judged
again by the arm's judge (:func:`.cascade.judge`'s rules). Nothing is retrieved, chunked or
generated, except the oracle: it is re-run for the questions whose support (spans, sets,
answerability) changed, with the arm's own generator, or with ``no_oracle`` its rows are kept and
the questions named stale in the manifest. Records of an infrastructure failure keep their verdicts.
A ledger swept with ``--repeats K`` has every repeat's answer judged again by the same code as the
records' (:func:`judge_answer`), so its ``repeats`` verdicts are what a sweep with the new fixtures
would give those answers, and repeat 0 stays equal to its record.
A stage an ingested trace did not record keeps its flag NULL (*not recorded*).

The new ledger (written in the current format, whatever the old one's) holds the same units,
boundaries and candidates, the new fixtures, the rejudged
records and oracle, and a manifest with both fixture digests (``rejudged``); ``compare --baseline-
ledger`` between the two shows which verdicts the new gold changed. The old ledger is only read.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import pyarrow as pa
import pyarrow.parquet as pq

from ledgerscope.common.atomic import atomic_write_text
from ledgerscope.common.errors import InputError, Problem
from ledgerscope.inputs.fixtures import Fixture, read_fixtures, resolve
from ledgerscope.ledger import schema
from ledgerscope.ledger.layout import Layout, layout_for
from ledgerscope.ledger.write import oracle_path, sources_path, write_partition, write_table
from ledgerscope.pipeline.judging.answer_judges import answer_judge
from ledgerscope.pipeline.run.rerun import load_ledger_inputs
from ledgerscope.pipeline.run.sweep import fixtures_digest
from ledgerscope.rules import judge as judging
from ledgerscope.rules import support as supporting

_STAGE_FLAGS = (
    "bm25",
    "dense_exact",
    "dense_ann",
    "union",
    "fused",
    "reranked",
    "selected",
    "packed",
    "topk",
)
#: an ingested trace's recorded stage that derives each flag (ingest/derive.py's _VSTAGES)
_INGESTED_NEEDS = {
    "bm25": "bm25",
    "dense_exact": "dense_exact",
    "exact": "dense_exact",
    "dense_ann": "dense_ann",
    "union": "union",
    "fused": "fused",
    "reranked": "reranked",
    "selected": "selected",
}


#: the record fields whose change :attr:`RejudgeResult.changes` lists
_WATCHED = ("answer_verdict", "citation_verdict", "support_packed", "support_chunked", "oracle_verdict")


@dataclass
class RejudgeResult:
    out: Path
    records: int = 0
    changed_questions: list[str] = field(default_factory=list)
    changed_records: int = 0
    oracle_rerun: list[str] = field(default_factory=list)
    oracle_stale: list[str] = field(default_factory=list)
    seconds: float = 0.0
    #: every record whose verdicts or packed support changed: arm, phase, qid, and each field's before/after
    changes: list[dict] = field(default_factory=list)
    #: ``repeats`` rows (a ``--repeats K`` ledger) judged again, and how many of them changed a verdict
    repeats: int = 0
    changed_repeats: int = 0


def support_changed(old: Fixture | None, new: Fixture | None) -> bool:
    """Whether a question's support differs: its spans' places and roles, its sets, its answerability
    (a role matters too: the judge infers a qualifier's default answer from the other spans)."""
    if old is None or new is None:
        return old is not new
    return _support_key(old) != _support_key(new)


def _support_key(f: Fixture) -> tuple:
    return (
        f.answerable,
        sorted((s.span_id, s.doc_id, s.start, s.end, s.dependency) for s in f.spans),
        sorted(tuple(sorted(s)) for s in f.sufficient_sets),
    )


def rejudge(ledger: Path, fixtures_path: Path, out: Path, no_oracle: bool = False) -> RejudgeResult:
    """Write ``out``: ``ledger`` judged against the fixtures at ``fixtures_path``."""
    t0 = time.perf_counter()
    ledger, out = Path(ledger), Path(out)
    _check_out(ledger, out)
    manifest, corpus, old_fixtures = load_ledger_inputs(ledger)
    new_fixtures = _load_new(fixtures_path, corpus, {f.qid for f in old_fixtures})
    texts = {s.doc_id: s.text for s in corpus}
    versions = {s.doc_id: s.version for s in corpus}
    old_by, new_by = {f.qid: f for f in old_fixtures}, {f.qid: f for f in new_fixtures}
    changed = sorted(q for q in old_by if support_changed(old_by[q], new_by.get(q)))
    result = RejudgeResult(out, changed_questions=changed)
    layout = layout_for(manifest)
    staging = out.with_name(out.name + ".rejudge-tmp")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        sources_path(staging).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(layout.sources_path(ledger), sources_path(staging))
        _write_fixtures(new_fixtures, staging / "fixtures.jsonl")
        oracle = _oracle(ledger, staging, manifest, layout, new_by, changed, no_oracle, result)
        for arm, entry in manifest["arms"].items():
            judge_table = (entry.get("config") or {}).get("judge") or {}
            for ph in entry["phases"]:
                if layout.is_committed(ledger, arm, ph["label"]):
                    _partition(
                        (ledger, layout),
                        staging,
                        arm,
                        ph["label"],
                        new_by,
                        texts,
                        versions,
                        judge_table,
                        oracle.get(arm, {}),
                        result,
                    )
        _manifest(manifest, ledger, staging, fixtures_path, new_fixtures, result)
        if (ledger / "_SWEEP_DONE.json").is_file():
            shutil.copy2(ledger / "_SWEEP_DONE.json", staging / "_SWEEP_DONE.json")
        staging.rename(out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    result.seconds = time.perf_counter() - t0
    return result


def _check_out(ledger: Path, out: Path) -> None:
    if out.exists():
        raise InputError(Problem(str(out), None, "out", "exists: rejudge writes a new ledger"))
    led, dst = ledger.resolve(), out.resolve()
    if led == dst or led in dst.parents:
        raise InputError(Problem(str(out), None, "out", "must lie outside the ledger (it is only read)"))


def _load_new(path: Path, corpus, known: set[str]) -> list[Fixture]:
    """The new version, resolved against the ledger's own sources (the offsets' pinned texts)."""
    fset, problems = read_fixtures(path)
    fixtures, _, more = resolve(fset, corpus)
    if problems or more:
        raise InputError(problems + more)
    extra = sorted({f.qid for f in fixtures} - known)
    if extra:
        raise InputError(
            Problem(
                str(path),
                None,
                "qid",
                f"{len(extra)} question(s) the ledger never swept "
                f"(e.g. {extra[0]!r}): rejudging judges recorded lists only",
            )
        )
    return fixtures


def _write_fixtures(fixtures: list[Fixture], path: Path) -> None:
    atomic_write_text(path, "".join(json.dumps(f.to_json(), ensure_ascii=False) + "\n" for f in fixtures))


def _units(rows: list[dict], versions: dict[str, str]) -> list[SimpleNamespace]:
    return [
        SimpleNamespace(
            doc_id=r["doc_id"], version=versions.get(r["doc_id"]), start=int(r["start"]), end=int(r["end"])
        )
        for r in rows
        if r["start"] is not None
    ]


def _partition(
    source: tuple[Path, Layout],
    staging: Path,
    arm: str,
    phase: str,
    fixtures: dict[str, Fixture],
    texts: dict,
    versions: dict,
    judge_table: dict,
    oracle: dict,
    result: RejudgeResult,
) -> None:
    """One partition: its tables carried over, its records judged again."""
    ledger, layout = source
    tables = {name: pq.read_table(p) for name, p in layout.partition_files(ledger, arm, phase).items()}
    units = tables["units"].select(["doc_id", "version", "start", "end"]).to_pylist()
    all_intervals = supporting.intervals_by_doc(
        SimpleNamespace(doc_id=u["doc_id"], version=u["version"], start=u["start"], end=u["end"])
        for u in units
    )
    lists: dict[str, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for c in tables["candidates"].select(["qid", "stage", "rank", "doc_id", "start", "end"]).to_pylist():
        lists[c["qid"]][c["stage"]].append(c)
    rows = tables["records"].to_pylist()
    judge = answer_judge(judge_table)
    for row in rows:
        before = {k: row.get(k) for k in _WATCHED}
        fx = fixtures.get(row["qid"])
        if fx is not None:
            _rejudge_row(row, fx, lists[row["qid"]], all_intervals, texts, versions, judge, oracle)
        result.records += 1
        diff = {k: [before[k], row.get(k)] for k in _WATCHED if before[k] != row.get(k)}
        if diff:
            result.changed_records += 1
            result.changes.append({"arm": arm, "phase": phase, "qid": row["qid"], **diff})
    tables["records"] = pa.Table.from_pylist(rows, schema=tables["records"].schema)
    if "repeats" in tables:
        tables["repeats"] = _rejudge_repeats(tables["repeats"], fixtures, texts, judge, result)
    meta = json.loads(layout.marker_path(ledger, arm, phase).read_text())
    meta.pop("files", None)
    write_partition(staging, arm, phase, tables, meta)


def _rejudge_row(
    row: dict,
    fx: Fixture,
    lists: dict[str, list[dict]],
    all_intervals: dict,
    texts: dict,
    versions: dict,
    judge,
    oracle: dict,
) -> None:
    """The record's support flags, verdicts and oracle columns against ``fx``, in place."""
    row.update(
        question=fx.question,
        segment=fx.segment,
        answerable=fx.answerable,
        support_only=fx.support_only,
        stress_set=fx.stress_set,
        doc_ids=list(fx.doc_ids),
    )
    by_stage = {s: _units(sorted(lists.get(s, []), key=lambda c: c["rank"]), versions) for s in _STAGE_FLAGS}
    if row.get("rerank_depth") is not None:
        by_stage["fused"] = by_stage["fused"][: row["rerank_depth"]]
    if row.get("selection_depth") is not None:
        by_stage["reranked"] = by_stage["reranked"][: row["selection_depth"]]
    citations = json.loads(row.get("citations_json") or "[]")
    by_stage["cited"] = _units([c for c in citations if c.get("unit_id") is not None], versions)
    by_stage["exact"] = by_stage["bm25"] + by_stage["dense_exact"]
    by_stage["production"] = by_stage["bm25"] + by_stage["dense_ann"]
    answerable = fx.answerable and bool(fx.sufficient_sets)
    recorded = _recorded_stages(row)
    for name, us in by_stage.items():
        col = f"support_{name}"
        if col not in row:
            continue
        if not answerable or (recorded is not None and not _derived(name, recorded, row)):
            row[col] = None
        else:
            row[col] = supporting.keeps(fx, us, texts)
    if row.get("support_chunked") is not None or (recorded is None and answerable):
        row["support_chunked"] = (
            supporting.kept_set_in(fx, all_intervals, texts) is not None if answerable else None
        )
    packed = by_stage["packed"]
    row["covered_set"] = supporting.kept_set(fx, packed, texts) if answerable else None
    row["single_unit_complete"] = supporting.single_unit_complete(fx, packed, texts) if answerable else None
    judge_answer(row, fx, texts, judge)
    o = oracle.get(fx.qid)
    if o is not None:
        row.update(oracle_verdict=o.get("answer_verdict"), oracle_feasible=o.get("feasible"))


def judge_answer(row: dict, fx: Fixture, texts: dict, judge) -> None:
    """A recorded answer and its citations (``answer``, ``abstained``, ``citations_json``) judged again
    against ``fx``, in place: a record's or a repeat's, by this one function, so the two agree. A
    generator failure keeps its infrastructure verdicts; a trace without citations stays so."""
    if row.get("generator_error"):
        return
    aj = judge.judge(row.get("answer"), bool(row.get("abstained")), fx)
    row.update(answer_verdict=aj.verdict, answer_reason=aj.reason)
    if row.get("citation_verdict") != "not-recorded":
        citations = json.loads(row.get("citations_json") or "[]")
        cj = judging.judge_citations(
            [(c["label"], c["doc_id"], c["start"], c["end"]) for c in citations], fx, texts, aj.verdict
        )
        row.update(citation_verdict=cj.verdict, citation_reason=cj.reason)


#: the ``repeats`` verdicts whose change :attr:`RejudgeResult.changed_repeats` counts
_REPEAT_VERDICTS = ("answer_verdict", "citation_verdict")


def _rejudge_repeats(
    table: pa.Table, fixtures: dict[str, Fixture], texts: dict, judge, result: RejudgeResult
) -> pa.Table:
    """Every repeat's answer judged again (``--repeats K``), as the records are."""
    rows = table.to_pylist()
    for row in rows:
        fx = fixtures.get(row["qid"])
        if fx is None:
            continue
        before = [row.get(k) for k in _REPEAT_VERDICTS]
        judge_answer(row, fx, texts, judge)
        result.repeats += 1
        result.changed_repeats += before != [row.get(k) for k in _REPEAT_VERDICTS]
    return pa.Table.from_pylist(rows, schema=table.schema)


def _recorded_stages(row: dict) -> list[str] | None:
    """An ingested record's recorded stages (None for a sweep's record: every stage recorded)."""
    try:
        detail = json.loads(row.get("generator_detail_json") or "{}")
    except ValueError:
        return None
    ing = detail.get("ingested") if isinstance(detail, dict) else None
    return list(ing.get("recorded_stages") or []) if isinstance(ing, dict) else None


def _derived(name: str, recorded: list[str], row: dict) -> bool:
    if name == "packed":
        return True
    if name == "cited":
        return row.get("citation_verdict") != "not-recorded"
    if name == "production":
        return "bm25" in recorded or "dense_ann" in recorded
    need = _INGESTED_NEEDS.get(name)
    return need is not None and need in recorded


def _oracle(
    ledger: Path,
    staging: Path,
    manifest: dict,
    layout,
    fixtures: dict[str, Fixture],
    changed: list[str],
    no_oracle: bool,
    result: RejudgeResult,
) -> dict[str, dict[str, dict]]:
    """Each arm's oracle rows: carried over, re-run for the changed questions (or those named stale)."""
    out: dict[str, dict[str, dict]] = {}
    for arm, entry in manifest["arms"].items():
        path = layout.oracle_path(ledger, arm)
        if not path.is_file():
            continue
        rows = {r["qid"]: r for r in pq.read_table(path).to_pylist()}
        todo = [q for q in changed if q in fixtures]
        if todo and not no_oracle:
            rt = _runtime(entry, ledger)
            if rt is None:
                result.oracle_stale += todo
            else:
                from ledgerscope.pipeline.run.oracle import prepare_oracle, run_oracle

                prepare_oracle(rt, [fixtures[q] for q in todo])
                rows.update({q: run_oracle(rt, fixtures[q]) for q in todo})
                result.oracle_rerun += todo
        elif todo:
            result.oracle_stale += todo
        write_table(oracle_path(staging, arm), list(rows.values()), schema.ORACLE)
        out[arm] = rows
    result.oracle_rerun = sorted(set(result.oracle_rerun))
    result.oracle_stale = sorted(set(result.oracle_stale))
    return out


def _runtime(entry: dict, ledger: Path):
    """The arm's runtime for its oracle, or None when the arm cannot run here: an ingested pipeline
    (its generator is external), an endpoint that does not answer, or a light install (no torch)."""
    if (entry.get("config") or {}).get("kind") == "ingested":
        return None
    try:
        from ledgerscope.pipeline.arm.config import arm_from_dict
        from ledgerscope.pipeline.embedding.encoder import shared_encoder
        from ledgerscope.pipeline.run.runtime import build_runtime, unreachable_endpoints

        cfg = arm_from_dict(entry["config"], f"{ledger}/manifest.json")
        return None if unreachable_endpoints(cfg) else build_runtime(cfg, shared_encoder)
    except ImportError:
        return None


def _manifest(
    manifest: dict,
    ledger: Path,
    staging: Path,
    fixtures_path: Path,
    fixtures: list[Fixture],
    result: RejudgeResult,
) -> None:
    new = dict(manifest)
    before, after = manifest.get("fixtures_digest"), fixtures_digest(fixtures)
    new["fixtures_digest"], new["fixture_count"] = after, len(fixtures)
    new["format"] = schema.FORMAT  # written in this version's layout, whatever the old ledger's
    blob = json.dumps({"rejudged_from": manifest.get("identity"), "fixtures": after}, sort_keys=True)
    new["identity"] = "sha256:" + hashlib.sha256(blob.encode()).hexdigest()
    new["rejudged"] = {
        "from_ledger": str(ledger),
        "from_identity": manifest.get("identity"),
        "fixtures_digest_before": before,
        "fixtures_digest_after": after,
        "fixtures_file": {
            "name": fixtures_path.name,
            "sha256": "sha256:" + hashlib.sha256(fixtures_path.read_bytes()).hexdigest(),
        },
        "changed_questions": result.changed_questions,
        "oracle": {"rerun": result.oracle_rerun, "stale": result.oracle_stale},
        "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    text = json.dumps(new, indent=2, sort_keys=True, ensure_ascii=False)
    atomic_write_text(staging / "manifest.json", text)
