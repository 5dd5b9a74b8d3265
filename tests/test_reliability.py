"""Reliability and security on one real ledger built from hostile, partly restricted inputs.

* Inputs are never modified: opening, diagnosing, comparing, exporting and re-running leave every
  byte of the ledger, the fixtures and the corpus as it was.
* Untrusted text (Rich markup, ANSI and OSC escapes, bidi overrides, long lines) in documents,
  questions, ids and answers prints literally and safely in every CLI output; ``--json`` output is
  valid JSON with those characters escaped.
* Access labels: a reader without clearance never gets a restricted span in retrieval results,
  expansion, the packed context, answers or exports, although the restricted document is the best
  match for the question; a reader with clearance does get it (so the check is not vacuous). The
  selection-time re-check holds even when the restricted units are in the index.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ledgerscope.cli.main import app

from .sweep_data import DISTRACTORS

pytestmark = pytest.mark.slow

MARKUP = "[bold red]x[/]"
ANSI = "\x1b[31mred\x1b[0m"
OSC_TITLE = "\x1b]0;title\x07"
OSC_LINK = "\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\"
BIDI = "\u202eevil"
HOSTILE = f"{MARKUP} {ANSI} {OSC_TITLE} {OSC_LINK} {BIDI}"
RAW_BAD = (b"\x1b", b"\x07", "\u202e".encode())
MARKER = "RESTRICTED-7731"
RESTRICTED_DOC = "restricted/board-minutes.md"

POLICY = (
    "# Request retention\n\n"
    "Support requests are stored in the regional data store of the workspace. "
    "Requests may be retained for 30 days. This limit is 7 days for requests marked temporary. "
    f"Style note: {HOSTILE} is how the style guide writes it.\n\n"
    "Attachments follow the same schedule as the request they belong to.\n"
)
RESTRICTED = (
    "# Board minutes\n\n"
    "How long may requests marked temporary be retained? Requests marked temporary may be retained "
    f"for 7 days, the board decided in {MARKER}. Temporary requests are retained 7 days.\n"
)
LONG_LINE = "a very long line " * 120
HOSTILE_QID = f"hostile-{MARKUP}-\x1b[31m-\u202e"


def _corpus_rows() -> list[dict]:
    rows = [
        {"doc_id": "policy/retention.md", "text": POLICY},
        {"doc_id": RESTRICTED_DOC, "text": RESTRICTED, "access": ["restricted"]},
        {"doc_id": "notes/long.md", "text": LONG_LINE + "\n"},
    ]
    return rows + [{"doc_id": k, "text": v} for k, v in sorted(DISTRACTORS.items())]


FIXTURES = [
    {
        "format": "ledgerscope-fixture/1",
        "qid": "temp-retention",
        "question": "How long may requests marked temporary be retained?",
        "segment": "rule-exception",
        "answer": {"expected": "7 days", "default": "30 days", "missing_condition": "abstain"},
        "spans": [
            {"id": "rule", "doc_id": "policy/retention.md", "quote": "Requests may be retained for 30 days."},
            {
                "id": "qualifier",
                "doc_id": "policy/retention.md",
                "quote": "This limit is 7 days for requests marked temporary.",
                "dependency": "exception",
            },
        ],
        "sufficient_sets": [["rule", "qualifier"]],
    },
    {
        "format": "ledgerscope-fixture/1",
        "qid": HOSTILE_QID,
        "question": f"What does the style note {HOSTILE} say?",
        "segment": "definition-referent",
        "answer": {"expected": MARKUP},
        "spans": [{"id": "note", "doc_id": "policy/retention.md", "quote": f"Style note: {HOSTILE} is how"}],
        "sufficient_sets": [["note"]],
    },
]


def _arm(name: str, clearance: list[str]) -> str:
    return (
        f'name = "{name}"\ncapacity = 16\noverlap = 0\nphases = [0, 7]\nbudget_tokens = 60\ntop_k = 2\n'
        '[selection]\nexpansion = "neighbours"\nneighbours = 1\n'
        f"[generator]\nabstain_threshold = 0.3\n[access]\nclearance = {json.dumps(clearance)}\n"
    )


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, Path]:
    from ledgerscope.inputs.fixtures import load_fixtures
    from ledgerscope.inputs.sources import load_corpus
    from ledgerscope.pipeline.arm.config import load_arm
    from ledgerscope.pipeline.run.sweep import sweep

    root = tmp_path_factory.mktemp("reliability")
    corpus = root / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(r) + "\n" for r in _corpus_rows()), encoding="utf-8")
    fixtures = root / "fixtures.jsonl"
    fixtures.write_text("".join(json.dumps(f) + "\n" for f in FIXTURES), encoding="utf-8")
    reader, cleared = root / "reader.toml", root / "cleared.toml"
    reader.write_text(_arm("reader", []), encoding="utf-8")
    cleared.write_text(_arm("cleared", ["restricted"]), encoding="utf-8")
    fx, merged = load_fixtures(fixtures, load_corpus(corpus))
    ledger = root / "ledger"
    sweep(fx, merged, [load_arm(reader), load_arm(cleared)], ledger)
    return {
        "root": root,
        "ledger": ledger,
        "corpus": corpus,
        "fixtures": fixtures,
        "reader": reader,
        "cleared": cleared,
    }


def _tree(*roots: Path) -> dict[str, str]:
    """Every file's SHA-256 and every directory, so a new file or directory shows too."""
    out = {}
    for root in roots:
        paths = [root] if root.is_file() else sorted(root.rglob("*"))
        for p in paths:
            out[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
    return out


def _invoke(*args: str):
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "250", "NO_COLOR": None})


