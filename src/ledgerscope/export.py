"""Exports of a selection of ledger records, for re-annotation and for other tools.

``export(ledger, where, fmt, out)`` selects the records of ``record_view``
(see :mod:`ledgerscope.query`) that the predicate ``where`` accepts and writes
them in one of four formats. The ledger is only read. Every output is written
to a temporary path beside ``out`` and renamed into place (a directory is
built beside it and renamed whole), so a failure leaves no partial output and
an earlier ``out`` untouched. ``out`` may not lie inside the ledger.

``fixtures``
    Canonical fixtures (``ledgerscope-fixture/1`` JSONL, as
    :func:`ledgerscope.fixtures.write_fixtures` writes them) of the distinct
    questions in the selection, sources inline so the file validates on its
    own (``ledgerscope validate OUT``). Each carries
    ``annotations["ledgerscope"] = {"ledger": {identity, format, created, path},
    "where": predicate, "records": [{arm, phase, step, step_name, label, flags,
    evidence, answer, answer_verdict, citation_verdict}, ...]}`` and the
    adjudication ``{"state": "needs-review", "reason": "exported from ledger for
    re-annotation: steps ...", "previous": <the fixture's adjudication>}``.

``label-studio``
    A JSON array of Label Studio tasks, one per (record, document involved),
    plus the matching labeling config ``<out>.config.xml``. The documents
    involved in a record are those of its gold spans, its packed units and its
    reranked units down to the selection cutoff. A task::

        {"data": {"text": <document text>, "question", "qid", "arm", "phase", "doc_id",
                  "step", "step_name", "label"},
         "predictions": [{"model_version": "ledgerscope gold+retrieved", "result": [
             {"id": "gold-1", "from_name": "label", "to_name": "text", "type": "labels",
              "value": {"start": 120, "end": 157, "text": <text[start:end]>, "labels": ["gold:rule"]}},
             ... "labels": ["packed rank 1"] ... "labels": ["reranked rank 3"] ...]}]}

    Offsets are Unicode code points of ``data.text`` (Python slicing; the
    ledger's canonical coordinates), which is what Label Studio stores for
    text regions since its emoji-offset fix; older versions count UTF-16 code
    units and would show regions after a character outside the Basic
    Multilingual Plane shifted. The config declares ``<Labels name="label"
    toName="text">`` with every label the tasks use and ``<Text name="text"
    value="$text"/>``.

``trec``
    A directory with, per (arm, phase) in the selection, a run file
    ``run.<arm>.<phase>.txt`` (``qid Q0 docno rank score runtag``) and a qrels
    file ``qrels.<arm>.<phase>.txt`` (``qid 0 docno rel``); characters other
    than letters, digits, ``.``, ``_`` and ``-`` in arm or phase names become
    ``_``. The run is the reranked stage, whole, with ``docno`` = unit id and
    ``runtag`` = ``ledgerscope-<arm>-<phase>``. trec_eval ranks by score, not
    by the rank column, so the score written is the ledger's score minus
    ``rank * 1e-9`` (ties then keep the ledger's order; strictly decreasing
    scores stay in order), and it is lowered further where needed to keep the
    written scores strictly decreasing down the list (a list not sorted by
    score, or a missing score). Relevance: a unit of that arm and phase's
    chunking (the ``units`` table) is relevant (``rel`` 1) to a question when
    its interval overlaps any gold span of the question; only relevant units
    are listed, so unanswerable controls have no qrels. Ids holding whitespace
    cannot be written in TREC format and are refused.

``jsonl``
    One self-contained line per selected record: every ``records`` column as
    stored (``*_json`` columns stay JSON text), ``reversal``, ``candidates``
    (every stage of :data:`ledgerscope.ledger.schema.STAGES`, each a list of
    ``{rank, unit_id, doc_id, start, end, score, lineage}`` in rank order) and
    ``diagnosis`` (``step``, ``step_name``, ``label``, ``evidence``, ``flags``,
    ``walk``).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from xml.sax.saxutils import quoteattr

from .errors import InputError, Problem

FORMATS = ("fixtures", "label-studio", "trec", "jsonl")
JSONL_FORMAT = "ledgerscope-record-view/1"
MODEL_VERSION = "ledgerscope gold+retrieved"
TIE_EPSILON = 1e-9
_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]")
_TREC_FILE = re.compile(r"^(run|qrels)\..+\.txt$")
_CAND_COLUMNS = ("rank", "unit_id", "doc_id", "start", "end", "score", "lineage")


@dataclass(frozen=True)
class ExportResult:
    count: int  # records selected
    paths: list[Path]  # what was written
    questions: int = 0  # distinct questions written
    format: str = ""


def export(ledger: str | Path, where: str, fmt: str, out: str | Path) -> ExportResult:
    """Write the records ``where`` selects from ``ledger`` to ``out`` in format ``fmt``."""
    from .ledger.read import connect, load_manifest
    from .query import build_record_view, validate_predicate

    ledger, out = Path(ledger), Path(out)
    if fmt not in FORMATS:
        raise InputError(Problem("--format", None, "format",
                                 f"unknown format {fmt!r}; known: {', '.join(FORMATS)}"))
    _check_out(ledger, out, fmt)
    manifest = load_manifest(ledger)
    con = connect(ledger)
    build_record_view(con, ledger)
    predicate = validate_predicate(con, where or "")
    rows = _selection(con, predicate)
    writer = {"fixtures": _export_fixtures, "label-studio": _export_label_studio,
              "trec": _export_trec, "jsonl": _export_jsonl}[fmt]
    paths, questions = writer(con, ledger, manifest, predicate, rows, out)
    return ExportResult(count=len(rows), paths=paths, questions=questions, format=fmt)


# ---------------------------------------------------------------------------
# shared


def _check_out(ledger: Path, out: Path, fmt: str) -> None:
    led, dst = ledger.resolve(), out.resolve()
    if dst == led or led in dst.parents or dst in led.parents:
        raise InputError(Problem(str(out), None, "out", "the export must be written outside the ledger "
                                                        "(the ledger is never modified)"))
    if fmt == "trec":
        if dst.exists() and not dst.is_dir():
            raise InputError(Problem(str(out), None, "out",
                                     "a trec export is a directory; a file is in the way"))
        if dst.is_dir():
            foreign = [p.name for p in dst.iterdir() if not (p.is_file() and _TREC_FILE.match(p.name))]
            if foreign:
                raise InputError(Problem(str(out), None, "out",
                                         "refusing to replace a directory that holds more than a trec export "
                                         f"(found {', '.join(sorted(foreign)[:3])})"))
    else:
        paths = [dst, dst.with_name(dst.name + ".config.xml")] if fmt == "label-studio" else [dst]
        for p in paths:
            if p.is_dir():
                raise InputError(Problem(str(p), None, "out",
                                         f"a {fmt} export is a file; a directory is in the way"))


def _selection(con, predicate: str) -> list[dict]:
    """The selected rows (record_view plus the diagnosis' evidence and walk), in a total order."""
    from .query import DIAGNOSIS_TABLE, VIEW, fetch_dicts, run_query, where_sql

    sql = (f"SELECT s.*, d.evidence_json AS _evidence_json, d.walk_json AS _walk_json "
           f"FROM (SELECT * FROM {VIEW}{where_sql(predicate)}) s LEFT JOIN {DIAGNOSIS_TABLE} d "
           "ON d.arm = s.arm AND d.phase = CAST(s.phase AS VARCHAR) AND d.qid = s.qid "
           "ORDER BY s.arm, s.phase_offset, CAST(s.phase AS VARCHAR), s.qid")
    rows = fetch_dicts(run_query(con, sql))
    for i, r in enumerate(rows):
        r["phase"] = str(r["phase"])
        r["_ord"] = i
        r["_evidence"] = json.loads(r.pop("_evidence_json") or "{}")
        r["_walk"] = json.loads(r.pop("_walk_json") or "[]")
    return rows


def _register_selection(con, rows: list[dict]) -> str:
    import pyarrow as pa

    name = "_ls_export_selection"
    table = pa.table({"arm": pa.array([r["arm"] for r in rows], pa.string()),
                      "phase": pa.array([r["phase"] for r in rows], pa.string()),
                      "qid": pa.array([r["qid"] for r in rows], pa.string()),
                      "ord": pa.array([r["_ord"] for r in rows], pa.int64()),
                      "selection_depth": pa.array([r.get("selection_depth") for r in rows], pa.int64())})
    con.register(name, table)
    return name


def _candidates(con, rows: list[dict], stages: Iterable[str] | None = None,
                cutoff_stage: str | None = None) -> Iterator[tuple[int, list[dict]]]:
    """(ord, candidate rows) per selected record that has any, in selection order, streamed.

    ``stages`` limits the stages read; rows of ``cutoff_stage`` are kept only
    down to the record's selection depth.
    """
    if not rows:
        return
    sel = _register_selection(con, rows)
    params: list = []
    stage_filter = ""
    if stages is not None:
        stages = list(stages)
        stage_filter = f" AND c.stage IN ({', '.join('?' for _ in stages)})"
        params.extend(stages)
    cut = ""
    if cutoff_stage is not None:
        cut = ' AND (c.stage <> ? OR c."rank" <= coalesce(s.selection_depth, 0))'
        params.append(cutoff_stage)
    cols = ", ".join(f'c."{c}"' for c in _CAND_COLUMNS)
    try:
        cur = con.execute(
            f"SELECT s.ord, c.stage, {cols} FROM candidates c JOIN {sel} s "
            "ON c.arm = s.arm AND CAST(c.phase AS VARCHAR) = s.phase AND c.qid = s.qid"
            f"{stage_filter}{cut} ORDER BY s.ord, c.stage, c.\"rank\"", params)
        names = [d[0] for d in cur.description]
        current: int | None = None
        bucket: list[dict] = []
        while True:
            batch = cur.fetchmany(10_000)
            if not batch:
                break
            for values in batch:
                row = dict(zip(names, values, strict=True))
                ord_ = row.pop("ord")
                if ord_ != current:
                    if current is not None:
                        yield current, bucket
                    current, bucket = ord_, []
                bucket.append(row)
        if current is not None:
            yield current, bucket
    finally:
        con.unregister(sel)


@contextlib.contextmanager
def atomic_dir(target: Path) -> Iterator[Path]:
    """Yield an empty temporary directory beside ``target``; swap it in for ``target`` on success.

    On any exception the temporary directory is removed and ``target`` is untouched.
    """
    from .atomic import clear_stale, temp_prefix

    target.parent.mkdir(parents=True, exist_ok=True)
    clear_stale(target, ".tmp")
    clear_stale(target, ".old")
    tmp = Path(tempfile.mkdtemp(prefix=temp_prefix(target), suffix=".tmp", dir=target.parent))
    try:
        yield tmp
        _publish_mode(tmp, directory=True)
        if target.exists():
            old = Path(tempfile.mkdtemp(prefix=temp_prefix(target), suffix=".old", dir=target.parent))
            os.replace(target, old / "x")
            try:
                os.replace(tmp, target)
            except BaseException:
                os.replace(old / "x", target)
                raise
            finally:
                shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _publish_mode(path: Path, directory: bool = False) -> None:
    """Give a temporary file (0600 from mkstemp) or directory the mode a plain create would."""
    path.chmod((0o777 if directory else 0o666) & ~_UMASK)


_UMASK = _umask()


def _json_line(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, default=str) + "\n"


def _source_texts(con) -> dict[str, str]:
    return {d: t for d, t in con.execute("SELECT doc_id, text FROM sources").fetchall()}


def _n_questions(rows: list[dict]) -> int:
    return len({r["qid"] for r in rows})


# ---------------------------------------------------------------------------
# fixtures


def _export_fixtures(con, ledger: Path, manifest: dict, predicate: str, rows: list[dict],
                     out: Path) -> tuple[list[Path], int]:
    from .diagnose import STEP_NAMES
    from .diagnose_ledger import load_ledger_fixtures
    from .fixtures import write_fixtures
    from .sources import Corpus, make_source

    fixtures, _ = load_ledger_fixtures(con, ledger)
    corpus = Corpus()
    for doc_id, version, text, observed, access in con.execute(
            "SELECT doc_id, version, text, observed, access FROM sources").fetchall():
        with contextlib.suppress(Exception):  # a damaged source: its fixtures fail validation, visibly
            corpus.add(make_source(doc_id, text, version, observed, tuple(access or ())))
    by_qid: dict[str, list[dict]] = {}
    for r in rows:
        by_qid.setdefault(r["qid"], []).append(r)
    identity = {k: manifest.get(k) for k in ("identity", "format", "created", "fixtures_digest")}
    identity["path"] = str(ledger)
    out_fixtures = []
    for qid, recs in by_qid.items():
        fx = fixtures.get(qid)
        if fx is None:
            continue
        steps = sorted({int(r["step"]) for r in recs if r.get("step") is not None})
        reason = "exported from ledger for re-annotation: steps " + ", ".join(
            f"{s} ({STEP_NAMES.get(s, '?')})" for s in steps)
        records = [{"arm": r["arm"], "phase": r["phase"], "step": r["step"], "step_name": r["step_name"],
                    "label": r["label"], "flags": list(r.get("flags") or []), "evidence": r["_evidence"],
                    "answer": r.get("answer"), "answer_verdict": r.get("answer_verdict"),
                    "citation_verdict": r.get("citation_verdict")} for r in recs]
        annotations = {**fx.annotations, "ledgerscope": {"ledger": identity, "where": predicate,
                                                         "records": records}}
        adjudication = {"state": "needs-review", "reason": reason, "previous": fx.adjudication}
        out_fixtures.append(replace(fx, annotations=annotations, adjudication=adjudication))
    write_fixtures(out_fixtures, out, corpus, inline_sources=True)  # itself written to a temp and renamed
    _publish_mode(out)
    return [out], len(out_fixtures)


# ---------------------------------------------------------------------------
# Label Studio

_COLOURS = {"gold": "#2e7d32", "packed": "#1565c0", "reranked": "#ef6c00"}


def _export_label_studio(con, ledger: Path, manifest: dict, predicate: str, rows: list[dict],
                         out: Path) -> tuple[list[Path], int]:
    from .atomic import atomic_path
    from .diagnose_ledger import load_ledger_fixtures

    fixtures, _ = load_ledger_fixtures(con, ledger)
    texts = _source_texts(con)
    config = out.with_name(out.name + ".config.xml")
    labels: dict[str, None] = {}
    with atomic_path(out) as tmp, atomic_path(config) as tmp_config:
        with tmp.open("w", encoding="utf-8") as fh:
            fh.write("[")
            first = True
            cands = dict(_candidates(con, rows, ("packed", "reranked"), cutoff_stage="reranked"))
            for r in rows:
                for task in _ls_tasks(r, fixtures.get(r["qid"]), cands.get(r["_ord"], []), texts):
                    for region in task["predictions"][0]["result"]:
                        labels.update(dict.fromkeys(region["value"]["labels"]))
                    fh.write(("\n" if first else ",\n") + json.dumps(task, ensure_ascii=False))
                    first = False
            fh.write("\n]\n")
        tmp_config.write_text(label_config(labels), encoding="utf-8")
        _publish_mode(tmp)
        _publish_mode(tmp_config)
    return [out, config], _n_questions(rows)


def _ls_tasks(rec: dict, fx, cands: list[dict], texts: dict[str, str]) -> Iterator[dict]:
    """One task per document the record involves: gold docs, then packed, then reranked (cutoff) docs."""
    spans = list(fx.spans) if fx is not None else []
    packed = sorted((c for c in cands if c["stage"] == "packed"), key=lambda c: c["rank"])
    reranked = sorted((c for c in cands if c["stage"] == "reranked"), key=lambda c: c["rank"])
    docs = list(dict.fromkeys([s.doc_id for s in spans] + [c["doc_id"] for c in packed + reranked]))
    for doc in docs:
        text = texts.get(doc)
        if text is None:
            continue
        result = []
        for s in spans:
            if s.doc_id == doc and 0 <= s.start < s.end <= len(text):
                result.append(_region(f"gold-{len(result) + 1}", text, s.start, s.end, f"gold:{s.span_id}"))
        for stage, lst in (("packed", packed), ("reranked", reranked)):
            for c in lst:
                if c["doc_id"] == doc and c["start"] is not None and 0 <= c["start"] < c["end"] <= len(text):
                    result.append(_region(f"{stage}-{c['rank']}", text, int(c["start"]), int(c["end"]),
                                          f"{stage} rank {c['rank']}"))
        yield {"data": {"text": text, "question": rec.get("question"), "qid": rec["qid"], "arm": rec["arm"],
                        "phase": rec["phase"], "doc_id": doc, "step": rec.get("step"),
                        "step_name": rec.get("step_name"), "label": rec.get("label")},
               "predictions": [{"model_version": MODEL_VERSION, "result": result}]}


def _label_order(name: str) -> tuple[int, int, str]:
    """gold labels first (by name), then packed, then reranked (by rank)."""
    kind, _, rest = name.partition(" rank ")
    if name.startswith("gold:"):
        return 0, 0, name
    return (1 if kind == "packed" else 2), int(rest) if rest.isdigit() else 0, name


def _region(region_id: str, text: str, start: int, end: int, label: str) -> dict:
    return {"id": region_id, "from_name": "label", "to_name": "text", "type": "labels",
            "value": {"start": start, "end": end, "text": text[start:end], "labels": [label]}}


def label_config(labels: Iterable[str]) -> str:
    """The Label Studio labeling config for the given label names (gold, packed, reranked colours)."""
    lines = ["<View>", '  <Header value="$question"/>', '  <Labels name="label" toName="text">']
    for name in sorted(dict.fromkeys(labels), key=_label_order):
        colour = _COLOURS.get(name.split(":")[0].split(" ")[0], "#757575")
        lines.append(f"    <Label value={quoteattr(name)} background={quoteattr(colour)}/>")
    lines += ["  </Labels>", '  <Text name="text" value="$text"/>', "</View>", ""]
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# TREC


def _safe_name(value: str) -> str:
    return _SAFE_NAME.sub("_", value)


def _trec_id(value: Any, what: str) -> str:
    text = str(value)
    if not text or any(ch.isspace() for ch in text):
        raise InputError(Problem("trec", None, what, f"{text!r} is empty or holds whitespace, which TREC "
                                                     "files cannot represent"))
    return text


def trec_scores(cands: list[dict]) -> list[float]:
    """Scores to write for a rank-ordered list: strictly decreasing, so trec_eval's order is the rank order.

    ``score - rank * 1e-9``; where that is not below the previous written score
    (ties beyond the epsilon, a list not sorted by score, a missing or NaN
    score) it is set just below the previous one.
    """
    out: list[float] = []
    for c in cands:
        score = c.get("score")
        value = float(score) - int(c["rank"]) * TIE_EPSILON if score is not None else -float(c["rank"])
        if out and not value < out[-1]:
            value = out[-1] - max(TIE_EPSILON, abs(out[-1]) * 1e-12)
        out.append(value)
    return out


def _export_trec(con, ledger: Path, manifest: dict, predicate: str, rows: list[dict],
                 out: Path) -> tuple[list[Path], int]:
    from .diagnose_ledger import gold_spans_table, load_ledger_fixtures

    groups: dict[tuple[str, str], list[dict]] = {}
    for r in rows:
        groups.setdefault((r["arm"], r["phase"]), []).append(r)
    names: dict[str, tuple[str, str]] = {}
    for arm, phase in groups:
        name = f"{_safe_name(arm)}.{_safe_name(phase)}"
        if name in names:
            raise InputError(Problem("trec", None, "arm/phase",
                                     f"{(arm, phase)} and {names[name]} map to the same file name {name}"))
        names[name] = (arm, phase)
    fixtures, _ = load_ledger_fixtures(con, ledger)
    by_ord = {r["_ord"]: r for r in rows}
    with atomic_dir(out) as tmp:
        handles: dict[tuple[str, str], Any] = {}
        try:
            for (arm, phase) in groups:
                handles[(arm, phase)] = (tmp / f"run.{_safe_name(arm)}.{_safe_name(phase)}.txt").open(
                    "w", encoding="utf-8")
            for ord_, cands in _candidates(con, rows, ("reranked",)):
                rec = by_ord[ord_]
                tag = _safe_name(f"ledgerscope-{rec['arm']}-{rec['phase']}")
                handles[(rec["arm"], rec["phase"])].writelines(_run_lines(rec["qid"], cands, tag))
        finally:
            for fh in handles.values():
                fh.close()
        for (arm, phase), recs in groups.items():
            qrels = _qrels(con, arm, phase, recs, gold_spans_table(fixtures, answerable_only=True))
            (tmp / f"qrels.{_safe_name(arm)}.{_safe_name(phase)}.txt").write_text(
                "".join(_qrels_lines(qrels)), encoding="utf-8")
    paths = sorted(out.iterdir())
    return paths, _n_questions(rows)


def _run_lines(qid: str, cands: list[dict], tag: str) -> Iterator[str]:
    cands = sorted(cands, key=lambda c: c["rank"])
    q = _trec_id(qid, "qid")
    for c, score in zip(cands, trec_scores(cands), strict=True):
        yield f"{q} Q0 {_trec_id(c['unit_id'], 'unit_id')} {int(c['rank'])} {score!r} {tag}\n"


def _qrels(con, arm: str, phase: str, recs: list[dict], spans) -> list[tuple[str, str]]:
    """(qid, unit_id) of this arm and phase's units that overlap a gold span of a selected question."""
    import pyarrow as pa

    qids = sorted({r["qid"] for r in recs})
    con.register("_ls_qrels_spans", spans)
    con.register("_ls_qrels_qids", pa.table({"qid": pa.array(qids, pa.string())}))
    try:
        return con.execute(
            "SELECT DISTINCT s.qid, u.unit_id FROM units u JOIN _ls_qrels_spans s "
            'ON u.doc_id = s.doc_id AND u."start" < s."end" AND u."end" > s."start" '
            "JOIN _ls_qrels_qids q ON q.qid = s.qid "
            "WHERE u.arm = ? AND CAST(u.phase AS VARCHAR) = ? ORDER BY s.qid, u.unit_id",
            [arm, phase]).fetchall()
    finally:
        con.unregister("_ls_qrels_spans")
        con.unregister("_ls_qrels_qids")


def _qrels_lines(qrels: list[tuple[str, str]]) -> Iterator[str]:
    for qid, unit_id in qrels:
        yield f"{_trec_id(qid, 'qid')} 0 {_trec_id(unit_id, 'unit_id')} 1\n"


# ---------------------------------------------------------------------------
# JSONL


def _export_jsonl(con, ledger: Path, manifest: dict, predicate: str, rows: list[dict],
                  out: Path) -> tuple[list[Path], int]:
    from .atomic import atomic_path
    from .ledger import schema

    record_cols = schema.RECORDS.names
    stream = _candidates(con, rows)
    pending = next(stream, None)
    with atomic_path(out) as tmp, tmp.open("w", encoding="utf-8") as fh:
        for r in rows:
            cands: list[dict] = []
            if pending is not None and pending[0] == r["_ord"]:
                cands = pending[1]
                pending = next(stream, None)
            fh.write(_json_line(_jsonl_row(r, cands, record_cols, schema.STAGES)))
        _publish_mode(tmp)
    return [out], _n_questions(rows)


def _jsonl_row(r: dict, cands: list[dict], record_cols: list[str], stages: tuple[str, ...]) -> dict:
    by_stage: dict[str, list[dict]] = {s: [] for s in stages}
    for c in cands:
        by_stage.setdefault(c["stage"], []).append({k: c[k] for k in _CAND_COLUMNS})
    for lst in by_stage.values():
        lst.sort(key=lambda c: c["rank"])
    row: dict[str, Any] = {"format": JSONL_FORMAT}
    row.update({k: r.get(k) for k in record_cols})
    row["reversal"] = r.get("reversal")
    row["candidates"] = by_stage
    row["diagnosis"] = {"step": r.get("step"), "step_name": r.get("step_name"), "label": r.get("label"),
                        "evidence": r["_evidence"], "flags": list(r.get("flags") or []), "walk": r["_walk"]}
    return row
