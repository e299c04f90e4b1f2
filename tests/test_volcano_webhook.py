"""Volcano's job webhook (pkg/webhooks/admission/jobs/validate at v1.15.1) as volcano.py's admission() models it:
each refusing fixture under tests/conformance/volcano-job/ is refused by admission() itself with upstream's text
(not only by the schema stage), the admitted ones pass it, and the cases no upstream test pins are read from
util.go / admit_job.go directly."""
from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from policies.launchers import volcano, volcano_webhook
from policies.launchers.base import Bundle, Check
from policies.kube.objects import Manifest

FIXTURES = sorted((Path(__file__).parent / "conformance" / "volcano-job").glob("*.yaml"))


def admission(obj: dict[str, Any], torchrun: bool = False) -> list[Check]:
    m = Manifest(obj, "test.yaml", 0)
    bundle = Bundle.of([m])
    launcher = volcano.LAUNCHER
    return launcher.admission(launcher.build(m, bundle), bundle, torchrun)


@pytest.mark.parametrize("path", FIXTURES, ids=[p.name for p in FIXTURES])
def test_fixture_through_admission(path: Path) -> None:
    doc = yaml.safe_load(path.read_text())
    job = next(o for o in doc["input"] if o.get("kind") == "Job")
    checks = admission(job)
    expect = doc["expect"]
    if expect.get("rejected"):
        reason = expect["reason"].strip(" ;")
        assert any(reason in c.message for c in checks), (reason, [c.message for c in checks])
        assert all(c.message.endswith(volcano_webhook.REFUSED) for c in checks if reason in c.message)
    else:
        assert not checks, [c.message for c in checks]


def job(**spec: Any) -> dict[str, Any]:
    tasks = spec.pop("tasks", None) or [{"name": "task-1", "replicas": 1, "template": {
        "spec": {"containers": [{"name": "c", "image": "busybox:1.24"}]}}}]
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "j"},
            "spec": {"tasks": tasks, **spec}}


def fields(checks: list[Check]) -> list[tuple[str, str]]:
    return [(c.field, c.message.removesuffix(": " + volcano_webhook.REFUSED)) for c in checks]


def test_policy_event_repeated_names_the_second_field() -> None:
    got = fields(admission(job(policies=[{"event": "PodFailed", "action": "AbortJob"},
                                         {"events": ["PodEvicted", "PodFailed"], "action": "RestartJob"}])))
    assert got == [("spec.policies[1].events[1]", "duplicate event PodFailed  across different policy")]


def test_policy_event_and_events_merged_within_one_policy() -> None:
    # getEventList removes duplicates within one policy: PodFailed in both event and events is allowed.
    assert not admission(job(policies=[{"event": "PodFailed", "events": ["PodFailed"], "action": "AbortJob"}]))


def test_policy_event_without_action_is_refused() -> None:
    # policyActionMap has no "" entry: an event policy must name an allowed action.
    got = fields(admission(job(policies=[{"event": "PodFailed"}])))
    assert got == [("spec.policies[0].action", 'spec.policies: Invalid value: "": invalid policy action')]


def test_internal_events_and_actions_refused() -> None:
    for policy, where in (({"event": "PodRunning", "action": "AbortJob"}, "event"),
                          ({"event": "OutOfSync", "action": "AbortJob"}, "event"),
                          ({"event": "PodFailed", "action": "SyncJob"}, "action")):
        got = fields(admission(job(policies=[policy])))
        assert got and got[0][0] == f"spec.policies[0].{where}", got


def test_exit_code_policy_action_not_checked() -> None:
    # validatePolicies checks the action only for event policies (util.go lines 78-104).
    assert not admission(job(policies=[{"exitCode": 3, "action": "Whatever"}]))


def test_task_policies_path_and_go_path() -> None:
    tasks = job()["spec"]["tasks"]
    tasks[0]["policies"] = [{"event": "Nope", "action": "AbortJob"}]
    got = fields(admission(job(tasks=tasks)))
    assert got == [("spec.tasks[0].policies[0].event", 'spec.tasks.policies: Invalid value: "Nope": invalid policy '
                    "event")]


def test_any_event_alone_and_per_list() -> None:
    assert not admission(job(policies=[{"event": "*", "action": "AbortJob"}]))
    # The job's and a task's lists are validated separately: '*' in one and PodFailed in the other is admitted.
    tasks = job()["spec"]["tasks"]
    tasks[0]["policies"] = [{"event": "PodFailed", "action": "RestartTask"}]
    assert not admission(job(tasks=tasks, policies=[{"event": "*", "action": "AbortJob"}]))


def test_volume_claim_rules() -> None:
    claim = {"resources": {"requests": {"storage": "1Gi"}}}
    assert not admission(job(volumes=[{"mountPath": "/a", "volumeClaim": claim},
                                      {"mountPath": "/b", "volumeClaimName": "pvc-b"}]))
    got = fields(admission(job(volumes=[{"mountPath": "/a", "volumeClaim": claim, "volumeClaimName": "pvc"}])))
    assert got[0][0] == "spec.volumes[0].volumeClaimName" and got[0][1].startswith("conflict:")
    got = fields(admission(job(volumes=[{"mountPath": "/a", "volumeClaimName": "Bad_Name"}])))
    assert got[0][0] == "spec.volumes[0].volumeClaimName" and "invalid VolumeClaimName Bad_Name" in got[0][1]


def tasks_with(deps: dict[str, list[str]]) -> list[dict[str, Any]]:
    base = job()["spec"]["tasks"][0]
    out = []
    for name, on in deps.items():
        t = copy.deepcopy(base)
        t["name"] = name
        if on:
            t["dependsOn"] = {"name": on}
        out.append(t)
    return out


