"""What a workload needs is applied before it: in an earlier sync wave, or earlier in Argo CD's kind order.

Argo CD applies one sync wave (`argocd.argoproj.io/sync-wave`, default 0) at a time and waits for it to be healthy
before the next; inside a wave it applies built-in kinds in a fixed order (Namespace, NetworkPolicy, ...,
ConfigMap, PersistentVolumeClaim, ..., Service, ..., StatefulSet, Job) and custom resources after them, by name.
So a ConfigMap or Service in the workload's wave is still created first, but a custom resource the workload needs
(the TrainJob's ClusterTrainingRuntime, which the Trainer's webhook looks up at admission; Kueue's LocalQueue) must
be in an earlier wave. PersistentVolumeClaims should stay in the workload's wave: with a WaitForFirstConsumer
storage class (kind's and GKE's default) a claim stays Pending until a pod uses it, and Argo CD would wait for that
earlier wave forever (argoproj/argo-cd#12840), so a PVC in an earlier wave than the workload that mounts it is a
warning.

Fails: a ClusterTrainingRuntime without a sync-wave next to the TrainJob that uses it; a Service in wave 1 while
the Job is in wave 0; `sync-wave: first`.
Passes: Services, ConfigMaps, the runtime and the LocalQueue in wave -1, PVCs and the workload in wave 0.
"""
from __future__ import annotations

import json
from typing import Iterator

from ..argocd.apps import SYNC_WAVE, WORKLOAD_KINDS, sync_wave
from ..render.files import rel
from ..kube.objects import WARNING, Problem
from .kit import Context

ID = "ARGO007"
NAME = "sync-waves"
# Only Applications (written out or generated) are read: other overlays skip the rule.
KINDS = ("Application", "ApplicationSet")
# Argo CD's order of kinds inside one wave (gitops-engine pkg/sync/sync_tasks.go); other kinds come after these.
KIND_ORDER = ["Namespace", "NetworkPolicy", "ResourceQuota", "LimitRange", "PodSecurityPolicy", "PodDisruptionBudget",
              "ServiceAccount", "Secret", "SecretList", "ConfigMap", "StorageClass", "PersistentVolume",
              "PersistentVolumeClaim", "CustomResourceDefinition", "ClusterRole", "ClusterRoleList",
              "ClusterRoleBinding", "ClusterRoleBindingList", "Role", "RoleList", "RoleBinding", "RoleBindingList",
              "Service", "DaemonSet", "Pod", "ReplicationController", "ReplicaSet", "Deployment",
              "HorizontalPodAutoscaler", "StatefulSet", "Job", "CronJob", "IngressClass", "Ingress", "APIService"]
ANNOTATION_FIELD = f"metadata.annotations[{SYNC_WAVE}]"


def check(ctx: Context) -> Iterator[Problem]:
    apps, _ = ctx.argo.apps, ctx.argo.failed
    done: set[str] = set()
    for app in apps:
        for _, _, t in ctx.argo.targets(app):
            source = rel(t.folder)
            if source in done:
                continue
            done.add(source)
            waves = {}
            for m in t.manifests:
                w = sync_wave(m)
                if w is None:
                    yield Problem(ID, f"sync-wave '{m.metadata['annotations'][SYNC_WAVE]}' is not an integer", source,
                                  obj=m.ref, field=ANNOTATION_FIELD, hint='write a number such as "-1"')
                waves[m.ref] = w if w is not None else 0
            workloads = [m for m in t.manifests if m.kind in WORKLOAD_KINDS]
            if not workloads:
                continue
            first = min(workloads, key=lambda m: waves[m.ref])
            wave = waves[first.ref]
            mounted = {m.ref: json.dumps(m.obj) for m in workloads}
            for m in t.manifests:
                if m.kind in WORKLOAD_KINDS:
                    continue
                w = waves[m.ref]
                if m.kind == "PersistentVolumeClaim":
                    users = [r for r, text in mounted.items() if f'"claimName": "{m.name}"' in text and waves[r] > w]
                    if users:
                        yield Problem(ID, f"in wave {w}, before {users[0]} (wave {waves[users[0]]}) that mounts it: "
                                      "with a WaitForFirstConsumer storage class it stays Pending until that pod "
                                      "exists, and the sync waits for it forever", source, obj=m.ref,
                                      field=ANNOTATION_FIELD, hint="leave the claim in the workload's wave (Argo CD "
                                      "creates PVCs before workloads inside a wave)", severity=WARNING)
                    continue
                if w > wave:
                    yield Problem(ID, f"in wave {w}, after {first.ref} (wave {wave}), which needs it from its first "
                                  "pod on", source, obj=m.ref, field=ANNOTATION_FIELD,
                                  hint=f'set argocd.argoproj.io/sync-wave: "{wave - 1}"')
                elif w == wave and m.kind not in KIND_ORDER:
                    yield Problem(ID, f"a custom resource in the same wave ({w}) as {first.ref}: Argo CD orders "
                                  "custom resources by name, not by what needs what", source, obj=m.ref,
                                  field=ANNOTATION_FIELD, hint=f'set argocd.argoproj.io/sync-wave: "{wave - 1}"')
