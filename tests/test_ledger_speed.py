"""The faster ledger checks and loading report and read exactly what the plain ones did.

The references below are the straightforward versions: one SQL query per row check, the
footer through ``pyarrow.parquet.read_metadata``, one arm per query through ``fetchall``.
"""

from __future__ import annotations

import json
import random
import shutil

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ledgerscope.analysis.stats import compare
from ledgerscope.analysis.stats.metrics import _ANSWERED, _UNJUDGED
from ledgerscope.common.errors import InputError, Problem
from ledgerscope.ledger import read, schema, verify
from ledgerscope.testing.synthetic import make_synthetic_ledger

SHOW = 5


def reference_row_problems(con, record_files, candidate_files) -> list[Problem]:
    """One query per check, as the checks were first written."""
    out = []
    if record_files:
        src = (
            f"read_parquet({read._sql_list(record_files)}, filename = true, file_row_number = true, "
            "union_by_name = true, hive_partitioning = false)"
        )
        for file, row, col in con.execute(
            "SELECT filename, file_row_number + 1, CASE WHEN arm IS NULL THEN 'arm' WHEN phase IS NULL "
            f"THEN 'phase' ELSE 'qid' END FROM {src} WHERE arm IS NULL OR phase IS NULL OR qid IS NULL "
            f"ORDER BY filename, file_row_number LIMIT {SHOW}"
        ).fetchall():
            out.append(Problem(file, None, col, f"row {row}: missing (null)"))
        for file, row, arm, phase in con.execute(
            f"SELECT filename, file_row_number + 1, arm, phase FROM {src} "
            "WHERE NOT contains('/' || replace(filename, '\\', '/'), "
            "'/arm-' || arm || '/phase-' || phase || '/records.parquet') "
            f"ORDER BY filename, file_row_number LIMIT {SHOW}"
        ).fetchall():
            out.append(
                Problem(
                    file,
                    None,
                    "arm/phase",
                    f"row {row}: a record of arm {arm!r}, phase {phase!r} in another partition's file",
                )
            )
        for file, row, arm, phase, qid, first in con.execute(
            "SELECT filename, r + 1, arm, phase, qid, f + 1 FROM (SELECT filename, file_row_number AS r, "
            "arm, phase, qid, min(file_row_number) OVER (PARTITION BY filename, arm, phase, qid) AS f, "
            f"count(*) OVER (PARTITION BY arm, phase, qid) AS n FROM {src} WHERE qid IS NOT NULL) "
            f"WHERE n > 1 AND r <> f ORDER BY filename, r LIMIT {SHOW}"
        ).fetchall():
            out.append(
                Problem(
                    file,
                    None,
                    "qid",
                    f"row {row}: duplicate record (arm {arm!r}, phase "
                    f"{phase!r}, qid {qid!r}; first at row {first})",
                )
            )
    if candidate_files:
        for file, row, qid, stage, rank, score in con.execute(
            f"SELECT filename, file_row_number + 1, qid, stage, rank, score FROM read_parquet("
            f"{read._sql_list(candidate_files)}, filename = true, file_row_number = true, "
            "union_by_name = true, hive_partitioning = false) WHERE NOT isfinite(score) "
            f"ORDER BY filename, file_row_number LIMIT {SHOW}"
        ).fetchall():
            out.append(
                Problem(
                    file,
                    None,
                    "score",
                    f"row {row}: {score} (qid {qid!r}, stage {stage!r}, rank {rank}); scores must be finite",
                )
            )
    return out


def _rewrite(path, table_schema, mutate) -> None:
    rows = mutate(pq.read_table(path).to_pylist())
    pq.write_table(pa.Table.from_pylist(rows, schema=table_schema), path)
    marker = path.parent / "_SUCCESS.json"
    meta = json.loads(marker.read_text())
    meta["files"][path.name] = verify.file_record(path)
    if path.stem in meta:
        meta[path.stem] = len(rows)
    marker.write_text(json.dumps(meta))


@pytest.fixture(scope="module")
def small_ledger(tmp_path_factory):
    path = tmp_path_factory.mktemp("speed") / "ledger"
    make_synthetic_ledger(path, questions=12, phases=3)
    return path