# ---------------------------------------------------------------------------
# inputs are never modified


def test_reading_never_changes_an_input_byte(built, tmp_path):
    from ledgerscope.analysis.diagnosis import build_record_view
    from ledgerscope.analysis.diagnosis.feed import diagnose_ledger
    from ledgerscope.ledger.read import connect

    ledger = built["ledger"]
    inputs = (ledger, built["fixtures"], built["corpus"], built["reader"], built["cleared"])
    before = _tree(*inputs)
    assert len(before) > 20
    con = connect(ledger)
    build_record_view(con)
    con.execute("SELECT count(*) FROM record_view").fetchall()
    list(diagnose_ledger(con, ledger))
    con.close()
    runs = [
        ("diagnose", str(ledger)),
        ("diagnose", str(ledger), "--json"),
        ("compare", str(ledger), "--candidate", "reader", "--baseline", "cleared", "--n-resamples", "200"),
        (
            "compare",
            str(ledger),
            "--candidate",
            "reader",
            "--baseline",
            "cleared",
            "--json",
            "--n-resamples",
            "200",
        ),
        ("rerun", str(ledger), "--arm", "reader", "--qid", "temp-retention", "--phase", "0"),
    ]
    for fmt, name in (
        ("jsonl", "x.jsonl"),
        ("fixtures", "x.fx.jsonl"),
        ("label-studio", "x.json"),
        ("trec", "trec"),
    ):
        # TREC ids cannot hold whitespace: the hostile qid (refused, cleanly) stays out of that one
        where = "qid = 'temp-retention'" if fmt == "trec" else ""
        runs.append(("export", str(ledger), "--format", fmt, "--out", str(tmp_path / name), "--where", where))
    runs.append(("convert", str(ledger), "--to", "jsonl", "--out", str(tmp_path / "interchange")))
    for args in runs:
        result = _invoke(*args)
        assert result.exit_code == 0, (args, result.output)
        assert _tree(*inputs) == before, args
    assert not list(ledger.rglob(".*.tmp"))


