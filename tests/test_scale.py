"""`make scale` / `make new-run`: every topology field changes together, scaling up then down gives back the
original bytes, comments and quoting survive, and bad input or an invalid result leaves every file untouched."""
from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys

import pytest
import yaml

from conftest import REPO


@pytest.fixture()
def repo(tmp_path):
    root = tmp_path / "repo"
    for d in ("base", "components", "overlays"):
        shutil.copytree(REPO / d, root / d)
    return root


def scale(root, *args):
    return subprocess.run([sys.executable, "-m", "policies.edit.scale", *args, "--root", str(root)], cwd=REPO,
                          capture_output=True, text=True, timeout=180)


def snapshot(root):
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def rendered(root, overlay):
    out = subprocess.run([str(REPO / ".venv/bin/kubectl") if (REPO / ".venv/bin/kubectl").exists() else "kubectl",
                          "kustomize", str(root / "overlays" / overlay)], capture_output=True, text=True, check=True)
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def workload(docs):
    (w,) = [d for d in docs if d["kind"] in ("Job", "StatefulSet", "PyTorchJob", "TrainJob")]
    return w


@pytest.mark.parametrize("overlay, up, down", [
    ("gke-t4/indexed-job", ["--nodes", "2"], ["--nodes", "4"]),
    ("64x8-h100/statefulset", ["--nodes", "128", "--gpus-per-node", "2"], ["--nodes", "64", "--gpus-per-node", "8"]),
    ("64x8-h100/pytorchjob", ["--nodes", "32", "--gpus-per-node", "4"], ["--nodes", "64", "--gpus-per-node", "8"]),
    ("64x8-h100/trainjob", ["--nodes", "128", "--gpus-per-node", "4"], ["--nodes", "64", "--gpus-per-node", "8"]),
    ("kind-cpu/trainjob", ["--nodes", "3", "--procs-per-node", "1"], ["--nodes", "2", "--procs-per-node", "2"]),
])
def test_scale_up_then_down_gives_back_the_bytes(repo, overlay, up, down):
    before = snapshot(repo)
    proc = scale(repo, "scale", overlay, *up)
    assert proc.returncode == 0, proc.stderr
    changed = {k for k, v in snapshot(repo).items() if before.get(k) != v}
    assert changed and all(k.startswith(f"overlays/{overlay}/") for k in changed), changed
    proc = scale(repo, "scale", overlay, *down)
    assert proc.returncode == 0, proc.stderr
    assert snapshot(repo) == before


def test_every_dependent_field_changes_and_comments_stay(repo):
    proc = scale(repo, "scale", "64x8-h100/indexed-job", "--nodes", "32", "--gpus-per-node", "4")
    assert proc.returncode == 0, proc.stderr
    assert "world size 512 -> 128" in proc.stderr
    patch = (repo / "overlays/64x8-h100/indexed-job/patches/set-topology.yaml").read_text()
    assert patch.startswith("# 32 nodes x 4 H100: world size 128.\n")
    assert 'value: "32"' in patch and 'value: "4"' in patch  # quoted strings stay quoted
    # Per GPU: 24 CPUs and 200Gi, as before; the GPU count is a plain integer, as before.
    assert 'cpu: "96"' in patch and "memory: 800Gi" in patch and "nvidia.com/gpu: 4" in patch
    kust = (repo / "overlays/64x8-h100/indexed-job/kustomization.yaml").read_text()
    assert kust.startswith("# 64x8-h100 x indexed-job: 32 nodes x 4 H100: world size 128.\n")
    assert "# Last: the patches above find the workload by its base name." in kust
    job = workload(rendered(repo, "64x8-h100/indexed-job"))
    assert job["spec"]["completions"] == job["spec"]["parallelism"] == 32
    spec = job["spec"]["template"]["spec"]
    env = {e["name"]: e.get("value") for e in spec["containers"][0]["env"]}
    assert (env["NNODES"], env["NPROC_PER_NODE"]) == ("32", "4")
    assert {v["name"]: v for v in spec["volumes"]}["dshm"]["emptyDir"]["sizeLimit"] == "128Gi"


