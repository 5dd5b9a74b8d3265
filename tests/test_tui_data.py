"""The TUI's data layer and text building, without a terminal: SQL diagnosis mirror, filters,
keymaps, themes, literal rendering, and the import boundary."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledgerscope.analysis.diagnosis import build_record_view
from ledgerscope.analysis.diagnosis.feed import diagnose_ledger
from ledgerscope.analysis.diagnosis.tree import diagnose
from ledgerscope.analysis.validity import unverified_arms
from ledgerscope.common.errors import InputError
from ledgerscope.ledger import schema
from ledgerscope.tui.data import LedgerSession, resolve_arms
from ledgerscope.tui.keymap import keymap_path, load_keymap, parse_keymap
from ledgerscope.tui.model import Cell, Filters, worst_phase
from ledgerscope.tui.render import answer_text, make_palette
from ledgerscope.tui.render_source import context_text, source_text

from .test_tui_ledger import MARKUP_DOC, ledger  # noqa: F401  (the shared, session-built ledger)

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def session(ledger):  # noqa: F811
    s = LedgerSession(ledger)
    s.open()
    return s


# ---------------------------------------------------------------------------
# the diagnosis in SQL equals the Python diagnosis


@pytest.mark.slow
def test_record_view_matches_diagnose_on_a_real_ledger(session, ledger):  # noqa: F811
    rows = session._fetch(
        "candidate",
        "SELECT arm, CAST(phase AS VARCHAR) AS phase, qid, step, step_name, label, flags FROM record_view",
    )
    mine = {(r["arm"], r["phase"], r["qid"]): r for r in rows}
    cur = session.cursor("candidate")
    checked = 0
    for d in diagnose_ledger(cur, ledger):
        m = mine[(d["arm"], d["phase"], d["qid"])]
        assert (m["step"], m["step_name"], m["label"], m["flags"]) == (
            d["step"],
            d["step_name"],
            d["label"],
            d["flags"],
        ), d
        checked += 1
    assert checked == len(mine) == 40


@pytest.mark.slow
def test_one_question_read_whole_diagnoses_as_the_bulk_feed(session, ledger):  # noqa: F811
    """The two ways a record reaches the tree, held to one result: one question's records with
    every row (``analysis.diagnosis.record``, the TUI's) and the whole ledger with the evidence rows
    only (``feed.diagnose_ledger``)."""
    roles = {session.arms[r].name: r for r in session.roles}
    cur = session.cursor("candidate")
    checked = 0
    for d in diagnose_ledger(cur, ledger):
        diag = session.detail(d["qid"], d["phase"]).arms[roles[d["arm"]]].diagnosis
        mine = (diag.step, diag.step_name, diag.label, list(diag.flags), diag.evidence, diag.walk)
        assert mine == (d["step"], d["step_name"], d["label"], d["flags"], d["evidence"], d["walk"]), d
        checked += 1
    assert checked == 40


@pytest.mark.slow
def test_record_view_has_the_columns_of_query_build_record_view(session, ledger):  # noqa: F811
    from ledgerscope.analysis.diagnosis.query import view_columns
    from ledgerscope.ledger.read import connect

    con = connect(ledger)
    build_record_view(con)
    cur = session.cursor("candidate")
    assert view_columns(cur) == view_columns(con)


_VERDICTS = st.sampled_from(
    [
        "correct",
        "wrong",
        "not-judged",
        "abstained",
        "infrastructure-failure",
        "critical-condition-error",
        "false-assertion",
        None,
    ]
)
_RECORD = st.fixed_dictionaries(
    {
        **{c: st.sampled_from([True, False, None]) for c in schema.SUPPORT_COLUMNS},
        "answerable": st.sampled_from([True, False, None]),
        "gold_status": st.sampled_from(["ok", "", None, "version-mismatch"]),
        "answer_verdict": _VERDICTS,
        "citation_verdict": st.sampled_from(
            ["supported", "unsupported", "unresolvable", "no-citation", "not-applicable", None]
        ),
        "single_unit_complete": st.sampled_from([True, False, None]),
        "oracle_verdict": _VERDICTS,
        "oracle_feasible": st.sampled_from([True, False, None]),
        "oracle_row": st.one_of(st.none(), st.tuples(_VERDICTS, st.sampled_from([True, False, None]))),
    }
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_RECORD, min_size=1, max_size=25))
def test_record_view_matches_diagnose_on_any_flags(records):
    con = duckdb.connect()
    rows, oracle = [], []
    for i, r in enumerate(records):
        row = {f.name: None for f in schema.RECORDS}
        row.update({k: v for k, v in r.items() if k != "oracle_row"})
        row.update(arm="a", phase=str(i % 3), qid=f"q{i}")
        rows.append(row)
        if r["oracle_row"] is not None:
            oracle.append(
                {f.name: None for f in schema.ORACLE}
                | {
                    "arm": "a",
                    "qid": f"q{i}",
                    "answer_verdict": r["oracle_row"][0],
                    "feasible": r["oracle_row"][1],
                }
            )
    con.register("_r", pa.Table.from_pylist(rows, schema=schema.RECORDS))
    con.register("_o", pa.Table.from_pylist(oracle, schema=schema.ORACLE))
    con.execute("CREATE VIEW records AS SELECT * FROM _r")
    con.execute("CREATE VIEW oracle AS SELECT * FROM _o")
    build_record_view(con)
    unverified = unverified_arms(con)
    got = {
        q: (s, n, lab, f)
        for q, s, n, lab, f in con.execute(
            "SELECT qid, step, step_name, label, flags FROM record_view"
        ).fetchall()
    }
    for row, r in zip(rows, records, strict=True):
        orow = (
            None
            if r["oracle_row"] is None
            else {"answer_verdict": r["oracle_row"][0], "feasible": r["oracle_row"][1]}
        )
        row["answer_unverified"] = "a" in unverified  # the arm's oracle meter (analysis/validity.py)
        d = diagnose(row, {}, None, {}, orow)
        assert got[row["qid"]] == (d.step, d.step_name, d.label, list(d.flags)), (row, orow)


# ---------------------------------------------------------------------------
# arms, filters, list


@pytest.mark.slow
def test_default_arms_and_explicit_choices(ledger):  # noqa: F811
    arms = resolve_arms(ledger, None, None, None)
    assert (arms["candidate"].name, arms["baseline"].name) == ("candidate", "baseline")
    assert arms["candidate"].phases == ("0", "1", "2", "5", "9")
    swapped = resolve_arms(ledger, None, "baseline", "candidate")
    assert (swapped["candidate"].name, swapped["baseline"].name) == ("baseline", "candidate")
    with pytest.raises(InputError, match="no arm 'nope'"):
        resolve_arms(ledger, None, "nope", None)
    with pytest.raises(InputError, match="no baseline arm"):
        resolve_arms(ledger, None, None, "candidate")
    two = resolve_arms(ledger, ledger, None, None)  # a second ledger: its 'baseline' arm
    assert two["baseline"].name == "baseline"


@pytest.mark.slow
def test_filters_compose_into_one_validated_predicate(session):
    f = Filters(where="NOT support_packed", segment="rule-exception", step=8, verdict="it's", reversal=True)
    composed = f.compose("candidate")
    assert composed.startswith("arm = 'candidate' AND (")
    assert "answer_verdict = 'it''s'" in composed and composed.endswith("reversal")
    normalised = session.validate("candidate", composed)
    assert "support_packed" in normalised
    assert f.describe() == "NOT support_packed; segment=rule-exception; step=8; verdict=it's; reversals only"


@pytest.mark.slow
def test_list_pages_search_and_a_bad_filter(session):
    n, predicate = session.build_list("candidate", Filters())
    assert (n, predicate) == (4, "arm = 'candidate'")
    rows = session.page("candidate", 0, 10)
    assert [r.qid for r in rows] == sorted(r.qid for r in rows)
    assert set(rows[0].cells) == {"candidate", "baseline"}
    assert set(rows[0].cells["candidate"]) == {"0", "1", "2", "5", "9"}
    assert session.search("candidate", "WEEKLY") == [0]
    assert session.locate("candidate", "temp-retention") == 3
    n, _ = session.build_list("candidate", Filters(segment="rule-exception"))
    assert n == 1
    with pytest.raises(InputError, match="unknown column 'stpe'"):
        session.build_list("candidate", Filters(where="stpe = 8"))
    assert session.count_records("candidate", "arm = 'baseline'") == (20, 4)


@pytest.mark.slow
def test_detail_has_both_arms_and_the_full_diagnosis(session):
    d = session.detail("temp-retention", "0")
    assert set(d.arms) == {"candidate", "baseline"}
    rd = d.arms["candidate"]
    assert rd.record["qid"] == "temp-retention" and rd.record["phase"] == "0"
    assert rd.diagnosis.walk and rd.diagnosis.step == tdata_step(session, "candidate", "0", "temp-retention")
    assert set(rd.coverage) == {"rule", "qualifier"}
    assert "packed" in rd.stages and rd.cuts["policy/retention.md"]
    assert session.detail("temp-retention", "0") is d  # cached
    missing = session.detail("temp-retention", "no-such-phase").arms["candidate"]
    assert missing.record is None


def tdata_step(session, role, phase, qid) -> int:
    return session._scalar(
        role,
        "SELECT step FROM record_view WHERE arm = ? AND phase = ? AND qid = ?",
        [session.arms[role].name, phase, qid],
    )


@pytest.mark.slow
def test_survival_and_summaries(session):
    surv = session.survival("candidate")
    assert set(surv) == {"0", "1", "2", "5", "9"}
    assert surv["0"]["n_answerable"] == 3
    summary = session.phase_summary("baseline")
    assert set(summary) == set(surv) and all(0 <= r["correct"] <= 1 for r in summary.values())


def test_worst_phase_rule():
    phases = ("0", "1", "2")
    same = {p: Cell("correct", 0) for p in phases}
    assert worst_phase(same, phases) is None
    cells = {"0": Cell("correct", 0), "1": Cell("wrong", 8), "2": Cell("critical-condition-error", 8)}
    assert worst_phase(cells, phases) == "2"
    cells["2"] = Cell("wrong", 3)  # same verdict: the earlier losing step is worse
    assert worst_phase(cells, phases) == "2"
    cells["2"] = Cell("wrong", 8)  # a tie: the first phase
    assert worst_phase(cells, phases) == "1"


# ---------------------------------------------------------------------------
# rendering is literal


@pytest.mark.slow
def test_source_and_context_render_markup_and_escapes_literally(session):
    d = session.detail("markup-notes", "0").arms["candidate"]
    text = source_text(d, "packed", make_palette())
    plain = text.plain
    assert "[bold red]x[/" in plain and "[bold red]x[/]" in plain.replace("┃", "")  # a cut may fall inside
    assert "\\x1b[31m" in plain and "\x1b" not in plain
    assert "⟪keep⟫" in plain and "┃" in plain
    assert all(
        not s.style or "red" not in str(s.style) for s in text.spans if "bold red" in plain[s.start : s.end]
    )
    ctx = context_text(d, make_palette()).plain
    assert "\x1b" not in ctx and "budget" in ctx


@pytest.mark.slow
def test_answer_pane_resolves_citations_and_flags_unresolvable(session):
    import copy

    d = copy.copy(session.detail("temp-retention", "0").arms["candidate"])
    d.record = dict(
        d.record,
        citations_json='[{"label": "9", "unit_id": "gone@1-2", "doc_id": "gone", "start": 1, "end": 2}]',
        answer="[bold]30 days[/bold]\x1b[2J",
    )
    plain = answer_text(d, make_palette()).plain
    assert "⊘ unresolvable: gone@1-2" in plain
    assert "[bold]30 days[/bold]\\x1b[2J" in plain
    assert "oracle" in plain


def test_palette_keeps_attributes_without_colours():
    p = make_palette({"success": "not-a-colour"})
    assert p["v-correct"].bold and p["gold"].underline and p["diff"].reverse


# ---------------------------------------------------------------------------
# keymap and themes


def test_keymap_parsing():
    ids = ["go-down", "export"]
    km, problems = parse_keymap('[keymap]\ngo-down = "j,down"\nexport = ["x", "ctrl+e"]\n', ids)
    assert km == {"go-down": "j,down", "export": "x,ctrl+e"} and problems == []
    km, problems = parse_keymap('go-down = "s"\nnope = "x"\nexport = 3\n', ids, "k.toml")
    assert km == {"go-down": "s"}
    assert problems == [
        "k.toml: unknown binding id 'nope'",
        "k.toml: export: expected a key string or a list of key strings",
    ]
    assert parse_keymap("go-down = ", ids)[1][0].startswith("keymap: not valid TOML")


def test_keymap_location(tmp_path, monkeypatch):
    assert keymap_path({"XDG_CONFIG_HOME": "/x"}) == Path("/x/ledgerscope/keymap.toml")
    assert keymap_path({"LEDGERSCOPE_KEYMAP": str(tmp_path / "k.toml")}) == tmp_path / "k.toml"
    monkeypatch.setenv("LEDGERSCOPE_KEYMAP", str(tmp_path / "missing.toml"))
    assert load_keymap(["go-down"])[1] == [f"{tmp_path / 'missing.toml'}: keymap file not found"]


def test_built_in_theme_files_load_and_a_user_file_overrides_one(tmp_path, monkeypatch):
    from ledgerscope.tui.themes import BUILT_IN_THEMES, load_themes, theme_dirs

    themes, problems = load_themes([BUILT_IN_THEMES])
    assert problems == []
    by_name = {t.name: t for t in themes}
    assert set(by_name) == {
        "ledgerscope-dark",
        "ledgerscope-light",
        "ledgerscope-high-contrast",
        "ledgerscope-ansi",
    }
    assert by_name["ledgerscope-ansi"].ansi and not by_name["ledgerscope-light"].dark
    assert all({"ls-gold", "ls-retrieved"} <= set(t.variables) for t in themes)
    # the search order: built-in, the user's config, then LEDGERSCOPE_THEMES; a later file wins
    user = tmp_path / "config" / "ledgerscope" / "themes"
    user.mkdir(parents=True)
    (user / "mine.toml").write_text('name = "ledgerscope-dark"\nprimary = "#123456"\n')
    (tmp_path / "bad.toml").write_text('name = "x"\nprimary = "#fff"\ncolour = "red"\n')
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("LEDGERSCOPE_THEMES", str(tmp_path))
    assert theme_dirs() == [BUILT_IN_THEMES, user, tmp_path]
    themes, problems = load_themes()
    assert {t.name: t for t in themes}["ledgerscope-dark"].primary == "#123456"
    assert len(themes) == 4
    assert len(problems) == 1 and "unknown theme field(s) colour" in problems[0]


# ---------------------------------------------------------------------------
# boundaries


def test_data_and_render_modules_and_headless_cli_do_not_import_textual():
    code = (
        "import sys, ledgerscope.cli.main, ledgerscope.tui.data, ledgerscope.tui.render, "
        "ledgerscope.tui.model, ledgerscope.tui.details, "
        "ledgerscope.tui.render_source, ledgerscope.tui.keymap\n"
        "assert 'textual' not in sys.modules, 'textual imported'\n"
        "assert 'torch' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_the_app_module_does_not_import_torch():
    code = (
        "import sys, ledgerscope.tui.app\n"
        "assert not {'torch', 'sentence_transformers'} & set(sys.modules), 'heavy import'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


@pytest.mark.slow
def test_markup_doc_is_in_the_shared_ledger(session):
    assert MARKUP_DOC in session.fixtures("candidate")[1]


@pytest.mark.slow
def test_a_second_ledger_holds_the_baseline(ledger, tmp_path):  # noqa: F811
    import shutil

    other = tmp_path / "other"
    shutil.copytree(ledger, other)
    s = LedgerSession(ledger, other)
    s.open()
    assert s.arms["baseline"].ledger == other and s.arms["baseline"].name == "baseline"
    assert s.cursor("candidate") is not None and len(s._cons) == 2
    s.build_list("baseline", Filters())
    rows = s.page("baseline", 0, 10)
    assert {"candidate", "baseline"} <= set(rows[0].cells)
    d = s.detail("temp-retention", "1")
    assert d.arms["baseline"].record["arm"] == "baseline" and d.arms["candidate"].record["arm"] == "candidate"
    comparison, decision = s.compare(n_resamples=200)
    assert comparison["baseline"]["arm"] == "baseline" and decision is None


RULE_HEAD = (
    'format = "ledgerscope-release-rule/1"\ndescription = "tui test"\ncandidate = "candidate"\n'
    'baseline = "baseline"\nconfidence = 0.9\nn_resamples = 300\nseed = 3\n'
    'interval_handling = "conservative"\nstress_sets = ["representative"]\n'
)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("rule", "outcome", "reason"),
    [
        # no difference falls below -1: the check passes whatever the data
        ("min_questions = 1\n[max_support_loss]\nmean = -1.0\n", "accept", "within tolerance"),
        # the same check, with far more questions asked for than the ledger holds
        ("min_questions = 1000\n[max_support_loss]\nmean = -1.0\n", "collect-more-evidence", "min_questions"),
        # every record's prompt is longer than one token
        ("min_questions = 1\n[max_evidence_tokens]\nmax = 1\n", "reject", "VIOLATES"),
    ],
    ids=["accept", "collect-more-evidence", "reject"],
)
def test_compare_with_a_rule_gives_the_release_decision(session, tmp_path, rule, outcome, reason):
    path = tmp_path / "rule.toml"
    path.write_text(RULE_HEAD + rule)
    comparison, decision = session.compare(rule_path=path)
    assert comparison["settings"]["n_resamples"] == 300 and comparison["settings"]["seed"] == 3
    assert decision["outcome"] == outcome
    assert reason in decision["reasons"][0], decision["reasons"]


def test_a_long_document_shows_a_window_around_the_marks():
    from ledgerscope.inputs.fixtures import Fixture, GoldSpan
    from ledgerscope.tui.model import RecordDetail
    from ledgerscope.tui.render_source import SOURCE_MARGIN

    text = ("lorem ipsum " * 20_000) + "THE GOLD SENTENCE." + (" dolor sit" * 20_000)
    start = text.index("THE GOLD")
    span = GoldSpan("g", "big.txt", start, start + 18)
    fx = Fixture("q", "?", "number-scope", (span,), (("g",),))
    packed = [
        {"rank": 1, "doc_id": "big.txt", "start": start - 10, "end": start + 30, "unit_id": "u", "score": 1.0}
    ]
    rd = RecordDetail(
        "candidate",
        "a",
        "0",
        {"qid": "q"},
        {"packed": packed},
        [],
        {"big.txt": [start - 5]},
        None,
        fx,
        {"big.txt": text},
        None,
        {"g": "full"},
    )
    plain = source_text(rd, "packed", make_palette()).plain
    assert "⟪g⟫THE GOLD SENTENCE.⟪/g⟫" in plain and "⟦r1" in plain and "┃" in plain
    assert f"… {start - 10 - SOURCE_MARGIN} characters before …" in plain and "characters after …" in plain
    assert len(plain) < 4 * SOURCE_MARGIN


# ---------------------------------------------------------------------------
# one record through the views; loading as the cursor moves


def _views_over_rows(tables: dict[str, list[dict]]):
    """A DuckDB connection whose ledger views are in-memory tables: no ledger files at all."""
    con = duckdb.connect()
    schemas = {**schema.TABLES, "oracle": schema.ORACLE}
    for name, table_schema in schemas.items():
        rows = [{f.name: None for f in table_schema} | r for r in tables.get(name, [])]
        con.register(f"_{name}", pa.Table.from_pylist(rows, schema=table_schema))
        con.execute(f"CREATE VIEW {name} AS SELECT * FROM _{name}")
    return con


def test_a_record_is_read_through_the_views_alone():
    from ledgerscope.analysis.diagnosis.record import Cancelled, read_record_rows

    def cand(arm, stage, rank, doc):
        key = {"arm": arm, "phase": "p", "qid": "q", "stage": stage, "rank": rank}
        return key | {"unit_id": f"{doc}@{rank}", "score": 1.0 / rank, "doc_id": doc, "start": 0, "end": 5}

    con = _views_over_rows(
        {
            "records": [
                {"arm": a, "phase": p, "qid": q, "answer": f"{a}/{p}/{q}"}
                for a in ("a", "b")
                for p in ("p", "other")
                for q in ("q", "r")
            ],
            "candidates": [
                cand("a", "packed", 2, "d2"),
                cand("a", "packed", 1, "d1"),
                cand("b", "bm25", 1, "d1"),
            ],
            "units": [
                {"arm": "a", "phase": "p", "unit_id": u, "doc_id": d, "start": s, "end": s + 5}
                for u, d, s in (("u2", "d1", 5), ("u1", "d1", 0), ("u3", "d2", 0), ("u4", "d3", 0))
            ],
            "boundaries": [{"arm": "a", "phase": "p", "doc_id": "d1", "cut_chars": [5]}],
            "oracle": [{"arm": "b", "qid": "q", "answer_verdict": "correct"}],
        }
    )
    rows = read_record_rows(con, ["a", "b", "c"], ["p"], "q", None, unverified={"b"})
    assert set(rows) == {("a", "p"), ("b", "p")}  # arm c holds no such record
    a, b = rows[("a", "p")], rows[("b", "p")]
    assert a.record["answer"] == "a/p/q" and b.record["answer"] == "b/p/q"
    assert not a.record["answer_unverified"] and b.record["answer_unverified"]
    assert [c["rank"] for c in a.stages["packed"]] == [1, 2] and "arm" not in a.stages["packed"][0]
    assert a.docs == ["d1", "d2"]  # no gold documents given: those of the packed context
    assert [u["unit_id"] for u in a.units] == ["u1", "u2", "u3"] and a.cuts == {"d1": [5]}
    assert b.docs == [] and b.units == [] and a.oracle is None and b.oracle["answer_verdict"] == "correct"
    gold = read_record_rows(con, ["a"], ["p"], "q", ["d3"])[("a", "p")]
    assert gold.docs == ["d3"] and [u["unit_id"] for u in gold.units] == ["u4"]
    assert read_record_rows(con, ["a"], ["p"], "nope", None) == {}
    # several phases in one read: each record keeps its own rows
    both = read_record_rows(con, ["a"], ["p", "other"], "q", None)
    assert set(both) == {("a", "p"), ("a", "other")} and both[("a", "other")].stages == {}
    assert both[("a", "p")].stages == a.stages and both[("a", "other")].record["answer"] == "a/other/q"
    calls = []

    def stop() -> bool:
        calls.append(1)
        return len(calls) > 1  # the second check: after the candidates were read

    with pytest.raises(Cancelled):
        read_record_rows(con, ["a"], ["p"], "q", None, cancelled=stop)
    assert len(calls) == 2


def test_a_record_is_loaded_once_whichever_thread_asks_and_a_cancelled_load_keeps_nothing():
    import threading

    from ledgerscope.analysis.diagnosis.record import Cancelled
    from ledgerscope.tui.details import DetailStore

    loads: list[tuple[str, list[str]]] = []
    started, release = threading.Event(), threading.Event()

    def load(qid, phases, cancelled=None):
        loads.append((qid, list(phases)))
        if qid == "slow":
            started.set()
            release.wait(5)
        if cancelled is not None and cancelled():
            raise Cancelled
        return {p: f"{qid}@{p}" for p in phases}

    store = DetailStore(load)
    assert store.get("q", ["0", "1"]) == {"0": "q@0", "1": "q@1"} and store.cached("q", "1")
    assert store.get("q", ["1", "2"]) == {"1": "q@1", "2": "q@2"}
    assert loads == [("q", ["0", "1"]), ("q", ["2"])]  # kept ones are not read again
    # a load in flight is waited for, not run twice
    got = {}
    first = threading.Thread(target=lambda: got.setdefault("a", store.get("slow", ["0", "1"])))
    first.start()
    started.wait(5)
    second = threading.Thread(target=lambda: got.setdefault("b", store.get("slow", ["1"])))
    second.start()
    release.set()
    first.join(5)
    second.join(5)
    assert got == {"a": {"0": "slow@0", "1": "slow@1"}, "b": {"1": "slow@1"}}
    assert loads.count(("slow", ["0", "1"])) == 1 and ("slow", ["1"]) not in loads
    # a cancelled load keeps nothing and leaves nothing in flight
    with pytest.raises(Cancelled):
        store.get("gone", ["0"], cancelled=lambda: True)
    assert not store.cached("gone", "0") and store.get("gone", ["0"]) == {"0": "gone@0"}


def test_neighbours_and_move_timing():
    from ledgerscope.tui.loading import MoveTimer, by_question, neighbour_keys

    phases = ("0", "1", "2")
    assert neighbour_keys(["b", None], "2", phases, "a") == [("b", "2"), ("a", "0"), ("a", "1")]
    assert neighbour_keys(["b", None], "2", phases, "a", phases_first=True) == [
        ("a", "0"),
        ("a", "1"),
        ("b", "2"),
        ("b", "0"),
        ("b", "1"),
    ]
    assert neighbour_keys([None, None], "9", phases, "a") == []
    five = ("0", "1", "2", "3", "4")  # after a phase move every other phase, the nearest first
    assert [p for _, p in neighbour_keys([], "0", five, "a")] == ["1", "4"]
    assert [p for _, p in neighbour_keys([], "0", five, "a", phases_first=True)] == ["1", "4", "2", "3"]
    assert by_question([("b", "2"), ("a", "0"), ("a", "1"), ("b", "0")]) == [
        ("b", ["2"]),
        ("a", ["0", "1"]),
        ("b", ["0"]),
    ]
    timer = MoveTimer()
    timer.start("question")
    timer.cancel()
    timer.finish()
    timer.start("phase")
    timer.finish()
    timer.finish()
    assert timer.timings["question"] == [] and len(timer.timings["phase"]) == 1
