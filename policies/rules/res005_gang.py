"""A large job is admitted as a gang: a Kueue queue label or a gang scheduler.

Without gang admission the scheduler places pods one by one: two large jobs can each get half their pods and wait
for each other for ever, every placed GPU idle until the rendezvous times out. Above the environment's `largeJobPods`
a training workload needs all-or-nothing admission: the `kueue.x-k8s.io/queue-name` label on the workload object,
or a gang scheduler (a PyTorchJob `runPolicy.schedulingPolicy`, a `scheduling.x-k8s.io/pod-group` label, Volcano's
`scheduling.k8s.io/group-name` annotation, a TrainJob runtime's `podGroupPolicy`). Without an environment
declaration the rule cannot run and says so. The queue label counts only where Kueue queues the kind (an
integration of Kueue v0.19.2, `Launcher.kueue_framework`) and, where the environment declares Kueue
(`kueueFrameworks`), only where that integration is on: elsewhere Kueue never sees the object and the label does
nothing.

Fails: a 64-pod Indexed Job without a queue label where `largeJobPods: 8`; a 64-pod PyTorchJob labelled with a queue
where the environment's `kueueFrameworks` leaves out `kubeflow.org/pytorchjob` (commented out in Kueue's released
configuration, config/components/manager/controller_manager_config.yaml:45-64 at v0.19.2).
Passes: the same Job labelled `kueue.x-k8s.io/queue-name: h100`; a 4-pod job.
"""
from __future__ import annotations

from typing import Iterator

from ..kube.values import KUEUE_QUEUE_LABEL, kueue_queue
from ..model.topology import Topology
from ..kube.objects import Problem
from .kit import Context, not_run, problem

ID = "RES005"
NAME = "gang-admission"
NEEDS = "largeJobPods"  # from the environment's declaration
QUEUE_LABEL = KUEUE_QUEUE_LABEL
POD_GROUP_LABELS = ("scheduling.x-k8s.io/pod-group", "pod-group.scheduling.sigs.k8s.io", QUEUE_LABEL)
POD_GROUP_ANNOTATIONS = ("scheduling.k8s.io/group-name",)


def kueue_ignores(ctx: Context, t: Topology) -> str | None:
    """Why the object's queue label does nothing (Kueue does not queue its kind, or the environment's Kueue has that
    integration off); None where it names no queue or Kueue queues it."""
    if kueue_queue(t.manifest.metadata) is None:
        return None
    framework = t.workload.launcher.kueue_framework
    if framework is None:
        return f"Kueue has no integration for {t.manifest.kind}, so its {QUEUE_LABEL} label does nothing"
    if ctx.kueue_frameworks() is not None and t.workload.queued is None:
        where = (f"the integrations.frameworks of {ctx.kueue.where}" if ctx.kueue is not None
                 else f"{ctx.env.name if ctx.env is not None else ''}'s kueueFrameworks")
        return f"its {QUEUE_LABEL} label does nothing: Kueue's {framework} integration is not among {where}"
    return None


def gang_admitted(ctx: Context, t: Topology) -> str | None:
    if kueue_queue(t.manifest.metadata) is not None and kueue_ignores(ctx, t) is None:
        return "kueue"
    declared = t.workload.launcher.gang_scheduler(t.workload)
    if declared:
        return declared
    pod = t.first.pod
    if any(pod.labels.get(k) for k in POD_GROUP_LABELS) or any(pod.annotations.get(k) for k in POD_GROUP_ANNOTATIONS):
        return "pod group"
    return None


def check(ctx: Context) -> Iterator[Problem]:
    if not ctx.topologies:
        return
    if ctx.env is None or ctx.env.large_job_pods is None:
        yield not_run(ID, ctx, "largeJobPods")
        return
    limit = ctx.env.large_job_pods
    for t in ctx.topologies:
        if t.pods > limit and not gang_admitted(ctx, t):
            ignored = kueue_ignores(ctx, t)
            hint = (f"label the {t.manifest.kind} {QUEUE_LABEL}: <queue> (Kueue), or use a gang scheduler"
                    if ignored is None else "turn the integration on in Kueue's Configuration (integrations."
                    "frameworks) and list it in kueueFrameworks, or use a gang scheduler")
            yield problem(ID, t, "metadata.labels", f"{t.pods} pods (above {ctx.env.name}'s largeJobPods {limit}) "
                          "and no gang admission: pods are placed one by one and partial worlds deadlock"
                          + (f" ({ignored})" if ignored else ""), hint)
