"""A large job is admitted as a gang: a Kueue queue label or a gang scheduler.

Without gang admission the scheduler places pods one by one: two large jobs can each get half their pods and wait
for each other for ever, every placed GPU idle until the rendezvous times out. Above the environment's `largeJobPods`
a training workload needs all-or-nothing admission: the `kueue.x-k8s.io/queue-name` label on the workload object,
or a gang scheduler (a PyTorchJob `runPolicy.schedulingPolicy`, a `scheduling.x-k8s.io/pod-group` label, Volcano's
`scheduling.k8s.io/group-name` annotation, a TrainJob runtime's `podGroupPolicy`). Without an environment
declaration the rule cannot run and says so.

Fails: a 64-pod Indexed Job without a queue label where `largeJobPods: 8`.
Passes: the same Job labelled `kueue.x-k8s.io/queue-name: h100`; a 4-pod job.
"""
from __future__ import annotations

from ..kube import KUEUE_QUEUE_LABEL
from ..rulekit import not_run, problem

ID = "RES005"
NAME = "gang-admission"
NEEDS = "largeJobPods"  # from the environment's declaration
QUEUE_LABEL = KUEUE_QUEUE_LABEL
POD_GROUP_LABELS = ("scheduling.x-k8s.io/pod-group", "pod-group.scheduling.sigs.k8s.io", QUEUE_LABEL)
POD_GROUP_ANNOTATIONS = ("scheduling.k8s.io/group-name",)


def gang_admitted(ctx, t) -> str | None:
    labels = t.manifest.metadata.get("labels") or {}
    if labels.get(QUEUE_LABEL):
        return "kueue"
    declared = t.workload.launcher.gang_scheduler(t.workload)
    if declared:
        return declared
    pod = t.first.pod
    if any(pod.labels.get(k) for k in POD_GROUP_LABELS) or any(pod.annotations.get(k) for k in POD_GROUP_ANNOTATIONS):
        return "pod group"
    return None


def check(ctx):
    if not ctx.topologies:
        return
    if ctx.env is None or ctx.env.large_job_pods is None:
        yield not_run(ID, ctx, "largeJobPods")
        return
    limit = ctx.env.large_job_pods
    for t in ctx.topologies:
        if t.pods > limit and not gang_admitted(ctx, t):
            yield problem(ID, t, "metadata.labels", f"{t.pods} pods (above {ctx.env.name}'s largeJobPods {limit}) "
                          "and no gang admission: pods are placed one by one and partial worlds deadlock",
                          f"label the {t.manifest.kind} {QUEUE_LABEL}: <queue> (Kueue), or use a gang scheduler")
