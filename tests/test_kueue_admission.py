"""Kueue's admission where an environment declares Kueue (`kueueFrameworks`): a workload of an integration that is on
and names a LocalQueue waits for Kueue; `make plan` says so (0 pods now for a suspended job, the scheduling gate for a
pod group), and RES005 counts a queue label only where Kueue queues the kind. Cases ported from
kubernetes-sigs/kueue v0.19.2 pkg/controller/jobs/job/job_webhook_test.go TestDefault (the suspend defaults) and
read from its webhooks (policies/launchers/kueue.py cites them)."""
from __future__ import annotations

import copy
import json

import pytest

from conftest import run_cli
from policies.report import engine, plan
from policies.rules import environment
from policies.kube.values import KUEUE_QUEUE_LABEL
from policies.launchers.kueue import KUEUE_FRAMEWORKS
from policies.launchers import BY_ID, Bundle, workloads
from policies.kube.objects import ERROR, Manifest
from policies.schema import BuiltinValidator

CONTAINER = {"name": "c", "image": "x:1", "command": ["torchrun", "--nnodes=2", "--nproc-per-node=1",
                                                       "--rdzv-backend=c10d", "--rdzv-endpoint=j-0.j:29500", "t.py"]}
RELEASED = ["batch/job", "kubeflow.org/mpijob", "ray.io/rayjob", "ray.io/raycluster", "ray.io/rayservice",
            "jobset.x-k8s.io/jobset", "workload.codeflare.dev/appwrapper", "trainer.kubeflow.org/trainjob", "pod",
            "deployment", "statefulset", "leaderworkerset.x-k8s.io/leaderworkerset"]


def labelled(obj: dict, queue: str | None) -> dict:
    obj = copy.deepcopy(obj)
    if queue is not None:
        obj["metadata"].setdefault("labels", {})[KUEUE_QUEUE_LABEL] = queue
    return obj


def job(queue: str | None = "queue", suspend: bool | None = False, completions: int = 2) -> dict:
    spec = {"completions": completions, "parallelism": completions, "completionMode": "Indexed",
            "template": {"spec": {"restartPolicy": "Never", "subdomain": "j", "containers": [CONTAINER]}}}
    if suspend is not None:
        spec["suspend"] = suspend
    return labelled({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "job", "namespace": "default"},
                     "spec": spec}, queue)


def pytorchjob(queue: str | None, workers: int = 1) -> dict:
    spec = {"replicas": 1, "restartPolicy": "OnFailure", "template": {"spec": {"containers": [
        {**CONTAINER, "name": "pytorch", "command": ["torchrun", f"--nnodes={workers + 1}", "t.py"]}]}}}
    return labelled({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "pj"},
                     "spec": {"pytorchReplicaSpecs": {"Master": spec, "Worker": {**copy.deepcopy(spec),
                                                                                 "replicas": workers}}}}, queue)


def statefulset(queue: str | None) -> dict:
    return labelled({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "s"}, "spec": {
        "replicas": 2, "serviceName": "s", "podManagementPolicy": "Parallel", "selector": {"matchLabels": {"a": "s"}},
        "template": {"metadata": {"labels": {"a": "s"}}, "spec": {"containers": [CONTAINER]}}}}, queue)


def workload(obj: dict, kueue: list[str] | None = RELEASED):
    [w] = [w for w in workloads(Bundle.of([Manifest(obj, "t.yaml", 0)]), None, kueue) if w.manifest.obj is obj]
    return w


# job_webhook_test.go:1075-1078 "update the suspend field with 'manageJobsWithoutQueueName=false'": a Job with a queue
# and suspend false is defaulted to suspended; :1140-1149 "invalid queue name": a queue no LocalQueue answers to is
# suspended all the same (it then waits for ever: the LocalQueue is the cluster's, not checked here).
@pytest.mark.parametrize("queue", ["queue", "invalid-local-queue"])
def test_a_queued_job_is_suspended_at_creation_whatever_it_says(queue):
    w = workload(job(queue, suspend=False))
    doc = plan.workload_doc(w, None)
    assert w.queued == queue and not w.suspended
    assert doc["pods_now"] == 0 and doc["pod_count"] == 2 and doc["queued"] == queue
    assert f"LocalQueue '{queue}'" in doc["pods_not_created"] and "defaults.go:36-46" in doc["pods_not_created"]
    assert "pods_gated" not in doc


# The test's counterpart without the label (manageJobsWithoutQueueName=false, the Configuration's default): Kueue leaves
# the Job alone (utils.go:146-152), and so does a declaration without the job integration or no declaration at all.
@pytest.mark.parametrize("obj,kueue", [
    (job(None), RELEASED),                          # no queue label
    (job("queue"), ["pod", "statefulset"]),         # batch/job off
    (job("queue"), None),                           # the environment declares no Kueue
    (job("", suspend=None), RELEASED),              # an empty name is no queue (utils.go:148)
], ids=["no-label", "integration-off", "no-kueue", "empty-label"])
def test_kueue_leaves_it_alone(obj, kueue):
    w = workload(obj, kueue)
    doc = plan.workload_doc(w, None)
    assert w.queued is None and doc["pods_now"] == 2 and doc["pods_not_created"] is None and "queued" not in doc


