"""`make simulate` runs the manifests' commands on this machine: its first line says so when what it runs is not the
default branch's (policies/simulate/provenance.py defines it: the overlay's kustomize inputs, trainer/, files named
under /app; uncommitted or untracked, outside the checkout, or different at HEAD from origin/HEAD's branch, else
main, else master). A git repository per test, made here."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
import yaml

from conftest import REPO
from policies.simulate import provenance

JOB = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}, "spec": {"template": {"spec": {
    "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox:1.36",
                                              "command": ["python", "/app/scripts/run.py"]}]}}}}


def git(repo, *args):
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                   env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                        "GIT_COMMITTER_EMAIL": "t@t"})


@pytest.fixture
def repo(tmp_path):
    r = tmp_path / "repo"
    overlay = r / "overlays" / "x"
    overlay.mkdir(parents=True)
    (overlay / "kustomization.yaml").write_text("resources:\n  - job.yaml\n")
    (overlay / "job.yaml").write_text(yaml.safe_dump(JOB))
    (r / "trainer").mkdir()
    (r / "trainer" / "train.py").write_text("print('train')\n")
    (r / "scripts").mkdir()
    (r / "scripts" / "run.py").write_text("print('run')\n")
    (r / "docs.md").write_text("docs\n")
    (r / ".gitignore").write_text("__pycache__/\n*.local.yaml\n")
    git(r, "init", "-q", "-b", "main")
    git(r, "add", "-A")
    git(r, "commit", "-qm", "one")
    return r


def warn(repo, source="overlays/x"):
    return provenance.warning(str(repo / source), [JOB], repo)


def test_the_default_branch_as_committed_says_nothing(repo):
    assert warn(repo) is None
    (repo / "docs.md").write_text("changed\n")  # not something the run reads
    (repo / "trainer" / "__pycache__").mkdir()
    (repo / "trainer" / "__pycache__" / "train.cpython-311.pyc").write_bytes(b"")  # ignored, under trainer/
    assert warn(repo) is None


def test_uncommitted_changes_to_what_the_run_reads(repo):
    (repo / "overlays" / "x" / "job.yaml").write_text(yaml.safe_dump(JOB) + "# edited\n")
    assert "uncommitted changes: overlays/x/job.yaml" in warn(repo)
    git(repo, "add", "-A")  # staged is still not committed
    assert "uncommitted changes: overlays/x/job.yaml" in warn(repo)
    git(repo, "commit", "-qam", "two")
    assert warn(repo) is None  # committed on main itself: it is the default branch's


def test_untracked_and_ignored_inputs(repo):
    (repo / "overlays" / "x" / "kustomization.yaml").write_text("resources:\n  - job.yaml\n  - extra.local.yaml\n")
    (repo / "overlays" / "x" / "extra.local.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: e}\n")
    (repo / "trainer" / "new.py").write_text("print('new')\n")
    got = warn(repo)
    assert "not in git: overlays/x/extra.local.yaml, trainer/new.py" in got, got
    assert "uncommitted changes: overlays/x/kustomization.yaml" in got


def test_a_file_the_manifests_name_under_app(repo):
    (repo / "scripts" / "run.py").write_text("print('other')\n")
    assert "uncommitted changes: scripts/run.py" in warn(repo)


def test_head_on_a_branch_that_changes_them(repo):
    git(repo, "checkout", "-qb", "feature")
    (repo / "docs.md").write_text("feature docs\n")
    git(repo, "commit", "-qam", "docs only")
    assert warn(repo) is None  # HEAD is not main, but the run's files are main's
    (repo / "trainer" / "train.py").write_text("print('feature')\n")
    git(repo, "commit", "-qam", "trainer")
    assert "HEAD differs from main in: trainer/train.py" in warn(repo)


def test_origin_head_names_the_default_branch(repo, tmp_path):
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(repo), str(clone)], check=True, capture_output=True)
    assert provenance.default_branch(clone) == "origin/main"
    git(repo, "checkout", "-qb", "other")  # a commit on the origin that the clone's HEAD does not have
    (repo / "trainer" / "train.py").write_text("print('upstream moved on')\n")
    git(repo, "commit", "-qam", "upstream")
    git(repo, "checkout", "-q", "main")
    git(repo, "merge", "-q", "other")
    git(clone, "fetch", "-q")
    assert "HEAD differs from origin/main in: trainer/train.py" in warn(clone)


def test_outside_the_checkout_and_no_git(repo, tmp_path):
    rendered = tmp_path / "rendered.yaml"
    rendered.write_text(yaml.safe_dump(JOB))
    assert f"outside this checkout: {rendered}" in provenance.warning(str(rendered), [JOB], repo)
    bare = tmp_path / "nogit"
    (bare / "trainer").mkdir(parents=True)
    got = provenance.warning(str(rendered), [JOB], bare)
    assert "cannot be told here (not a git checkout" in got, got
    git(repo, "branch", "-qm", "main", "trunk")
    assert "no default branch" in warn(repo)


def test_it_is_the_first_line_of_the_run(tmp_path):
    """Through the command: a rendered file outside the checkout (the pods' command only prints)."""
    job = {**JOB, "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [
        {"name": "c", "image": "busybox:1.36", "command": ["sh", "-c", "echo hello"]}]}}}}
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(job))
    proc = subprocess.run([sys.executable, "-m", "policies.simulate", str(path), "--deadline", "30", "--run-dir",
                           str(tmp_path / "run")], cwd=REPO, capture_output=True, text=True, timeout=120)
    first = proc.stdout.splitlines()[0]
    assert first.startswith("simulate: WARNING: the pods run the commands in ") and "outside this checkout" in first
    assert "enforced here:" in proc.stdout and "NOT enforced:" in proc.stdout
