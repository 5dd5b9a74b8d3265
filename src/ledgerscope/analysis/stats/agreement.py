"""Agreement between two raters on categorical labels: confusion matrix and Cohen's kappa.

Used by ``ledgerscope judge calibrate`` to say what an LLM judge's verdicts are
worth next to the deterministic judge's (pure functions, no I/O).

Cohen's kappa (Cohen 1960): ``(p_o - p_e) / (1 - p_e)`` with ``p_o`` the observed
agreement and ``p_e`` the agreement expected by chance from the two raters'
marginal label frequencies. Undefined (None) with no pairs, or when both raters
give one and the same label to everything (``p_e = 1``). Bands after Landis and
Koch (1977): below 0 poor, up to 0.20 slight, 0.40 fair, 0.60 moderate, 0.80
substantial, above almost perfect.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

_BANDS = ((0.0, "poor"), (0.20, "slight"), (0.40, "fair"), (0.60, "moderate"), (0.80, "substantial"))


def confusion_matrix(
    pairs: Sequence[tuple[str, str]], labels: Sequence[str] | None = None
) -> tuple[list[str], list[list[int]]]:
    """(labels, matrix) with ``matrix[i][j]`` = pairs whose first label is ``labels[i]`` and second
    ``labels[j]``; ``labels`` are the given ones first, then any other seen, sorted."""
    seen = sorted({a for a, _ in pairs} | {b for _, b in pairs})
    order = list(labels or []) + [x for x in seen if x not in (labels or [])]
    index = {label: i for i, label in enumerate(order)}
    matrix = [[0] * len(order) for _ in order]
    for a, b in pairs:
        matrix[index[a]][index[b]] += 1
    return order, matrix


def cohen_kappa(pairs: Sequence[tuple[str, str]]) -> dict[str, Any]:
    """Observed agreement, chance agreement and kappa (None where undefined)."""
    n = len(pairs)
    if not n:
        return {"n": 0, "observed": None, "expected": None, "kappa": None}
    observed = sum(a == b for a, b in pairs) / n
    first, second = Counter(a for a, _ in pairs), Counter(b for _, b in pairs)
    expected = sum(first[k] * second.get(k, 0) for k in first) / (n * n)
    kappa = None if expected >= 1.0 else (observed - expected) / (1.0 - expected)
    return {"n": n, "observed": observed, "expected": expected, "kappa": kappa}


def kappa_band(kappa: float | None) -> str:
    """Landis and Koch's words for a kappa value ("undefined" for None)."""
    if kappa is None:
        return "undefined"
    if kappa < 0:
        return "poor"
    for upper, word in _BANDS[1:]:
        if kappa <= upper:
            return word
    return "almost perfect"
