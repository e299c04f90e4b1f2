"""Cluster-scoped and RBAC objects only where the environment allows their kind.

A Namespace, a ClusterRole or ClusterRoleBinding, a webhook configuration, a CRD or a PriorityClass reaches past the
training's namespace: a ClusterRoleBinding to `cluster-admin` gives a service account the whole cluster, a
ValidatingWebhookConfiguration sees every object created. A Role or RoleBinding grants API access inside it. An
environment (and, in the Argo CD plugin, the operator's policy, which a repository can only narrow) lists the kinds
its manifests may hold in `spec.allowedClusterKinds` as `group/Kind` (`/Namespace` for the core group): any other is
an error there. Where no declaration says, the rule says nothing (the AppProject, ARGO008, fences a sync by name).

Fails: a ClusterRoleBinding where allowedClusterKinds is `[trainer.kubeflow.org/ClusterTrainingRuntime]`.
Passes: the repository's trainjob overlay with its ClusterTrainingRuntime where that kind is listed.
"""
from __future__ import annotations

from typing import Iterator

from ..argocd.apps import CLUSTER_SCOPED
from ..kube.values import group_of
from ..kube.objects import ERROR, Problem
from .kit import Context, obj_problem

ID = "SEC009"
NAME = "cluster-kinds"
SEVERITY = ERROR
RBAC_GROUP = "rbac.authorization.k8s.io"


def check(ctx: Context) -> Iterator[Problem]:
    env = ctx.env
    if env is None or env.allowed_cluster_kinds is None:
        return
    for m in ctx.bundle.manifests:
        group = group_of(m.api_version)
        if (group, m.kind) not in CLUSTER_SCOPED and group != RBAC_GROUP:
            continue
        name = f"{group}/{m.kind}"
        if name in env.allowed_cluster_kinds:
            continue
        what = "an RBAC object: it grants API access" if group == RBAC_GROUP else "cluster-scoped: it reaches past " \
            "the training's namespace"
        narrowed = f" (as the operator's policy {env.operator} narrows it)" if env.operator else ""
        yield obj_problem(ID, m, "kind", f"{m.kind} '{m.name}' is {what}; {env.name}'s allowedClusterKinds does "
                          f"not list {name}{narrowed}", f"remove it (the platform team applies such objects), or list {name} "
                          "in allowedClusterKinds")
