"""The objects the manifests reference are in them, or said to live elsewhere.

A file validated on its own often names objects applied from another repository or installed with an operator: the
ConfigMaps, Secrets and PersistentVolumeClaims its pods mount or read env from, the ServiceAccount they run as (other
than `default`, which every namespace has), the PriorityClass and RuntimeClass they name (other than
`system-node-critical` and `system-cluster-critical`, which every cluster has), the etcd Service a torchrun etcd
rendezvous dials, the (Cluster)TrainingRuntime a TrainJob names, the Volcano Queue a Volcano Job names (other than
`default`, which Volcano creates; its state and child queues need the cluster too), the WorkloadPriorityClass the
`kueue.x-k8s.io/priority-class` label of an object the environment's Kueue queues names, or without that label the
PriorityClass its `runPolicy.schedulingPolicy.priorityClass` names (a PyTorchJob's, an MPIJob's: Kueue makes no
Workload without it), the PriorityClass a Volcano Job's `spec.priorityClassName` gives the pods of its tasks that name
none (one only its PodGroup gets is not listed: Volcano's scheduler reads a class it cannot find as its default
priority), and the Dynamic Resource Allocation objects: the ResourceClaim or ResourceClaimTemplate a pod's
`resourceClaims` name, and the DeviceClass each device request of a ResourceClaim(Template) in the manifests names
(`policies/kube/dra.py`; a template that NVIDIA's DRA driver makes for a ComputeDomain in the manifests counts as
in them; whether the class's devices are GPUs is TOPO002's and TOPO007's condition, not checked here). What is not
in the manifests cannot be checked here (a key that is missing, a claim that does not bind): one info line per input
lists those references.
Where an environment declares its manifests self-contained (`selfContained: true` in its policy.yaml, as this
repository's environments do), each reference that is not in them is an error: the pod would wait for it
(ContainerCreating, CreateContainerConfigError; Pending for a missing claim, claim template or DeviceClass, which
the scheduler's DynamicResources plugin and the resourceclaim controller wait for), or the API server refuses it (a
missing ServiceAccount; the Priority plugin's `no PriorityClass with name X was found`; the RuntimeClass plugin's
`pod rejected: RuntimeClass "x" not found`), and the world never forms (what those plugins refuse of a class in the
manifests is ADM002's). A reference written `optional: true` is not one the pod waits for.

Fails: an overlay of a self-contained environment whose pods read `envFrom: [{configMapRef: {name: ddp-env}}]` and
hold no ConfigMap `ddp-env`, or run as `serviceAccountName: trainer` with no ServiceAccount `trainer`, or name
`priorityClassName: training-high` or `runtimeClassName: kata` with no such class, or claim devices through
`resourceClaimTemplateName: single-gpu` with no such ResourceClaimTemplate, or hold that template and no DeviceClass
`gpu.example.com` its request names.
Passes: every referenced ConfigMap, Secret and claim in the manifests (a ResourceClaimTemplate and its DeviceClass
too); `priorityClassName: system-cluster-critical`; a file without an environment (info).
"""
from __future__ import annotations

from typing import Iterator

from ..launchers import Workload
from ..launchers.base import Need
from ..kube import dra
from ..kube.admission_classes import REFUSED_PRIORITY, REFUSED_RUNTIME, SYSTEM_PRIORITY_CLASSES
from ..kube.objects import ERROR, INFO, Manifest, Problem
from .kit import Context, obj_problem

# What follows a missing reference other than a pod waiting for it: the ServiceAccount admission plugin refuses the pod
# (kubernetes plugin/pkg/admission/serviceaccount/admission.go, Plugin.Admit: "error looking up service account").
# The Priority and RuntimeClass plugins refuse a pod whose class does not exist (policies/kube/admission_classes.py).
REFUSED = {"ServiceAccount": "the API server refuses every pod (serviceaccount not found), so none is created",
           "PriorityClass": "the API server refuses every pod (" + REFUSED_PRIORITY + "), so none is created",
           "RuntimeClass": "the API server refuses every pod (" + REFUSED_RUNTIME + "), so none is created",
           **dra.WAITS}  # the DRA objects: admitted, the pods stay Pending (kube/dra.py)
ID = "REF001"
NAME = "references-resolve"
SEVERITY = INFO


def _optional(ref: object) -> bool:
    return isinstance(ref, dict) and ref.get("optional") is True


def _needs(ctx: Context) -> Iterator[tuple[Workload, Need]]:
    """(workload, need) for what each workload's controller needs first, every workload once (modelled or not)."""
    for w in ctx.workloads + [w for w in ctx.unresolved if w not in ctx.workloads]:
        for need in w.needs:
            yield w, need


