"""A queued workload fits its ClusterQueue.

Kueue admits a workload whole, once one flavor of its ClusterQueue can take each pod set (`launchers/kueue_quota.py`,
ported from kueue v0.19.2 pkg/scheduler/flavorassigner). Where the manifests hold the LocalQueue the workload's
`kueue.x-k8s.io/queue-name` label names and that queue's ClusterQueue, some workloads can never be admitted, whatever
else runs: the ClusterQueue's namespaceSelector does not select the workload's namespace (an unset one selects none;
a selector on labels other than `kubernetes.io/metadata.name` is judged only against a Namespace the manifests
hold), a pod set asks for a resource no resource group covers (`resource nvidia.com/gpu unavailable in
ClusterQueue`), or every flavor refuses it (an untolerated taint, node labels its node affinity rules out, or more of
a resource than the flavor's maximum capacity: its nominalQuota outside a cohort, nominalQuota + borrowingLimit in
one), or the pod sets together need more than every flavor they may use can hold (a LeaderWorkerSet is one Workload
per group, each admitted on its own). The job then stays suspended and no pod starts: the workload's QuotaReserved
condition carries Kueue's message. An error where the environment
declares Kueue with the kind's integration on (`kueueFrameworks`); without that declaration a warning phrased as the
condition that the integration is on; nothing where the environment's Kueue leaves the integration off (Kueue never
sees the object, RES005). A pod set's requests include the overhead of the RuntimeClass its template names where
the manifests hold it (Kueue adds it: pkg/workload/resources.go handlePodOverhead). A ResourceFlavor the manifests do
not hold may fit; a cohort without a borrowingLimit may lend any amount; requests LimitRange defaults or the overhead
of a RuntimeClass not in the manifests would add, partial admission and Kueue's Configuration are not read: none of
these is ground for a claim.

Fails: 4 pods of 8 GPUs in a queue whose only flavor has a nominalQuota of 16 `nvidia.com/gpu` (no cohort); a pod
set asking for `nvidia.com/gpu` from a ClusterQueue covering only cpu and memory; a flavor tainted
`nvidia.com/gpu:NoSchedule` that neither the pods nor the flavor tolerate; a ClusterQueue with no namespaceSelector.
Passes: the same pods with a nominalQuota of 32; or in a cohort with no borrowingLimit; a flavor the manifests do
not hold; a LocalQueue the manifests do not hold.
"""
from __future__ import annotations

from typing import Iterator

from ..kube.objects import WARNING, Problem
from ..kube.values import kueue_queue
from ..launchers.kueue_quota import (NOT_SETTLED, PodSet, namespace_refused, never_admitted, pod_requests,
                                     queue_objects, workloads_per_object)
from .kit import Context, obj_problem
from .sec010_pod_security import pod_views

ID = "RES010"
NAME = "kueue-quota-fits"
KINDS = ("ClusterQueue",)  # nothing to judge without one
HINT = ("give the ClusterQueue the quota (or the resource, or a flavor the pods tolerate and select), or ask for "
        "less")
HINT_NAMESPACE = "make the ClusterQueue's namespaceSelector select the namespace (`{}` selects every namespace)"


def check(ctx: Context) -> Iterator[Problem]:
    queued = [w for w in ctx.workloads if kueue_queue(w.manifest.metadata) and w.managed_by is None
              and w.launcher.kueue_framework is not None]
    if not queued:
        return
    views = [v for v in pod_views(ctx) if v.workload is not None]
    kept = [m for m in ctx.bundle.manifests if m.ref not in ctx.schema_refused]  # their errors are SCHEMA's
    env = ctx.env
    for w in queued:
        framework = w.launcher.kueue_framework
        if env is not None and env.kueue_frameworks is not None and w.queued is None:
            continue  # the environment's Kueue leaves this integration off: it never sees the object
        meta = w.manifest.metadata
        if any(k in (meta.get("annotations") or {}) or k in (meta.get("labels") or {}) for k in NOT_SETTLED):
            continue
        queue = kueue_queue(meta)
        assert queue is not None, "queued: each has a queue label"
        local, cluster, flavors = queue_objects(kept, w.namespace, queue)
        if cluster is None:
            continue
        mine = [v for v in views if v.workload is w]
        alike = max(w.copies, 1) * workloads_per_object(framework, w.manifest.obj)  # each its own Workload
        # Kueue reads the template, not the admitted pod, but adds its RuntimeClass's overhead (kueue v0.19.2
        # pkg/workload/resources.go handlePodOverhead 57-73): the written spec with the admitted pod's overhead.
        specs = [(v, {**v.without_added(v.written or None),
                      **({"overhead": v.spec["overhead"]} if v.spec.get("overhead") else {})}) for v in mine]
        podsets = [PodSet(v.field.removesuffix(".spec"), (v.count or 0) // alike, spec, pod_requests(spec))
                   for v, spec in specs]
        home = next((m.obj for m in ctx.of_kind("Namespace") if m.api_version == "v1" and m.name == w.namespace
                     and m.ref not in ctx.schema_refused), None)
        refused = namespace_refused(cluster.obj, w.namespace, home)
        reasons = [refused] if refused else never_admitted(cluster.obj, flavors, podsets)
        if not reasons:
            continue
        said = (f"ClusterQueue '{cluster.name}' (of LocalQueue '{queue}') never admits it: {'; '.join(reasons)}: the "
                "workload stays pending and no pod starts (kueue v0.19.2 pkg/scheduler)")
        hint = HINT_NAMESPACE if refused else HINT
        if w.queued is None:
            yield obj_problem(ID, w.manifest, "metadata.labels", f"if Kueue's {framework} integration is on, {said}",
                              hint, severity=WARNING)
        else:
            found = obj_problem(ID, w.manifest, "metadata.labels", said, hint)
            found.extra.update(pods_refused=True, never_admitted=True)  # make plan: no pod of it is created
            yield found
