"""Never simulate in CI on code from a fork with secrets or a write token (docs/simulate.md, docs/security.md).
`make simulate` and the tests (the simulate tests are among them) run what a pull request wrote, so in
.github/workflows:

- a job of a workflow that a fork's pull request triggers (`pull_request`) that runs them holds a token that is
  read-only by its own `permissions` (job or workflow level, written: the repository's default may be write), no
  secret but GITHUB_TOKEN, no `environment`, no `secrets: inherit`;
- no job of a workflow that runs with the base repository's secrets and write token whatever the pull request
  (`pull_request_target`, `workflow_run`, `issue_comment`, ...) runs them at all.

The check is run on the repository's workflows, and on changed copies of them that it must refuse."""
from __future__ import annotations

import copy
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import REPO
from policies.simulate.cli import PRIVILEGED_EVENTS as PRIVILEGED

WORKFLOWS = REPO / ".github" / "workflows"
# A step that runs the simulator or the tests (the simulate tests among them, make test-fast included).
RUNS_SIMULATION = re.compile(r"\bmake\b[^\n;&|]*\b(simulate|test|test-fast)\b|policies\.simulate|\bpytest\b|"
                             r"\.ci/run\b")


def load(path: Path) -> dict:
    doc = yaml.safe_load(path.read_text())
    if True in doc:  # YAML 1.1 reads the key `on` as true
        doc["on"] = doc.pop(True)
    return doc


def triggers(doc: dict) -> set[str]:
    on = doc.get("on")
    if isinstance(on, str):
        return {on}
    return set(on or [])


def runs_simulation(job: dict) -> bool:
    return any(RUNS_SIMULATION.search(str(step.get("run", ""))) for step in job.get("steps") or []) or (
        "uses" in job and str(job["uses"]).startswith("./"))  # a local reusable workflow: assume it may


def write_scopes(permissions) -> list[str]:
    if permissions is None:
        return ["no permissions written (the repository's default token may write)"]
    if isinstance(permissions, str):
        return [] if permissions == "read-all" else [permissions]
    return [f"{k}: {v}" for k, v in permissions.items() if v == "write"]


def problems(docs: dict[str, dict]) -> list[str]:
    found = []
    for name, doc in sorted(docs.items()):
        events = triggers(doc)
        for job_id, job in (doc.get("jobs") or {}).items():
            if not runs_simulation(job):
                continue
            where = f"{name} job {job_id}"
            privileged = sorted(events & PRIVILEGED)
            if privileged:
                found.append(f"{where}: runs the simulator or the tests on {', '.join(privileged)}, which holds the "
                             "base repository's secrets and write token")
            if "pull_request" not in events:
                continue
            scopes = write_scopes(job["permissions"] if "permissions" in job else doc.get("permissions"))
            if scopes:
                found.append(f"{where}: runs a pull request's code with {', '.join(scopes)}")
            text = yaml.safe_dump(job)
            secrets = sorted(set(re.findall(r"secrets\.(\w+)", text)) - {"GITHUB_TOKEN"})
            if secrets:
                found.append(f"{where}: runs a pull request's code with secrets {', '.join(secrets)}")
            if "environment" in job:
                found.append(f"{where}: runs a pull request's code in environment {job['environment']}")
            if job.get("secrets") == "inherit":
                found.append(f"{where}: runs a pull request's code with every secret (secrets: inherit)")
    return found


def repository_workflows() -> dict[str, dict]:
    return {p.name: load(p) for p in sorted(WORKFLOWS.glob("*.y*ml"))}


def test_the_repositorys_workflows_never_simulate_fork_code_with_secrets_or_write_tokens():
    docs = repository_workflows()
    assert any(runs_simulation(j) for d in docs.values() for j in d["jobs"].values())  # the check sees the tests
    assert problems(docs) == []


def ci_job(docs: dict) -> dict:
    return docs["ci.yaml"]["jobs"]["validate-and-test"]


def write_token(docs):
    ci_job(docs)["permissions"] = {"contents": "write"}


def no_permissions(docs):
    ci_job(docs).pop("permissions")
    docs["ci.yaml"].pop("permissions")


def a_secret(docs):
    ci_job(docs)["steps"].append({"run": "make simulate OVERLAY=x", "env": {"T": "${{ secrets.REGISTRY_TOKEN }}"}})


def an_environment(docs):
    ci_job(docs)["environment"] = "image-pin"


def on_pull_request_target(docs):
    docs["ci.yaml"]["on"] = {"pull_request_target": {}}


def simulate_in_the_comment_workflow(docs):
    job = next(iter(docs["pr-diff-comment.yaml"]["jobs"].values()))
    job["steps"].append({"run": "make simulate OVERLAY=overlays/kind-cpu/statefulset"})


def write_all_on_pytest(docs):
    ci_job(docs)["permissions"] = "write-all"
    ci_job(docs)["steps"] = [{"run": ".venv/bin/python -m pytest tests/test_simulate.py"}]


@pytest.mark.parametrize("change", [write_token, no_permissions, a_secret, an_environment, on_pull_request_target,
                                    simulate_in_the_comment_workflow, write_all_on_pytest],
                         ids=lambda f: f.__name__)
def test_a_change_that_would_simulate_fork_code_with_privileges_is_refused(change):
    docs = copy.deepcopy(repository_workflows())
    change(docs)
    assert problems(docs), change.__name__


def test_the_simulator_itself_refuses_a_privileged_run(tmp_path):
    """Should a workflow still ask: on pull_request_target (or workflow_run, ...) the simulator starts nothing."""
    env = {**os.environ, "GITHUB_ACTIONS": "true", "GITHUB_EVENT_NAME": "pull_request_target"}
    proc = subprocess.run([sys.executable, "-m", "policies.simulate", "overlays/kind-cpu/indexed-job", "--run-dir",
                           str(tmp_path / "run")], cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stdout == "" and "refused on a GitHub Actions pull_request_target run" in \
        proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    assert not (tmp_path / "run").exists()