def references(ctx: Context) -> list[tuple[str, str, str, Manifest, str]]:
    """(kind, namespace, name, the object that names it, its field) for every reference a pod template makes."""
    out: list[tuple[str, str, str, Manifest, str]] = []
    for site in ctx.sites:
        ns = site.manifest.namespace
        for i, vol in enumerate(site.spec.get("volumes") or []):
            if not isinstance(vol, dict):
                continue
            where = f"{site.field}.volumes[{i}]"
            sources = [vol] + [s for s in ((vol.get("projected") or {}).get("sources") or []) if isinstance(s, dict)]
            for src in sources:
                cm, sec, pvc = src.get("configMap"), src.get("secret"), vol.get("persistentVolumeClaim")
                if isinstance(cm, dict) and cm.get("name") and not _optional(cm):
                    out.append(("ConfigMap", ns, str(cm["name"]), site.manifest, where))
                if isinstance(sec, dict) and (sec.get("secretName") or sec.get("name")) and not _optional(sec):
                    out.append(("Secret", ns, str(sec.get("secretName") or sec.get("name")), site.manifest, where))
                if src is vol and isinstance(pvc, dict) and pvc.get("claimName"):
                    out.append(("PersistentVolumeClaim", ns, str(pvc["claimName"]), site.manifest, where))
        # serviceAccount: the deprecated alias the API server copies into serviceAccountName where that is empty.
        account = site.spec.get("serviceAccountName") or site.spec.get("serviceAccount")
        if isinstance(account, str) and account and account != "default":  # `default`: every namespace has one
            key = "serviceAccountName" if site.spec.get("serviceAccountName") else "serviceAccount"
            out.append(("ServiceAccount", ns, account, site.manifest, f"{site.field}.{key}"))
        # Cluster-scoped classes; the two system PriorityClasses are in every cluster.
        priority, runtime = site.spec.get("priorityClassName"), site.spec.get("runtimeClassName")
        if isinstance(priority, str) and priority and priority not in SYSTEM_PRIORITY_CLASSES:
            out.append(("PriorityClass", "", priority, site.manifest, f"{site.field}.priorityClassName"))
        if isinstance(runtime, str) and runtime:
            out.append(("RuntimeClass", "", runtime, site.manifest, f"{site.field}.runtimeClassName"))
        for kind, name, i in dra.pod_claims(site.spec):  # namespaced: the pod's namespace
            out.append((kind, ns, name, site.manifest, f"{site.field}.resourceClaims[{i}]"))
        for field, c in site.containers():
            for j, src in enumerate(c.get("envFrom") or []):
                if not isinstance(src, dict):
                    continue
                for key, kind in (("configMapRef", "ConfigMap"), ("secretRef", "Secret")):
                    ref = src.get(key)
                    if isinstance(ref, dict) and ref.get("name") and not _optional(ref):
                        out.append((kind, ns, str(ref["name"]), site.manifest, f"{field}.envFrom[{j}]"))
            for j, var in enumerate(c.get("env") or []):
                source = var.get("valueFrom") if isinstance(var, dict) and "valueFrom" in var else None
                if not isinstance(source, dict):
                    continue
                for key, kind in (("configMapKeyRef", "ConfigMap"), ("secretKeyRef", "Secret")):
                    ref = source.get(key)
                    if isinstance(ref, dict) and ref.get("name") and not _optional(ref):
                        out.append((kind, ns, str(ref["name"]), site.manifest, f"{field}.env[{j}]"))
    for m in ctx.bundle.manifests:  # the DeviceClasses the claims (and claim templates) in the manifests ask for
        if m.kind in (dra.CLAIM, dra.CLAIM_TEMPLATE) and m.api_version.split("/")[0] == dra.GROUP:
            out += [(dra.DEVICE_CLASS, "", name, m, field) for name, field in dra.device_classes(m.kind, m.obj)]
    for w, need in _needs(ctx):  # what the controller needs first (a TrainJob's runtime, launchers/trainjob.py)
        out.append((need.kind, need.namespace, need.name, w.manifest, need.field))
    for t in ctx.topologies:
        host = t.endpoint_host or ""
        if t.backend.startswith("etcd") and host and "$" not in host and not host.replace(".", "").isdigit():
            parts = host.split(".")
            if host != "localhost":
                out.append(("Service", parts[1] if len(parts) > 1 else t.manifest.namespace, parts[0], t.manifest,
                            t.first.endpoint.field or "spec"))
    return out


def check(ctx: Context) -> Iterator[Problem]:
    have = {(m.kind, m.namespace, m.name) for m in ctx.bundle.manifests}
    # and what a controller makes from them (a ComputeDomain's ResourceClaimTemplate, kube/dra.py)
    have |= set(dra.made_templates([(m.api_version, m.kind, m.namespace, m.obj) for m in ctx.bundle.manifests]))
    # A name without a namespace in the manifests is applied where its reader runs: match on kind and name.
    loose = {(m.kind, m.name) for m in ctx.bundle.manifests if not m.namespace}
    missing: dict[tuple[str, str, str], tuple[Manifest, str]] = {}
    for kind, ns, name, m, field in references(ctx):
        if (kind, ns, name) in have or (kind, name) in loose or (not ns and any(
                k == kind and n == name for k, _, n in have)):
            continue
        missing.setdefault((kind, ns, name), (m, field))
    if not missing:
        return
    withouts = {(n.kind, n.namespace, n.name): n.without for _, n in _needs(ctx)}
    if ctx.env is not None and ctx.env.self_contained:
        for (kind, ns, name), (m, field) in missing.items():
            what = withouts.get((kind, ns, name),
                                REFUSED.get(kind, "the pod waits for it and never starts").format(name))
            yield obj_problem(ID, m, field, f"{kind} '{name}' is not in the manifests, which {ctx.env.name} declares "
                              f"self-contained: {what}",
                              f"add the {kind} to the overlay" + (", or mark the reference optional" if kind in
                                                                  ("ConfigMap", "Secret") else ""), severity=ERROR)
        return
    listed = ", ".join(f"{kind} {name}" for (kind, _, name) in sorted(missing))
    yield Problem(ID, f"references objects applied elsewhere, which could not be checked here: {listed}",
                  ctx.source, severity=INFO, hint="validate them in one input with the objects they name (each "
                  "file is checked on its own: `make validate BUNDLE=1 PATHS=<folder>` reads a folder's files as "
                  "one, `cat <files> | make validate PATHS=-` any files), or declare the environment "
                  "selfContained to have each one required")
