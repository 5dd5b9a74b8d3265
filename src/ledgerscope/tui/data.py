"""Data access for the TUI: SQL over a ledger and pure helpers. No Textual here.

Every method of :class:`LedgerSession` may run in a worker thread: each one
takes its own DuckDB cursor (DuckDB connections are not shared across threads)
and returns plain data. Nothing is written to the ledger directory: the helper
tables (``tui_index``, ``tui_list``) live in the in-memory DuckDB database.

Declared choices
----------------
* **Record view.** The filter bar takes the predicate language of ``export
  --where`` (:mod:`ledgerscope.query`): one boolean expression over
  ``record_view`` (every ``records`` column plus ``step``, ``step_name``,
  ``label``, ``flags``, ``reversal``). :func:`query.build_record_view` runs the
  whole diagnosis in Python (seconds on a large ledger), so the TUI builds the
  same view in SQL: :func:`create_record_view` mirrors
  :func:`ledgerscope.diagnose.diagnosis_step`, the label rules and the flags
  of :func:`ledgerscope.diagnose.diagnose`, which depend only on the record's
  flags, verdicts and the oracle row. ``tests/test_tui_data.py`` checks the
  two agree on every record of a real ledger. The full
  :class:`~ledgerscope.diagnose.Diagnosis` (walk and evidence) is computed for
  the selected record only.
* **Questions list.** One row per question of the current arm that has at
  least one record (any phase) matching the filter, ordered by qid; pages are
  fetched with ``LIMIT``/``OFFSET`` from the ``tui_list`` table.
* **Worst phase of a question** (grid mark): the phase whose record fails
  (step other than 0), with the most severe answer verdict
  (:data:`VERDICT_SEVERITY`), then the earliest losing step, then the first
  phase; marked only when the phases differ or the worst one fails.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..diagnose import PASSING_ANSWERS, STEP_LABELS, STEP_NAMES, SUPPORT_WALK
from ..errors import InputError, Problem
from ..ledger.read import connect, load_manifest

ROLES = ("candidate", "baseline")

#: verdict -> glyph; meaning never rests on colour alone
VERDICT_GLYPHS: dict[str, str] = {
    "correct": "✓",
    "wrong": "✗",
    "critical-condition-error": "!",
    "abstained": "∅",
    "not-judged": "?",
    "infrastructure-failure": "⚠",
    "false-assertion": "⊘",
}
MISSING_GLYPH = "·"  # no record for this (arm, phase, question)
UNKNOWN_GLYPH = "~"
REVERSAL_GLYPH = "↕"
WORST_GLYPH = "▼"
VERDICT_SEVERITY: dict[str | None, int] = {
    "false-assertion": 7, "critical-condition-error": 6, "wrong": 5, "infrastructure-failure": 4,
    "abstained": 3, "not-judged": 1, "correct": 0,
}
CITATION_GLYPHS = {"supported": "✓", "unsupported": "✗", "unresolvable": "⊘", "no-citation": "∅",
                   "not-applicable": "–"}
ORACLE_FAILURES = ("critical-condition-error", "abstained", "wrong", "false-assertion")
INFRA = "infrastructure-failure"


def verdict_glyph(verdict: str | None) -> str:
    if verdict is None:
        return MISSING_GLYPH
    return VERDICT_GLYPHS.get(verdict, UNKNOWN_GLYPH)


def sql_literal(value: str) -> str:
    return "'" + str(value).replace("'", "''") + "'"


def _path_literal(path: Path) -> str:
    return sql_literal(str(path))


# ---------------------------------------------------------------------------
# the diagnosis in SQL (mirrors ledgerscope.diagnose)


def _kept(col: str) -> str:
    return f"coalesce({col}, false)"


def _lost_sql() -> str:
    """The step at which support is lost for good (NULL: the packed context keeps it)."""
    walk = list(SUPPORT_WALK)
    parts = [f"WHEN {_kept(walk[-1][1])} THEN NULL"]
    for i in range(len(walk) - 2, -1, -1):
        parts.append(f"WHEN {_kept(walk[i][1])} THEN {walk[i + 1][0]}")
    return f"CASE {' '.join(parts)} ELSE {walk[0][0]} END"


def _recovered_sql() -> str:
    """Some stage lost support that a later stage (up to the packed context) regains."""
    cols = [c for _, c, _ in SUPPORT_WALK]
    terms = []
    for j in range(1, len(cols)):
        before = " AND ".join(_kept(c) for c in cols[:j])
        terms.append(f"({_kept(cols[j])} AND NOT ({before}))")
    return "(" + " OR ".join(terms) + ")"


def _in(values: Iterable[str]) -> str:
    return "(" + ", ".join(sql_literal(v) for v in values) + ")"


def _step_sql() -> str:
    passing = _in(sorted(PASSING_ANSWERS))
    return (
        "CASE WHEN answerable = false THEN (CASE WHEN answer_verdict = 'abstained' THEN 0 ELSE 9 END) "
        "WHEN coalesce(nullif(gold_status, ''), 'ok') <> 'ok' THEN 1 "
        "WHEN _lost IS NOT NULL THEN _lost "
        f"WHEN answer_verdict IS NULL OR answer_verdict NOT IN {passing} THEN 9 "
        "WHEN (CASE WHEN answer_verdict = 'not-judged' "
        "THEN coalesce(citation_verdict IN ('unsupported', 'unresolvable'), false) "
        "ELSE citation_verdict IS DISTINCT FROM 'supported' END) THEN 10 "
        "ELSE 0 END"
    )


def _step_case(table: Mapping[int, str]) -> str:
    whens = " ".join(f"WHEN {k} THEN {sql_literal(v)}" for k, v in sorted(table.items()))
    return f"CASE step {whens} END"


def _label_sql() -> str:
    fails = _in(ORACLE_FAILURES)
    return (
        "CASE WHEN answerable = false THEN (CASE WHEN step = 0 THEN 'control-abstained' "
        f"WHEN answer_verdict = '{INFRA}' THEN '{INFRA}' ELSE 'control-false-assertion' END) "
        f"WHEN step = 9 AND answer_verdict = '{INFRA}' THEN '{INFRA}' "
        "WHEN step BETWEEN 2 AND 8 AND _ov = 'correct' THEN 'retrieval-failure-oracle-success' "
        f"WHEN step BETWEEN 2 AND 9 AND _ov IN {fails} THEN 'both-fail' "
        "WHEN step = 9 AND _ov = 'correct' THEN 'generator-failure-oracle-success' "
        f"ELSE {_step_case(STEP_LABELS)} END"
    )


def _flags_sql() -> str:
    nc = "answerable IS DISTINCT FROM false"
    fails = _in(ORACLE_FAILURES)
    items = [
        (f"answer_verdict = '{INFRA}'", INFRA),
        (f"{nc} AND coalesce(nullif(gold_status, ''), 'ok') = 'ok' AND _rec", "support-recovered"),
        (f"{nc} AND step = 0 AND answer_verdict = 'not-judged' AND citation_verdict IS DISTINCT FROM 'supported'",
         "citations-not-checked"),
        (f"{nc} AND step BETWEEN 1 AND 8 AND answer_verdict = 'correct'", "answer-correct-without-support"),
        (f"{nc} AND coalesce(support_packed, false) AND single_unit_complete = false", "single-unit-incomplete"),
        (f"{nc} AND _ov IN {fails} AND _of IS DISTINCT FROM false", "annotation-check"),
        (f"{nc} AND _of = false", "budget-infeasible"),
        (f"{nc} AND _ov = '{INFRA}'", "oracle-infrastructure-failure"),
    ]
    cases = ", ".join(f"CASE WHEN {cond} THEN {sql_literal(flag)} END" for cond, flag in items)
    return f"list_filter([{cases}], lambda x: x IS NOT NULL)"


def record_view_sql() -> str:
    """``record_view``: records + step, step_name, label, flags, reversal (same columns as query.py)."""
    return f"""
