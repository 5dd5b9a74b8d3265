"""Chunks onto source intervals: wrong offsets repaired, repeats told apart, the unlocatable reported.

The rules are :mod:`ledgerscope.ingest.derive.resolve`'s; every case here is one a real
pipeline produces (an off-by-some start, a boilerplate sentence that occurs twice,
text the splitter stripped or re-spaced, a chunk of another document version).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from ledgerscope.ingest.derive.resolve import ResolutionReport, normalise, resolve_chunk, resolve_chunks
from ledgerscope.ingest.read.chunkstore import Chunk
from ledgerscope.inputs.coords import CODEPOINT, UTF8, UTF16
from ledgerscope.inputs.sources import Corpus, make_source
from ledgerscope.ledger.read import connect

TEXT = (
    "Retention\n\nAudit logs are kept for 90 days.  Contact support.\n\n"
    "Team plans\n\nAudit logs are kept for 30 days.  Contact support.\n\nSee größe 🕒 notes."
)
DOC = "docs/audit.md"


@pytest.fixture()
def corpus() -> Corpus:
    c = Corpus()
    c.add(make_source(DOC, TEXT))
    return c


def chunk(text: str, **kw) -> Chunk:
    return Chunk(kw.pop("chunk_id", "c"), kw.pop("doc_id", DOC), text, 1, **kw)


def test_given_offsets_are_verified_by_slicing_in_their_own_system(corpus):
    s = TEXT.index("größe")
    e = s + len("größe 🕒")
    for system in (CODEPOINT, UTF8, UTF16):
        from ledgerscope.inputs.coords import from_codepoint_span

        a, b = from_codepoint_span(TEXT, s, e, system)
        r = resolve_chunk(chunk("größe 🕒", start=a, end=b, system=system), corpus)
        assert (r.status, r.start, r.end) == ("verified", s, e), system
    # UTF-8 offsets read as code points do not slice to the text: repaired, not trusted
    a, b = from_codepoint_span(TEXT, s, e, UTF8)
    r = resolve_chunk(chunk("größe 🕒", start=a, end=b, system=CODEPOINT), corpus)
    assert (r.status, r.start, r.end) == ("repaired", s, e) and "slices" in r.note


def test_wrong_offsets_are_repaired_to_the_nearest_occurrence(corpus):
    second = TEXT.index("Audit logs are kept for 30")
    text = "Contact support."
    near_second = TEXT.index(text, second)
    r = resolve_chunk(
        chunk(text, start=near_second - 7, end=near_second - 7 + len(text), system=CODEPOINT), corpus
    )
    assert (r.status, r.start) == ("repaired", near_second)
    assert f"repaired to [{near_second}, {near_second + len(text)})" in r.note and "nearest" in r.note
    # an offset inside a multi-byte character does not translate: repaired from the text
    inside = len(TEXT[: TEXT.index("ö")].encode()) + 1
    r = resolve_chunk(chunk("notes.", start=inside, end=inside + 6, system=UTF8), corpus)
    assert r.status == "repaired" and "does not translate" in r.note


def test_text_that_occurs_twice_is_ambiguous_unless_context_tells_them_apart(corpus):
    text = "Contact support."
    r = resolve_chunk(chunk(text), corpus)
    assert r.status == "ambiguous" and not r.resolved and r.start is None and "2 times" in r.note
    r = resolve_chunk(chunk(text, prefix="kept for 30 days.  "), corpus)
    assert (r.status, r.start) == ("located", TEXT.index(text, TEXT.index("30 days")))
    r = resolve_chunk(chunk(text, suffix="\n\nTeam plans"), corpus)
    assert (r.status, r.start) == ("located", TEXT.index(text))
    # offsets equally near two occurrences (0 and 6; given start 3): ambiguous, never a coin toss
    twice = Corpus()
    twice.add(make_source("t.md", "ab XX ab"))
    r = resolve_chunk(chunk("ab", doc_id="t.md", start=3, end=5, system=CODEPOINT), twice)
    assert r.status == "ambiguous" and "equally near" in r.note
    r = resolve_chunk(chunk("ab", doc_id="t.md", start=4, end=6, system=CODEPOINT), twice)
    assert (r.status, r.start) == ("repaired", 6)


def test_text_differing_only_in_whitespace_is_located_and_said_so(corpus):
    r = resolve_chunk(chunk("Audit logs are kept for 90 days. Contact\nsupport."), corpus)
    s = TEXT.index("Audit logs are kept for 90")
    e = TEXT.index("support.", s) + len("support.")
    assert (r.status, r.start, r.end) == ("located-whitespace", s, e)
    assert "whitespace" in r.note
    assert normalise(TEXT[s:e])[0] == normalise("Audit logs are kept for 90 days. Contact\nsupport.")[0]


def test_text_that_occurs_nowhere_and_missing_documents_are_reported(corpus):
    rs = resolve_chunks(
        [
            chunk("Audit logs are kept forever.", chunk_id="x1"),
            chunk("anything", chunk_id="x2", doc_id="no/such.md"),
            chunk("Retention", chunk_id="x3", version="sha256:" + "0" * 64),
            chunk("Retention", chunk_id="ok"),
        ],
        corpus,
    )
    # a chunk of another version whose text is still there: located, flagged, never fatal
    assert [r.status for r in rs] == ["unlocatable", "document-missing", "version-drifted", "located"]
    assert (rs[2].start, rs[2].end) == (0, len("Retention"))
    report = ResolutionReport.of(rs).to_json()
    assert report["counts"] == {"document-missing": 1, "located": 1, "unlocatable": 1, "version-drifted": 1}
    assert report["per_document"][DOC] == {"located": 1, "unlocatable": 1, "version-drifted": 1}
    example = report["examples"]["unlocatable"][0]
    assert example.startswith("x1 (line 1, docs/audit.md): its text occurs nowhere")
    assert report["unlocated"]["count"] == 2 and report["unlocated"]["of"] == 4
    assert report["unlocated"]["per_document"][DOC]["unlocated"] == 1
    drifted = resolve_chunks([chunk("Audit logs are kept forever.", version="sha256:" + "0" * 64)], corpus)
    assert drifted[0].status == "version-differs" and "occurs nowhere" in drifted[0].note


def test_an_unlocatable_chunk_is_a_unit_without_an_interval_or_stops_with_strict(tmp_path):
    """Through the CLI: a trace naming a chunk that lies nowhere is ingested (the chunk a unit without
    an interval, reported per document) when the share of such chunks is under --max-unlocated,
    stops (exit 2, located) over it, and stops at the chunk with --strict (the old behaviour); a
    repaired and a whitespace-located chunk are reported and used."""
    from .ingest_pipeline import CORPUS, FIXTURES

    doc = (CORPUS / "plans" / "plans-and-limits.md").read_text()
    rule = "Each uploaded file may be up to 250 MB."
    s = doc.index(rule)
    chunks = [
        {
            "chunk_id": "rule",
            "doc_id": "plans/plans-and-limits.md",
            "text": rule,
            "start": s + 3,
            "end": s + 3 + len(rule),
            "coordinate_system": "codepoint-half-open",
        },
        {
            "chunk_id": "spaced",
            "doc_id": "plans/plans-and-limits.md",
            "text": "  " + rule.replace(" ", "\n  "),
        },
        {"chunk_id": "nowhere", "doc_id": "plans/plans-and-limits.md", "text": "Files may be up to 9 TB."},
    ]
    (tmp_path / "c.jsonl").write_text("".join(json.dumps(c) + "\n" for c in chunks))
    trace = {
        "qid": "re-free-upload",
        "config": "x",
        "retrieved_ids": ["rule", "spaced", "nowhere"],
        "context_ids": ["rule"],
        "context_text": rule,
        "answer": "250 MB",
    }
    (tmp_path / "t.jsonl").write_text(json.dumps(trace) + "\n")
    cmd = [
        sys.executable,
        "-m",
        "ledgerscope.cli",
        "ingest",
        str(tmp_path / "t.jsonl"),
        "--chunks",
        str(tmp_path / "c.jsonl"),
        "--fixtures",
        str(FIXTURES),
        "--corpus",
        str(CORPUS),
    ]
    ok = subprocess.run(
        [*cmd, "--out", str(tmp_path / "ok"), "--max-unlocated", "0.5"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ok.returncode == 0, ok.stderr
    assert "chunks: repaired 1, located-whitespace 1, unlocatable 1" in ok.stdout
    assert "unlocated chunks: 1 of 3 (33.33%)" in ok.stdout
    assert "  plans/plans-and-limits.md: 1" in ok.stdout and "e.g. nowhere (unlocatable, line 3)" in ok.stdout
    assert "chunker output recorded" in ok.stdout
    con = connect(tmp_path / "ok")
    rows = con.execute('SELECT unit_id, located, placement, "start" FROM units ORDER BY unit_id').fetchall()
    assert rows == [
        ("nowhere", False, "unlocatable", None),
        ("rule", True, "repaired", s),
        ("spaced", True, "located-whitespace", s),
    ]
    over = subprocess.run(
        [*cmd, "--out", str(tmp_path / "over")], capture_output=True, text=True, timeout=120
    )
    assert over.returncode == 2 and not (tmp_path / "over").exists()
    assert (
        "1 of 3 chunks (33.3%) could not be placed in the corpus, more than --max-unlocated 0.1"
        in over.stderr
    )
    bad = subprocess.run(
        [*cmd, "--out", str(tmp_path / "bad"), "--strict"], capture_output=True, text=True, timeout=120
    )
    assert bad.returncode == 2 and not (tmp_path / "bad").exists()
    assert re.search(
        r"c\.jsonl:3: text: chunk 'nowhere' \(unlocatable\): its text occurs nowhere", bad.stderr
    )
