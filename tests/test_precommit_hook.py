"""The pre-commit hook other repositories use (.pre-commit-hooks.yaml), run by the real `pre-commit try-repo`
(pre-commit from PyPI, requirements-dev.txt) against a temporary repository holding a good and a broken manifest, an
overlay, and the YAML every repository has that is no Kubernetes object (a GitHub workflow, .pre-commit-config.yaml,
Helm values).

No network: pre-commit clones this checkout (a local path), makes the hook's virtualenv with virtualenv's own seed
wheels, and runs `pip install .` in the clone; that pip reads the build backend and the dependencies only from the
wheelhouse `make setup` downloads (PIP_NO_INDEX, PIP_FIND_LINKS), and every proxy leads nowhere
(tests/package_helpers.py)."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import REPO
from package_helpers import offline_env, outside_checkout

HOOKS = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())
CORPUS = REPO / "tests" / "corpus"
GOOD = "pytorchjob/kueue-sample-pytorchjob.yaml"  # runs as written: warnings only
BROKEN = "appwrapper/appwrapper-wrapped-failing-pytorch-job.yaml"  # cannot form: one error


def pre_commit() -> str:
    exe = Path(sys.executable).with_name("pre-commit")
    if not exe.exists():
        pytest.skip("pre-commit is not installed (requirements-dev.txt; run make setup)")
    return str(exe)


def test_the_hook_is_declared_for_pre_commit():
    assert [h["id"] for h in HOOKS] == ["ddp-check"]
    hook = HOOKS[0]
    assert hook["language"] == "python" and hook["entry"] == "ddp-check changed"
    # ddp-check is the console script the package installs into the hook's environment.
    import tomllib

    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert hook["entry"].split()[0] in scripts


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
                   check=True, capture_output=True, timeout=60)


@pytest.mark.slow
def test_try_repo_passes_the_good_and_fails_the_broken_manifest(tmp_path):
    exe = pre_commit()
    # pre-commit clones HEAD (and a shadow commit of tracked changes): the hook file must be committed.
    tracked = subprocess.run(["git", "ls-files", "--error-unmatch", ".pre-commit-hooks.yaml", "pyproject.toml"],
                             cwd=REPO, capture_output=True, timeout=60)
    assert tracked.returncode == 0, tracked.stderr
    user = outside_checkout(tmp_path / "their-repo")
    user.mkdir()
    git(user, "init", "-q")
    shutil.copy(CORPUS / GOOD, user / "good.yaml")
    shutil.copy(CORPUS / BROKEN, user / "broken.yaml")
    # An overlay with a patch: the patch is checked through the overlay that reads it, never as an object.
    (user / "deploy").mkdir()
    shutil.copy(CORPUS / GOOD, user / "deploy" / "job.yaml")
    (user / "deploy" / "kustomization.yaml").write_text("resources: [job.yaml]\npatches:\n  - path: patch.yaml\n")
    name = yaml.safe_load((CORPUS / GOOD).read_text())["metadata"]["name"]
    (user / "deploy" / "patch.yaml").write_text(
        f"apiVersion: kubeflow.org/v1\nkind: PyTorchJob\nmetadata:\n  name: {name}\n"
        "  labels: {team: a}\n")
    # What every repository also holds: YAML that is no Kubernetes object. The hook skips each, said at info level.
    (user / ".github" / "workflows").mkdir(parents=True)
    (user / ".github" / "workflows" / "ci.yml").write_text(
        "name: ci\non: [push]\njobs:\n  test:\n    runs-on: ubuntu-latest\n    steps:\n      - run: make test\n")
    (user / ".pre-commit-config.yaml").write_text(
        f"repos:\n  - repo: {REPO}\n    rev: HEAD\n    hooks:\n      - id: ddp-check\n")
    (user / "chart").mkdir()
    (user / "chart" / "values.yaml").write_text("replicaCount: 2\nimage:\n  repository: x\n  tag: '1'\n")
    # A tool's configuration with a manifest's header (kind's cluster config): no object either.
    (user / "kind").mkdir()
    (user / "kind" / "cluster.yaml").write_text("kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\nnodes:\n"
                                                "- role: control-plane\n")
    others = (".github/workflows/ci.yml", ".pre-commit-config.yaml", "chart/values.yaml", "kind/cluster.yaml")
    git(user, "add", ".")
    env = offline_env(PRE_COMMIT_HOME=str(tmp_path / "pre-commit-home"), HOME=str(tmp_path / "home"))

    def try_repo(*files: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([exe, "try-repo", str(REPO), "ddp-check", "--verbose", "--files", *files], cwd=user,
                              env=env, capture_output=True, text=True, timeout=900)

    # --verbose: the hook's output even when it passes.
    good = try_repo("good.yaml", "deploy/patch.yaml", *others)
    assert good.returncode == 0, good.stdout + good.stderr
    assert "Passed" in good.stdout
    # The patch reached the overlay: one rendered folder and the good file; the others skipped, one line each.
    assert "OK: 1 rendered folder, 1 file (4 files skipped: not Kubernetes)," in good.stdout, good.stdout
    skipped = sorted(line.split()[2].rstrip(":") for line in good.stdout.splitlines() if line.startswith("info SKIP "))
    assert skipped == sorted(others), good.stdout

    bad = try_repo("good.yaml", "broken.yaml", *others)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "Failed" in bad.stdout and "Traceback" not in bad.stdout + bad.stderr
    errors = [line for line in bad.stdout.splitlines() if line.startswith("error ")]
    assert len(errors) == 1 and errors[0].startswith("error IMG003 broken.yaml: "), bad.stdout
    assert "FAILED: 2 files (4 files skipped: not Kubernetes)," in bad.stdout


@pytest.mark.slow
def test_the_hook_with_bundle_reads_a_changed_file_with_its_neighbours(tmp_path):
    """`args: [--bundle]` in their .pre-commit-config.yaml, run by `pre-commit run` as a commit runs it: the changed
    Pod is checked with the Namespace beside it in its folder, whose Pod Security level refuses it."""
    exe = pre_commit()
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert head.returncode == 0, head.stderr
    user = outside_checkout(tmp_path / "their-repo")
    (user / "deploy").mkdir(parents=True)
    git(user, "init", "-q")
    (user / "deploy" / "namespace.yaml").write_text(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: train\n  labels:\n"
        "    pod-security.kubernetes.io/enforce: restricted\n")
    (user / "deploy" / "pod.yaml").write_text(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: trainer\n  namespace: train\nspec:\n"
        "  containers:\n    - name: trainer\n      image: ghcr.io/example/ddp-trainer:0.1.0\n")
    (user / ".pre-commit-config.yaml").write_text(
        f"repos:\n  - repo: {REPO}\n    rev: {head.stdout.strip()}\n    hooks:\n      - id: ddp-check\n"
        "        args: [--bundle]\n")
    git(user, "add", ".")
    env = offline_env(PRE_COMMIT_HOME=str(tmp_path / "pre-commit-home"), HOME=str(tmp_path / "home"))
    run = subprocess.run([exe, "run", "ddp-check", "--verbose", "--files", "deploy/pod.yaml"], cwd=user, env=env,
                         capture_output=True, text=True, timeout=900)
    assert run.returncode == 1 and "Failed" in run.stdout, run.stdout + run.stderr
    assert "error SEC010 deploy/pod.yaml: Pod/train/trainer" in run.stdout, run.stdout
    assert "namespace 'train' (pod-security.kubernetes.io/enforce: restricted)" in run.stdout, run.stdout
