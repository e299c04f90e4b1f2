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
per group, each admitted on its own; the pod sets of one TAS podset group, `kueue.x-k8s.io/podset-group-name` beside a
required or preferred topology, need one flavor for all of them), or the ClusterQueue is inactive, which Kueue checks first and which admits
nothing (kueue v0.19.2 pkg/scheduler/scheduler.go 677-679; the reasons of pkg/cache/scheduler/clusterqueue.go
inactiveReason 310-366, in its words): it names an AdmissionCheck that is never Active (a
`kueue.x-k8s.io/provisioning-request` check whose parameters name no kueue.x-k8s.io ProvisioningRequestConfig), two
MultiKueue checks, a MultiKueue check on some flavors only, or MultiKueue beside ProvisioningRequest; or, where the
environment declares its manifests self-contained (`selfContained`, as REF001 reads it), a ResourceFlavor, an
AdmissionCheck, a ProvisioningRequestConfig or a TAS flavor's Topology they do not hold. The job then stays suspended
and no pod starts: the workload's QuotaReserved condition carries Kueue's message. An error where the environment
declares Kueue with the kind's integration on (`kueueFrameworks`); without that declaration a warning phrased as the
condition that the integration is on; nothing where the environment's Kueue leaves the integration off (Kueue never
sees the object, RES005). A pod set's requests include the overhead of the RuntimeClass its template names where
the manifests hold it (Kueue adds it: pkg/workload/resources.go handlePodOverhead). A ResourceFlavor the manifests do
not hold may fit; a cohort without a borrowingLimit may lend any amount; requests LimitRange defaults or the overhead
of a RuntimeClass not in the manifests would add, partial admission, TAS placement in the topology and Kueue's
Configuration (its managedJobsNamespaceSelector among them) are not read, and outside a self-contained environment a
ResourceFlavor or AdmissionCheck the manifests do not hold may exist: none of these is ground for a claim, nor is an
AdmissionCheck of another controller, whose controller alone marks it Active.
A ClusterQueue or ResourceFlavor that the schema or Kueue's webhook refuses (SCHEMA, ADM003) is never created and
is read here as absent, so the workloads queued to it are not told of it again.

A queue held by its `stopPolicy` (Hold or HoldAndDrain, on the ClusterQueue or the LocalQueue) admits no new workload
while it is set (`ClusterQueue %s is stopped`, `LocalQueue %s is stopped`: pkg/controller/core/workload_controller.go
1080-1085, 1125-1130): the input shows it, and no pod starts until the hold is lifted. That is a warning wherever
Kueue queues the kind, not an error: holding a queue is an operator's deliberate and temporary act (jobs are held back
to be released together, or through maintenance), the workload runs as written once it is lifted, and nothing in the
job is wrong. Where the environment declares the kind's integration on, `make plan` says no pod of it is created
while the queue is held; without that declaration the warning is phrased as that condition. A queue that would never
admit the workload anyway is the error above.