CREATE OR REPLACE VIEW record_view AS
WITH rev AS (
    SELECT arm, qid, (count(DISTINCT support_packed) > 1
                      OR count(DISTINCT coalesce(answer_verdict, '')) > 1) AS reversal
    FROM records GROUP BY arm, qid),
orc AS (
    SELECT arm, qid, any_value({{'v': answer_verdict, 'f': feasible}}) AS o FROM oracle GROUP BY arm, qid),
b AS (
    SELECT r.*, coalesce(v.reversal, false) AS _reversal,
           CASE WHEN o.arm IS NOT NULL THEN o.o.v ELSE r.oracle_verdict END AS _ov,
           CASE WHEN o.arm IS NOT NULL THEN o.o.f ELSE r.oracle_feasible END AS _of,
           {_lost_sql()} AS _lost, {_recovered_sql()} AS _rec
    FROM records r LEFT JOIN rev v ON v.arm = r.arm AND v.qid = r.qid
    LEFT JOIN orc o ON o.arm = r.arm AND o.qid = r.qid),
s AS (SELECT *, CAST({_step_sql()} AS INTEGER) AS step FROM b)
SELECT * EXCLUDE (_reversal, _ov, _of, _lost, _rec, step), step,
       {_step_case(STEP_NAMES)} AS step_name, {_label_sql()} AS label, {_flags_sql()} AS flags,
       _reversal AS reversal
