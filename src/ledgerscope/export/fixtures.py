"""The ``fixtures`` export: the selected questions as canonical fixtures, flagged for re-annotation.

Canonical fixtures (``ledgerscope-fixture/1`` JSONL, as
:func:`ledgerscope.inputs.fixtures.write_fixtures` writes them) of the distinct
questions in the selection, sources inline so the file validates on its own
(``ledgerscope validate OUT``). Each carries
``annotations["ledgerscope"] = {"ledger": {identity, format, created, path},
"where": predicate, "records": [{arm, phase, step, step_name, label, flags,
evidence, answer, answer_verdict, citation_verdict}, ...]}`` and the
adjudication ``{"state": "needs-review", "reason": "exported from ledger for
re-annotation: steps ...", "previous": <the fixture's adjudication>}``.

Restricted documents (access labels) are not carried inline unless asked; their spans keep
doc id, offsets and version but no quote, and ``annotations["ledgerscope"]["redacted"]``
lists the documents and spans withheld. Such a file validates against the authorised corpus
(``ledgerscope validate OUT --corpus CORPUS``).
"""

from __future__ import annotations

import contextlib
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ledgerscope.export._common import publish_mode

if TYPE_CHECKING:
    from duckdb import DuckDBPyConnection

    from ledgerscope.export._common import ExportRequest
    from ledgerscope.export.redaction import Redactor
    from ledgerscope.inputs.fixtures import Fixture
    from ledgerscope.inputs.sources import Corpus


def export_fixtures(req: ExportRequest) -> tuple[list[Path], int]:
    """Write the fixtures of the selected questions to ``out``; (paths written, questions written)."""
    con, ledger, manifest, predicate = req.con, req.ledger, req.manifest, req.predicate
    rows, out, loaded, redactor = req.rows, req.out, req.loaded, req.redactor
    from ledgerscope.analysis.diagnosis import STEP_NAMES
    from ledgerscope.inputs.fixtures import write_fixtures

    fixtures, _ = loaded  # load_ledger_fixtures, read once by export()
    corpus = _corpus(con, redactor)
    by_qid: dict[str, list[dict[str, Any]]] = {}
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
            f"{s} ({STEP_NAMES.get(s, '?')})" for s in steps
        )
        records = [_record_note(r) for r in recs]
        annotations = {
            **fx.annotations,
            "ledgerscope": {"ledger": identity, "where": predicate, "records": records},
        }
        adjudication = {"state": "needs-review", "reason": reason, "previous": fx.adjudication}
        if redactor is not None:
            fx, annotations = _redacted(fx, annotations, redactor)
        out_fixtures.append(replace(fx, annotations=annotations, adjudication=adjudication))
    write_fixtures(out_fixtures, out, corpus, inline_sources=True)  # itself written to a temp and renamed
    publish_mode(out)
    return [out], len(out_fixtures)


def _corpus(con: DuckDBPyConnection, redactor: Any) -> Corpus:
    """The ledger's sources as a corpus for the exported fixtures, restricted ones left out."""
    from ledgerscope.inputs.sources import Corpus, make_source

    corpus = Corpus()
    for doc_id, version, text, observed, access in con.execute(
        "SELECT doc_id, version, text, observed, access FROM sources"
    ).fetchall():
        if redactor is not None and redactor.is_restricted(doc_id):
            continue  # its text stays home: only its id and digest leave, on the spans
        with contextlib.suppress(Exception):  # a damaged source: its fixtures fail validation, visibly
            corpus.add(make_source(doc_id, text, version, observed, tuple(access or ())))
    return corpus


def _record_note(r: dict[str, Any]) -> dict[str, Any]:
    """One diagnosed record as the exported fixture notes it (why it was sent for re-annotation)."""
    return {
        "arm": r["arm"],
        "phase": r["phase"],
        "step": r["step"],
        "step_name": r["step_name"],
        "label": r["label"],
        "flags": list(r.get("flags") or []),
        "evidence": r["_evidence"],
        "answer": r.get("answer"),
        "answer_verdict": r.get("answer_verdict"),
        "citation_verdict": r.get("citation_verdict"),
    }


def _redacted(fx: Fixture, annotations: dict[str, Any], redactor: Redactor) -> tuple[Fixture, dict[str, Any]]:
    """The fixture with the quotes of its restricted spans withheld, and what was withheld noted."""
    spans, withheld = [], []
    for span in fx.spans:
        if redactor.is_restricted(span.doc_id):
            redactor.span_text(span.doc_id, span.start, span.end, span.quote or "")
            spans.append(replace(span, quote=None, prefix="", suffix=""))
            withheld.append(span.span_id)
        else:
            spans.append(span)
    annotations = redactor.value(annotations)
    docs = sorted({s.doc_id for s in fx.spans if redactor.is_restricted(s.doc_id)})
    if docs or withheld:
        annotations["ledgerscope"]["redacted"] = {
            "documents": [
                {k: redactor.restricted[d][k] for k in ("doc_id", "version", "access")} for d in docs
            ],
            "spans": withheld,
            "marker": "quote withheld (restricted source); offsets and version kept",
        }
    return replace(fx, spans=tuple(spans)), annotations
