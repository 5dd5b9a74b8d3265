"""The release rule's file side: its dataclasses, :func:`rule_digest` and :func:`load_rule`.

Apart from the decision (:mod:`.decision`, which documents the file format; the package re-exports
these names) so each module stays one stage: reading a rule versus applying it.
"""

from __future__ import annotations

import hashlib
import re
import tomllib
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ledgerscope.analysis.stats import DEFAULT_N_RESAMPLES, DEFAULT_SEED
from ledgerscope.analysis.stats.release.resource_limits import KEYS as RESOURCE_KEYS
from ledgerscope.analysis.stats.release.resource_limits import ResourceLimits, parse_limits
from ledgerscope.common.errors import InputError, Problem
from ledgerscope.inputs.fixtures import SEGMENTS, STRESS_SETS

FORMAT = "ledgerscope-release-rule/1"
OUTCOMES = ("accept", "reject", "collect-more-evidence")
INTERVAL_HANDLING = ("conservative",)
DIFFERENCE_STATISTICS = ("mean", "pooled_mean", "worst_aggregate", "worst_per_question")
#: tolerance key -> the metric of :data:`ledgerscope.analysis.stats.metrics.METRICS` it bounds
DIFFERENCE_KEYS = {
    "max_support_loss": "support",
    "max_answer_loss": "answer_correct",
    "max_citation_loss": "citation_supported",
}
TOKEN_FIELDS = ("prompt_tokens", "evidence_tokens")
_TOP_KEYS = (
    "format",
    "description",
    "candidate",
    "baseline",
    "confidence",
    "n_resamples",
    "seed",
    "interval_handling",
    "min_questions",
    "min_oracle_correct",
    "stress_sets",
    *DIFFERENCE_KEYS,
    "max_critical_errors_per_segment",
    "max_evidence_tokens",
    "underpowered_is_inconclusive",
    *RESOURCE_KEYS,
)
STAT_WORDS = {
    "mean": "phase average (mean of per-phase means)",
    "pooled_mean": "pooled mean over records",
    "worst_aggregate": "worst phase (worst per-phase aggregate)",
    "worst_per_question": "worst phase per question, averaged",
}


@dataclass(frozen=True)
class DifferenceTolerance:
    key: str  # e.g. max_support_loss
    metric: str  # e.g. support
    statistic: str  # e.g. worst_aggregate
    limit: float  # the difference must be >= limit


@dataclass(frozen=True)
class SegmentLimit:
    segment: str
    kind: str  # "count" or "rate"
    limit: float


@dataclass(frozen=True)
class TokenCeiling:
    field: str
    mean: float | None
    max: float | None


@dataclass(frozen=True)
class Rule:
    path: str
    digest: str
    description: str = ""
    candidate: str | None = None
    baseline: str | None = None
    confidence: float = 0.95
    n_resamples: int = DEFAULT_N_RESAMPLES
    seed: int = DEFAULT_SEED
    interval_handling: str = "conservative"
    min_questions: int = 1
    min_oracle_correct: float = 0.8  # ledgerscope.analysis.validity.DEFAULT_MIN_ORACLE_CORRECT
    stress_sets: tuple[str, ...] | None = None
    differences: tuple[DifferenceTolerance, ...] = ()
    critical_per_segment: tuple[SegmentLimit, ...] = ()
    tokens: TokenCeiling | None = None
    #: an ACCEPT whose passing tolerances are below the minimum detectable difference becomes
    #: collect-more-evidence (:mod:`ledgerscope.analysis.stats.power`); false: accepted with a warning
    underpowered_is_inconclusive: bool = True
    #: latency allowance and cost boundary (:mod:`.resource_limits`)
    resources: ResourceLimits | None = None


@dataclass(frozen=True)
class Check:
    stress_set: str
    tolerance: str  # the rule's key path, e.g. max_support_loss.mean
    metric: str
    status: str  # pass | violates | inconclusive
    reason: str
    observed: float | None = None
    low: float | None = None
    high: float | None = None
    limit: float | None = None
    n: int | None = None


@dataclass(frozen=True)
class Decision:
    outcome: str
    reasons: list[str]
    rule_digest: str
    checks: list[Check] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome,
            "reasons": list(self.reasons),
            "rule_digest": self.rule_digest,
            "checks": [asdict(c) for c in self.checks],
        }


# ---------------------------------------------------------------------------
# loading


def rule_digest(path: str | Path) -> str:
    """``sha256:<hex>`` of the rule file's bytes."""
    return "sha256:" + hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _is_number(v: object) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


