"""docs/ci.md's workflows are the ones that work: the GitHub Actions workflow's ``run:`` steps run
literally, in order, on the committed sample, as GitHub's bash runs them; the GitLab job runs the
same gate command and hands GitLab the JUnit file."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import junitparser
import yaml

from ledgerscope.cli.release.decision_exit import EXIT_REJECT

ROOT = Path(__file__).resolve().parent.parent
CI_DOC = ROOT / "docs" / "ci.md"


def _yaml_block(heading: str) -> dict:
    """The first ```yaml block after a ``## heading`` of docs/ci.md, parsed."""
    text = CI_DOC.read_text(encoding="utf-8")
    section = text[text.index(f"## {heading}\n") :]
    return yaml.safe_load(re.search(r"```yaml\n(.*?)```", section, re.S).group(1))


def _github_env(tmp_path: Path) -> dict[str, str]:
    """This checkout's ledgerscope first on PATH (as the install step would leave it), pip kept
    offline (every requirement is already satisfied here, so the install steps change nothing),
    and GitHub's step summary file."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.update(
        PIP_NO_INDEX="1",
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        HF_HUB_OFFLINE="1",
        GITHUB_STEP_SUMMARY=str(tmp_path / "step-summary.md"),
    )
    return env


def test_github_workflow_run_steps_in_order_on_the_sample(tmp_path):
    workflow = _yaml_block("GitHub Actions")
    steps = workflow["jobs"]["gate"]["steps"]
    runs = [s for s in steps if "run" in s]
    assert [s["name"] for s in runs] == ["Install ledgerscope (the CPU build of torch first)", "Release gate"]
    work = tmp_path / "repo"  # the user's checkout: the sample's inputs and its complete ledger
    work.mkdir()
    (work / "sample_ledgers").symlink_to(ROOT / "sample_ledgers", target_is_directory=True)
    env = _github_env(tmp_path)
    codes = []
    for step in runs:  # GitHub's default shell: bash --noprofile --norc -eo pipefail {0}
        shell = ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]]
        res = subprocess.run(
            shell, cwd=work, env=env, capture_output=True, text=True, timeout=300, check=False
        )
        codes.append(res.returncode)
        if step["name"] == "Release gate":
            assert res.returncode == EXIT_REJECT, res.stdout + res.stderr
            assert "nothing to sweep" in res.stdout and "release decision: REJECT" in res.stdout
        else:
            assert res.returncode == 0, res.stdout + res.stderr
    assert codes == [0, EXIT_REJECT]
    out = work / "gate"
    assert {p.name for p in out.iterdir()} == {"report.html", "junit.xml", "summary.md"}
    xml = junitparser.JUnitXml.fromfile(str(out / "junit.xml"))
    assert {s.name for s in xml} == {"release-rule", "flips"}
    summary = (out / "summary.md").read_text(encoding="utf-8")
    assert "REJECT" in summary
    assert summary.strip() in (tmp_path / "step-summary.md").read_text(encoding="utf-8")
    # what the later `uses:` steps read is where the gate wrote it
    later = steps[steps.index(runs[-1]) + 1 :]
    assert all(s.get("if") == "always()" for s in later)
    read = {s["with"].get("path") or s["with"].get("report_paths") for s in later}
    assert read == {"gate/", "gate/junit.xml"}


def test_gitlab_job_runs_the_same_gate_and_reports_its_junit():
    job = _yaml_block("GitLab CI")["release-gate"]
    gh = next(
        s["run"]
        for s in _yaml_block("GitHub Actions")["jobs"]["gate"]["steps"]
        if s.get("name") == "Release gate"
    )
    words = " ".join(gh.replace("\\\n", " ").split())
    assert " ".join(job["script"][-1].split()) == words
    assert job["artifacts"]["reports"]["junit"] == "gate/junit.xml" and job["artifacts"]["when"] == "always"
    assert job["script"][:2] == [
        line.strip()
        for line in next(
            s["run"]
            for s in _yaml_block("GitHub Actions")["jobs"]["gate"]["steps"]
            if s.get("name", "").startswith("Install")
        )
        .strip()
        .splitlines()
    ]
