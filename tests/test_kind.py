"""The kind recipe (make kind-up) cannot run here (no Docker engine), so what can be checked is: the cluster config,
the script's syntax and pinned versions, that it reads the launcher from the ApplicationSet, that it fails fast and
clearly without Docker, and that the documented commands are the ones it runs."""
from __future__ import annotations

import os
import re
import subprocess

import pytest
import yaml

from conftest import REPO

SCRIPT = REPO / "scripts/kind-up.sh"


def test_cluster_config():
    doc = yaml.safe_load((REPO / "kind/cluster.yaml").read_text())
    assert doc["kind"] == "Cluster" and doc["apiVersion"] == "kind.x-k8s.io/v1alpha4"
    # One node: the ReadWriteOnce outputs-pvc (local-path) must be reachable from every pod of the world.
    assert [n["role"] for n in doc["nodes"]] == ["control-plane"]
    assert doc["name"] == "ddp"


def test_script_syntax_and_pins():
    subprocess.run(["bash", "-n", str(SCRIPT)], check=True)
    text = SCRIPT.read_text()
    assert os.access(SCRIPT, os.X_OK)
    assert 'TRAINER_VERSION="${TRAINER_VERSION:-v2.3.0}"' in text
    assert 'JOBSET_VERSION="${JOBSET_VERSION:-v0.12.0}"' in text
    assert 'TRAINING_OPERATOR_VERSION="${TRAINING_OPERATOR_VERSION:-v1.9.4}"' in text
    assert "manifests/overlays/manager?ref=${TRAINER_VERSION}" in text
    assert "manifests/overlays/standalone?ref=${TRAINING_OPERATOR_VERSION}" in text
    applies = [line.strip() for line in text.splitlines() if re.search(r'"\$KUBECTL" apply\b', line)]
    assert applies and all("--server-side" in a for a in applies), applies
    assert '"$KUBECTL" apply --server-side -n "$NAMESPACE" -k "$overlay"' in text
    assert 'kind create cluster --name "$CLUSTER" --config kind/cluster.yaml' in text


def test_launcher_comes_from_the_applicationset():
    text = SCRIPT.read_text()
    assert "argocd/applicationset.yaml" in text and 'overlay="overlays/kind-cpu/$launcher"' in text
    doc = yaml.safe_load((REPO / "argocd/applicationset.yaml").read_text())
    (el,) = [e for e in doc["spec"]["generators"][0]["list"]["elements"] if e["env"] == "kind-cpu"]
    assert (REPO / "overlays/kind-cpu" / el["launcher"] / "kustomization.yaml").is_file()
    assert f"  {el['launcher']})" in text or f"|{el['launcher']})" in text  # the script knows how to install it


def fake_bin(tmp_path, docker_rc):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "docker").write_text(f"#!/bin/sh\nexit {docker_rc}\n")
    (bin_dir / "docker").chmod(0o755)
    return bin_dir


@pytest.mark.parametrize("docker, message", [
    (None, "docker is not installed"),
    (1, "no Docker engine answers (docker info failed)"),
])
def test_fails_fast_without_docker(tmp_path, docker, message):
    path = "/usr/bin:/bin" if docker is None else f"{fake_bin(tmp_path, docker)}:/usr/bin:/bin"
    proc = subprocess.run(["bash", str(SCRIPT)], cwd=REPO, env={"PATH": path, "HOME": str(tmp_path)},
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert proc.stderr.strip() == f"make kind-up: {message}" or proc.stderr.strip().startswith(f"make kind-up: {message}")


def test_documented_commands_are_the_script_s():
    """docs/gitops.md lists the commands with the variables filled in; each must be one the script runs."""
    doc = (REPO / "docs/gitops.md").read_text()
    block = doc.split("<!-- kind-up commands -->", 1)[1].split("```", 2)[1]
    text = SCRIPT.read_text()
    for var, value in (('"$KUBECTL"', "kubectl"), ('"$CLUSTER"', "ddp"), ("${TRAINER_VERSION}", "v2.3.0"),
                       ("${TRAINING_OPERATOR_VERSION}", "v1.9.4"), ('"$NAMESPACE"', "ddp-kind-cpu"),
                       ('"$overlay"', "overlays/kind-cpu/trainjob")):
        text = text.replace(var, value)
    lines = [line.strip() for line in block.strip().splitlines()[1:] if line.strip()]
    assert len(lines) >= 5
    for line in lines:
        assert line in text, f"docs/gitops.md documents `{line}`, which scripts/kind-up.sh does not run"


def test_make_kind_up_fails_clearly_here():
    proc = subprocess.run(["make", "-s", "kind-up"], cwd=REPO, capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, PATH="/usr/bin:/bin"))
    if proc.returncode == 0:
        pytest.skip("a Docker engine and kind are available: make kind-up ran")
    assert "make kind-up: " in proc.stderr