def _damage(ledger, seed: int) -> None:
    rnd = random.Random(seed)
    parts = verify.finished_partitions(ledger)
    for _ in range(rnd.randint(1, 4)):
        part = rnd.choice(parts)
        kind = rnd.choice(["null", "dup", "misfiled", "score", "dup-other"])
        if kind == "score":

            def mutate(rows):
                for i in rnd.sample(range(len(rows)), rnd.randint(1, 8)):
                    rows[i]["score"] = rnd.choice([float("nan"), float("inf"), -float("inf")])
                return rows

            _rewrite(part / "candidates.parquet", schema.CANDIDATES, mutate)
            continue

        def mutate(rows, kind=kind):
            row = dict(rnd.choice(rows))
            if kind == "null":
                row[rnd.choice(["arm", "phase", "qid"])] = None
            elif kind == "misfiled":
                row["phase"] = "99"
            elif kind == "dup-other":
                row["qid"] = rnd.choice(rows)["qid"]
            rows.insert(rnd.randrange(len(rows) + 1), row)
            return rows

        _rewrite(part / "records.parquet", schema.RECORDS, mutate)


@pytest.mark.parametrize("seed", range(8))
def test_row_checks_list_what_one_query_per_check_lists(small_ledger, tmp_path, seed):
    ledger = tmp_path / "ledger"
    shutil.copytree(small_ledger, ledger)
    if seed:
        _damage(ledger, seed)
    con = duckdb.connect()
    files = {}
    for name, table_schema in schema.TABLES.items():
        files[name] = [
            p / f"{name}.parquet"
            for p in verify.finished_partitions(ledger)
            if (p / f"{name}.parquet").is_file()
        ]
        read._view(con, name, files[name], table_schema)
    got = read.row_problems(con, ledger, files["records"], files["candidates"])
    assert got == reference_row_problems(con, files["records"], files["candidates"])
    assert bool(got) == bool(seed)
    if got:
        with pytest.raises(InputError) as err:
            read.connect(ledger)
        assert [str(p) for p in err.value.problems] == [str(p) for p in got]