def test_shm_and_memory_follow_the_gpus(repo):
    proc = scale(repo, "scale", "64x8-h100/pytorchjob", "--nodes", "64", "--gpus-per-node", "4")
    assert proc.returncode == 0, proc.stderr
    shm = (repo / "overlays/64x8-h100/pytorchjob/patches/set-shm.yaml").read_text()
    assert shm.count("value: 128Gi") == 2 and shm.startswith("# /dev/shm per pod")
    patch = (repo / "overlays/64x8-h100/pytorchjob/patches/set-topology.yaml").read_text()
    assert '{requests: {cpu: "96", memory: 800Gi, nvidia.com/gpu: 4}' in patch  # flow style kept
    assert "1 Master + 63 Worker(s), nprocPerNode 4." in patch
    job = workload(rendered(repo, "64x8-h100/pytorchjob"))
    assert job["spec"]["nprocPerNode"] == "4"


def test_dry_run_prints_a_diff_and_writes_nothing(repo):
    before = snapshot(repo)
    proc = scale(repo, "scale", "kind-cpu/indexed-job", "--nodes", "4", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert snapshot(repo) == before
    assert "--- a/overlays/kind-cpu/indexed-job/patches/set-topology.yaml\n" in proc.stdout
    assert "+++ b/overlays/kind-cpu/indexed-job/patches/set-topology.yaml\n" in proc.stdout
    assert "\n-  completions: 2\n" in proc.stdout and "\n+  completions: 4\n" in proc.stdout


@pytest.mark.parametrize("args, message", [
    (["scale", "gke-t4/indexed-job", "--nodes", "eight"], "NODES must be a whole number, got 'eight'"),
    (["scale", "gke-t4/indexed-job", "--nodes", "2.5"], "NODES must be a whole number"),
    (["scale", "gke-t4/indexed-job", "--nodes", "0"], "NODES must be at least 1"),
    (["scale", "gke-t4/indexed-job"], "NODES is required"),
    (["scale", "gke-t4/indexed-job", "--nodes", "4", "--gpus-per-node", "0"], "GPUS_PER_NODE must be at least 1"),
    (["scale", "gke-t4/indexed-job", "--nodes", "4", "--gpus-per-node", "-1"], "GPUS_PER_NODE must be 0 or more"),
    (["scale", "kind-cpu/indexed-job", "--nodes", "4", "--gpus-per-node", "1"], "has no GPUs"),
    (["scale", "kind-cpu/indexed-job", "--nodes", "4", "--procs-per-node", "0"], "PROCS_PER_NODE must be at least 1"),
    (["scale", "gke-t4/nope", "--nodes", "4"], "is not an overlay folder"),
    (["scale", "", "--nodes", "4"], "OVERLAY is required"),
    (["new-run", "gke-t4/indexed-job", "--run-id", "Run_2"], "must be lowercase letters"),
])
def test_bad_input_is_one_line_and_touches_nothing(repo, args, message):
    before = snapshot(repo)
    proc = scale(repo, *args)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert lines[-1].startswith("error: ") and message in lines[-1], proc.stderr
    assert snapshot(repo) == before


def test_an_overlay_named_otherwise_is_recognised_by_its_patch(repo):
    shutil.copytree(repo / "overlays/kind-cpu/statefulset", repo / "overlays/kind-cpu/sts-copy")
    before = snapshot(repo)
    proc = scale(repo, "scale", "kind-cpu/sts-copy", "--nodes", "3")
    assert proc.returncode == 0, proc.stderr
    assert "replicas: 3" in (repo / "overlays/kind-cpu/sts-copy/patches/set-topology.yaml").read_text()
    assert {k for k, v in snapshot(repo).items() if before[k] != v} <= {
        "overlays/kind-cpu/sts-copy/patches/set-topology.yaml", "overlays/kind-cpu/sts-copy/kustomization.yaml"}


def test_an_overlay_without_set_topology_is_refused(repo):
    (repo / "overlays/kind-cpu/statefulset/patches/set-topology.yaml").unlink()
    proc = scale(repo, "scale", "kind-cpu/statefulset", "--nodes", "3")
    assert proc.returncode == 2 and "has no patches/set-topology.yaml" in proc.stderr


def test_an_overlay_it_does_not_understand_is_refused(repo):
    patch = repo / "overlays/gke-t4/indexed-job/patches/set-topology.yaml"
    patch.write_text(patch.read_text().replace("  completions: 4\n", ""))
    before = snapshot(repo)
    proc = scale(repo, "scale", "gke-t4/indexed-job", "--nodes", "8")
    assert proc.returncode == 2 and "has no spec.completions" in proc.stderr, proc.stderr
    assert snapshot(repo) == before


def test_a_result_that_fails_validation_is_not_written(repo):
    before = snapshot(repo)
    # 16 GPUs per pod on 8-GPU H100 nodes: the environment's declaration (policy.yaml) makes it an error.
    proc = scale(repo, "scale", "64x8-h100/indexed-job", "--nodes", "64", "--gpus-per-node", "16")
    assert proc.returncode == 1, proc.stderr
    assert "does not validate, so nothing was written" in proc.stderr and "error " in proc.stderr
    assert snapshot(repo) == before
    assert not list((repo / "overlays/64x8-h100/indexed-job/patches").glob("*.tmp"))


def test_new_run_renames_the_workload_and_its_run_id(repo):
    proc = scale(repo, "new-run", "gke-t4/indexed-job")
    assert proc.returncode == 0, proc.stderr
    assert "run-001 -> run-002" in proc.stderr
    job = workload(rendered(repo, "gke-t4/indexed-job"))
    env = {e["name"]: e.get("value") for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert job["metadata"]["name"] == "ddp-train-run-002"
    assert env["MASTER_ADDR"] == "ddp-train-run-002-0.ddp-train" and env["RUN_ID"] == "run-002"
    proc = scale(repo, "new-run", "64x8-h100/pytorchjob", "--run-id", "resnet-7")
    assert proc.returncode == 0, proc.stderr
    job = workload(rendered(repo, "64x8-h100/pytorchjob"))
    assert job["metadata"]["name"] == "ddp-train-resnet-7"
    for rtype in ("Master", "Worker"):
        env = job["spec"]["pytorchReplicaSpecs"][rtype]["template"]["spec"]["containers"][0]["env"]
        assert {"name": "RUN_ID", "value": "resnet-7"} in env


def test_scale_with_a_new_run_in_one_step(repo):
    proc = scale(repo, "scale", "kind-cpu/statefulset", "--nodes", "3", "--new-run")
    assert proc.returncode == 0, proc.stderr
    sts = workload(rendered(repo, "kind-cpu/statefulset"))
    assert sts["metadata"]["name"] == "ddp-train-run-002" and sts["spec"]["replicas"] == 3


def test_make_targets_pass_the_arguments(tmp_path):
    proc = subprocess.run(["make", "-s", "scale", "NODES=8"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "OVERLAY is required" in proc.stderr  # never a default overlay
    proc = subprocess.run(["make", "-s", "scale", "OVERLAY=gke-t4/indexed-job", "NODES=zero"], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "NODES must be a whole number, got 'zero'" in proc.stderr
    proc = subprocess.run(["make", "-s", "scale", "OVERLAY=gke-t4/indexed-job", "NODES=2", "DRY_RUN=1"], cwd=REPO,
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr
    assert "+  completions: 2" in proc.stdout


JOBSET_PATCH = """\
# 2 pods x 2 processes
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: ddp
spec:
  replicatedJobs:
    - name: workers
      template:
        spec:
          completions: 2
          parallelism: 2
          template:
            spec:
              containers:
                - name: trainer
                  env:
                    - name: NNODES
                      value: "2"
                    - name: NPROC_PER_NODE
                      value: "2"
                  resources:
                    limits:
                      cpu: "2"
"""


def test_a_jobset_patch_is_scaled_where_its_launcher_module_says(tmp_path):
    """JobSet is modelled, so make scale knows where its pods, processes and resources are (launchers/jobset.py)."""
    from fractions import Fraction

    from policies.edit.scale import _launcher_of
    from policies.edit.scale_edits import Plan, edit_topology
    from policies.edit.yamledit import YamlFile

    path = tmp_path / "set-topology.yaml"
    path.write_text(JOBSET_PATCH)
    assert _launcher_of(path) == "jobset"
    f = YamlFile.load(path)
    edit_topology(f, "jobset", Plan(nodes=4, nproc=1, gpus=0, ratio=Fraction(1, 2)))
    out = f.dump()
    job = yaml.safe_load(out)["spec"]["replicatedJobs"][0]["template"]["spec"]
    assert job["completions"] == job["parallelism"] == 4
    c = job["template"]["spec"]["containers"][0]
    assert {e["name"]: e["value"] for e in c["env"]} == {"NNODES": "4", "NPROC_PER_NODE": "1"}
    assert c["resources"]["limits"]["cpu"] == "1"
    assert out.startswith("# 2 pods x 2 processes\n") and '"4"' in out  # comments and quoting kept


def test_the_restart_budget_follows_the_pod_count(repo):
    """A lost pod of a static PyTorchJob world costs one container restart per pod: 64x8-h100 asks every workload to
    survive one (podLosses 1), so 32 pods need backoffLimit 33 (RESTART007). make scale writes it, and its comment."""
    proc = scale(repo, "scale", "64x8-h100/pytorchjob", "--nodes", "32")
    assert proc.returncode == 0, proc.stderr
    text = (repo / "overlays/64x8-h100/pytorchjob/patches/survive-a-lost-pod.yaml").read_text()
    assert "value: 33\n" in text and "32 per lost pod" in text and "backoffLimit 33 survives one" in text
    assert workload(rendered(repo, "64x8-h100/pytorchjob"))["spec"]["runPolicy"]["backoffLimit"] == 33
    # kind-cpu asks for no pod loss (podLosses 0): its PyTorchJobs' budgets are left alone
    before = snapshot(repo)
    proc = scale(repo, "scale", "kind-cpu/pytorchjob", "--nodes", "3")
    assert proc.returncode == 0, proc.stderr
    assert {k for k, v in snapshot(repo).items() if before.get(k) != v} <= {
        "overlays/kind-cpu/pytorchjob/patches/set-topology.yaml", "overlays/kind-cpu/pytorchjob/kustomization.yaml"}


def test_the_gpu_count_is_written_under_the_resource_name_the_patch_uses(repo):
    """make scale reads GPUs as validation does (policies/launchers/pods.py knows every GPU resource name) and writes
    the new count under the name the patch already uses: an AMD overlay keeps amd.com/gpu, no nvidia.com/gpu added."""
    topo = repo / "overlays/64x8-h100/pytorchjob/patches/set-topology.yaml"
    topo.write_text(topo.read_text().replace("nvidia.com/gpu:", "amd.com/gpu:"))
    proc = scale(repo, "scale", "64x8-h100/pytorchjob", "--nodes", "32", "--gpus-per-node", "4")
    assert proc.returncode == 0, proc.stderr
    assert "8 -> 4 GPUs per pod" in proc.stderr
    text = topo.read_text()
    assert "nvidia.com/gpu:" not in text and text.count("amd.com/gpu: 4") == text.count("amd.com/gpu:") > 0, text


def test_a_malformed_environment_is_the_loaders_one_line_error(repo):
    """The restart budget follows the environment's podLosses, read by policies/rules/environment.py as validation reads
    it: a declaration the loader refuses stops make scale with its error, one line, nothing written (never a silent
    podLosses 0)."""
    policy = repo / "components/64x8-h100/policy.yaml"
    policy.write_text(policy.read_text().replace("podLosses: 1", "podLosses: one"))
    before = snapshot(repo)
    proc = scale(repo, "scale", "64x8-h100/pytorchjob", "--nodes", "32")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith("error: components/64x8-h100/policy.yaml:") and \
        "spec.podLosses is 'one', expected a whole number" in proc.stderr, proc.stderr
    assert snapshot(repo) == before


MPI_RUNTIME = """\
apiVersion: trainer.kubeflow.org/v1alpha1
kind: ClusterTrainingRuntime
metadata:
  name: mpi-cpu
spec:
  mlPolicy:
    numNodes: 1
    mpi:
      numProcPerNode: 1
      mpiImplementation: OpenMPI
      sshAuthMountPath: /root/.ssh
      runLauncherAsNode: AS_NODE
  template:
    spec:
      replicatedJobs:
        - name: launcher
          template:
            metadata:
              labels:
                trainer.kubeflow.org/trainjob-ancestor-step: trainer
            spec:
              template:
                spec:
                  containers:
                    - name: node
                      image: ghcr.io/example/ddp-trainer:0.1.0
                      command: [mpirun, --allow-run-as-root, -np, "4", python, /app/trainer/train.py]
        - name: node
          template:
            spec:
              template:
                spec:
                  containers:
                    - name: node
                      image: ghcr.io/example/ddp-trainer:0.1.0
                      command: [/usr/sbin/sshd, -De]
"""
MPI_TOPOLOGY = """\
# 2 pods x 2 processes on CPU (gloo): world size 4.
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: ddp-train
spec:
  trainer:
    numNodes: 2
    numProcPerNode: 2
    resourcesPerNode:
      limits:
        cpu: "2"
        memory: 2Gi
"""


def mpi_overlay(root, as_node):
    base, ov = root / "base/trainjob-mpi", root / "overlays/kind-cpu/trainjob-mpi"
    (ov / "patches").mkdir(parents=True)
    base.mkdir()
    (base / "runtime.yaml").write_text(MPI_RUNTIME.replace("AS_NODE", "true" if as_node else "false"))
    (base / "trainjob.yaml").write_text("apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata:\n"
                                        "  name: ddp-train\nspec:\n  runtimeRef:\n    apiGroup: trainer.kubeflow.org\n"
                                        "    kind: ClusterTrainingRuntime\n    name: mpi-cpu\n  trainer:\n"
                                        "    numNodes: 2\n    numProcPerNode: 2\n")
    (base / "kustomization.yaml").write_text("resources: [runtime.yaml, trainjob.yaml]\n")
    (ov / "patches/set-topology.yaml").write_text(MPI_TOPOLOGY)
    (ov / "kustomization.yaml").write_text("resources: [../../../base/trainjob-mpi]\n"
                                           "patches:\n  - path: patches/set-topology.yaml\n")
    return "kind-cpu/trainjob-mpi"


def test_an_mpi_trainjob_scales_its_hosts_not_its_pods(repo):
    """kubeflow/trainer v2.3.0 mpi.go 116-126: without runLauncherAsNode the `node` Job runs spec.trainer.numNodes
    pods and the launcher one more, which runs mpirun and no rank (the hostfile lists the node pods alone, 316-348).
    NODES is the hosts: numNodes NODES, NODES+1 pods; the world checked is mpirun's (its -np against the slots), not
    a torchrun world of the 3 pods with the launcher as pod 0."""
    overlay = mpi_overlay(repo, as_node=False)
    proc = scale(repo, "scale", overlay, "--nodes", "4")
    assert proc.returncode == 0, proc.stderr
    assert "mpirun's world: 2 -> 4 hosts (3 -> 5 pods with the launcher), 2 -> 2 slots per host, 4 -> 8 ranks" \
        in proc.stderr, proc.stderr
    assert workload(rendered(repo, overlay))["spec"]["trainer"]["numNodes"] == 4
    # -np 4 on 1 host x 2 slots: Open MPI refuses to start, so make scale writes nothing
    before = snapshot(repo)
    proc = scale(repo, "scale", overlay, "--nodes", "1")
    assert proc.returncode != 0 and "mpirun -np 4 but the Trainer's hostfile has 2 slots" in proc.stderr, proc.stderr
    assert snapshot(repo) == before


def test_an_mpi_trainjob_with_the_launcher_as_a_node(repo):
    """runLauncherAsNode: the launcher is a host and the `node` Job runs max(numNodes-1, 1) pods, so NODES is both
    the hosts and the pods (mpi.go 116-126)."""
    overlay = mpi_overlay(repo, as_node=True)
    proc = scale(repo, "scale", overlay, "--nodes", "3")
    assert proc.returncode == 0, proc.stderr
    assert "2 -> 3 hosts (2 -> 3 pods with the launcher)" in proc.stderr, proc.stderr
    assert workload(rendered(repo, overlay))["spec"]["trainer"]["numNodes"] == 3
