"""The fast bootstrap gives the straightforward computation's numbers, bit for bit.

``reference_bootstrap`` below is the plain algorithm the fast one replaced (float64
multiplicities times the unit matrix, chunk by chunk, then ``np.nanmean`` / ``np.nanmin`` /
``np.argmin`` per block and ``np.quantile``); every fast path is checked against it or against
the numpy function it stands in for, on data that reach each path.
"""

from __future__ import annotations

import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from ledgerscope.analysis.stats import resampling as rs
from ledgerscope.analysis.stats.bootstrap import paired_bootstrap_batch, paired_bootstrap_many
from ledgerscope.analysis.stats.metrics import DEFAULT_STATISTICS, STATISTICS, phase_table

nan = np.nan


def _reference_statistics(a: np.ndarray, p: int, hib: bool, wanted) -> tuple[dict, dict]:
    sums, counts = a[:, :p], a[:, p : 2 * p]
    out, which = {}, {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        per_phase = sums / counts
        for name in wanted:
            if name == "mean":
                out[name] = np.nanmean(per_phase, axis=1)
            elif name == "pooled_mean":
                out[name] = sums.sum(axis=1) / counts.sum(axis=1)
            elif name in ("worst_aggregate", "best_aggregate"):
                use_min = (name == "worst_aggregate") == hib
                out[name] = np.nanmin(per_phase, axis=1) if use_min else np.nanmax(per_phase, axis=1)
                filled = np.where(np.isnan(per_phase), np.inf if use_min else -np.inf, per_phase)
                idx = np.argmin(filled, axis=1) if use_min else np.argmax(filled, axis=1)
                which[name] = np.where(np.isnan(out[name]), -1, idx)
            elif name == "worst_per_question":
                out[name] = a[:, 2 * p] / a[:, 2 * p + 1]
            elif name == "best_per_question":
                out[name] = a[:, 2 * p + 2] / a[:, 2 * p + 3]
    return out, which


def reference_bootstrap(
    pairs, clusters, *, n_resamples, seed, confidence, statistics, chunk_elements, indices=None
) -> dict:
    """Replicates, intervals and phase frequencies as the plain algorithm computes them."""
    mats = list(pairs.values())
    n_q, p = mats[0][0].shape
    blocks = [(x, h) for c, b, h in mats for x in (c, b)]
    q_cols = np.hstack([rs.question_columns(x, h) for x, h in blocks])
    unit_of, n_units = rs.units(clusters, n_q)
    unit_matrix = np.zeros((n_units, q_cols.shape[1]))
    np.add.at(unit_matrix, unit_of, q_cols)
    if indices is not None:
        n_resamples = len(indices)
    width = 2 * p + 4
    reps = {(k, s): np.empty(n_resamples) for k in range(len(blocks)) for s in statistics}
    which = {}
    rng = np.random.Generator(np.random.PCG64(seed))
    chunk = max(1, chunk_elements // n_units)
    for lo in range(0, n_resamples, chunk):
        hi = min(n_resamples, lo + chunk)
        idx = indices[lo:hi] if indices is not None else rng.integers(0, n_units, size=(hi - lo, n_units))
        flat = (np.arange(hi - lo)[:, None] * n_units + idx).ravel()
        w = np.bincount(flat, minlength=(hi - lo) * n_units).reshape(hi - lo, n_units).astype(float)
        agg = w @ unit_matrix
        for k, (_x, h) in enumerate(blocks):
            vals, wh = _reference_statistics(agg[:, k * width : (k + 1) * width], p, h, statistics)
            for s, v in vals.items():
                reps[(k, s)][lo:hi] = v
            for s, v in wh.items():
                which.setdefault((k, s), np.empty(n_resamples, dtype=np.int64))[lo:hi] = v
    full = unit_matrix.sum(axis=0, keepdims=True)
    alpha = (1 - confidence) / 2
    out = {}
    for i, name in enumerate(pairs):
        point = [
            _reference_statistics(full[:, k * width : (k + 1) * width], p, blocks[k][1], statistics)
            for k in (2 * i, 2 * i + 1)
        ]
        for s in statistics:
            diff = reps[(2 * i, s)] - reps[(2 * i + 1, s)]
            ok = ~np.isnan(diff)
            entry = {
                "replicates": (reps[(2 * i, s)], reps[(2 * i + 1, s)]),
                "point": (point[0][0][s][0], point[1][0][s][0]),
            }
            if ok.any():
                entry["interval"] = tuple(np.quantile(diff[ok], [alpha, 1 - alpha]))
                entry["se"] = float(np.std(diff[ok], ddof=1)) if ok.sum() > 1 else None
            if s in ("worst_aggregate", "best_aggregate"):
                entry["which"] = (which[(2 * i, s)], which[(2 * i + 1, s)])
                entry["phase"] = (int(point[0][1][s][0]), int(point[1][1][s][0]))
            out[(name, s)] = entry
    return out


def _same(a, b) -> bool:
    """Equal values, NaN where NaN, and the same sign on every zero."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    signed = ~np.isnan(a)
    return bool(
        np.array_equal(a, b, equal_nan=True) and np.array_equal(np.signbit(a[signed]), np.signbit(b[signed]))
    )


def _matrix(rng, kind: int, n_q: int, n_p: int) -> np.ndarray:
    if kind == 0:
        x = (rng.random((n_q, n_p)) < rng.random()).astype(float)  # 0/1 outcomes
    elif kind == 1:
        x = rng.integers(0, 4000, (n_q, n_p)).astype(float)  # token counts
    elif kind == 2:
        x = rng.normal(100, 30, (n_q, n_p))  # continuous: the float64 path
    elif kind == 3:
        x = rng.integers(-(2**40), 2**40, (n_q, n_p)).astype(float)  # past float32, exact in float64
    else:
        x = rng.normal(0, 5, (n_q, n_p))  # infinite values
        x[rng.random(x.shape) < 0.05] = np.inf
        x[rng.random(x.shape) < 0.03] = -np.inf
    x[rng.random(x.shape) < rng.random() * 0.6] = nan
    return x


def _check(res: dict, ref: dict, statistics, labels, n_resamples: int) -> None:
    for (name, s), want in ref.items():
        got = res[name]["statistics"][s]
        cand_r, base_r = (
            res[name]["replicates"][s]["candidate"],
            res[name]["replicates"][s]["baseline"],
        )
        assert _same(cand_r, want["replicates"][0]) and _same(base_r, want["replicates"][1]), (
            name,
            s,
        )
        assert _same(
            [
                got["candidate"] if got["candidate"] is not None else nan,
                got["baseline"] if got["baseline"] is not None else nan,
            ],
            want["point"],
        ), (name, s)
        if "interval" in want:
            assert _same([got["low"], got["high"]], want["interval"]), (name, s)
            se = got["standard_error"]
            assert se == want["se"] if want["se"] is None else _same(se, want["se"])
        else:
            assert got["low"] is None and got["high"] is None
        if "which" in want:
            for arm, w, k in zip(("candidate", "baseline"), want["which"], want["phase"], strict=True):
                assert got[f"{arm}_phase"] == (labels[k] if k >= 0 else None)
                freq = np.bincount(w[w >= 0], minlength=len(labels)) / n_resamples
                assert got[f"{arm}_phase_frequency"] == {
                    labels[t]: float(freq[t]) for t in range(len(labels)) if freq[t] > 0
                }


@pytest.mark.parametrize("seed", range(12))
def test_fast_bootstrap_equals_the_plain_algorithm(seed):
    rng = np.random.default_rng(seed)
    for trial in range(10):
        kind = trial % 5
        n_q, n_p = int(rng.integers(1, 90)), int(rng.choice([1, 3, 8, 9, 17]))
        pairs = {
            f"m{i}": (
                _matrix(rng, kind, n_q, n_p),
                _matrix(rng, kind, n_q, n_p),
                bool(rng.random() < 0.5),
            )
            for i in range(int(rng.integers(1, 5)))
        }
        clusters = None if trial % 3 == 0 else rng.integers(0, max(1, n_q // 3), n_q).astype(str)
        statistics = tuple(s for s in STATISTICS if rng.random() < 0.6) or DEFAULT_STATISTICS
        kw = {
            "n_resamples": int(rng.integers(1, 900)),
            "seed": int(rng.integers(0, 99)),
            "confidence": float(rng.choice([0.9, 0.95])),
            "statistics": statistics,
            "chunk_elements": int(rng.integers(1, 5000)),
        }
        labels = [f"p{i}" for i in range(n_p)]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            res = paired_bootstrap_many(pairs, clusters, phase_labels=labels, return_replicates=True, **kw)
            ref = reference_bootstrap(pairs, clusters, **kw)
        _check(res, ref, statistics, labels, kw["n_resamples"])


def test_injected_indices_take_the_same_paths():
    rng = np.random.default_rng(40)
    pairs = {
        "a": (_matrix(rng, 0, 50, 8), _matrix(rng, 0, 50, 8), True),
        "b": (_matrix(rng, 1, 50, 8), _matrix(rng, 1, 50, 8), False),
    }
    clusters = rng.integers(0, 20, 50).astype(str)
    idx = rng.integers(0, len(set(clusters.tolist())), (700, len(set(clusters.tolist()))))
    kw = {
        "n_resamples": 0,
        "seed": 0,
        "confidence": 0.95,
        "statistics": STATISTICS,
        "chunk_elements": 999,
    }
    res = paired_bootstrap_many(
        pairs, clusters, phase_labels=list("abcdefgh"), indices=idx, return_replicates=True, **kw
    )
    _check(
        res,
        reference_bootstrap(pairs, clusters, indices=idx, **kw),
        STATISTICS,
        list("abcdefgh"),
        700,
    )


def test_batch_equals_one_call_each_inline_and_on_threads():
    rng = np.random.default_rng(41)
    calls = []
    for kind in (0, 1, 0, 2, 3):  # the exact ones with as many units share a pass; the others alone
        n_q = 60
        clusters = np.array([f"d{i % 25}" for i in rng.permutation(n_q)])
        calls.append(
            (
                {
                    f"m{j}": (_matrix(rng, kind, n_q, 8), _matrix(rng, kind, n_q, 8), j % 2 == 0)
                    for j in range(3)
                },
                clusters,
            )
        )
    calls.append(({"x": (_matrix(rng, 0, 40, 8), _matrix(rng, 0, 40, 8), True)}, None))
    calls.append(({}, None))
    kw = {
        "n_resamples": 2_000,
        "seed": 7,
        "statistics": ("mean", "worst_aggregate", "best_per_question"),
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        want = [paired_bootstrap_many(pairs, cl, **kw) for pairs, cl in calls]
        assert [f.result() for f in paired_bootstrap_batch(calls, **kw)] == want
        with ThreadPoolExecutor(max_workers=2) as pool:
            futures = paired_bootstrap_batch(calls, submit=pool.submit, **kw)
            assert [f.result() for f in futures] == want


def test_batch_checks_each_call_in_order():
    good = ({"m": (np.ones((3, 2)), np.ones((3, 2)), True)}, None)
    bad = ({"m": (np.ones((3, 2)), np.ones((4, 2)), True)}, None)
    with pytest.raises(ValueError, match="share one 2-D shape"):
        paired_bootstrap_batch([good, bad])
    with pytest.raises(ValueError, match="n_resamples"):
        paired_bootstrap_batch([good, bad], n_resamples=0)


def test_int32_draws_are_the_int64_stream():
    for n_units in (1, 2, 155, 233, 4097, 2**20 + 3, 2**31 - 1):
        a = np.random.Generator(np.random.PCG64(5)).integers(0, n_units, size=(7, 301))
        b = np.random.Generator(np.random.PCG64(5)).integers(0, n_units, size=(7, 301), dtype=np.int32)
        assert np.array_equal(a, b)


def test_quantiles_and_sums_match_numpy():
    rng = np.random.default_rng(42)
    for t in range(3000):
        n = int(rng.integers(1, 2500)) if t % 2 else int(rng.integers(1, 12))
        x = rng.normal(size=n) * 10 ** rng.normal()
        if t % 3 == 0:
            x = np.round(x, 1)  # ties and signed zeros
        q = (1 - float(rng.choice([0.95, 0.5, rng.random()]))) / 2
        assert _same(rs.quantiles(x, np.array([q, 1 - q])), np.quantile(x, [q, 1 - q]))
    for n in (1, 2, 7, 8, 9, 15, 16, 17, 64, 129, 300):
        x = rng.normal(size=(n, 5, 11)) * 10 ** rng.normal(size=(n, 5, 11))
        assert _same(rs.phase_sum(x), np.add.reduce(np.moveaxis(x, 0, -1).copy(), axis=-1))
        assert _same(rs.phase_sum(x), np.nansum(np.moveaxis(x, 0, -1).copy(), axis=-1))


def test_unit_sums_and_counts_match_the_plain_ones():
    rng = np.random.default_rng(43)
    for t in range(300):
        n, k = int(rng.integers(1, 120)), int(rng.integers(1, 20))
        _, unit_of = np.unique(rng.integers(0, int(rng.integers(1, n + 1)), n), return_inverse=True)
        rows = [
            rng.normal(size=(n, k)) * 1e3,
            rng.choice([0.0, -0.0, 1.0, 3000.0], (n, k)),
            rng.choice([0.0, -0.0, 2.5, np.inf, -np.inf], (n, k)),
        ][t % 3]
        want = np.zeros((unit_of.max() + 1, k))
        with np.errstate(invalid="ignore"):  # inf - inf
            np.add.at(want, unit_of, rows)
            assert _same(rs.unit_sums(rows, unit_of, unit_of.max() + 1), want)
    idx = rng.integers(0, 233, (1024, 233))
    assert np.array_equal(rs.counts(idx, 233), np.stack([np.bincount(r, minlength=233) for r in idx]))


def test_phase_table_extremes_and_binary_flag_as_computed_before():
    rng = np.random.default_rng(44)
    for t in range(400):
        m = _matrix(rng, t % 5, int(rng.integers(0, 30)), int(rng.integers(1, 9)))
        hib = bool(t % 2)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            table = phase_table(m, [str(i) for i in range(m.shape[1])], higher_is_better=hib)
            valid = ~np.isnan(m)
            for worst, key in ((True, "worst_phase"), (False, "best_phase")):
                per_q = rs.per_question_extreme(m[valid.any(axis=1)], worst, hib)
                want = float(per_q.mean()) if per_q.size else None
                want = None if want is not None and np.isnan(want) else want
                assert table[key]["per_question"]["value"] == want
        assert ("questions_with_any" in table) == bool(np.all(np.isin(m[valid], (0.0, 1.0))))