class _Problems:
    def __init__(self, path: str, text: str) -> None:
        self.path, self.lines = path, text.splitlines()
        self.items: list[Problem] = []

    def line_of(self, dotted: str) -> int | None:
        """Best effort: the line that sets ``dotted`` (``table.key`` or ``key``)."""
        parts = dotted.split(".")
        key, table = parts[-1], parts[0] if len(parts) > 1 else None
        in_table = table is None
        pat = re.compile(rf'^\s*"?{re.escape(key)}"?\s*=')
        inline = re.compile(rf"^\s*{re.escape(table)}\s*=.*\b{re.escape(key)}\b") if table else None
        for i, line in enumerate(self.lines, 1):
            head = re.match(r"^\s*\[([^\]]+)\]", line)
            if head:
                in_table = table is not None and head.group(1).strip() == table
                if table is None:
                    break
                continue
            if (in_table and pat.match(line)) or (inline and inline.match(line)):
                return i
        return None

    def add(self, dotted: str, reason: str) -> None:
        self.items.append(Problem(self.path, self.line_of(dotted), dotted, reason))


#: a rule's single-valued settings: key -> (accepts the value, converts it, what it must be)
_SETTINGS: dict[str, tuple[Callable[[Any], bool], Callable[[Any], Any], str]] = {
    "confidence": (lambda v: _is_number(v) and 0 < v < 1, float, "a number strictly between 0 and 1"),
    "n_resamples": (lambda v: _is_int(v) and v >= 100, int, "an integer of at least 100"),
    "seed": (lambda v: _is_int(v) and v >= 0, int, "a non-negative integer"),
    "interval_handling": (lambda v: v in INTERVAL_HANDLING, str, f"one of {', '.join(INTERVAL_HANDLING)}"),
    "min_questions": (lambda v: _is_int(v) and v >= 1, int, "a positive integer"),
    "min_oracle_correct": (lambda v: _is_number(v) and 0 <= v <= 1, float, "a number in [0, 1]"),
    "underpowered_is_inconclusive": (lambda v: isinstance(v, bool), bool, "true or false"),
}


def _read_toml(path: Path) -> tuple[str, str, dict[str, Any]]:
    """The rule file's digest, text and parsed table; unreadable, non-UTF-8 or bad TOML is an error."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(Problem(str(path), None, "rule", f"cannot read: {exc.strerror or exc}")) from None
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    try:
        text = data.decode("utf-8")
        doc = tomllib.loads(text)
    except UnicodeDecodeError as exc:
        raise InputError(Problem(str(path), None, "rule", f"not UTF-8: {exc}")) from None
    except tomllib.TOMLDecodeError as exc:
        m = re.search(r"line (\d+)", str(exc))
        raise InputError(Problem(str(path), int(m.group(1)) if m else None, "toml", str(exc))) from None
    return digest, text, doc


def _settings(doc: dict[str, Any], pr: _Problems) -> dict[str, Any]:
    """The rule's keys, format, names and single-valued settings (see :data:`_SETTINGS`)."""
    for key in doc:
        if key not in _TOP_KEYS:
            pr.add(key, f"unknown key; known: {', '.join(_TOP_KEYS)}")
    if "format" in doc and doc["format"] != FORMAT:
        pr.add("format", f"unknown rule format {doc['format']!r} (expected {FORMAT})")
    kw: dict[str, Any] = {}
    for key in ("description", "candidate", "baseline"):
        if key in doc:
            if isinstance(doc[key], str) and (doc[key] or key == "description"):
                kw[key] = doc[key]
            else:
                pr.add(key, "must be a non-empty string")
    for key, (accepts, convert, must_be) in _SETTINGS.items():
        if key in doc:
            v = doc[key]
            if accepts(v):
                kw[key] = convert(v)
            else:
                pr.add(key, f"must be {must_be}, got {v!r}")
    if "stress_sets" in doc:
        v = doc["stress_sets"]
        if (
            isinstance(v, list)
            and v
            and all(isinstance(s, str) and s in STRESS_SETS for s in v)
            and len(set(v)) == len(v)
        ):
            kw["stress_sets"] = tuple(v)
        else:
            pr.add("stress_sets", f"must be a non-empty list of distinct names from {', '.join(STRESS_SETS)}")
    return kw


