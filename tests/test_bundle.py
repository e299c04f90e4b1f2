"""`validate --bundle` / `make validate BUNDLE=1`: the plain manifest files of each folder are one input, as
`kubectl apply -f <folder>` applies them, so what one file needs of another (a TrainJob's runtime, the Namespace whose
Pod Security level its pods meet) is checked; without it each file is checked on its own, as kubeconform reads a
folder. Each object's problems still name its own file."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import REPO, run_cli

NAMESPACE = """apiVersion: v1
kind: Namespace
metadata:
  name: train
  labels:
    pod-security.kubernetes.io/enforce: restricted
"""
POD = """apiVersion: v1
kind: Pod
metadata:
  name: trainer
  namespace: train
spec:
  automountServiceAccountToken: false
  securityContext: {runAsNonRoot: true, runAsUser: 1000, seccompProfile: {type: RuntimeDefault}}
  containers:
    - name: trainer
      image: ghcr.io/example/ddp-trainer:0.1.0
      securityContext: {allowPrivilegeEscalation: false}
"""


def validate(*args: str) -> dict:
    proc = run_cli("validate", "--format", "json", *args)
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(proc.stdout)


def rules(report: dict, rule: str) -> list[tuple[str, str]]:
    return [(p["severity"], p["source"]) for p in report["problems"] if p["rule"] == rule]


def test_a_namespace_and_its_pod_in_files_of_their_own(tmp_path):
    (tmp_path / "namespace.yaml").write_text(NAMESPACE)
    (tmp_path / "pod.yaml").write_text(POD)
    alone = validate(str(tmp_path))
    assert rules(alone, "SEC010") == [] and [u["kind"] for u in alone["units"]] == ["file", "file"]
    together = validate("--bundle", str(tmp_path))
    assert rules(together, "SEC010") == [("error", str(tmp_path / "pod.yaml"))]
    assert [(u["kind"], u["source"], u["objects"]) for u in together["units"]] == [("folder", str(tmp_path), 2)]
    assert (together["summary"]["files"], together["summary"]["objects"]) == (2, 2)
    # traced to the line in its own file, also where another file of the folder holds an object of the same name
    (tmp_path / "pod-copy.yaml").write_text(POD)
    traced = [(Path(p["file"]).name, p["line"], p["traced"]) for p in validate("--bundle", str(tmp_path))["problems"]
              if p["rule"] == "SEC010"]
    assert sorted(traced) == [("pod-copy.yaml", 6, True), ("pod.yaml", 6, True)]


def test_a_trainjob_beside_its_runtime(tmp_path):
    for name in ("trainjob.yaml", "clustertrainingruntime.yaml"):
        shutil.copy(REPO / "base/trainjob" / name, tmp_path / name)
    alone = validate(str(tmp_path))
    assert alone["summary"]["workloads"] == 0
    assert any("is not in these manifests" in p["message"] for p in alone["problems"])
    together = validate("--bundle", str(tmp_path))
    assert together["summary"]["workloads"] == 1
    assert not any("is not in these manifests" in p["message"] for p in together["problems"])
    plan = run_cli("plan", "--format", "json", "--bundle", str(tmp_path))
    assert plan.returncode == 0, plan.stderr
    assert [w["object"] for o in json.loads(plan.stdout)["overlays"] for w in o["workloads"]] == [
        "TrainJob/ddp-train"]


def test_each_folder_is_its_own_input_and_unreadable_files_stay_their_own(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "namespace.yaml").write_text(NAMESPACE)
    (b / "pod.yaml").write_text(POD)                      # its Namespace is in another folder: not read with it
    (b / "broken.yaml").write_text("a: [\n")
    (b / "values.yaml").write_text("replicas: 3\n")       # not Kubernetes
    report = validate("--bundle", str(a), str(b))
    assert rules(report, "SEC010") == []
    assert [(u["kind"], Path(u["source"]).name) for u in report["units"]] == [
        ("folder", "a"), ("file", "broken.yaml"), ("folder", "b"), ("skipped", "values.yaml")]
    assert rules(report, "INPUT") == [("error", f"{b / 'broken.yaml'}:2")]
    assert (report["summary"]["files"], report["summary"]["skipped"]) == (3, 1)


def test_an_overlay_below_a_bundled_folder_is_still_rendered_on_its_own(tmp_path):
    report = validate("--bundle", str(REPO / "overlays/kind-cpu"))
    assert {u["kind"] for u in report["units"]} == {"overlay"} and len(report["units"]) >= 5


def test_make_validate_bundle(tmp_path):
    (tmp_path / "namespace.yaml").write_text(NAMESPACE)
    (tmp_path / "pod.yaml").write_text(POD)
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    proc = subprocess.run(["make", "-s", "--no-print-directory", "validate", "BUNDLE=1", f"PATHS={tmp_path}"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0 and f"error SEC010 {tmp_path / 'pod.yaml'}: Pod/train/trainer" in proc.stdout, \
        proc.stdout + proc.stderr


def test_files_named_with_bundle_are_one_input_per_folder(tmp_path):
    (tmp_path / "namespace.yaml").write_text(NAMESPACE)
    (tmp_path / "pod.yaml").write_text(POD)
    alone = validate("--bundle", str(tmp_path / "pod.yaml"))  # its Namespace not named: not read
    assert rules(alone, "SEC010") == [] and [(u["kind"], u["objects"]) for u in alone["units"]] == [("folder", 1)]
    both = validate("--bundle", str(tmp_path / "pod.yaml"), str(tmp_path / "namespace.yaml"), str(tmp_path / "pod.yaml"))
    assert rules(both, "SEC010") == [("error", str(tmp_path / "pod.yaml"))]
    assert [(u["kind"], u["objects"]) for u in both["units"]] == [("folder", 2)]  # a file named twice is read once


def test_the_pre_commit_hooks_changed_bundle_reads_a_changed_file_with_its_neighbours(tmp_path):
    """`ddp-check changed --bundle` (the hook's `args: [--bundle]`): a changed file is checked with the other plain
    manifests of its folder, as `kubectl apply -f <folder>` applies them (not with another folder's); without it, on
    its own."""
    (tmp_path / "namespace.yaml").write_text(NAMESPACE)
    (tmp_path / "pod.yaml").write_text(POD)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "pod.yaml").write_text(POD.replace("name: trainer", "name: elsewhere"))

    def changed(*args: str) -> list[dict]:
        proc = subprocess.run([sys.executable, "-m", "policies.cli", "changed", "--format", "json", *args], cwd=tmp_path,
                              env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=300)
        assert proc.returncode in (0, 1), proc.stderr
        return [p for p in json.loads(proc.stdout)["problems"] if p["rule"] == "SEC010"]

    assert changed("pod.yaml") == []  # on its own, the level of namespace 'train' is not shown
    found = changed("--bundle", "pod.yaml")
    assert [(p["severity"], Path(p["file"]).name, p["object"]) for p in found] == [
        ("error", "pod.yaml", "Pod/train/trainer")]
    # a folder with a kustomization is an overlay: a changed file there is checked through it, never bundled
    (tmp_path / "kustomization.yaml").write_text("resources: [namespace.yaml]\n")
    assert changed("--bundle", "pod.yaml") == []
