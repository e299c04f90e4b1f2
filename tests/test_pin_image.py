"""The image workflow's pinning step: every environment gets the released tag (CPU environments the -cpu image) and
digest, by round-trip edits that change nothing else; a stale digest never outlives a new tag."""
from __future__ import annotations

import shutil
import subprocess
import sys

import pytest
import yaml

from conftest import REPO

GPU = "sha256:" + "a" * 64
CPU = "sha256:" + "b" * 64


@pytest.fixture()
def repo(tmp_path):
    root = tmp_path / "repo"
    for d in ("base", "components", "overlays"):
        shutil.copytree(REPO / d, root / d)
    return root


def pin(root, *args):
    return subprocess.run([sys.executable, "-m", "policies.pin_image", *args, "--root", str(root)], cwd=REPO,
                          capture_output=True, text=True, timeout=120)


def images(root, overlay):
    out = subprocess.run([str(REPO / ".venv/bin/kubectl"), "kustomize", str(root / "overlays" / overlay)],
                         capture_output=True, text=True, check=True).stdout
    return sorted({line.split("image:", 1)[1].strip() for line in out.splitlines() if "image:" in line})


def test_every_environment_runs_the_release(repo):
    proc = pin(repo, "--tag", "0.2.0", "--digest", GPU, "--cpu-digest", CPU, "--name", "ghcr.io/acme/ddp-trainer")
    assert proc.returncode == 0, proc.stderr
    assert images(repo, "gke-t4/indexed-job") == [f"ghcr.io/acme/ddp-trainer:0.2.0@{GPU}"]
    assert images(repo, "64x8-h100/pytorchjob") == [f"ghcr.io/acme/ddp-trainer:0.2.0@{GPU}"]
    assert images(repo, "kind-cpu/trainjob") == [f"ghcr.io/acme/ddp-trainer:0.2.0-cpu@{CPU}"]
    # Only the images entries changed: comments and everything else are byte for byte the same.
    for env in ("64x8-h100", "kind-cpu"):
        old = (REPO / f"components/{env}/kustomization.yaml").read_text().splitlines()
        new = (repo / f"components/{env}/kustomization.yaml").read_text().splitlines()
        assert [l for l in old if "newTag" not in l and "digest" not in l] == \
               [l for l in new if "newTag" not in l and "digest" not in l and "newName" not in l]
    assert pin(repo, "--tag", "0.2.0", "--digest", GPU, "--cpu-digest", CPU, "--name",
               "ghcr.io/acme/ddp-trainer").stdout.startswith("every environment already runs 0.2.0")


def test_a_tag_without_digest_drops_the_old_digest(repo):
    proc = pin(repo, "--tag", "0.3.0")
    assert proc.returncode == 0, proc.stderr
    doc = yaml.safe_load((repo / "components/64x8-h100/kustomization.yaml").read_text())
    (entry,) = doc["images"]
    assert entry == {"name": "ghcr.io/example/ddp-trainer", "newTag": "0.3.0"}


@pytest.mark.parametrize("args, message", [
    (["--tag", "0.2.0 beta"], "is not a valid image tag"),
    (["--tag", "0.2.0", "--digest", "sha256:xyz"], "is not sha256:<64 hex digits>"),
])
def test_bad_input(repo, args, message):
    proc = pin(repo, *args)
    assert proc.returncode == 2 and message in proc.stderr
