"""managedBy and suspend: what a controller decides before any pod exists. A Job, JobSet, PyTorchJob or TrainJob
whose managedBy names another controller gets no pods from the controller here (make plan says 0 and why; the checks
of its pods are skipped and said so); a suspended one gets none until it is resumed (its pods are still checked as
they will be). Cases ported from each controller's tests at the pinned tags; the Job's read from its source."""
from __future__ import annotations

import copy
import json

import pytest
import yaml

from conftest import REPO, run_cli
from policies.report import engine, plan
from policies.launchers import BY_ID, Bundle, workloads
from policies.kube.objects import Manifest
from policies.schema import BuiltinValidator

TORCHRUN = ["torchrun", "--nnodes=3", "t.py"]  # 3 nodes for a 2-pod world: TOPO001 fires wherever pods are checked
CONTAINER = {"name": "pytorch", "image": "x:1", "command": TORCHRUN}
POD = {"spec": {"restartPolicy": "Never", "containers": [CONTAINER]}}


def job(extra: dict) -> dict:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
            "spec": {"completions": 2, "parallelism": 2, "completionMode": "Indexed", "template": POD, **extra}}


def jobset(extra: dict) -> dict:
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "js"},
            "spec": {"replicatedJobs": [{"name": "w", "replicas": 1, "template": {"spec": {
                "completions": 2, "parallelism": 2, "template": POD}}}], **extra}}


def pytorchjob(run_policy: dict) -> dict:
    spec = {"replicas": 1, "restartPolicy": "OnFailure", "template": {"spec": {"containers": [CONTAINER]}}}
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "pj"},
            "spec": {"runPolicy": run_policy, "pytorchReplicaSpecs": {"Master": spec, "Worker": copy.deepcopy(spec)}}}


