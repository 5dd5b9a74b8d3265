"""The ten-step diagnosis: one entry point per question a caller asks. Callers import from here.

A record's step and walk (with its evidence), from its rows:
    :func:`diagnose` (``tree``): the definition, a pure function of one record, its candidate
    lists, fixture and texts; :func:`diagnosis_step`, the step alone from the record's flags.
    The TUI's detail pane.
A ledger's heads (every record's step, step name, label, flags) and reversals, to filter:
    :func:`build_record_view` creates ``record_view`` (:data:`VIEW`) on a ledger connection;
    :func:`ledger_heads` gives its heads in ledger order. The ``diagnose`` summary, ``export``
    and the TUI's list and filter bar; the filter language over the view is
    :func:`validate_predicate`, :func:`select_records`, :func:`count_records`, and for a query
    of one's own :func:`where_sql`, :func:`run_query`, :func:`fetch_dicts` (``query``).
A ledger's evidence:
    :func:`write_json_lines`, every record (``diagnose --json``); :func:`diagnosis_evidence`,
    the records of a selection (``export``).
The first-stage depths steps 3 and 4 report (a record's ``top_n``):
    :func:`first_stage_depths` of an arm's manifest entry.
The names of the steps, and a record's JSON list columns (``citations_json``) read leniently:
    :data:`STEP_NAMES`, :func:`json_list`.

Modules: ``tree`` (the definition), ``evidence`` (what shows each step), ``sql/`` (the same rules
in DuckDB for whole ledgers: the heads run the pure tree once per distinct combination, the
evidence is mirrored in SQL for speed), ``feed`` (the pure tree fed from a ledger record by
record: the Python form ``tests/test_diagnose_sql.py`` holds the SQL form to), ``record`` (one
question's records with every row, fed to the tree as ``feed`` feeds it: the TUI's panes),
``record_view``, ``query``. Reversals are :mod:`ledgerscope.analysis.reversals`. The modules of
this package import one another, never this package.
"""

from ledgerscope.analysis.diagnosis.evidence import first_stage_depths, json_list
from ledgerscope.analysis.diagnosis.query import (
    count_records,
    fetch_dicts,
    run_query,
    select_records,
    validate_predicate,
    where_sql,
)
from ledgerscope.analysis.diagnosis.record_view import VIEW, build_record_view, ledger_heads
from ledgerscope.analysis.diagnosis.sql import diagnosis_evidence, write_json_lines
from ledgerscope.analysis.diagnosis.tree import STEP_NAMES, Diagnosis, diagnose, diagnosis_step

__all__ = [
    "STEP_NAMES",
    "VIEW",
    "Diagnosis",
    "build_record_view",
    "count_records",
    "diagnose",
    "diagnosis_evidence",
    "diagnosis_step",
    "fetch_dicts",
    "first_stage_depths",
    "json_list",
    "ledger_heads",
    "run_query",
    "select_records",
    "validate_predicate",
    "where_sql",
    "write_json_lines",
]