def test_verification_lists_problems_in_partition_order(small_ledger, tmp_path):
    ledger = tmp_path / "ledger"
    shutil.copytree(small_ledger, ledger)
    parts = verify.finished_partitions(ledger)
    (parts[1] / "units.parquet").write_bytes(b"not parquet")
    data = (parts[4] / "candidates.parquet").read_bytes()
    (parts[4] / "candidates.parquet").write_bytes(data[: len(data) // 2])
    (parts[-1] / "boundaries.parquet").unlink()
    with pytest.raises(InputError) as err:
        verify.verify_ledger(ledger)
    arms = verify.load_manifest(ledger)["arms"]
    want = [str(p) for part in parts for p in verify._partition_problems(part, arms)]
    assert [str(p) for p in err.value.problems] == want and len(want) == 3


def test_footers_read_as_pyarrow_parquet_reads_them(small_ledger, tmp_path):
    files = sorted(small_ledger.rglob("*.parquet"))
    for f in files:
        a, b = pq.read_metadata(f), verify._read_metadata(f)
        assert (a.num_rows, a.schema.to_arrow_schema()) == (b.num_rows, b.schema.to_arrow_schema())
    data = files[0].read_bytes()
    rng = np.random.default_rng(0)
    cases = [b"", b"PAR1", data[:-3], data[: len(data) // 2], data[:100] + data[-200:]]
    for _ in range(150):
        b = bytearray(data)
        b[int(rng.integers(len(b) - 1500, len(b)))] ^= 0xFF
        cases.append(bytes(b))
    for i, case in enumerate(cases):
        path = tmp_path / f"{i}.parquet"
        path.write_bytes(case)
        outcome = []
        for fn in (pq.read_metadata, verify._read_metadata):
            try:
                m = fn(path)
                outcome.append(("ok", m.num_rows, str(m.schema.to_arrow_schema())))
            except (pa.ArrowException, OSError, ValueError) as exc:
                outcome.append((type(exc).__name__, str(exc)))
        assert outcome[0] == outcome[1], i


def reference_load_arm(con, arm: str) -> dict:
    rows = con.execute(
        "SELECT qid, phase, segment, stress_set, answerable, support_only, doc_ids[1], support_packed, "
        "answer_verdict, citation_verdict, prompt_tokens, evidence_tokens FROM records WHERE arm = ? "
        "ORDER BY qid, phase",
        [arm],
    ).fetchall()
    cols = list(zip(*rows, strict=True))
    qid = np.array(cols[0], dtype=object)
    ans, sonly = np.array([bool(a) for a in cols[4]]), np.array([bool(s) for s in cols[5]])
    av, cv = np.array(cols[8], dtype=object), np.array(cols[9], dtype=object)
    judged = ans & ~sonly & np.array([v is not None and v not in _UNJUDGED for v in av])
    control = ~ans & ~sonly & np.array([v in ("abstained", "false-assertion") for v in av])
    answered = judged & np.array([v in _ANSWERED for v in av])

    def where(defined, hit):
        return np.where(defined, np.asarray(hit).astype(float), np.nan)

    return {
        "qid": qid,
        "phase": np.array([str(p) for p in cols[1]], dtype=object),
        "segment": np.array(cols[2], dtype=object),
        "stress_set": np.array(cols[3], dtype=object),
        "cluster": np.array(
            [d if d is not None else f"qid:{q}" for q, d in zip(qid, cols[6], strict=True)],
            dtype=object,
        ),
        "support": where(ans & np.array([s is not None for s in cols[7]]), [bool(s) for s in cols[7]]),
        "answer_correct": where(judged, av == "correct"),
        "abstained": where(judged, av == "abstained"),
        "critical": where(judged, av == "critical-condition-error"),
        "false_assertion": where(control, av == "false-assertion"),
        "citation_supported": where(answered, cv == "supported"),
        "prompt_tokens": np.array([np.nan if v is None else float(v) for v in cols[10]]),
        "evidence_tokens": np.array([np.nan if v is None else float(v) for v in cols[11]]),
    }


def test_arms_load_as_one_query_per_arm_loads_them():
    rnd = random.Random(3)
    verdicts = [
        None,
        "correct",
        "critical-condition-error",
        "wrong",
        "abstained",
        "false-assertion",
        "not-judged",
        "infrastructure-failure",
    ]
    rows = []
    for arm in ("cand", "base"):
        for i in range(40):
            for p in ("0", "1", "10", "2"):
                row = {name: None for name in schema.RECORDS.names}
                row.update(
                    arm=arm,
                    phase=p,
                    qid=f"q{i:02d}",
                    segment=rnd.choice(["a", "b", None]),
                    stress_set=rnd.choice(["representative", None]),
                    answerable=rnd.choice([True, False, None]),
                    support_only=rnd.choice([True, False, None]),
                    doc_ids=rnd.choice([[], ["d1"], None, ["d2", "d1"]]),
                    support_packed=rnd.choice([True, False, None]),
                    answer_verdict=rnd.choice(verdicts),
                    citation_verdict=rnd.choice([None, "supported", "unsupported"]),
                    prompt_tokens=rnd.choice([None, 12, 2048]),
                    evidence_tokens=rnd.choice([None, 7]),
                )
                rows.append(row)
    con = duckdb.connect()
    con.register("_rows", pa.Table.from_pylist(rows, schema=schema.RECORDS))
    con.execute("CREATE VIEW records AS SELECT * FROM _rows")
    for got, arm in zip(compare.load_arms(con, ["cand", "base"]), ("cand", "base"), strict=True):
        want = reference_load_arm(con, arm)
        fields = {
            "qid": got.qid,
            "phase": got.phase,
            "segment": got.segment,
            "stress_set": got.stress_set,
            "cluster": got.cluster,
            **got.values,
        }
        for name, values in want.items():
            assert values.dtype == fields[name].dtype, name
            assert np.array_equal(values, fields[name], equal_nan=values.dtype.kind == "f"), name


def test_views_unify_files_only_when_their_schemas_differ(small_ledger, tmp_path):
    ledger = tmp_path / "ledger"
    shutil.copytree(small_ledger, ledger)
    con = read.connect(ledger)
    assert [r[0] for r in con.execute("DESCRIBE records").fetchall()] == schema.RECORDS.names
    part = verify.finished_partitions(ledger)[2] / "records.parquet"
    table = pq.read_table(part)
    pq.write_table(table.append_column("extra", pa.array(["x"] * table.num_rows)), part)
    marker = part.parent / "_SUCCESS.json"
    meta = json.loads(marker.read_text())
    meta["files"][part.name] = verify.file_record(part)
    marker.write_text(json.dumps(meta))
    con = read.connect(ledger)
    names = [r[0] for r in con.execute("DESCRIBE records").fetchall()]
    assert names[-1] == "extra" and set(schema.RECORDS.names) <= set(names)
    assert con.execute("SELECT count(extra) FROM records").fetchall()[0][0] == table.num_rows