Fails: 4 pods of 8 GPUs in a queue whose only flavor has a nominalQuota of 16 `nvidia.com/gpu` (no cohort); a pod
set asking for `nvidia.com/gpu` from a ClusterQueue covering only cpu and memory; a flavor tainted
`nvidia.com/gpu:NoSchedule` that neither the pods nor the flavor tolerate; a ClusterQueue with no namespaceSelector;
one naming a MultiKueue and a ProvisioningRequest check (an error); a LeaderWorkerSet's leader and workers in one TAS
podset group that no one flavor holds; a held ClusterQueue or LocalQueue (a warning).
Passes: the same pods with a nominalQuota of 32; or in a cohort with no borrowingLimit; a flavor or an AdmissionCheck
the manifests do not hold; Kueue's provisioning, MultiKueue and TAS samples; a LocalQueue the manifests do not hold.
"""
from __future__ import annotations

from typing import Iterator

from ..kube.objects import WARNING, Problem
from ..launchers import Workload
from ..kube.values import kueue_queue
from ..launchers.kueue_quota import (CQ_INACTIVE, NOT_SETTLED, PodSet, inactive_reasons, kueue_objects,
                                     namespace_refused, never_active_checks, never_admitted, pod_requests,
                                     podset_group, queue_objects, stop_policy, workloads_per_object)
from ..launchers.kueue_webhooks import refusals as webhook_refusals
from .kit import Context, obj_problem
from .sec010_pod_security import pod_views

ID = "RES010"
NAME = "kueue-quota-fits"
KINDS = ("ClusterQueue", "LocalQueue")  # nothing to judge without one
HINT = ("give the ClusterQueue the quota (or the resource, or a flavor the pods tolerate and select), or ask for "
        "less")
HINT_NAMESPACE = "make the ClusterQueue's namespaceSelector select the namespace (`{}` selects every namespace)"
HINT_INACTIVE = ("give the ClusterQueue what it names (its ResourceFlavors, AdmissionChecks, a TAS flavor's Topology) "
                 "and AdmissionChecks that can be Active: a ProvisioningRequestConfig as a provisioning check's "
                 "parameters, at most one MultiKueue check, for every flavor and not beside a provisioning check")
HINT_HELD = "set the queue's stopPolicy to None (or remove it) when the workload should start"
STOPPED = "is stopped"


def check(ctx: Context) -> Iterator[Problem]:
    queued = [w for w in ctx.workloads if kueue_queue(w.manifest.metadata) and w.managed_by is None
              and w.launcher.kueue_framework is not None]
    if not queued:
        return
    views = [v for v in pod_views(ctx) if v.workload is not None]
    # an object the schema or Kueue's webhook refuses is never created: their errors are SCHEMA's and ADM003's
    kept = [m for m in ctx.bundle.manifests if m.ref not in ctx.schema_refused
            and not webhook_refusals(m.api_version, m.kind, m.obj)]
    env = ctx.env
    objs = kueue_objects(kept)
    complete = env is not None and env.self_contained  # what the manifests do not hold does not exist
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
        held = [f"LocalQueue '{queue}' is stopped (stopPolicy {stop})" for stop in
                [stop_policy(local.obj) if local is not None else None] if stop]
        if cluster is None:
            if held:
                yield _held(w, held)
            continue
        mine = [v for v in views if v.workload is w]
        alike = max(w.copies, 1) * workloads_per_object(framework, w.manifest.obj)  # each its own Workload
        # Kueue reads the template, not the admitted pod, but adds its RuntimeClass's overhead (kueue v0.19.2
        # pkg/workload/resources.go handlePodOverhead 57-73): the written spec with the admitted pod's overhead.
        specs = [(v, {**v.without_added(v.written or None),
                      **({"overhead": v.spec["overhead"]} if v.spec.get("overhead") else {})}) for v in mine]
        podsets = [PodSet(v.field.removesuffix(".spec"), (v.count or 0) // alike, spec, pod_requests(spec),
                          podset_group(v.metadata.get("annotations") or {})) for v, spec in specs]
        home = next((m.obj for m in ctx.of_kind("Namespace") if m.api_version == "v1" and m.name == w.namespace
                     and m.ref not in ctx.schema_refused), None)
        inactive = inactive_reasons(cluster.obj, objs, complete)
        if inactive and STOPPED in inactive:
            held.append(f"ClusterQueue '{cluster.name}' is stopped (stopPolicy {stop_policy(cluster.obj)})")
        refused = namespace_refused(cluster.obj, w.namespace, home)
        if inactive != [STOPPED] and inactive:
            why = "".join(f"; AdmissionCheck '{n}' is never Active: {d}" for n, d in
                          never_active_checks(cluster.obj, objs, complete).items())
            said = (f"ClusterQueue '{cluster.name}' (of LocalQueue '{queue}') is inactive "
                    f"({CQ_INACTIVE.format(', '.join(inactive))}){why}: it admits nothing, so the workload stays "
                    "pending and no pod starts (kueue v0.19.2 pkg/scheduler/scheduler.go 677-679)")
            hint = HINT_INACTIVE
        else:
            reasons = [refused] if refused else never_admitted(cluster.obj, flavors, podsets)
            if not reasons:
                if held:
                    yield _held(w, held)
                continue
            said = (f"ClusterQueue '{cluster.name}' (of LocalQueue '{queue}') never admits it: {'; '.join(reasons)}: "
                    "the workload stays pending and no pod starts (kueue v0.19.2 pkg/scheduler)")
            hint = HINT_NAMESPACE if refused else HINT
        if w.queued is None:
            yield obj_problem(ID, w.manifest, "metadata.labels", f"if Kueue's {framework} integration is on, {said}",
                              hint, severity=WARNING)
        else:
            found = obj_problem(ID, w.manifest, "metadata.labels", said, hint)
            found.extra.update(pods_refused=True, never_admitted=True)  # make plan: no pod of it is created
            yield found


def _held(w: Workload, held: list[str]) -> Problem:
    """A stopped queue: a warning however the environment declares Kueue. Kueue admits no new workload while its
    stopPolicy is set (the workload's QuotaReserved condition: `LocalQueue %s is stopped`, `ClusterQueue %s is
    stopped`, pkg/controller/core/workload_controller.go 1080-1085, 1125-1130), but holding a queue is an operator's
    deliberate, temporary act (jobs are held back to be released together, or through maintenance): the workload runs
    as written once the hold is lifted. Where the environment's Kueue queues the kind, make plan says no pod starts
    while it is held."""
    framework = w.launcher.kueue_framework
    said = (f"{' and '.join(held)}: Kueue admits no new workload while a stopPolicy is set, so the workload stays "
            "pending and no pod starts until it is lifted (kueue v0.19.2 pkg/controller/core/workload_controller.go)")
    if w.queued is None:
        return obj_problem(ID, w.manifest, "metadata.labels", f"if Kueue's {framework} integration is on, {said}",
                           HINT_HELD, severity=WARNING)
    found = obj_problem(ID, w.manifest, "metadata.labels", said, HINT_HELD, severity=WARNING)
    found.extra.update(pods_refused=True, held=True)  # make plan: no pod of it is created while the queue is held
    return found
