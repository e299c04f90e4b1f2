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
of a RuntimeClass not in the manifests would add, partial admission, TAS placement in the topology and a Kueue
Configuration the manifests do not hold are not read, and outside a self-contained environment a ResourceFlavor or
AdmissionCheck the manifests do not hold may exist: none of these is ground for a claim, nor is an AdmissionCheck of
another controller, whose controller alone marks it Active.

Where the manifests hold Kueue's Configuration (its ConfigMap `kueue-manager-config`, `launchers/kueue_config.py`;
one Kueue cannot load is ADM003's), it is what Kueue runs: its `integrations.frameworks` stand in for the
environment's `kueueFrameworks`; requests named by its `resources.excludeResourcePrefixes` are not counted (kueue
v0.19.2 pkg/workload/workload.go 463-478), `quotaCheckStrategy: IgnoreUndeclared` skips a resource the ClusterQueue
does not cover (pkg/scheduler/flavorassigner/flavorassigner.go 803-812), and a pod set asking for a resource its
`resources.transformations` transform is not judged. Of a job integration (a Job, JobSet, PyTorchJob, MPIJob,
TrainJob, AppWrapper; not a child of another object, and not in kube-system or kueue-system, which Kueue's webhook
configurations skip): one that names a LocalQueue in a namespace its `managedJobsNamespaceSelector` does not select
(the Namespace's labels as the manifests hold them, else only its name) is suspended by Kueue's webhook and skipped
by its reconciler, so it never gets a Workload (pkg/controller/jobframework/utils.go 147-150, reconciler.go 334-339):
an error. One that names none, in a namespace the selector selects, under `manageJobsWithoutQueueName: true`, is
suspended and waits for a queue for ever (utils.go 152-155) unless a LocalQueue named `default` exists in its
namespace, which Kueue gives it (defaults.go 59-98): an error where the environment declares its manifests
self-contained and they hold no such queue, else a warning phrased as that condition. Where they hold it, the
workload is judged in that queue: certainly under manageJobsWithoutQueueName (it waits either way), else as the
condition that the queue exists when the workload is created (the webhook reads it then).
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
podset group that no one flavor holds; a held ClusterQueue or LocalQueue (a warning); under a Configuration in the
manifests, a queued PyTorchJob in a namespace its managedJobsNamespaceSelector leaves out, and one without a queue
under manageJobsWithoutQueueName with no LocalQueue `default` (a warning outside a self-contained environment).
Passes: the same pods with a nominalQuota of 32; or in a cohort with no borrowingLimit; a flavor or an AdmissionCheck
the manifests do not hold; Kueue's provisioning, MultiKueue and TAS samples; a LocalQueue the manifests do not hold;
a GPU the ClusterQueue does not cover under a Configuration that excludes `nvidia.com/` or ignores undeclared
resources; a job without a queue where the namespace has a LocalQueue `default` that admits it.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Iterator

from ..kube.objects import ERROR, WARNING, Problem
from ..launchers import Workload
from ..kube.values import kueue_queue
from ..launchers.kueue_quota import (CQ_INACTIVE, NOT_SETTLED, PodSet, inactive_reasons, kueue_objects,
                                     namespace_refused, never_active_checks, never_admitted, pod_requests,
                                     podset_group, queue_objects, stop_policy, workloads_per_object)
from ..launchers.kueue_config import DEFAULT_LOCAL_QUEUE, DEFAULT_NAMESPACE, SYSTEM_NAMESPACE, KueueConfig
from ..launchers.kueue_webhooks import refusals as webhook_refusals
from .kit import Context, obj_problem
from .sec010_pod_security import pod_views

ID = "RES010"
NAME = "kueue-quota-fits"
KINDS = ("ClusterQueue", "LocalQueue", "ConfigMap")  # nothing to judge without one (or Kueue's Configuration)
HINT = ("give the ClusterQueue the quota (or the resource, or a flavor the pods tolerate and select), or ask for "
        "less")
HINT_NAMESPACE = "make the ClusterQueue's namespaceSelector select the namespace (`{}` selects every namespace)"
HINT_INACTIVE = ("give the ClusterQueue what it names (its ResourceFlavors, AdmissionChecks, a TAS flavor's Topology) "
                 "and AdmissionChecks that can be Active: a ProvisioningRequestConfig as a provisioning check's "
                 "parameters, at most one MultiKueue check, for every flavor and not beside a provisioning check")
HINT_HELD = "set the queue's stopPolicy to None (or remove it) when the workload should start"
STOPPED = "is stopped"


def check(ctx: Context) -> Iterator[Problem]:
    cfg = ctx.kueue
    told = list(_configured(ctx, cfg)) if cfg is not None else []
    yield from told
    settled = {p.obj for p in told}  # the workloads the Configuration already settles
    # (workload, the LocalQueue it waits in, the condition that holds where the input does not show it: None where
    # only that Kueue runs its integration is not shown (w.queued), '' where nothing is)
    queued: list[tuple[Workload, str, str | None]] = [
        (w, q, None) for w in ctx.workloads if (q := kueue_queue(w.manifest.metadata)) and w.managed_by is None
        and w.launcher.kueue_framework is not None and w.manifest.ref not in settled]
    queued += _defaulted(ctx, cfg) if cfg is not None else []
    if not queued:
        return
    views = [v for v in pod_views(ctx) if v.workload is not None]
    # an object the schema or Kueue's webhook refuses is never created: their errors are SCHEMA's and ADM003's
    kept = [m for m in ctx.bundle.manifests if m.ref not in ctx.schema_refused
            and not webhook_refusals(m.api_version, m.kind, m.obj)]
    env = ctx.env
    objs = kueue_objects(kept)
    complete = env is not None and env.self_contained  # what the manifests do not hold does not exist
    for w, queue, cond in queued:
        framework = w.launcher.kueue_framework
        if cond is None and ctx.kueue_frameworks() is not None and w.queued is None:
            continue  # the cluster's Kueue leaves this integration off: it never sees the object
        meta = w.manifest.metadata
        if any(k in (meta.get("annotations") or {}) or k in (meta.get("labels") or {}) for k in NOT_SETTLED):
            continue
        if cond is None and w.queued is None:
            cond = f"if Kueue's {framework} integration is on, "
        local, cluster, flavors = queue_objects(kept, w.namespace, queue)
        held = [f"LocalQueue '{queue}' is stopped (stopPolicy {stop})" for stop in
                [stop_policy(local.obj) if local is not None else None] if stop]
        if cluster is None:
            if held:
                yield _held(w, held, cond)
            continue
        mine = [v for v in views if v.workload is w]
        alike = max(w.copies, 1) * workloads_per_object(framework, w.manifest.obj)  # each its own Workload
        # Kueue reads the template, not the admitted pod, but adds its RuntimeClass's overhead (kueue v0.19.2
        # pkg/workload/resources.go handlePodOverhead 57-73): the written spec with the admitted pod's overhead.
        specs = [(v, {**v.without_added(v.written or None),
                      **({"overhead": v.spec["overhead"]} if v.spec.get("overhead") else {})}) for v in mine]
        podsets = [PodSet(v.field.removesuffix(".spec"), (v.count or 0) // alike, spec, pod_requests(spec),
                          podset_group(v.metadata.get("annotations") or {})) for v, spec in specs]
        if cfg is not None:  # what its Configuration counts: excluded prefixes dropped; a transformed one not judged
            if any(r in cfg.transformed for ps in podsets for r in ps.requests):
                continue
            podsets = [replace(ps, requests=cfg.counted(ps.requests)) for ps in podsets]
        home = _home(ctx, w)
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
            reasons = [refused] if refused else never_admitted(cluster.obj, flavors, podsets,
                                                               cfg is not None and cfg.ignore_undeclared)
            if not reasons:
                if held:
                    yield _held(w, held, cond)
                continue
            said = (f"ClusterQueue '{cluster.name}' (of LocalQueue '{queue}') never admits it: {'; '.join(reasons)}: "
                    "the workload stays pending and no pod starts (kueue v0.19.2 pkg/scheduler)")
            hint = HINT_NAMESPACE if refused else HINT
        if cond:
            yield obj_problem(ID, w.manifest, "metadata.labels", f"{cond}{said}", hint, severity=WARNING)
        else:
            lead = "" if kueue_queue(meta) else (f"Kueue gives it LocalQueue '{queue}' (it names none, and under "
                                                 "manageJobsWithoutQueueName waits for a queue in any case): ")
            found = obj_problem(ID, w.manifest, "metadata.labels", lead + said, hint)
            found.extra.update(pods_refused=True, never_admitted=True)  # make plan: no pod of it is created
            yield found


def _held(w: Workload, held: list[str], cond: str | None) -> Problem:
    """A stopped queue: a warning however the environment declares Kueue. Kueue admits no new workload while its
    stopPolicy is set (the workload's QuotaReserved condition: `LocalQueue %s is stopped`, `ClusterQueue %s is
    stopped`, pkg/controller/core/workload_controller.go 1080-1085, 1125-1130), but holding a queue is an operator's
    deliberate, temporary act (jobs are held back to be released together, or through maintenance): the workload runs
    as written once the hold is lifted. Where the environment's Kueue queues the kind, make plan says no pod starts
    while it is held."""
    said = (f"{' and '.join(held)}: Kueue admits no new workload while a stopPolicy is set, so the workload stays "
            "pending and no pod starts until it is lifted (kueue v0.19.2 pkg/controller/core/workload_controller.go)")
    if cond:
        return obj_problem(ID, w.manifest, "metadata.labels", f"{cond}{said}", HINT_HELD, severity=WARNING)
    found = obj_problem(ID, w.manifest, "metadata.labels", said, HINT_HELD, severity=WARNING)
    found.extra.update(pods_refused=True, held=True)  # make plan: no pod of it is created while the queue is held
    return found


HINT_UNMANAGED = ("make Kueue's managedJobsNamespaceSelector select the namespace, or run the workload in one it "
                  "selects")
HINT_NO_QUEUE = ("label it kueue.x-k8s.io/queue-name: <a LocalQueue of its namespace>, or add a LocalQueue named "
                 "'default' to the namespace (Kueue gives it that queue)")
# Kueue's webhook configurations skip these namespaces whatever the Configuration says (kueue v0.19.2
# config/components/webhook/kustomization.yaml: the namespaceSelector of every job integration's webhook): an object
# there is never suspended by Kueue.
WEBHOOK_SKIPS = (SYSTEM_NAMESPACE, DEFAULT_NAMESPACE)


def _configured(ctx: Context, cfg: KueueConfig) -> Iterator[Problem]:
    """What the Configuration in the manifests settles before any quota (launchers/kueue_config.py): a job
    integration's webhook suspends an object that names a LocalQueue (jobframework/utils.go 147-150), but the
    reconciler skips every object of a namespace managedJobsNamespaceSelector does not select (reconciler.go
    334-339), so it never gets a Workload and stays suspended; under manageJobsWithoutQueueName an object without the
    label in a namespace the selector selects is suspended too (utils.go 152-155) and waits for a queue for ever,
    unless a LocalQueue named `default` exists in its namespace and Kueue gives it that one (defaults.go 59-98)."""
    complete = ctx.env is not None and ctx.env.self_contained
    for w in ctx.workloads:
        launcher, meta = w.launcher, w.manifest.metadata
        if launcher.suspend_field is None or not _seen(cfg, w):
            continue  # a pod-group integration's pod webhook reads the selector itself
        managed = cfg.manages_namespace(w.namespace, _home(ctx, w))
        queue = kueue_queue(meta)
        suspend = ".".join(launcher.suspend_field)
        if queue is not None and managed is False:
            found = obj_problem(
                ID, w.manifest, "metadata.namespace",
                f"the managedJobsNamespaceSelector of {cfg.where} does not select namespace '{w.namespace}': Kueue's "
                f"webhook suspends the {w.manifest.kind} ({suspend} set true: it names LocalQueue '{queue}') but its "
                "reconciler skips the namespace, makes no Workload and never resumes it, so no pod starts (kueue "
                "v0.19.2 pkg/controller/jobframework/utils.go:147-150, reconciler.go:334-339)", HINT_UNMANAGED,
                severity=ERROR)
            found.extra.update(pods_refused=True, never_admitted=True)
            yield found
        elif queue is None and cfg.manage_without_queue_name and managed:
            if any(_default_queue(m, w.namespace) for m in ctx.of_kind("LocalQueue")):
                continue  # Kueue gives it LocalQueue 'default' (where that exists when it is created)
            said = (f"{cfg.where} sets manageJobsWithoutQueueName and selects namespace '{w.namespace}': Kueue's "
                    f"webhook suspends the {w.manifest.kind} ({suspend} set true) though it names no LocalQueue, and "
                    "with no queue to give it, it waits for one for ever: no pod starts (kueue v0.19.2 "
                    "pkg/controller/jobframework/utils.go:152-155, defaults.go:59-98)")
            if complete:
                found = obj_problem(ID, w.manifest, "metadata.labels", f"{said}; no LocalQueue 'default' in the "
                                    f"namespace among these manifests, which {ctx.env.name if ctx.env else ''} "
                                    "declares self-contained", HINT_NO_QUEUE, severity=ERROR)
                found.extra.update(pods_refused=True, never_admitted=True)
                yield found
            else:
                yield obj_problem(ID, w.manifest, "metadata.labels",
                                  f"unless a LocalQueue 'default' exists in namespace '{w.namespace}' when it is "
                                  f"created (none among these manifests), {said}", HINT_NO_QUEUE, severity=WARNING)


def _default_queue(m: Any, namespace: str) -> bool:
    return bool(m.api_version.startswith("kueue.x-k8s.io/") and m.name == DEFAULT_LOCAL_QUEUE
                and (not m.namespace or m.namespace == namespace))


def _seen(cfg: KueueConfig, w: Workload) -> bool:
    """Kueue's webhook for the object's integration sees it: the integration is on, no other controller manages it,
    it is no child of another object (Kueue manages a child through its owner) and its namespace is not one the
    webhook configurations skip."""
    return bool(w.managed_by is None and w.launcher.kueue_framework in cfg.frameworks
                and not w.manifest.metadata.get("ownerReferences") and w.namespace not in WEBHOOK_SKIPS)


def _home(ctx: Context, w: Workload) -> dict[str, Any] | None:
    """The workload's Namespace object, where the manifests hold one the schema admits."""
    return next((m.obj for m in ctx.of_kind("Namespace") if m.api_version == "v1" and m.name == w.namespace
                 and m.ref not in ctx.schema_refused), None)


def _defaulted(ctx: Context, cfg: KueueConfig) -> list[tuple[Workload, str, str | None]]:
    """The workloads without a queue label that Kueue gives LocalQueue `default`: one of that name exists in their
    namespace among the manifests, and managedJobsNamespaceSelector selects it (kueue v0.19.2
    pkg/controller/jobframework/defaults.go 59-98, each integration's webhook Default). The webhook reads the queue
    as the object is created: under manageJobsWithoutQueueName the object waits either way (for `default`, or for
    ever without a queue), so what `default`'s ClusterQueue never admits is certain (''); otherwise it is said as
    the condition that the queue exists by then."""
    out: list[tuple[Workload, str, str | None]] = []
    for w in ctx.workloads:
        if kueue_queue(w.manifest.metadata) is not None or not _seen(cfg, w) or \
                not any(_default_queue(m, w.namespace) for m in ctx.of_kind("LocalQueue")) or \
                not cfg.manages_namespace(w.namespace, _home(ctx, w)):
            continue
        out.append((w, DEFAULT_LOCAL_QUEUE, "" if cfg.manage_without_queue_name else (
            f"if LocalQueue '{DEFAULT_LOCAL_QUEUE}' exists when the {w.manifest.kind} is created (Kueue then gives "
            "it that queue: it names none), ")))
    return out