def test_every_output_is_written_to_a_temporary_file_and_renamed(built, tmp_path, monkeypatch):
    """A failure mid-write leaves the earlier output (or none), and no temporary file."""
    import ledgerscope.export as export_mod
    import ledgerscope.export.jsonl as export_jsonl

    out = tmp_path / "x.jsonl"
    assert _invoke("export", str(built["ledger"]), "--format", "jsonl", "--out", str(out)).exit_code == 0
    old = out.read_bytes()

    def fail(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(export_jsonl, "_jsonl_row", fail)
    with pytest.raises(OSError):
        export_mod.export(built["ledger"], "", "jsonl", out)
    assert out.read_bytes() == old
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.jsonl"]


# ---------------------------------------------------------------------------
# untrusted text in the terminal


def _assert_safe(data: bytes, where: str) -> None:
    for bad in RAW_BAD:
        assert bad not in data, f"{where}: raw {bad!r} reached the terminal"


def _assert_json_lines(data: bytes, where: str) -> list:
    _assert_safe(data, where)
    return [json.loads(line) for line in data.decode("utf-8").splitlines() if line.strip()]


def test_diagnose_table_and_json_print_untrusted_text_literally(built):
    ledger = str(built["ledger"])
    table = _invoke("diagnose", ledger)
    assert table.exit_code == 0, table.output
    _assert_safe(table.stdout_bytes, "diagnose")
    assert b"[bold red]x[/]" in table.stdout_bytes  # the hostile qid, shown as typed
    assert b"\\x1b[31m" in table.stdout_bytes and b"\\u202e" in table.stdout_bytes  # escapes made visible
    js = _invoke("diagnose", ledger, "--json")
    rows = _assert_json_lines(js.stdout_bytes, "diagnose --json")
    assert {r["qid"] for r in rows} == {"temp-retention", HOSTILE_QID}  # decoded back exactly
    assert b"[bold red]x[/]" in js.stdout_bytes


def test_compare_report_and_json_are_safe(built):
    ledger = str(built["ledger"])
    args = ("compare", ledger, "--candidate", "reader", "--baseline", "cleared", "--n-resamples", "200")
    report = _invoke(*args)
    assert report.exit_code == 0, report.output
    _assert_safe(report.stdout_bytes, "compare")
    js = _invoke(*args, "--json")
    [doc] = _assert_json_lines(js.stdout_bytes, "compare --json")
    assert doc["comparison"]["candidate"]["arm"] == "reader"


def test_rerun_diff_lines_print_a_hostile_answer_literally(built, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ledgerscope.ledger import schema
    from ledgerscope.testing.ledger_files import rerecord, table_file

    copy = tmp_path / "ledger"
    shutil.copytree(built["ledger"], copy)
    part = table_file(copy, "records", "reader", "0")
    rows = pq.read_table(part).to_pylist()
    for row in rows:
        if row["qid"] == "temp-retention":
            row["answer"] = f"tampered {HOSTILE} " + "x" * 3000
    pq.write_table(pa.Table.from_pylist(rows, schema=schema.RECORDS), part)
    rerecord(copy, part)
    lines = _invoke("rerun", str(copy), "--arm", "reader", "--qid", "temp-retention", "--phase", "0")
    assert lines.exit_code == 1, lines.output  # it differs
    _assert_safe(lines.stdout_bytes, "rerun")
    assert b"answer: recorded 'tampered [bold red]x[/] \\x1b[31mred" in lines.stdout_bytes
    js = _invoke("rerun", str(copy), "--arm", "reader", "--qid", "temp-retention", "--phase", "0", "--json")
    _assert_safe(js.stdout_bytes, "rerun --json")
    doc = json.loads(js.stdout_bytes)
    assert any(d["field"] == "answer" and HOSTILE in d["recorded"] for d in doc["differences"])


def test_validate_summary_and_errors_are_safe(built, tmp_path):
    hostile_name = tmp_path / "fx-[bold red]x-\x1b[31m-\u202e.jsonl"  # no "/" in a file name
    shutil.copy(built["fixtures"], hostile_name)
    ok = _invoke("validate", str(hostile_name), "--corpus", str(built["corpus"]))
    assert ok.exit_code == 0, ok.output
    _assert_safe(ok.stdout_bytes, "validate")
    # the title (the file name) may wrap at the table's width: compare without whitespace
    assert b"[boldred]x-\\x1b[31m-\\u202e.jsonl" in b"".join(ok.stdout_bytes.split())
    bad = tmp_path / "bad.jsonl"
    fx = json.loads(json.dumps(FIXTURES[1]))
    fx["spans"][0]["quote"] = f"Style note: {HOSTILE} is NOT how"  # the message echoes both quotes
    bad.write_text(json.dumps(fx) + "\n", encoding="utf-8")
    err = _invoke("validate", str(bad), "--corpus", str(built["corpus"]))
    assert err.exit_code == 2
    _assert_safe(err.stderr_bytes, "validate error")
    assert b"[bold red]x[/]" in err.stderr_bytes and b"\\x1b" in err.stderr_bytes
    assert err.stdout_bytes == b""


def test_import_report_and_export_summary_are_safe(built, tmp_path):
    squad = tmp_path / "squad.json"
    context = f"The limit is 7 days. {HOSTILE}"
    squad.write_text(
        json.dumps(
            {
                "data": [
                    {
                        "title": f"t {MARKUP}",
                        "paragraphs": [
                            {
                                "context": context,
                                "qas": [
                                    {
                                        "id": f"q-{MARKUP}-\x1b]0;pwned\x07",
                                        "question": f"Why {HOSTILE}?",
                                        "answers": [{"text": f"{MARKUP} {ANSI}", "answer_start": 0}],
                                    }
                                ],
                            }
                        ],
                    }
                ]
            }
        ),
        encoding="utf-8",
    )
    report = _invoke("import", "squad", str(squad), "--out", str(tmp_path / "imported"))
    assert report.exit_code == 0, report.output
    _assert_safe(report.stdout_bytes, "import squad")
    assert b"offset:" in report.stdout_bytes and b"[bold red]x[/]" in report.stdout_bytes
    out = tmp_path / "export-[bold red]x-\x1b[31m.jsonl"
    exp = _invoke("export", str(built["ledger"]), "--format", "jsonl", "--out", str(out))
    assert exp.exit_code == 0, exp.output
    _assert_safe(exp.stdout_bytes, "export")
    assert b"export-[bold red]x-\\x1b[31m.jsonl" in exp.stdout_bytes


def test_error_messages_are_safe_and_bounded(tmp_path):
    bad = tmp_path / "fixtures.jsonl"
    bad.write_text(
        json.dumps(
            {
                "format": "ledgerscope-fixture/1",
                "qid": "q",
                "question": "?",
                "segment": f"{HOSTILE} " + "y" * 100_000,
                "spans": [],
            }
        )
        + "\n",
        encoding="utf-8",
    )
    err = _invoke("validate", str(bad))
    assert err.exit_code == 2
    _assert_safe(err.stderr_bytes, "validate")
    lines = err.stderr_bytes.decode().splitlines()
    assert lines and all(len(line) <= 2000 + len(str(bad)) for line in lines)
    assert "[bold red]x[/]" in lines[0]


# ---------------------------------------------------------------------------
# access labels


def _words(value: str | None) -> list[str]:
    text = value or ""
    return [w for w in (MARKER, RESTRICTED_DOC, "board") if w in text]


def _con(built):
    from ledgerscope.ledger.read import connect

    return connect(built["ledger"])


def test_a_reader_without_clearance_never_sees_the_restricted_document(built):
    con = _con(built)
    q = "SELECT count(*) FROM {} WHERE arm = 'reader' AND doc_id = ?"
    assert con.execute(q.format("units"), [RESTRICTED_DOC]).fetchone()[0] == 0
    assert con.execute(q.format("candidates"), [RESTRICTED_DOC]).fetchone()[0] == 0
    assert (
        con.execute(
            "SELECT count(*) FROM boundaries WHERE arm = 'reader' AND doc_id = ?", [RESTRICTED_DOC]
        ).fetchone()[0]
        == 0
    )
    recs = con.execute(
        "SELECT packed_context, answer, citations_json, expansion_dropped_json, "
        "generator_detail_json FROM records WHERE arm = 'reader'"
    ).fetchall()
    assert recs
    for row in recs:
        for value in row:  # the marker, the doc id, and "board" (a word only the restricted doc has)
            assert not {MARKER, RESTRICTED_DOC, "board"} & set(_words(value)), value
    oracle = con.execute("SELECT context, answer FROM oracle WHERE arm = 'reader'").fetchall()
    assert all(MARKER not in (c or "") + (a or "") for c, a in oracle)


def test_a_cleared_reader_gets_it_as_the_best_match(built):
    """Not vacuous: with clearance the restricted document is retrieved, first, and packed."""
    con = _con(built)
    top = con.execute(
        "SELECT phase, doc_id FROM candidates WHERE arm = 'cleared' AND qid = 'temp-retention' "
        "AND stage = 'reranked' AND rank = 1"
    ).fetchall()
    assert top and all(doc == RESTRICTED_DOC for _, doc in top), top
    packed = con.execute(
        "SELECT packed_context FROM records WHERE arm = 'cleared' AND qid = 'temp-retention'"
    ).fetchall()
    assert packed and all(RESTRICTED_DOC in ctx and "board" in ctx for (ctx,) in packed)


@pytest.mark.parametrize("fmt", ["jsonl", "fixtures", "label-studio", "trec"])
def test_exports_for_the_reader_hold_nothing_restricted(built, tmp_path, fmt):
    from ledgerscope.export import export

    only = " AND qid = 'temp-retention'" if fmt == "trec" else ""  # TREC ids hold no whitespace
    result = export(built["ledger"], "arm = 'reader'" + only, fmt, tmp_path / "out")
    assert result.count > 0
    files = [p for p in (tmp_path).rglob("*") if p.is_file()]
    assert files
    for p in files:
        data = p.read_bytes()
        assert MARKER.encode() not in data and RESTRICTED_DOC.encode() not in data, p
    # the cleared arm's export withholds the restricted text unless asked, and carries it when asked
    # (the check can fail; trec files hold ids only, and the fixtures only their questions' gold documents)
    other = export(built["ledger"], "arm = 'cleared'" + only, fmt, tmp_path / "cleared" / "out")
    blob = b"".join(p.read_bytes() for p in (tmp_path / "cleared").rglob("*") if p.is_file())
    assert MARKER.encode() not in blob and RESTRICTED_DOC.encode() in blob, fmt
    assert other.count > 0
    asked = export(
        built["ledger"], "arm = 'cleared'" + only, fmt, tmp_path / "asked" / "out", include_restricted=True
    )
    blob = b"".join(p.read_bytes() for p in (tmp_path / "asked").rglob("*") if p.is_file())
    assert (MARKER.encode() in blob) == (fmt in ("jsonl", "label-studio")), fmt
    assert asked.count == other.count


def test_selection_rechecks_labels_when_restricted_units_are_in_the_index(built):
    """The second line of defence: index built WITH the restricted source (the pre-filter bypassed),
    questions run for the reader WITHOUT clearance: retrieval finds the restricted units, selection,
    expansion, packing and the answer never carry them."""
    from ledgerscope.ledger.verify import load_manifest
    from ledgerscope.pipeline.arm.config import arm_from_dict
    from ledgerscope.pipeline.contracts.units import Phase
    from ledgerscope.pipeline.embedding.encoder import shared_encoder
    from ledgerscope.pipeline.run.cascade import build_phase, build_runtime, run_questions
    from ledgerscope.pipeline.run.oracle import run_oracle
    from ledgerscope.pipeline.run.rerun import load_ledger_inputs

    manifest, corpus, fixtures = load_ledger_inputs(built["ledger"])
    assert manifest == load_manifest(built["ledger"])
    reader = build_runtime(arm_from_dict(manifest["arms"]["reader"]["config"]), shared_encoder)
    cleared = build_runtime(arm_from_dict(manifest["arms"]["cleared"]["config"]), shared_encoder)
    index = build_phase(cleared, Phase("0", 0), list(corpus))  # holds the restricted units
    assert any(u.doc_id == RESTRICTED_DOC for u in index.units)
    texts = {s.doc_id: s.text for s in corpus}
    oracle = {fx.qid: run_oracle(reader, fx) for fx in fixtures}
    records, cands = run_questions(reader, index, fixtures, texts, oracle)
    by_stage: dict[str, set] = {}
    for row in cands.rows():
        by_stage.setdefault(row["stage"], set()).add(row["doc_id"])
    assert RESTRICTED_DOC in by_stage["reranked"]  # retrieval did find it ...
    for stage in ("selected", "packed", "topk"):  # ... selection never passed it on
        assert RESTRICTED_DOC not in by_stage.get(stage, set()), stage
    for rec in records:
        assert MARKER not in (rec["packed_context"] or "") and MARKER not in (rec["answer"] or "")
        assert all(RESTRICTED_DOC not in uid for uid in rec["packed_unit_ids"])


def test_expand_drops_neighbours_whose_labels_the_reader_lacks():
    from ledgerscope.pipeline.contracts.units import Unit
    from ledgerscope.pipeline.ranking.select import expand, visible

    def unit(i: int, access: tuple[str, ...] = (), version: str = "v1") -> Unit:
        return Unit(
            f"d@{i}", "d", version, i, i * 10, i * 10 + 10, f"text {i}", i, i + 1, i * 10, i * 10 + 10, access
        )

    units = [unit(0), unit(1, ("restricted",)), unit(2), unit(3, ("restricted", "legal")), unit(4, (), "v2")]
    by_doc = {"d": units}
    out, dropped = expand([units[2]], by_doc, 1, frozenset())
    assert [u.unit_id for u in out] == ["d@2"]  # both neighbours are restricted
    assert {d["unit_id"]: d["reason"] for d in dropped} == {
        "d@1": "access label not held by reader",
        "d@3": "access label not held by reader",
    }
    out, dropped = expand([units[2]], by_doc, 1, frozenset({"restricted"}))
    assert [u.unit_id for u in out] == ["d@1", "d@2"]  # d@3 needs "legal" as well
    assert [d["unit_id"] for d in dropped] == ["d@3"]
    out, dropped = expand([units[3]], by_doc, 1, frozenset({"restricted", "legal"}))
    assert [u.unit_id for u in out] == ["d@2", "d@3"]
    assert dropped == [{"unit_id": "d@4", "reason": "version differs from the hit"}]
    assert visible(units[0], frozenset()) and not visible(units[3], frozenset({"restricted"}))