def mpijob(run_policy: dict) -> dict:
    tmpl = {"spec": {"containers": [{"name": "c", "image": "mpioperator/mpi-pi:openmpi"}]}}
    return {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": {"name": "mj", "namespace": "bar"},
            "spec": {"runPolicy": run_policy, "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "template": tmpl}, "Worker": {"replicas": 2, "template": tmpl}}}}


RUNTIME = [d for d in yaml.safe_load_all((REPO / "tests/corpus/trainjob/runtime-torch_distributed.yaml").read_text())
           if d]


def trainjob(extra: dict) -> dict:
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {"name": "tj"},
            "spec": {"runtimeRef": {"name": "torch-distributed"},
                     "trainer": {"numNodes": 2, "image": "x:1", "command": TORCHRUN}, **extra}}


def workload(obj: dict, *others: dict):
    ms = [Manifest(o, "t.yaml", i) for i, o in enumerate([*others, obj])]
    return [w for w in workloads(Bundle.of(ms)) if w.manifest.obj is obj][0]


# kubeflow/trainer v1.9.4 pkg/controller.v1/common/job_test.go:234 TestManagedByExternalController
@pytest.mark.parametrize("managed_by,elsewhere", [
    (None, None), ("", ""), ("kubeflow.org/training-operator", None),
    ("kueue.x-k8s.io/multikueue", "kueue.x-k8s.io/multikueue"), ("other-job-controller", "other-job-controller")])
def test_pytorchjob_managed_by(managed_by, elsewhere):
    w = workload(pytorchjob({} if managed_by is None else {"managedBy": managed_by}))
    assert w.managed_by == elsewhere


# kubeflow/trainer v2.3.0 pkg/util/trainjob/trainjob_test.go:138 TestIsManagedByExternalController
@pytest.mark.parametrize("managed_by,external", [
    (None, False), ("trainer.kubeflow.org/trainjob-controller", False), ("kueue.x-k8s.io/multikueue", True),
    ("foo", True)])
def test_trainjob_managed_by(managed_by, external):
    w = workload(trainjob({} if managed_by is None else {"managedBy": managed_by}), *RUNTIME)
    assert (w.managed_by is not None) is external


# kubernetes-sigs/jobset v0.12.0 pkg/controllers/jobset_controller.go:1177 managedByExternalController, and
# test/integration/controller/jobset_controller_test.go:2920: a JobSet managed by "other-controller" gets no Jobs.
@pytest.mark.parametrize("managed_by,external", [
    (None, False), ("jobset.sigs.k8s.io/jobset-controller", False), ("other-controller", True)])
def test_jobset_managed_by(managed_by, external):
    w = workload(jobset({} if managed_by is None else {"managedBy": managed_by}))
    assert (w.managed_by is not None) is external
    doc = plan.workload_doc(w, None)
    assert (doc["pod_count"], doc["pods"] == []) == ((0, True) if external else (2, False))


# kubernetes v1.36.0 pkg/controller/job/job_controller.go managedByExternalController (read from the source): set
# and not batch.JobControllerName
@pytest.mark.parametrize("managed_by,external", [
    (None, False), ("kubernetes.io/job-controller", False), ("kueue.x-k8s.io/multikueue", True)])
def test_job_managed_by(managed_by, external):
    w = workload(job({} if managed_by is None else {"managedBy": managed_by}))
    assert (w.managed_by is not None) is external


# kubeflow/mpi-operator v0.8.0 pkg/controller/mpi_job_controller_test.go:519 TestDoNothingWithMPIJobManagedExternally
# (kueue.x-k8s.io/multikueue: no pods, Services or Secrets), and managedByExternalController (mpi_job_controller.go:1810):
# set and not kubeflow.org/mpi-operator
@pytest.mark.parametrize("managed_by,external", [
    (None, False), ("kubeflow.org/mpi-operator", False), ("kueue.x-k8s.io/multikueue", True)])
def test_mpijob_managed_by(managed_by, external):
    w = workload(mpijob({} if managed_by is None else {"managedBy": managed_by}))
    assert (w.managed_by is not None) is external
    doc = plan.workload_doc(w, None)
    assert doc["pods_now"] == (0 if external else 3)  # the launcher and 2 workers
    if external:
        assert BY_ID["mpijob"].managed_by_source in doc["pods_not_created"]


def test_a_suspended_mpijob_has_no_pods_now():
    """runPolicy.suspend: the launcher Job is created suspended and the workers' pods deleted
    (mpi_job_controller.go:711-724); the model said nothing of it (its Workload flag was overwritten)."""
    w = workload(mpijob({"suspend": True}))
    doc = plan.workload_doc(w, None)
    assert doc["pods_now"] == 0 and doc["pod_count"] == 2
    assert "spec.runPolicy.suspend is true" in doc["pods_not_created"]


def validate(*objs: dict) -> engine.Unit:
    unit = engine.Unit("t.yaml", "file", [Manifest(o, "t.yaml", i) for i, o in enumerate(objs)])
    engine.validate([unit], BuiltinValidator())
    return unit


MANAGED = [
    ("indexed-job", lambda: [job({"managedBy": "kueue.x-k8s.io/multikueue"})]),
    ("jobset", lambda: [jobset({"managedBy": "kueue.x-k8s.io/multikueue"})]),
    ("pytorchjob", lambda: [pytorchjob({"managedBy": "kueue.x-k8s.io/multikueue"})]),
    ("trainjob", lambda: [*RUNTIME, trainjob({"managedBy": "kueue.x-k8s.io/multikueue"})]),
]


@pytest.mark.parametrize("name,objs", MANAGED, ids=[m[0] for m in MANAGED])
def test_managed_elsewhere_skips_the_pod_checks_and_says_so(name, objs):
    unit = validate(*objs())
    rules = {p.rule for p in unit.problems}
    assert "TOPO001" not in rules and not unit.topologies
    said = [p for p in unit.problems if p.rule == "TOPO012" and "managedBy" in p.message]
    assert len(said) == 1 and said[0].severity == "info" and "skipped" in said[0].message
    assert BY_ID[name].managed_by_source.split()[0] in said[0].message  # the upstream source is cited


SUSPENDED = [
    ("indexed-job", lambda: [job({"suspend": True})]),
    ("jobset", lambda: [jobset({"suspend": True})]),
    ("pytorchjob", lambda: [pytorchjob({"suspend": True})]),
    ("trainjob", lambda: [*RUNTIME, trainjob({"suspend": True})]),
]


@pytest.mark.parametrize("name,objs", SUSPENDED, ids=[m[0] for m in SUSPENDED])
def test_suspended_has_no_pods_now_and_is_checked_as_it_will_run(name, objs):
    unit = validate(*objs())
    assert "TOPO001" in {p.rule for p in unit.problems}  # its pods are checked as they will be once resumed
    doc = plan.unit_doc(unit)["workloads"]
    mine = [d for d in doc if d["launcher"] == name][0]
    assert mine["pods_now"] == 0 and mine["pod_count"] == 2 and "suspended" in mine["pods_not_created"]
    assert BY_ID[name].suspend_source in mine["pods_not_created"]


def test_make_plan_says_it_per_workload(tmp_path):
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump_all([job({"managedBy": "example.com/mine"}), jobset({"suspend": True})]))
    text = run_cli("plan", str(path)).stdout
    assert "note: Job/j: 0 pods now: managedBy 'example.com/mine' names another controller" in text
    assert "note: JobSet/js: 0 pods now: suspended (spec.suspend is true)" in text
    doc = json.loads(run_cli("plan", "--format", "json", str(path)).stdout)["overlays"][0]["workloads"]
    assert [(d["object"], d["pods_now"], bool(d["pods_not_created"])) for d in doc] == [
        ("Job/j", 0, True), ("JobSet/js", 0, True)]
    pods = run_cli("plan", "--pods", str(path)).stdout
    assert "Job/j (indexed-job): no pods here: managedBy" in pods