def _differences(doc: dict[str, Any], pr: _Problems) -> tuple[DifferenceTolerance, ...]:
    """``max_*_loss``: a number (for the mean and the worst phase) or a table of statistic = limit."""
    diffs: list[DifferenceTolerance] = []
    for key, metric in DIFFERENCE_KEYS.items():
        if key not in doc:
            continue
        v = doc[key]
        if _is_number(v):
            table = {"mean": v, "worst_aggregate": v}
        elif isinstance(v, dict) and v:
            table = v
        else:
            pr.add(key, "must be a number or a table of statistic = number")
            continue
        for stat, limit in table.items():
            where = f"{key}.{stat}" if isinstance(v, dict) else key
            if stat not in DIFFERENCE_STATISTICS:
                pr.add(where, f"unknown statistic; known: {', '.join(DIFFERENCE_STATISTICS)}")
            elif not (_is_number(limit) and -1 <= limit <= 1):
                pr.add(where, f"must be a number in [-1, 1] (candidate minus baseline), got {limit!r}")
            else:
                diffs.append(DifferenceTolerance(key, metric, stat, float(limit)))
    return tuple(diffs)


def _critical_limits(doc: dict[str, Any], pr: _Problems) -> tuple[SegmentLimit, ...]:
    """``max_critical_errors_per_segment``: per segment a count (an int) or a rate (a float)."""
    crit: list[SegmentLimit] = []
    if "max_critical_errors_per_segment" not in doc:
        return ()
    v = doc["max_critical_errors_per_segment"]
    if not isinstance(v, dict) or not v:
        pr.add("max_critical_errors_per_segment", "must be a table of segment = count or rate")
        return ()
    for seg, limit in v.items():
        where = f"max_critical_errors_per_segment.{seg}"
        if seg not in SEGMENTS:
            pr.add(where, f"unknown segment; known: {', '.join(SEGMENTS)}")
        elif _is_int(limit) and limit >= 0:
            crit.append(SegmentLimit(seg, "count", float(limit)))
        elif isinstance(limit, float) and 0 <= limit <= 1:
            crit.append(SegmentLimit(seg, "rate", limit))
        else:
            pr.add(
                where,
                "must be a non-negative integer (most questions) or a float in [0, 1] "
                f"(most share of questions), got {limit!r}",
            )
    return tuple(crit)


def _token_ceiling(doc: dict[str, Any], pr: _Problems) -> TokenCeiling | None:
    """``max_evidence_tokens``: a number (most prompt tokens) or a table of field, mean, max."""
    key = "max_evidence_tokens"
    if key not in doc:
        return None
    v = doc[key]
    if _is_number(v) and v > 0:
        return TokenCeiling("prompt_tokens", None, float(v))
    if not isinstance(v, dict):
        pr.add(key, "must be a positive number (max prompt tokens) or a table with field, mean, max")
        return None
    before = len(pr.items)
    for k in v:
        if k not in ("field", "mean", "max"):
            pr.add(f"{key}.{k}", "unknown key; known: field, mean, max")
    fld = v.get("field", "prompt_tokens")
    if fld not in TOKEN_FIELDS:
        pr.add(f"{key}.field", f"must be one of {', '.join(TOKEN_FIELDS)}, got {fld!r}")
    for k in ("mean", "max"):
        if k in v and not (_is_number(v[k]) and v[k] > 0):
            pr.add(f"{key}.{k}", f"must be a positive number of tokens, got {v[k]!r}")
    if "mean" not in v and "max" not in v:
        pr.add(key, "names neither mean nor max")
    if len(pr.items) > before:
        return None
    return TokenCeiling(
        fld, float(v["mean"]) if "mean" in v else None, float(v["max"]) if "max" in v else None
    )


def load_rule(path: str | Path) -> Rule:
    """Read and validate a release rule; every problem is reported with file, line and field."""
    path = Path(path)
    digest, text, doc = _read_toml(path)
    pr = _Problems(str(path), text)
    kw = _settings(doc, pr)
    kw["differences"] = _differences(doc, pr)
    kw["critical_per_segment"] = _critical_limits(doc, pr)
    if (tokens := _token_ceiling(doc, pr)) is not None:
        kw["tokens"] = tokens
    if (limits := parse_limits(doc, pr, path)) is not None:
        kw["resources"] = limits
    if not pr.items and not (
        kw["differences"] or kw["critical_per_segment"] or kw.get("tokens") or kw.get("resources")
    ):
        pr.add(
            "rule",
            "declares no tolerance (max_support_loss, max_answer_loss, max_citation_loss, "
            "max_critical_errors_per_segment, max_evidence_tokens, max_latency, "
            "max_latency_vs_baseline or max_cost)",
        )
    if pr.items:
        raise InputError(pr.items)
    return Rule(path=str(path), digest=digest, **kw)
