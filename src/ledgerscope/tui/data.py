"""Data access for the TUI: SQL over a ledger and pure helpers. No Textual here.

Every method of :class:`LedgerSession` may run in a worker thread: each one
takes its own DuckDB cursor (DuckDB connections are not shared across threads)
and returns plain data. Everything is read through the views of
:func:`ledgerscope.ledger.read.connect` (its checks included), never from
partition paths; one question's records, rows and diagnoses come from
:mod:`ledgerscope.analysis.diagnosis.record`, kept by :mod:`.details`.
Nothing is written to the ledger directory: the helper tables (``tui_index``,
``tui_list``) live in the in-memory DuckDB database.

Declared choices
----------------
* **Record view.** The filter bar takes the predicate language of ``export
  --where`` over ``record_view``, built by
  :func:`ledgerscope.analysis.diagnosis.build_record_view` (the heads: step, label and flags from
  the diagnosis tree). The
  full :class:`~ledgerscope.analysis.diagnosis.tree.Diagnosis` (walk and evidence) is
  computed for the selected record only.
* **Questions list.** One row per question of the current arm that has at
  least one record (any phase) matching the filter, ordered by qid; pages are
  fetched with ``LIMIT``/``OFFSET`` from the ``tui_list`` table.

The plain data the methods return (rows, details, filters) is in :mod:`.model`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from ledgerscope.analysis.diagnosis import build_record_view, fetch_dicts, first_stage_depths
from ledgerscope.analysis.stats import DEFAULT_N_RESAMPLES, DEFAULT_SEED
from ledgerscope.common.errors import InputError, Problem
from ledgerscope.common.sql_tables import sql_in
from ledgerscope.ledger.read import check_ledger, open_unchecked
from ledgerscope.ledger.verify import load_manifest
from ledgerscope.tui.details import DetailStore, load_details
from ledgerscope.tui.model import Cell, Detail, Filters, ListRow

ROLES = ("candidate", "baseline")


# ---------------------------------------------------------------------------
# the session


@dataclass(frozen=True)
class ArmRef:
    role: str
    name: str
    ledger: Path
    phases: tuple[str, ...]  # labels, by offset then label
    top_n: dict[str, int] = field(default_factory=dict)


def _order_phases(entries: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    def key(e):
        return (int(e.get("offset") or 0), str(e["label"]))

    return tuple(str(e["label"]) for e in sorted(entries, key=key))


def resolve_arms(
    ledger: Path, baseline_ledger: Path | None, candidate: str | None, baseline_arm: str | None
) -> dict[str, ArmRef]:
    """Pick the candidate and baseline arms (rules in ``ledgerscope open --help``)."""
    manifest = load_manifest(ledger)
    arms = list((manifest.get("arms") or {}).keys())
    where = str(ledger / "manifest.json")
    if not arms:
        raise InputError(Problem(where, None, "arms", "the ledger holds no arms"))
    cand = candidate or ("candidate" if "candidate" in arms else arms[0])
    if cand not in arms:
        raise InputError(Problem(where, None, "arm", f"no arm {cand!r}; arms: {', '.join(arms)}"))
    out = {
        "candidate": ArmRef(
            "candidate",
            cand,
            ledger,
            _order_phases(manifest["arms"][cand]["phases"]),
            first_stage_depths(manifest["arms"][cand]),
        )
    }
    base_ledger = baseline_ledger or ledger
    bman = load_manifest(base_ledger) if baseline_ledger else manifest
    barms = list((bman.get("arms") or {}).keys())
    same = baseline_ledger is None or Path(baseline_ledger).resolve() == Path(ledger).resolve()
    others = [a for a in barms if not (same and a == cand)]
    base = baseline_arm or ("baseline" if "baseline" in others else (others[0] if others else None))
    if baseline_arm is not None and (base not in barms or (same and base == cand)):
        raise InputError(
            Problem(
                str(base_ledger / "manifest.json"),
                None,
                "arm",
                f"no baseline arm {base!r}; arms: {', '.join(others) or 'none'}",
            )
        )
    if base is not None:
        out["baseline"] = ArmRef(
            "baseline",
            base,
            Path(base_ledger),
            _order_phases(bman["arms"][base]["phases"]),
            first_stage_depths(bman["arms"][base]),
        )
    return out


class LedgerSession:
    """One or two ledgers opened for browsing (candidate and baseline roles)."""

    def __init__(
        self,
        ledger: str | Path,
        baseline_ledger: str | Path | None = None,
        candidate: str | None = None,
        baseline_arm: str | None = None,
    ):
        self.ledger = Path(ledger)
        self.baseline_ledger = Path(baseline_ledger) if baseline_ledger else None
        self.arms = resolve_arms(self.ledger, self.baseline_ledger, candidate, baseline_arm)
        labels: list[str] = list(self.arms["candidate"].phases)
        if "baseline" in self.arms:
            labels += [p for p in self.arms["baseline"].phases if p not in labels]
        self.phases: tuple[str, ...] = tuple(labels)
        self._cons: dict[Path, Any] = {}
        self._lock = threading.Lock()
        self._opener: threading.Thread | None = None
        self._open_error: BaseException | None = None
        self._fixtures: dict[Path, tuple[dict, dict]] = {}
        self._fixture_lock = threading.Lock()
        self._details = DetailStore(partial(load_details, self))
        self._unverified: dict[Path, frozenset[str]] = {}
        self._survival: dict[str, dict[str, dict]] = {}

    # -- connections -------------------------------------------------------

    @property
    def roles(self) -> tuple[str, ...]:
        return tuple(r for r in ROLES if r in self.arms)

    def start_open(self) -> None:
        """Begin :meth:`open` in a background thread (the CLI calls it before importing Textual)."""
        with self._lock:
            if self._opener is not None:
                return
            self._opener = threading.Thread(target=self._open_in_thread, name="ledgerscope-open", daemon=True)
            self._opener.start()

    def _open_in_thread(self) -> None:
        try:
            self._open()
        except BaseException as exc:  # re-raised by open() in the caller's thread
            self._open_error = exc

    def open(self) -> None:
        """Connect, build ``record_view`` and the compact ``tui_index`` per ledger (run in a worker)."""
        self.start_open()
        self._opener.join()
        if self._open_error is not None:
            raise self._open_error

    def _ledgers(self) -> list[Path]:
        """The session's ledger directories, each once."""
        return list({a.ledger.resolve(): a.ledger for a in self.arms.values()}.values())

    def _open(self) -> None:
        """The views without the ledger's checks (``open_unchecked``): the first screen does not wait
        for them. Nothing read here is trusted until :meth:`check` passes (the screen runs it next)."""
        import duckdb

        for ledger in self._ledgers():
            con = duckdb.connect()
            # a record's lookup touches every partition's file footer: keep them parsed in memory
            con.execute("SET parquet_metadata_cache = true")
            # one DuckDB thread while the views are built: the main thread is busy starting Textual,
            # and these small queries cost more CPU split in two (the default is set back after)
            con.execute("SET threads = 1")
            open_unchecked(ledger, con)
            build_record_view(con)
            names = [a.name for a in self.arms.values() if a.ledger.resolve() == ledger.resolve()]
            con.execute(
                "CREATE OR REPLACE TABLE tui_index AS SELECT arm, CAST(phase AS VARCHAR) AS phase, "
                "phase_offset, qid, segment, question, answerable, support_packed, answer_verdict, step, "
                f"label, reversal FROM record_view WHERE arm IN {sql_in(names)}"
            )
            con.execute("CREATE OR REPLACE TABLE tui_list (ord BIGINT, qid VARCHAR)")
            con.execute("RESET threads")
            self._cons[ledger.resolve()] = con

    def check(self) -> None:
        """The checks ``connect`` runs before reading (files: footers, sizes, digests; then rows), on
        every ledger of the session; raises :class:`InputError` listing the problems. Run in a worker
        after :meth:`open`; until it passes, what the session read is shown as unverified."""
        problems: list[Problem] = []
        for ledger in self._ledgers():
            con = self._cons.get(ledger.resolve())
            cur = con.cursor() if con is not None else None
            try:
                if cur is None:  # the views did not open: a fresh connection for the row checks
                    import duckdb

                    cur = duckdb.connect()
                check_ledger(ledger, cur)
            except InputError as exc:
                problems.extend(exc.problems)
            finally:
                if cur is not None:
                    cur.close()
        if problems:
            raise InputError(problems)

    def cursor(self, role: str):
        return self._cons[self.arms[role].ledger.resolve()].cursor()

    def _fetch(self, role: str, sql: str, params: Sequence[Any] = ()) -> list[dict]:
        cur = self.cursor(role)
        try:
            return fetch_dicts(cur.execute(sql, list(params)))
        finally:
            cur.close()

    def _scalar(self, role: str, sql: str, params: Sequence[Any] = ()) -> Any:
        rows = self._fetch(role, sql, params)
        return next(iter(rows[0].values())) if rows else None

    # -- filter and list ---------------------------------------------------

    def validate(self, role: str, predicate: str) -> str:
        """The normalised predicate (``query.validate_predicate``), or InputError."""
        from ledgerscope.analysis.diagnosis import validate_predicate

        cur = self.cursor(role)
        try:
            return validate_predicate(cur, predicate)
        finally:
            cur.close()

    def build_list(self, role: str, filters: Filters) -> tuple[int, str]:
        """Fill ``tui_list`` for ``role`` under ``filters``: (questions listed, validated predicate).

        The user's predicate is validated (``query.validate_predicate``) and run
        over ``record_view``; without one, the quick filters (built here from
        quoted literals, over columns ``tui_index`` holds) run over ``tui_index``.
        """
        composed = filters.compose(self.arms[role].name)
        if filters.where.strip():
            self.validate(role, filters.where)  # alone first: an error's position is in the typed text
            predicate, source = self.validate(role, composed), "record_view"
        else:
            predicate, source = composed, "tui_index"
        cond = f"WHERE (\n{predicate}\n)" if predicate else ""
        cur = self.cursor(role)
        try:
            cur.execute(
                "CREATE OR REPLACE TABLE tui_list AS "
                "SELECT CAST(row_number() OVER (ORDER BY qid) - 1 AS BIGINT) "
                f"AS ord, qid FROM (SELECT DISTINCT qid FROM {source} {cond})"
            ).fetchall()
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
        return int(
            self._scalar(
                role, "SELECT count(DISTINCT qid) FROM tui_index WHERE arm = ?", [self.arms[role].name]
            )
            or 0
        )

    def page(self, role: str, offset: int, limit: int) -> list[ListRow]:
        """Rows ``offset`` .. ``offset + limit`` of the list, with every role's cells."""
        rows = self._fetch(
            role,
            "SELECT ord, qid FROM tui_list WHERE ord >= ? AND ord < ? ORDER BY ord",
            [offset, offset + limit],
        )
        if not rows:
            return []
        qids = [r["qid"] for r in rows]
        out = {r["qid"]: ListRow(r["ord"], r["qid"], "", "", {}, {}) for r in rows}
        for other in self.roles:
            for r in self._fetch(
                other,
                "SELECT phase, qid, segment, question, answer_verdict, step, label, "
                "reversal FROM tui_index WHERE arm = ? AND list_contains(?, qid)",
                [self.arms[other].name, qids],
            ):
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
        rows = self._fetch(
            role,
            "SELECT l.ord FROM tui_list l SEMI JOIN (SELECT qid FROM tui_index WHERE arm = ? "
            "AND (contains(lower(qid), ?) OR contains(lower(coalesce(question, '')), ?))) s "
            "ON s.qid = l.qid ORDER BY l.ord",
            [self.arms[role].name, needle, needle],
        )
        return [r["ord"] for r in rows]

    def choices(self, role: str) -> dict[str, list]:
        """Distinct segments, verdicts and steps of ``role`` (for the quick filters)."""
        arm = self.arms[role].name

        def col(c: str) -> list:
            return [
                r["v"]
                for r in self._fetch(
                    role,
                    f"SELECT DISTINCT {c} AS v FROM tui_index WHERE arm = ? AND {c} IS NOT NULL ORDER BY 1",
                    [arm],
                )
            ]

        return {"segment": col("segment"), "verdict": col("answer_verdict"), "step": col("step")}

    def phase_summary(self, role: str) -> dict[str, dict]:
        """Per phase: answerable records, support and correct rates (answerable records)."""
        rows = self._fetch(
            role,
            "SELECT phase, count(*) FILTER (WHERE answerable) AS n, "
            "avg(CASE WHEN support_packed THEN 1.0 ELSE 0.0 END) FILTER (WHERE answerable) AS support, "
            "avg(CASE WHEN answer_verdict = 'correct' THEN 1.0 ELSE 0.0 END) "
            "FILTER (WHERE answerable) AS correct FROM tui_index WHERE arm = ? GROUP BY phase",
            [self.arms[role].name],
        )
        return {r["phase"]: r for r in rows}

    # -- one record --------------------------------------------------------

    def fixtures(self, role: str) -> tuple[dict, dict]:
        """(fixtures by qid, source texts) of the role's ledger, loaded once."""
        from ledgerscope.ledger.fixtures import load_ledger_fixtures

        ledger = self.arms[role].ledger.resolve()
        with self._fixture_lock:
            if ledger not in self._fixtures:
                cur = self.cursor(role)
                try:
                    self._fixtures[ledger] = load_ledger_fixtures(cur, ledger)
                finally:
                    cur.close()
            return self._fixtures[ledger]

    def details(
        self, qid: str, phases: Sequence[str], cancelled: Callable[[], bool] | None = None
    ) -> dict[str, Detail]:
        """Both roles' records of ``qid`` at each of ``phases``, with their full diagnoses; kept, the
        missing ones read in one set of queries (:class:`~ledgerscope.tui.details.DetailStore`).
        ``cancelled`` is asked between the queries (then
        :class:`~ledgerscope.analysis.diagnosis.record.Cancelled` is raised)."""
        return self._details.get(qid, phases, cancelled)

    def detail(self, qid: str, phase: str, cancelled: Callable[[], bool] | None = None) -> Detail:
        """Both roles' records for (question, phase): :meth:`details` of one phase."""
        return self._details.get(qid, [phase], cancelled)[phase]

    def cached(self, qid: str, phase: str) -> bool:
        return self._details.cached(qid, phase)

    def unverified(self, role: str, cur) -> frozenset[str]:
        """The arms of the role's ledger whose answer side is unverified, read once (``cur``: a cursor
        of that ledger's connection)."""
        from ledgerscope.analysis.diagnosis.record import registered_unverified

        ledger = self.arms[role].ledger.resolve()
        if ledger not in self._unverified:
            self._unverified[ledger] = registered_unverified(cur)
        return self._unverified[ledger]

    # -- aggregates --------------------------------------------------------

    def survival(self, role: str) -> dict[str, dict]:
        """Per phase label: stage survival counts of the role's arm (``survival.survival_counts``)."""
        from ledgerscope.analysis.survival import survival_counts

        if role not in self._survival:
            cur = self.cursor(role)
            try:
                rows = survival_counts(cur, self.arms[role].name)
            finally:
                cur.close()
            self._survival[role] = {str(r["phase"]): r for r in rows}
        return self._survival[role]

    def compare(
        self,
        n_resamples: int = DEFAULT_N_RESAMPLES,
        seed: int = DEFAULT_SEED,
        rule_path: str | Path | None = None,
    ) -> tuple[dict, dict | None]:
        """Paired comparison (``compare.compare_arms``) and, with a rule, the release decision; the
        defaults are ``ledgerscope compare``'s."""
        from ledgerscope.analysis.stats.compare import compare_arms

        if "baseline" not in self.arms:
            raise InputError(Problem(str(self.ledger), None, "baseline", "no baseline arm to compare with"))
        confidence = 0.95
        rule = None
        if rule_path is not None:
            from ledgerscope.analysis.stats.release import load_rule

            rule = load_rule(rule_path)
            n_resamples, seed, confidence = rule.n_resamples, rule.seed, rule.confidence
        c, b = self.cursor("candidate"), self.cursor("baseline")
        same = self.arms["candidate"].ledger.resolve() == self.arms["baseline"].ledger.resolve()
        try:
            comparison = compare_arms(
                c,
                self.arms["candidate"].name,
                self.arms["baseline"].name,
                None if same else b,
                seed=seed,
                n_resamples=n_resamples,
                confidence=confidence,
                min_oracle_correct=None if rule is None else rule.min_oracle_correct,
            )
        finally:
            c.close()
            b.close()
        from ledgerscope.analysis.resources import attach, price_table

        attach(
            comparison,
            self.arms["candidate"].ledger,
            self.arms["candidate"].name,
            self.arms["baseline"].ledger,
            self.arms["baseline"].name,
            price_table(None, rule),
        )
        decision = None
        if rule is not None:
            from ledgerscope.analysis.stats.release import decide

            decision = decide(rule, comparison).to_dict()
        return comparison, decision