FROM s"""


def create_record_view(con) -> None:
    con.execute(record_view_sql())


def _materialise_empty_views(con) -> None:
    """Views over connection-local registered (empty) tables become real tables, visible to cursors."""
    rows = con.execute("SELECT view_name, sql FROM duckdb_views() WHERE NOT internal").fetchall()
    for name, sql in rows:
        marker = f"_{name}_empty"
        if marker in (sql or ""):
            con.execute(f"CREATE OR REPLACE TABLE {marker}_t AS SELECT * FROM {marker}")
            con.execute(f"CREATE OR REPLACE VIEW {name} AS SELECT * FROM {marker}_t")


# ---------------------------------------------------------------------------
# the session


@dataclass(frozen=True)
class ArmRef:
    role: str
    name: str
    ledger: Path
    phases: tuple[str, ...]  # labels, by offset then label
    top_n: dict[str, int] = field(default_factory=dict)


@dataclass
class Cell:
    verdict: str | None
    step: int | None
    label: str | None = None


@dataclass
class ListRow:
    ord: int
    qid: str
    segment: str
    question: str
    reversal: dict[str, bool]
    cells: dict[str, dict[str, Cell]]  # role -> phase -> cell


@dataclass
class RecordDetail:
    role: str
    arm: str
    phase: str
    record: dict | None
    stages: dict[str, list[dict]]
    units: list[dict]
    cuts: dict[str, list[int]]
    oracle: dict | None
    fixture: Any
    texts: dict[str, str]
    diagnosis: Any = None
    coverage: dict[str, str] = field(default_factory=dict)  # span id -> full | partial | none (packed)


@dataclass
class Detail:
    qid: str
    phase: str
    arms: dict[str, RecordDetail]


def _order_phases(entries: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    def key(e):
        return (int(e.get("offset") or 0), str(e["label"]))

    return tuple(str(e["label"]) for e in sorted(entries, key=key))


def _top_n(arm_entry: Mapping[str, Any]) -> dict[str, int]:
    r = ((arm_entry or {}).get("config") or {}).get("retrieval") or {}
    return {k: int(r[c]) for k, c in (("bm25", "bm25_top_n"), ("dense_exact", "dense_top_n"),
                                       ("dense_ann", "ann_top_n")) if c in r}


def resolve_arms(ledger: Path, baseline_ledger: Path | None, candidate: str | None,
                 baseline_arm: str | None) -> dict[str, ArmRef]:
    """Pick the candidate and baseline arms (rules in ``ledgerscope open --help``)."""
    manifest = load_manifest(ledger)
    arms = list((manifest.get("arms") or {}).keys())
    where = str(ledger / "manifest.json")
    if not arms:
        raise InputError(Problem(where, None, "arms", "the ledger holds no arms"))
    cand = candidate or ("candidate" if "candidate" in arms else arms[0])
    if cand not in arms:
        raise InputError(Problem(where, None, "arm", f"no arm {cand!r}; arms: {', '.join(arms)}"))
    out = {"candidate": ArmRef("candidate", cand, ledger, _order_phases(manifest["arms"][cand]["phases"]),
                               _top_n(manifest["arms"][cand]))}
    base_ledger = baseline_ledger or ledger
    bman = load_manifest(base_ledger) if baseline_ledger else manifest
    barms = list((bman.get("arms") or {}).keys())
    same = baseline_ledger is None or Path(baseline_ledger).resolve() == Path(ledger).resolve()
    others = [a for a in barms if not (same and a == cand)]
    base = baseline_arm or ("baseline" if "baseline" in others else (others[0] if others else None))
    if baseline_arm is not None and (base not in barms or (same and base == cand)):
        raise InputError(Problem(str(base_ledger / "manifest.json"), None, "arm",
                                 f"no baseline arm {base!r}; arms: {', '.join(others) or 'none'}"))
    if base is not None:
        out["baseline"] = ArmRef("baseline", base, Path(base_ledger), _order_phases(bman["arms"][base]["phases"]),
                                 _top_n(bman["arms"][base]))
    return out


@dataclass
class Filters:
    """The list filter: the filter-bar predicate plus quick filters, composed into one predicate."""

    where: str = ""
    segment: str | None = None
    step: int | None = None
    verdict: str | None = None
    reversal: bool = False

    def compose(self, arm: str) -> str:
        parts = [f"arm = {sql_literal(arm)}"]
        if self.where.strip():
            parts.append(f"(\n{self.where.strip()}\n)")
        if self.segment:
            parts.append(f"segment = {sql_literal(self.segment)}")
        if self.step is not None:
            parts.append(f"step = {int(self.step)}")
        if self.verdict:
            parts.append(f"answer_verdict = {sql_literal(self.verdict)}")
        if self.reversal:
            parts.append("reversal")
        return " AND ".join(parts)

    def describe(self) -> str:
        bits = []
        if self.where.strip():
            bits.append(self.where.strip())
        if self.segment:
            bits.append(f"segment={self.segment}")
        if self.step is not None:
            bits.append(f"step={self.step}")
        if self.verdict:
            bits.append(f"verdict={self.verdict}")
        if self.reversal:
            bits.append("reversals only")
        return "; ".join(bits)


class LedgerSession:
    """One or two ledgers opened for browsing (candidate and baseline roles)."""

    DETAIL_CACHE = 64

    def __init__(self, ledger: str | Path, baseline_ledger: str | Path | None = None,
                 candidate: str | None = None, baseline_arm: str | None = None):
        self.ledger = Path(ledger)
        self.baseline_ledger = Path(baseline_ledger) if baseline_ledger else None
        self.arms = resolve_arms(self.ledger, self.baseline_ledger, candidate, baseline_arm)
        labels: list[str] = list(self.arms["candidate"].phases)
        if "baseline" in self.arms:
            labels += [p for p in self.arms["baseline"].phases if p not in labels]
        self.phases: tuple[str, ...] = tuple(labels)
        self._cons: dict[Path, Any] = {}
        self._lock = threading.Lock()
        self._fixtures: dict[Path, tuple[dict, dict]] = {}
        self._fixture_lock = threading.Lock()
        self._details: OrderedDict[tuple[str, str], Detail] = OrderedDict()
        self._inflight: dict[tuple[str, str], threading.Event] = {}
        self._survival: dict[str, dict[str, dict]] = {}

    # -- connections -------------------------------------------------------

    @property
    def roles(self) -> tuple[str, ...]:
        return tuple(r for r in ROLES if r in self.arms)

    def open(self) -> None:
        """Connect, build ``record_view`` and the compact ``tui_index`` per ledger (run in a worker)."""
        for ledger in {a.ledger.resolve(): a.ledger for a in self.arms.values()}.values():
            con = connect(ledger)
            _materialise_empty_views(con)
            create_record_view(con)
            names = [a.name for a in self.arms.values() if a.ledger.resolve() == ledger.resolve()]
            con.execute(
                "CREATE OR REPLACE TABLE tui_index AS SELECT arm, CAST(phase AS VARCHAR) AS phase, "
                "phase_offset, qid, segment, question, answerable, support_packed, answer_verdict, step, "
                f"label, reversal FROM record_view WHERE arm IN {_in(names)}")
            con.execute("CREATE OR REPLACE TABLE tui_list (ord BIGINT, qid VARCHAR)")
            self._cons[ledger.resolve()] = con

    def cursor(self, role: str):
        return self._cons[self.arms[role].ledger.resolve()].cursor()

    def _fetch(self, role: str, sql: str, params: Sequence[Any] = ()) -> list[dict]:
        cur = self.cursor(role)
        try:
            result = cur.execute(sql, list(params))
            names = [d[0] for d in result.description]
            return [dict(zip(names, row, strict=True)) for row in result.fetchall()]
        finally:
            cur.close()

    def _scalar(self, role: str, sql: str, params: Sequence[Any] = ()) -> Any:
        rows = self._fetch(role, sql, params)
        return next(iter(rows[0].values())) if rows else None

    # -- filter and list ---------------------------------------------------

    def validate(self, role: str, predicate: str) -> str:
        """The normalised predicate (``query.validate_predicate``), or InputError."""
        from ..query import validate_predicate

        cur = self.cursor(role)
        try:
            return validate_predicate(cur, predicate)
        finally:
            cur.close()

    def build_list(self, role: str, filters: Filters) -> tuple[int, str]:
        """Fill ``tui_list`` for ``role`` under ``filters``: (questions listed, validated predicate)."""
        predicate = self.validate(role, filters.compose(self.arms[role].name))
        cond = f"WHERE (\n{predicate}\n)" if predicate else ""
        cur = self.cursor(role)
        try:
            cur.execute(
                "CREATE OR REPLACE TABLE tui_list AS SELECT CAST(row_number() OVER (ORDER BY qid) - 1 AS BIGINT) "
                f"AS ord, qid FROM (SELECT DISTINCT qid FROM record_view {cond})").fetchall()
            n = cur.execute("SELECT count(*) FROM tui_list").fetchall()[0][0]
        except Exception as exc:  # an evaluation error (a failing cast) is the filter's fault
            import duckdb

            if isinstance(exc, duckdb.Error):
                raise InputError(Problem("filter", None, "where", str(exc).splitlines()[0])) from None
            raise
        finally:
            cur.close()
        return int(n), predicate

    def count_records(self, role: str, predicate: str) -> tuple[int, int]:
        """(records, distinct questions) that ``predicate`` selects in ``record_view`` (validated first)."""
        normalised = self.validate(role, predicate)
        cond = f"WHERE (\n{normalised}\n)" if normalised else ""
        row = self._fetch(role, f"SELECT count(*) AS n, count(DISTINCT qid) AS q FROM record_view {cond}")[0]
        return int(row["n"]), int(row["q"])

    def total_questions(self, role: str) -> int:
        return int(self._scalar(role, "SELECT count(DISTINCT qid) FROM tui_index WHERE arm = ?",
                                [self.arms[role].name]) or 0)

    def page(self, role: str, offset: int, limit: int) -> list[ListRow]:
        """Rows ``offset`` .. ``offset + limit`` of the list, with every role's cells."""
        rows = self._fetch(role, "SELECT ord, qid FROM tui_list WHERE ord >= ? AND ord < ? ORDER BY ord",
                           [offset, offset + limit])
        if not rows:
            return []
        qids = [r["qid"] for r in rows]
        out = {r["qid"]: ListRow(r["ord"], r["qid"], "", "", {}, {}) for r in rows}
        for other in self.roles:
            for r in self._fetch(other, "SELECT phase, qid, segment, question, answer_verdict, step, label, "
                                        "reversal FROM tui_index WHERE arm = ? AND list_contains(?, qid)",
                                 [self.arms[other].name, qids]):
                row = out[r["qid"]]
                if other == role or not row.segment:
                    row.segment, row.question = r["segment"] or "", r["question"] or ""
                row.reversal[other] = bool(r["reversal"])
                row.cells.setdefault(other, {})[r["phase"]] = Cell(r["answer_verdict"], r["step"], r["label"])
        return [out[q] for q in qids]

    def locate(self, role: str, qid: str) -> int | None:
        return self._scalar(role, "SELECT ord FROM tui_list WHERE qid = ?", [qid])

    def search(self, role: str, text: str) -> list[int]:
        """List positions whose qid or question contains ``text`` (case-insensitive)."""
        needle = text.lower()
        rows = self._fetch(role, "SELECT l.ord FROM tui_list l SEMI JOIN (SELECT qid FROM tui_index WHERE arm = ? "
                                 "AND (contains(lower(qid), ?) OR contains(lower(coalesce(question, '')), ?))) s "
                                 "ON s.qid = l.qid ORDER BY l.ord", [self.arms[role].name, needle, needle])
        return [r["ord"] for r in rows]

    def choices(self, role: str) -> dict[str, list]:
        """Distinct segments, verdicts and steps of ``role`` (for the quick filters)."""
        arm = self.arms[role].name
        def col(c: str) -> list:
            return [r["v"] for r in self._fetch(role, f"SELECT DISTINCT {c} AS v FROM tui_index WHERE arm = ? "
                                                      f"AND {c} IS NOT NULL ORDER BY 1", [arm])]
        return {"segment": col("segment"), "verdict": col("answer_verdict"), "step": col("step")}

    def phase_summary(self, role: str) -> dict[str, dict]:
        """Per phase: answerable records, support and correct rates (answerable records)."""
        rows = self._fetch(role, "SELECT phase, count(*) FILTER (WHERE answerable) AS n, "
                                 "avg(CASE WHEN support_packed THEN 1.0 ELSE 0.0 END) FILTER (WHERE answerable) AS support, "
                                 "avg(CASE WHEN answer_verdict = 'correct' THEN 1.0 ELSE 0.0 END) "
                                 "FILTER (WHERE answerable) AS correct FROM tui_index WHERE arm = ? GROUP BY phase",
                           [self.arms[role].name])
        return {r["phase"]: r for r in rows}

    # -- one record --------------------------------------------------------

    def fixtures(self, role: str) -> tuple[dict, dict]:
        """(fixtures by qid, source texts) of the role's ledger, loaded once."""
        from ..diagnose import load_ledger_fixtures

        ledger = self.arms[role].ledger.resolve()
        with self._fixture_lock:
            if ledger not in self._fixtures:
                cur = self.cursor(role)
                try:
                    self._fixtures[ledger] = load_ledger_fixtures(cur, ledger)
                finally:
                    cur.close()
            return self._fixtures[ledger]

    def detail(self, qid: str, phase: str) -> Detail:
        """Both arms' records for (question, phase), with the full diagnosis; cached, one load per key."""
        key = (qid, phase)
        while True:
            with self._lock:
                if key in self._details:
                    self._details.move_to_end(key)
                    return self._details[key]
                waiting = self._inflight.get(key)
                if waiting is None:
                    done = self._inflight[key] = threading.Event()
                    break
            waiting.wait()  # another thread is loading it (a prefetch)
        try:
            d = Detail(qid, phase, {role: self._record_detail(role, qid, phase) for role in self.roles})
            with self._lock:
                self._details[key] = d
                while len(self._details) > self.DETAIL_CACHE:
                    self._details.popitem(last=False)
            return d
        finally:
            with self._lock:
                self._inflight.pop(key, None)
            done.set()

    def cached(self, qid: str, phase: str) -> bool:
        with self._lock:
            return (qid, phase) in self._details

    def _record_detail(self, role: str, qid: str, phase: str) -> RecordDetail:
        from ..diagnose import diagnose

        arm = self.arms[role]
        fixtures, texts = self.fixtures(role)
        fx = fixtures.get(qid)
        part = arm.ledger / "partitions" / f"arm={arm.name}" / f"phase={phase}"
        empty = RecordDetail(role, arm.name, phase, None, {}, [], {}, None, fx, {})
        if phase not in arm.phases or not (part / "_SUCCESS.json").is_file():
            return empty
        recs = self._fetch(role, f"SELECT * FROM read_parquet({_path_literal(part / 'records.parquet')}) "
                                 "WHERE qid = ? LIMIT 1", [qid])
        if not recs:
            return empty
        rec = recs[0]
        rec["phase"] = str(rec["phase"])
        cands = self._fetch(role, 'SELECT stage, "rank", unit_id, score, doc_id, "start", "end", lineage '
                                  f"FROM read_parquet({_path_literal(part / 'candidates.parquet')}) WHERE qid = ? "
                                  'ORDER BY stage, "rank"', [qid])
        stages: dict[str, list[dict]] = {}
        for c in cands:
            stages.setdefault(c["stage"], []).append(c)
        docs = list(fx.doc_ids) if fx is not None else []
        if not docs:
            docs = list(dict.fromkeys(r["doc_id"] for r in stages.get("packed", []) if r.get("doc_id")))
        units = self._fetch(role, 'SELECT unit_id, doc_id, ordinal, "start", "end", core_start, core_end, n_tokens '
                                  f"FROM read_parquet({_path_literal(part / 'units.parquet')}) "
                                  'WHERE list_contains(?, doc_id) ORDER BY doc_id, "start"', [docs]) if docs else []
        cuts = {r["doc_id"]: list(r["cut_chars"] or []) for r in self._fetch(
            role, f"SELECT doc_id, cut_chars FROM read_parquet({_path_literal(part / 'boundaries.parquet')}) "
                  "WHERE list_contains(?, doc_id)", [docs])} if docs else {}
        orc = self._fetch(role, "SELECT * FROM oracle WHERE arm = ? AND qid = ? LIMIT 1", [arm.name, qid])
        oracle = orc[0] if orc else None
        rec["top_n"] = arm.top_n
        stages_for = {**stages, "units": units}
        for s in ("bm25", "dense_exact", "dense_ann", "union", "fused", "reranked", "selected", "packed"):
            stages_for.setdefault(s, [])
        diag = diagnose(rec, stages_for, fx, texts, oracle)
        doc_texts = {d: texts[d] for d in set(docs) | {c["doc_id"] for c in cands if c.get("doc_id")}
                     if d in texts}
        cov = span_coverage(fx, stages.get("packed", []), texts) if fx is not None else {}
        return RecordDetail(role, arm.name, phase, rec, stages, units, cuts, oracle, fx, doc_texts, diag, cov)

    # -- aggregates --------------------------------------------------------

    def survival(self, role: str) -> dict[str, dict]:
        """Per phase label: stage survival counts of the role's arm (``survival.survival_counts``)."""
        from ..survival import survival_counts

        if role not in self._survival:
            cur = self.cursor(role)
            try:
                rows = survival_counts(cur, self.arms[role].name)
            finally:
                cur.close()
            self._survival[role] = {str(r["phase"]): r for r in rows}
        return self._survival[role]

    def compare(self, n_resamples: int = 2000, seed: int = 0, rule_path: str | Path | None = None
                ) -> tuple[dict, dict | None]:
        """Paired comparison (``stats.compare_arms``) and, with a rule, the release decision."""
        from ..stats import compare_arms

        if "baseline" not in self.arms:
            raise InputError(Problem(str(self.ledger), None, "baseline", "no baseline arm to compare with"))
        confidence = 0.95
        rule = None
        if rule_path is not None:
            from ..release import load_rule

            rule = load_rule(rule_path)
            n_resamples, seed, confidence = rule.n_resamples, rule.seed, rule.confidence
        c, b = self.cursor("candidate"), self.cursor("baseline")
        same = self.arms["candidate"].ledger.resolve() == self.arms["baseline"].ledger.resolve()
        try:
            comparison = compare_arms(c, self.arms["candidate"].name, self.arms["baseline"].name,
                                      None if same else b, seed=seed, n_resamples=n_resamples,
                                      confidence=confidence)
        finally:
            c.close()
            b.close()
        decision = None
        if rule is not None:
            from ..release import decide

            decision = decide(rule, comparison).to_dict()
        return comparison, decision


