"""A price table (TOML) that turns recorded usage into money.

    format = "ledgerscope-prices/1"
    currency = "USD"

    [embedding."text-embedding-3-small"]
    per_million_tokens = 0.02

    [rerank."rerank-english-v3.0"]
    per_request = 0.002            # or per_thousand_requests, per_million_tokens

    [generator."gpt-4o-mini"]
    per_million_prompt_tokens = 0.15
    per_million_completion_tokens = 0.60

A table per stage kind (``embedding``, ``rerank``, ``generator``), one entry per model name as the
arm names it (``"*"`` prices every model of that kind the table does not name). A model the table
does not price has no cost (``None``, said so), never a made-up zero. ``docs/prices.example.toml``
prices the embedded models (MiniLM, the extractive reader, MaxSim) at zero.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ledgerscope.common.errors import InputError, Problem

FORMAT = "ledgerscope-prices/1"
KINDS = ("embedding", "rerank", "generator")
RATES = {
    "embedding": ("per_million_tokens", "per_request", "per_thousand_requests"),
    "rerank": ("per_request", "per_thousand_requests", "per_million_tokens"),
    "generator": (
        "per_million_prompt_tokens",
        "per_million_completion_tokens",
        "per_request",
        "per_thousand_requests",
    ),
}


@dataclass(frozen=True)
class Prices:
    path: str
    currency: str = "USD"
    models: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)

    def rates(self, kind: str, model: str | None) -> dict[str, float] | None:
        table = self.models.get(kind, {})
        return table.get(model or "") or table.get("*")

    def cost(self, kind: str, model: str | None, usage: dict[str, float]) -> float | None:
        """Money for ``usage`` (tokens, prompt_tokens, completion_tokens, requests) of one model;
        None when the table does not price the model."""
        rates = self.rates(kind, model)
        if rates is None:
            return None
        requests = usage.get("requests", 0.0) or 0.0
        total = (
            rates.get("per_request", 0.0) * requests
            + rates.get("per_thousand_requests", 0.0) * requests / 1000
        )
        total += rates.get("per_million_tokens", 0.0) * (usage.get("tokens", 0.0) or 0.0) / 1e6
        total += rates.get("per_million_prompt_tokens", 0.0) * (usage.get("prompt_tokens", 0.0) or 0.0) / 1e6
        total += (
            rates.get("per_million_completion_tokens", 0.0)
            * (usage.get("completion_tokens", 0.0) or 0.0)
            / 1e6
        )
        return total

    def describe(self) -> dict[str, Any]:
        return {"path": self.path, "currency": self.currency}


def _line(text: str, kind: str, model: str) -> int | None:
    pat = re.compile(rf'^\s*\[\s*{re.escape(kind)}\s*\.\s*"?{re.escape(model)}"?\s*\]')
    for i, line in enumerate(text.splitlines(), 1):
        if pat.match(line):
            return i
    return None


def load_prices(path: str | Path) -> Prices:
    """Read and check a price table; every problem names the file, line and key."""
    path = Path(path)
    try:
        text = path.read_bytes().decode("utf-8")
        doc = tomllib.loads(text)
    except OSError as exc:
        raise InputError(Problem(str(path), None, "prices", f"cannot read: {exc.strerror or exc}")) from None
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        m = re.search(r"line (\d+)", str(exc))
        raise InputError(Problem(str(path), int(m.group(1)) if m else None, "toml", str(exc))) from None
    problems = []
    if doc.get("format", FORMAT) != FORMAT:
        problems.append(
            Problem(str(path), None, "format", f"unknown format {doc['format']!r} (expected {FORMAT})")
        )
    currency = doc.get("currency", "USD")
    if not isinstance(currency, str) or not currency:
        problems.append(Problem(str(path), None, "currency", "must be a non-empty string"))
    models: dict[str, dict[str, dict[str, float]]] = {}
    for key, value in doc.items():
        if key in ("format", "currency"):
            continue
        if key not in KINDS or not isinstance(value, dict):
            problems.append(
                Problem(str(path), None, key, f"unknown key; known: format, currency, {', '.join(KINDS)}")
            )
            continue
        for model, rates in value.items():
            where = f"{key}.{model}"
            if not isinstance(rates, dict) or not rates:
                problems.append(
                    Problem(str(path), _line(text, key, model), where, "must be a table of rates")
                )
                continue
            for rate, amount in rates.items():
                if rate not in RATES[key]:
                    problems.append(
                        Problem(
                            str(path),
                            _line(text, key, model),
                            f"{where}.{rate}",
                            f"unknown rate; known for {key}: {', '.join(RATES[key])}",
                        )
                    )
                elif not (isinstance(amount, int | float) and not isinstance(amount, bool) and amount >= 0):
                    problems.append(
                        Problem(
                            str(path),
                            _line(text, key, model),
                            f"{where}.{rate}",
                            f"must be a non-negative number, got {amount!r}",
                        )
                    )
            models.setdefault(key, {})[model] = {
                r: float(a) for r, a in rates.items() if r in RATES[key] and isinstance(a, int | float)
            }
    if problems:
        raise InputError(problems)
    return Prices(str(path), currency if isinstance(currency, str) else "USD", models)
