"""`make new-env`: one command makes an environment from another (component, an overlay per launcher, the Argo CD
entry, the identity), resized and renamed for the new hardware, validated before anything is written."""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys

import pytest
import yaml

from conftest import REPO, stop, wait_for_hook
from policies.argocd import identity
from test_init import URL, IMAGE, copy_repo, init, snapshot

# The example: an 8-node, 4-GPU A100 pool made from the 4 x 1 T4 one (under another name where a fork made
# that environment already).
FROM, NODES, GPUS = "gke-t4", 8, 4
ENV = next(e for e in ("a100-8x4", "a100-8x4-again") if e not in identity.environments_in_tree(REPO))


def new_env(root, *args, env=None):
    return subprocess.run([sys.executable, "-m", "policies.edit.new_env", *args, "--root", str(root)], cwd=REPO,
                          capture_output=True, text=True, timeout=600, env=env)


def with_code(root):
    """The copy with the code and schemas beside it, so that its own gitops.yaml is the one the validator reads."""
    if not (root / "policies").exists():
        shutil.copytree(REPO / "policies", root / "policies", ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copytree(REPO / "trainer", root / "trainer", ignore=shutil.ignore_patterns("__pycache__"))
        (root / "schemas").symlink_to(REPO / "schemas")
    return root


def cli(root, *args):
    return subprocess.run([sys.executable, "-m", "policies.cli", *args], cwd=with_code(root), capture_output=True,
                          text=True, timeout=600)


@pytest.fixture()
def repo(tmp_path):
    root = copy_repo(tmp_path / "repo")
    proc = init(root, "--repo-url", URL, "--image", IMAGE)
    assert proc.returncode == 0, proc.stderr
    return root


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """The issue's command on an initialised copy: make new-env ENV=a100-8x4 FROM=gke-t4 NODES=8 GPUS_PER_NODE=4."""
    root = copy_repo(tmp_path_factory.mktemp("made") / "repo")
    assert init(root, "--repo-url", URL, "--image", IMAGE).returncode == 0
    proc = new_env(root, "--env", ENV, "--from", FROM, "--nodes", str(NODES), "--gpus-per-node", str(GPUS))
    assert proc.returncode == 0, proc.stderr
    return root, proc


def test_it_makes_the_component_every_overlay_and_the_argocd_entry(made):
    root, proc = made
    source = sorted(p.parent.parent.name for p in (REPO / "overlays" / FROM).glob("*/patches/set-topology.yaml"))
    assert sorted(p.parent.name for p in (root / "overlays" / ENV).glob("*/kustomization.yaml")) == source
    assert {p.relative_to(root / "components" / ENV) for p in (root / "components" / ENV).rglob("*")} == \
        {p.relative_to(REPO / "components" / FROM) for p in (REPO / "components" / FROM).rglob("*")}
    ident = identity.load(root)
    assert ident.environments[ENV] == identity.Place(ENV, f"ddp-{ENV}")
    assert identity.disagreements(root, ident) == []
    declared = yaml.safe_load((root / "components" / ENV / "policy.yaml").read_text())
    assert declared["metadata"]["name"] == ENV
    assert declared["spec"]["real"] is True and declared["spec"]["gpusPerNode"] == GPUS
    assert declared["spec"]["gpuCapacity"] == NODES * GPUS
    written = {line.removeprefix("wrote ") for line in proc.stdout.splitlines()}
    assert {"argocd/applicationset.yaml", "argocd/appproject.yaml", "gitops.yaml"} <= written


def test_the_result_validates_and_plans_the_new_world_on_every_launcher(made):
    root, _ = made
    proc = cli(root, "validate", "overlays", "argocd")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "0 errors, 0 warnings" in proc.stdout.splitlines()[-1]
    plan = cli(root, "plan", "--format", "json", f"overlays/{ENV}")
    assert plan.returncode == 0, plan.stderr
    overlays = json.loads(plan.stdout)["overlays"]
    assert len(overlays) == len(list((root / "overlays" / ENV).glob("*/kustomization.yaml")))
    for ov in overlays:
        (w,) = ov["workloads"]
        t = w["topology"]
        assert (t["pods"], t["nproc_per_node"], t["world_size"], t["pods"] * t["gpus_per_pod"]) == \
            (NODES, str(GPUS), NODES * GPUS, NODES * GPUS), ov["path"]


def test_nothing_in_the_new_environment_names_t4_or_the_example(made):
    root, _ = made
    word = re.compile(r"(?i)(?<![a-z0-9])t4(?![a-z0-9])|" + re.escape(identity.EXAMPLE_REPO_URL) + "|"
                      + re.escape(identity.EXAMPLE_REGISTRY))
    for folder in (root / "components" / ENV, root / "overlays" / ENV):
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            for i, line in enumerate(path.read_text().splitlines(), 1):
                assert not word.search(line), f"{path.relative_to(root)}:{i}: {line}"
    topo = (root / "overlays" / ENV / "indexed-job/patches/set-topology.yaml").read_text()
    assert topo.startswith(f"# {NODES} nodes x {GPUS} A100: world size {NODES * GPUS}.\n")


def test_the_same_hardware_keeps_its_name(repo):
    """A smaller pool of FROM's own GPUs (h100-4x8 from 64x8-h100): the comments go on saying H100, and only FROM's
    name may not be left behind."""
    proc = new_env(repo, "--env", "h100-4x8", "--from", "64x8-h100", "--nodes", "4", "--gpus-per-node", "8")
    assert proc.returncode == 0, proc.stderr
    topo = (repo / "overlays/h100-4x8/indexed-job/patches/set-topology.yaml").read_text()
    assert topo.startswith("# 4 nodes x 8 H100: world size 32.\n")
    # FROM's node selector still names the right GPU: it stays (RES006 reads the GPU's memory from it).
    assert "the accelerator node selector was left out" not in proc.stdout + proc.stderr
    proc = cli(repo, "validate", "--format", "json", "overlays/h100-4x8/statefulset-lm")
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert not [p for p in json.loads(proc.stdout)["problems"] if p["rule"] == "RES006"]
    for folder in (repo / "components/h100-4x8", repo / "overlays/h100-4x8"):
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            assert not re.search(r"(?<![\w-])64x8-h100(?![\w-])", path.read_text()), path


def test_without_make_init_it_is_refused(tmp_path):
    root = copy_repo(tmp_path / "repo")
    before = snapshot(root)
    proc = new_env(root, "--env", ENV, "--from", FROM, "--nodes", "8", "--gpus-per-node", "4")
    assert proc.returncode == 2
    (line,) = proc.stderr.splitlines()
    assert "still names the template's example repository and registry" in line and "make init" in line
    assert snapshot(root) == before


def test_the_accelerator_label_toleration_and_resource_name(repo):
    proc = new_env(repo, "--env", "mi300-2x8", "--from", FROM, "--nodes", "2", "--gpus-per-node", "8",
                   "--gpu-label", "amd.com/gpu.product-name=AMD_Instinct_MI300X", "--toleration",
                   "amd.com/gpu=present:NoSchedule", "--gpu-resource", "amd.com/gpu", "--cluster", "mi300",
                   "--namespace", "training", "--launcher", "statefulset")
    assert proc.returncode == 0, proc.stderr
    out = subprocess.run([str(REPO / ".venv/bin/kubectl"), "kustomize", str(repo / "overlays/mi300-2x8/statefulset")],
                         capture_output=True, text=True, check=True).stdout
    sts = next(d for d in yaml.safe_load_all(out) if d["kind"] == "StatefulSet")
    spec = sts["spec"]["template"]["spec"]
    assert spec["nodeSelector"] == {"amd.com/gpu.product-name": "AMD_Instinct_MI300X"}
    assert spec["tolerations"] == [{"key": "amd.com/gpu", "operator": "Equal", "value": "present",
                                    "effect": "NoSchedule"}]
    assert spec["containers"][0]["resources"]["limits"]["amd.com/gpu"] == 8
    assert "nvidia.com/gpu" not in spec["containers"][0]["resources"]["limits"]
    assert identity.load(repo).environments["mi300-2x8"] == identity.Place("mi300", "training")
    appset = yaml.safe_load((repo / "argocd/applicationset.yaml").read_text())
    (element,) = [e for e in appset["spec"]["generators"][0]["list"]["elements"] if e["env"] == "mi300-2x8"]
    assert element == {"env": "mi300-2x8", "launcher": "statefulset", "cluster": "mi300", "namespace": "training"}
    assert "MI300X" in (repo / "overlays/mi300-2x8/statefulset/patches/set-topology.yaml").read_text()


@pytest.mark.parametrize("args, message", [
    (["--env", FROM, "--from", FROM, "--nodes", "2"], f"environment {FROM} exists already"),
    (["--env", "x", "--from", "nowhere", "--nodes", "2"], "FROM 'nowhere' is not an environment"),
    (["--env", "Bad_Name", "--from", FROM, "--nodes", "2"], "ENV 'Bad_Name' must be lowercase"),
    (["--env", "x", "--from", FROM, "--nodes", "0"], "NODES must be at least 1"),
    (["--env", "x", "--from", FROM, "--nodes", "2", "--gpus-per-node", "0"], "GPUS_PER_NODE must be at least 1"),
    (["--env", "x", "--from", FROM, "--nodes", "2", "--toleration", "gpu"], "TOLERATION 'gpu' is not"),
    (["--env", "x", "--from", FROM, "--nodes", "2", "--gpu-label", "novalue"], "GPU_LABEL 'novalue' is not"),
    (["--env", "x", "--from", FROM, "--nodes", "2", "--gpu-resource", "example.com/tpu"],
     "GPU_RESOURCE 'example.com/tpu' is not one the validator counts"),
    (["--env", "x", "--from", FROM, "--nodes", "2", "--gpus-per-node", "1", "--launcher", "nope"], "LAUNCHER 'nope' is not one of"),
    (["--env", "x", "--from", FROM, "--nodes", "2", "--namespace", "kube-system"],
     "NAMESPACE 'kube-system' is the cluster's own namespace (kube-*)"),
    (["--env", "x", "--from", FROM, "--nodes", "2", "--namespace", "argocd"], "NAMESPACE 'argocd' is Argo CD's own"),
    # The Makefile passes `--env=VALUE`: a value that looks like an option is a value, refused by name.
    (["--env=-x6", "--from", FROM, "--nodes", "2"], "ENV '-x6' must be lowercase"),
    (["--env", "x", "--from", FROM, "--nodes", "2"], f"GPUS_PER_NODE is required: {FROM} has 1 GPU per node"),
    (["--env", "x", "--from", "kind-cpu", "--nodes", "2"], "PROCS_PER_NODE is required: kind-cpu is a CPU environment"),
])
def test_a_bad_argument_is_one_line_and_writes_nothing(repo, args, message):
    before = snapshot(repo)
    proc = new_env(repo, *args)
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.splitlines()
    assert line.startswith("error: ") and message in line, line
    assert snapshot(repo) == before


def test_dry_run_writes_nothing(repo):
    before = snapshot(repo)
    proc = new_env(repo, "--env", ENV, "--from", FROM, "--nodes", "8", "--gpus-per-node", "4", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert f"+++ b/components/{ENV}/policy.yaml" in proc.stdout and "dry run: nothing was written" in proc.stderr
    assert snapshot(repo) == before


def test_a_result_that_does_not_validate_writes_nothing(repo):
    """A pool that needs gang admission above 2 pods and has no Kueue queue: RES005 refuses the result (8 pods), so
    nothing is written."""
    (repo / "components" / FROM / "policy.yaml").write_text(
        (repo / "components" / FROM / "policy.yaml").read_text().replace("largeJobPods: 4", "largeJobPods: 2"))
    before = snapshot(repo)
    proc = new_env(repo, "--env", ENV, "--from", FROM, "--nodes", "8", "--gpus-per-node", "4")
    assert proc.returncode == 1, proc.stderr
    assert "the result does not validate, so nothing was written" in proc.stderr and "RES005" in proc.stderr
    assert snapshot(repo) == before and not (repo / "components" / ENV).exists()
    assert not (repo / "overlays" / ENV).exists()


def test_a_new_env_killed_between_two_renames_is_finished_by_the_next_run(repo):
    args = ["--env", ENV, "--from", FROM, "--nodes", "8", "--gpus-per-node", "4", "--root", str(repo)]
    proc = subprocess.Popen([sys.executable, "-m", "policies.edit.new_env", *args], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "DDP_SCALE_TEST_HOOK": "renamed-3"})
    wait_for_hook(proc, "renamed-3")
    stop(proc, signal.SIGKILL)
    assert (repo / ".scale-journal").is_file()
    again = new_env(repo, *args[:-2])
    assert again.returncode == 0, again.stderr
    assert "finished the change an interrupted run began" in again.stderr
    assert f"{ENV}: the interrupted make new-env that began it is finished" in again.stderr
    assert not (repo / ".scale-journal").exists() and not list(repo.rglob(".*.scale-tmp"))
    assert identity.disagreements(repo) == [] and ENV in identity.load(repo).environments


def test_a_new_env_killed_before_its_journal_leaves_nothing_behind(repo):
    before = snapshot(repo)
    args = ["--env", ENV, "--from", FROM, "--nodes", "8", "--gpus-per-node", "4", "--root", str(repo)]
    proc = subprocess.Popen([sys.executable, "-m", "policies.edit.new_env", *args], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ,
                                                                    "DDP_SCALE_TEST_HOOK": "temps-written"})
    wait_for_hook(proc, "temps-written")
    stop(proc, signal.SIGKILL)
    assert (repo / "overlays" / ENV).is_dir()  # its folders, holding temporary files only
    assert identity.environments_in_tree(repo) == sorted(identity.load(repo).environments)
    again = new_env(repo, *args[:-2], "--dry-run")
    assert again.returncode == 0, again.stderr
    assert not (repo / ".scale-journal").exists()
    made = new_env(repo, *args[:-2])
    assert made.returncode == 0, made.stderr
    assert not list(repo.rglob(".*.scale-tmp"))
    assert {p for p in snapshot(repo) if p not in before} >= {p.relative_to(repo) for p in
                                                              (repo / "overlays" / ENV).rglob("*.yaml")}