def test_a_queued_pod_group_is_created_behind_the_scheduling_gate():
    """statefulset_webhook.go:89-105 marks the template SuspendedByParent, pod_webhook.go:109, 176 gates each pod."""
    w = workload(statefulset("h100"))
    doc = plan.workload_doc(w, None)
    assert doc["pods_now"] == 2 and doc["queued"] == "h100" and "kueue.x-k8s.io/admission" in doc["pods_gated"]


def test_suspended_by_hand_and_queued_says_kueue():
    doc = plan.workload_doc(workload(job("q", suspend=True)), None)
    assert doc["pods_now"] == 0 and doc["suspended"] is True and "Kueue" in doc["pods_not_created"]


def test_every_modelled_integration_is_one_kueue_knows():
    named = {i.kueue_framework for i in BY_ID.values() if i.kueue_framework}
    assert named <= set(KUEUE_FRAMEWORKS) and {"batch/job", "kubeflow.org/pytorchjob", "statefulset"} <= named
    assert set(RELEASED) <= set(KUEUE_FRAMEWORKS)


DECLARATION = """apiVersion: policies.ddp/v1
kind: Environment
metadata: {name: lab}
spec:
  largeJobPods: 2
"""


def env_with(tmp_path, frameworks: str | None):
    path = tmp_path / "policy.yaml"
    text = DECLARATION + (f"  kueueFrameworks: {frameworks}\n" if frameworks is not None else "")
    path.write_text(text)
    return environment.load(path), text, path


def test_an_unknown_integration_is_one_env_error_with_file_and_line(tmp_path):
    (env, problems), text, path = env_with(tmp_path, "[batch/job, kubeflow.org/pytorchjobs]")
    assert env is None and len(problems) == 1
    [p] = problems
    assert p.rule == "ENV" and p.severity == ERROR and "'kubeflow.org/pytorchjobs'" in p.message
    assert p.location == (str(path), len(text.splitlines())) and "kubeflow.org/pytorchjob" in p.hint


def res005(tmp_path, obj: dict, frameworks: str | None) -> list[str]:
    (env, problems), _, _ = env_with(tmp_path, frameworks)
    assert not problems
    unit = engine.Unit("t.yaml", "file", [Manifest(obj, "t.yaml", 0)])
    unit.environment = env
    engine.validate([unit], BuiltinValidator())
    return [p.message for p in unit.problems if p.rule == "RES005"]


def test_res005_counts_the_label_only_where_the_integration_is_on(tmp_path):
    big = pytorchjob("h100", workers=3)  # 4 pods, above largeJobPods 2
    assert res005(tmp_path, big, None) == []  # no Kueue declared: the label is taken at its word
    assert res005(tmp_path, big, "[batch/job, kubeflow.org/pytorchjob]") == []
    [message] = res005(tmp_path, big, "[" + ", ".join(RELEASED) + "]")  # the released list leaves it out
    assert "kubeflow.org/pytorchjob integration is not among lab's kueueFrameworks" in message
    assert res005(tmp_path, pytorchjob(None, workers=3), "[kubeflow.org/pytorchjob]")  # no label: as before


def test_the_repositorys_queued_environment_plans_its_jobs_as_waiting():
    """components/64x8-h100 declares Kueue: its Job waits for the h100 queue, its StatefulSet's pods for the gate."""
    proc = run_cli("plan", "--format", "json", "overlays/64x8-h100/indexed-job", "overlays/64x8-h100/statefulset")
    assert proc.returncode == 0, proc.stderr
    job_doc, sts_doc = (o["workloads"][0] for o in json.loads(proc.stdout)["overlays"])
    assert job_doc["pods_now"] == 0 and job_doc["queued"] == "h100" and job_doc["pod_count"] == 64
    assert sts_doc["pods_now"] == 64 and "kueue.x-k8s.io/admission" in sts_doc["pods_gated"]


@pytest.mark.parametrize("path,kind,pods,gated", [
    ("tests/corpus/job/kueue-sample-job-v0.15.yaml", "Job", 0, False),            # site/static/examples/jobs
    ("tests/corpus/beside/kueue-sample-statefulset.yaml", "StatefulSet", 3, True),  # .../serving-workloads
])
def test_kueues_own_samples_wait_for_user_queue(tmp_path, path, kind, pods, gated):
    """Kueue's own examples (tests/corpus, copied unchanged) planned where the environment declares Kueue's released
    integrations: the Job waits suspended for user-queue, the StatefulSet's pods behind the gate."""
    (tmp_path / "policy.yaml").write_text(DECLARATION + "  kueueFrameworks: [" + ", ".join(RELEASED) + "]\n")
    proc = run_cli("plan", "--format", "json", "--env", str(tmp_path / "policy.yaml"), path)
    assert proc.returncode == 0, proc.stderr
    [doc] = [w for o in json.loads(proc.stdout)["overlays"] for w in o["workloads"] if w["object"].startswith(kind)]
    assert doc["queued"] == "user-queue" and doc["pods_now"] == pods and ("pods_gated" in doc) is gated