def test_depends_on_cycle_self_and_repeat() -> None:
    dag = "job has dependencies between tasks, but doesn't form a directed acyclic graph(DAG)"
    assert not admission(job(tasks=tasks_with({"a": [], "b": ["a"], "c": ["a", "b"]})))
    for deps in ({"a": ["b"], "b": ["a"]}, {"a": ["a"]}, {"a": [], "b": ["a", "a"]}):
        got = fields(admission(job(tasks=tasks_with(deps))))
        assert [m for _, m in got] == [dag], (deps, got)


def test_numa_topology_policy_whole_cpus() -> None:
    tasks = job()["spec"]["tasks"]
    tasks[0]["topologyPolicy"] = "single-numa-node"
    got = fields(admission(job(tasks=tasks)))
    assert got == [("spec.tasks[0].template.spec.containers[0].resources.requests.cpu",
                    "the cpu request isn't  an integer in spec.task[0] container[0].")]
    tasks[0]["template"]["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "2"}}
    assert not admission(job(tasks=tasks))
    tasks[0]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1500m"}}
    assert admission(job(tasks=tasks))
    tasks[0]["topologyPolicy"] = "none"
    assert not admission(job(tasks=tasks))


def test_task_template_core_validation() -> None:
    tasks = job()["spec"]["tasks"]
    tasks[0]["template"]["spec"]["restartPolicy"] = "Sometimes"
    got = admission(job(tasks=tasks))
    assert [c.field for c in got] == ["spec.tasks[0].template.spec.restartPolicy"]
    assert got[0].message.endswith(volcano_webhook.REFUSED)


def test_mpi_default_master() -> None:
    got = fields(admission(job(plugins={"mpi": []})))
    assert got == [("spec.plugins.mpi", "The specified mpi master task was not found")]
    tasks = job()["spec"]["tasks"]
    tasks[0]["name"] = "master"
    assert not admission(job(tasks=tasks, plugins={"mpi": []}))


def test_queue_root_and_non_leaf_are_refused_a_leaf_is_admitted() -> None:
    """admit_job_test.go 2090-2160 at v1.15.1 (TestValidateHierarchyCreate), with its fake Queues root, parentQueue
    (parent root) and childQueue (parent parentQueue) in the manifests (2198-2225): the root queue and a queue
    with child queues are refused (admit_job.go 207-226), the leaf is admitted."""
    queues = [{"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": n},
               "spec": {"parent": p} if p else {}} for n, p in (("root", None), ("parentQueue", "root"),
                                                                 ("childQueue", "parentQueue"))]

    def admitted(queue: str) -> list[Check]:
        obj = job(queue=queue, minAvailable=1)
        ms = [Manifest(o, "test.yaml", i) for i, o in enumerate([obj, *queues])]
        bundle = Bundle.of(ms)
        return volcano.LAUNCHER.admission(volcano.LAUNCHER.build(ms[0], bundle), bundle, False)

    assert fields(admitted("root")) == [("spec.queue", "can not submit job to root queue")]
    assert fields(admitted("parentQueue")) == [
        ("spec.queue", "can only submit job to leaf queue, queue `parentQueue` has 1 child queues")]
    assert admitted("childQueue") == []
    # Without the cluster's Queues only `root` is known to be refused; whether another queue exists and is Open is
    # not claimed: the queue is REF001's reference (one info line), an error only in a self-contained environment.
    assert fields(admission(job(queue="root"))) == [("spec.queue", "can not submit job to root queue")]
    assert admission(job(queue="team-a")) == [] and admission(job()) == []
    m = Manifest(job(queue="team-a"), "test.yaml", 0)
    w = volcano.LAUNCHER.build(m, Bundle.of([m]))
    assert [(n.kind, n.name, n.field) for n in w.needs] == [("Queue", "team-a", "spec.queue")]
    m = Manifest(job(), "test.yaml", 0)
    assert volcano.LAUNCHER.build(m, Bundle.of([m])).needs == []  # (Volcano creates `default` itself)


def test_the_jobs_priority_class_goes_to_the_pods_of_tasks_naming_none() -> None:
    """createJobPod (job_controller_util.go 67-70 at v1.15.1): a task template without priorityClassName gets the
    Job's; REF001's reference where a pod gets it (not a system class); a class only the PodGroup gets is not one
    (the scheduler reads a class it cannot find as its default priority, cache.go 1538-1543)."""
    own = {"name": "own", "replicas": 1, "template": {"spec": {"priorityClassName": "task-high", "containers": [
        {"name": "c", "image": "busybox:1.24"}]}}}
    plain = {"name": "plain", "replicas": 2, "template": {"spec": {"containers": [
        {"name": "c", "image": "busybox:1.24"}]}}}

    def built(**spec: Any) -> volcano.VolcanoWorkload:
        m = Manifest(job(**spec), "test.yaml", 0)
        return volcano.LAUNCHER.build(m, Bundle.of([m]))

    w = built(priorityClassName="training-high", tasks=[own, plain])
    assert [g.spec.get("priorityClassName") for g in w.groups] == ["task-high", "training-high"]
    assert [(n.kind, n.name, n.field) for n in w.needs] == [("PriorityClass", "training-high",
                                                            "spec.priorityClassName")]
    assert "no PriorityClass with name training-high was found" in w.needs[0].without
    assert built(priorityClassName="training-high", tasks=[own]).needs == []             # the PodGroup's only
    assert built(priorityClassName="system-cluster-critical", tasks=[plain]).needs == []  # in every cluster
    w = built(tasks=[plain])
    assert w.needs == [] and "priorityClassName" not in w.groups[0].spec
    # the pod template as written is left alone (the webhook's core validation reads it)
    assert "priorityClassName" not in plain["template"]["spec"]