# ---------------------------------------------------------------------------
# pure helpers


def span_coverage(fixture, rows: Sequence[Mapping[str, Any]], texts: Mapping[str, str]) -> dict[str, str]:
    """Per gold span: ``full``, ``partial`` or ``none`` coverage by the rows' intervals."""
    from ..pipeline.units import uncovered

    out: dict[str, str] = {}
    for span in fixture.spans:
        ivs = [(int(r["start"]), int(r["end"])) for r in rows
               if r.get("doc_id") == span.doc_id and r.get("start") is not None]
        text = texts.get(span.doc_id, "")
        gaps = uncovered(text, span.start, span.end, ivs) if text else [(span.start, span.end)]
        if not gaps:
            out[span.span_id] = "full"
        elif any(s < span.end and e > span.start for s, e in ivs):
            out[span.span_id] = "partial"
        else:
            out[span.span_id] = "none"
    return out


def worst_phase(cells: Mapping[str, Cell], phases: Sequence[str]) -> str | None:
    """The question's worst phase (rule in the module docstring), or None when nothing stands out."""
    keyed = []
    for i, p in enumerate(phases):
        c = cells.get(p)
        if c is None or c.step is None:
            continue
        keyed.append(((1 if c.step != 0 else 0, VERDICT_SEVERITY.get(c.verdict, 2),
                       -(c.step or 0) if c.step else 0, -i), p))
    if not keyed:
        return None
    keys = [k[:3] for k, _ in keyed]
    best = max(keyed)
    if best[0][0] == 0 and len(set(keys)) == 1:
        return None
    return best[1]


def json_list(value: Any) -> list[dict]:
    if not value:
        return []
    if isinstance(value, list):
        return value
    try:
        data = json.loads(value)
    except (TypeError, ValueError):
        return []
    return [d for d in data if isinstance(d, dict)] if isinstance(data, list) else []
