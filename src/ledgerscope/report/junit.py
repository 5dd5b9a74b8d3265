"""The release gate as JUnit XML, the test report every CI system shows natively.

One test suite ``release-rule``: a test case per rule check (a violated check fails, an
inconclusive one is skipped with its reason, or fails when collect-more-evidence fails the gate);
one suite ``flips``: a test case per question whose answer flipped from correct (baseline) to wrong
(candidate), failing with the phases, the diagnosis step and the chunk boundary at its gold spans.
Untrusted text (questions, ids) goes through ElementTree's escaping after control and bidi
characters are made visible (XML 1.0 cannot carry most controls at all).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

from ledgerscope.common.safe_text import safe
from ledgerscope.report.gate_inputs import GateOutcome


def _t(text: object) -> str:
    return safe(str(text))


def _suite(parent: ET.Element, name: str, cases: list[ET.Element]) -> None:
    counts = {"failures": 0, "skipped": 0}
    for case in cases:
        counts["failures"] += case.find("failure") is not None
        counts["skipped"] += case.find("skipped") is not None
    suite = ET.SubElement(
        parent,
        "testsuite",
        name=name,
        tests=str(len(cases)),
        errors="0",
        failures=str(counts["failures"]),
        skipped=str(counts["skipped"]),
    )
    suite.extend(cases)


def _check_case(check: dict[str, Any], inconclusive_fails: bool) -> ET.Element:
    case = ET.Element(
        "testcase", classname=f"release-rule.{_t(check['stress_set'])}", name=_t(check["tolerance"])
    )
    status, reason = check["status"], _t(check["reason"])
    if status == "violates":
        ET.SubElement(case, "failure", message=reason, type="violates").text = reason
    elif status == "inconclusive" and inconclusive_fails:
        ET.SubElement(case, "failure", message=reason, type="inconclusive").text = reason
    elif status == "inconclusive":
        ET.SubElement(case, "skipped", message=reason)
    else:
        ET.SubElement(case, "system-out").text = reason
    return case


def flip_message(flip: dict[str, Any]) -> str:
    """One question's flip in words: phases, verdicts, diagnosis step and boundary per phase."""
    parts = [
        f"phase {p['phase']}: baseline correct, candidate {p['candidate']}; diagnosis step "
        f"{p['step']} ({p['step_name']}); boundary: {p['boundary']}"
        for p in flip["phases"]
    ]
    noisy = ""
    if flip.get("noisy"):  # --repeats: its verdict also flips between repeats of one record
        rates = ", ".join(f"{side} {r:.2f}" for side, r in sorted(flip.get("flip_rates", {}).items()))
        noisy = f"[noisy: the verdict differs between repeats; flip rate {rates}] "
    return noisy + (
        f"{flip['qid']} ({flip['segment']}, {flip['stress_set']}) flipped from correct to wrong at "
        f"{len(flip['phases'])} phase(s): " + " | ".join(parts)
    )


def _flip_case(flip: dict[str, Any]) -> ET.Element:
    case = ET.Element("testcase", classname=f"flips.{_t(flip['segment'])}", name=_t(flip["qid"]))
    message = _t(flip_message(flip))
    kind = "correct-to-wrong-noisy" if flip.get("noisy") else "correct-to-wrong"
    failure = ET.SubElement(case, "failure", message=message, type=kind)
    failure.text = message + "\nquestion: " + _t(flip["question"])
    return case


def junit_xml(gate: GateOutcome) -> str:
    """The gate as a JUnit XML document (``testsuites`` with the rule's checks and the flips)."""
    decision = gate.decision
    root = ET.Element(
        "testsuites",
        name=f"ledgerscope release gate: {_t(gate.candidate)} vs {_t(gate.baseline)} ({decision['outcome']})",
    )
    inconclusive_fails = gate.fail_on == "collect-more-evidence"
    _suite(root, "release-rule", [_check_case(c, inconclusive_fails) for c in decision["checks"]])
    _suite(root, "flips", [_flip_case(f) for f in gate.flips])
    props = ET.Element("properties")
    for name, value in (
        ("decision", decision["outcome"]),
        ("rule", gate.rule),
        ("rule_digest", decision["rule_digest"]),
        ("ledger", gate.ledger),
        ("candidate", gate.candidate),
        ("baseline", gate.baseline),
        ("exit_code", gate.exit_code),
    ):
        ET.SubElement(props, "property", name=name, value=_t(value))
    root[0].insert(0, props)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
