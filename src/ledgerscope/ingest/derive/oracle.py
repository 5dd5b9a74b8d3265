"""The oracle for ingested traces, only when the user names a generator for it (``--oracle-arm``).

The pipeline's own generator is external, so there is no "same generator" to
put on a sufficient set: the oracle runs the generator of the arm file the user
names (:func:`ledgerscope.pipeline.run.oracle.run_oracle`, its budget and answer
rubric), and the manifest and the report say which generator that was. Without
``--oracle-arm`` the oracle is "not run" and no record carries an oracle verdict.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa

from ledgerscope.inputs.fixtures import Fixture
from ledgerscope.ledger import schema


def oracle_rows(con, arm_file: Path, arms: Sequence[str], fixtures: Sequence[Fixture]) -> str:
    """Run the oracle once per question; its rows under every ingested arm as ``_ig_oracle_rows`` and
    ``_ig_oracle`` (arm, qid, answer_verdict, feasible). Returns what the labels say about it."""
    from ledgerscope.pipeline.arm.config import load_arm
    from ledgerscope.pipeline.embedding.encoder import shared_encoder
    from ledgerscope.pipeline.run.cascade import build_runtime
    from ledgerscope.pipeline.run.oracle import prepare_oracle, run_oracle

    cfg = load_arm(arm_file)
    rt = build_runtime(cfg, shared_encoder)
    prepare_oracle(rt, fixtures)
    rows = [run_oracle(rt, fx) for fx in fixtures]
    table = pa.Table.from_pylist([{**r, "arm": arm} for arm in arms for r in rows], schema=schema.ORACLE)
    from ledgerscope.ingest.derive.tables import create_table

    create_table(con, "_ig_oracle_rows", table)
    con.execute(
        "CREATE OR REPLACE TABLE _ig_oracle AS SELECT arm, qid, answer_verdict, feasible FROM _ig_oracle_rows"
    )
    gen = cfg.generator
    what = gen.get("kind", "extractive") + (f" {gen['model']}" if gen.get("model") else "")
    return (
        f"run: the {what} generator of {arm_file.name} on each question's cheapest sufficient set "
        f"under its budget of {cfg.budget_tokens} tokens (not the pipeline's own generator)"
    )
