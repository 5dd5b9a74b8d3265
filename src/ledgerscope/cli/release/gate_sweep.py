"""The gate's first step: sweep only what is missing.

A ledger whose ``_SWEEP_DONE.json`` carries the identity the arms, fixtures and sources give now is
complete: nothing runs and no model loads. An existing baseline ledger is reused when its manifest
matches (the baseline arm's config digest, the fixtures' digest, the source versions) and its sweep
finished; otherwise the baseline is swept too. Everything else is the sweep's own resume (and the
embedding cache every sweep shares).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from ledgerscope.common.errors import InputError, Problem
from ledgerscope.common.paths import shown_path


@dataclass
class SweepPlan:
    """Which arms go into which ledger, and what the gate says about it."""

    runs: list[tuple[Path, list]] = field(default_factory=list)  # (ledger, arm configs) to sweep
    notes: list[str] = field(default_factory=list)
    repeats: int = 1  # --repeats K: every sweep of the plan asks the generator K times per record


def _done_identity(ledger: Path) -> str | None:
    try:
        return json.loads((ledger / "_SWEEP_DONE.json").read_text(encoding="utf-8")).get("identity")
    except (OSError, ValueError, AttributeError):
        return None


def _baseline_mismatch(ledger: Path, cfg, fixtures, corpus, repeats: int = 1) -> str | None:
    """Why an existing baseline ledger cannot stand for this baseline arm (None: it can)."""
    from ledgerscope.ledger.verify import load_manifest
    from ledgerscope.pipeline.run.sweep import fixtures_digest

    manifest = load_manifest(ledger)
    arm = (manifest.get("arms") or {}).get(cfg.name)
    if arm is None:
        return f"it holds no arm {cfg.name!r}"
    if arm.get("config_digest") != cfg.digest():
        return f"its arm {cfg.name!r} was swept with another configuration"
    if manifest.get("fixtures_digest") != fixtures_digest(fixtures):
        return "it was swept over other fixtures"
    if manifest.get("sources") != {s.doc_id: s.version for s in corpus}:
        return "it was swept over other source versions"
    if manifest.get("repeats", 1) != repeats:
        return f"it was swept with --repeats {manifest.get('repeats', 1)}, not {repeats}"
    if _done_identity(ledger) != manifest.get("identity"):
        return "its sweep did not finish"
    return None


def plan_sweeps(
    ledger: Path, candidate, baseline, baseline_ledger: Path | None, fixtures, corpus, repeats: int = 1
) -> SweepPlan:
    """The sweeps the gate must run: the candidate (and baseline) into ``ledger``, or the baseline
    into a ``baseline_ledger`` that does not exist yet; complete ledgers are left alone."""
    from ledgerscope.pipeline.run.sweep import sweep_identity
    from ledgerscope.rules.judge import with_inferred_default

    fixtures = [with_inferred_default(f) for f in fixtures]
    plan = SweepPlan()
    here = [candidate]
    if baseline is not None and baseline_ledger is not None:
        if not (baseline_ledger / "manifest.json").is_file():
            plan.runs.append((baseline_ledger, [baseline]))
            plan.notes.append(f"baseline ledger {shown_path(baseline_ledger)}: not there yet, sweeping it")
        elif (why := _baseline_mismatch(baseline_ledger, baseline, fixtures, corpus, repeats)) is not None:
            raise InputError(
                Problem(
                    str(baseline_ledger),
                    None,
                    "manifest",
                    f"cannot stand for the baseline arm: {why}; remove it (it is swept "
                    "again) or name another --baseline-ledger",
                )
            )
        else:
            plan.notes.append(f"baseline ledger {shown_path(baseline_ledger)}: its manifest matches, reused")
    elif baseline is not None:
        here.append(baseline)
    plan.repeats = repeats
    if _done_identity(ledger) == sweep_identity(here, fixtures, corpus, repeats):
        plan.notes.append(
            f"ledger {shown_path(ledger)}: complete for {', '.join(c.name for c in here)}, nothing to sweep"
        )
    else:
        plan.runs.append((ledger, here))
    return plan


def run_sweeps(plan: SweepPlan, fixtures, corpus, quiet: bool) -> list[str]:
    """Run the planned sweeps (the ``sweep`` extra is checked first); one summary line each."""
    from ledgerscope.cli.shared.extras import require_extra

    if not plan.runs:
        return []
    require_extra("sweep", "ledgerscope gate (its sweep)")
    from ledgerscope.cli.shared.machine import writing
    from ledgerscope.pipeline.run.sweep import sweep

    lines = []
    for out, arms in plan.runs:
        with writing(out):
            if quiet:
                result = sweep(fixtures, corpus, arms, out, repeats=plan.repeats)
            else:
                from ledgerscope.cli.shared.progress import RichSweepProgress

                with RichSweepProgress() as progress:
                    result = sweep(fixtures, corpus, arms, out, progress=progress, repeats=plan.repeats)
        lines.append(
            f"ledger {shown_path(out)}: {len(result.written)} partition(s) swept, "
            f"{len(result.skipped)} already done, texts: {result.cached_texts} from the embedding "
            f"cache, {result.encoded_texts} encoded, {result.seconds:.1f} s"
        )
    return lines
