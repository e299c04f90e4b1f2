"""Names are valid DNS-1123 names, including the names controllers derive from them.

The API server rejects an object whose name is not a DNS-1123 subdomain (lowercase letters, digits, `-` and `.`,
at most 253 characters); Services and Namespaces must be DNS labels (at most 63 characters; a Service must start
with a letter), and so must the `metadata.namespace` of a namespaced object (apimachinery ValidateObjectMeta:
ValidateNamespaceName), such as a `<user_namespace>` left from a template. Roles, ClusterRoles and their bindings are the exception: their names need only be a path segment
(kubernetes pkg/apis/rbac/validation/validation.go ValidateRBACName -> apimachinery v0.36.0
pkg/api/validate/content/path.go 27-62: not `.` or `..`, no `/` or `%`), so `system:auth-delegator` and the
`<prefix>:system:auth-delegator` bindings of metrics adapters are valid. Controllers build more names from a workload's name, and those fail at run time, not at apply:
pod hostnames `<job>-<index>` and `<statefulset>-<ordinal>` must be DNS labels, the training operator makes a
Service `<pytorchjob>-worker-<i>` per replica, and the Trainer a Service named after the TrainJob. Argo CD
Application names (also those an ApplicationSet generates) and destination namespaces follow the same rules.

Fails: a Job named `DDP_Train`; a RoleBinding named `team/a`; a 64-pod Indexed Job whose name is 61 characters long (pod `<name>-63` is longer
than 63); a TrainJob named `64x8-run` (its Service would start with a digit); an Application `ddp-GKE`.
Passes: `ddp-train-run-001` with 64 completions; a ClusterRoleBinding `custom-metrics:system:auth-delegator`.
"""
from __future__ import annotations

import re
from typing import Iterator

from ..argocd.apps import CLUSTER_SCOPED
from ..kube.values import DNS1035 as DNS1035_LABEL, DNS1123_LABEL, DNS1123_SUBDOMAIN, group_of
from .. import launchers
from ..kube.objects import Problem
from .kit import Context, obj_problem

ID = "ARGO003"
NAME = "dns-names"
# (pattern, length limit) of an object's own name: DNS labels for these kinds, a DNS-1123 subdomain for the others.
NAME_RULES = {"Namespace": (DNS1123_LABEL, 63), "Service": (DNS1035_LABEL, 63)}
SUBDOMAIN = (DNS1123_SUBDOMAIN, 253)
# The RBAC kinds, whose names are path segments (ValidateRBACName).
RBAC = ("rbac.authorization.k8s.io", ("Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"))


def _path_segment_why(name: str) -> str | None:
    """content.IsPathSegmentName: what makes `name` no path segment, None when it is one."""
    if name in (".", ".."):
        return f"may not be '{name}'"
    bad = [c for c in ("/", "%") if c in name]
    return "may not contain " + " or ".join(f"'{c}'" for c in bad) if bad else None


def _why(name: str, pattern: re.Pattern[str], limit: int) -> str | None:
    if len(name) > limit:
        return f"is {len(name)} characters, more than {limit}"
    if not pattern.match(name):
        what = "start with a lowercase letter and contain only" if pattern is DNS1035_LABEL else "contain only"
        dots = "" if pattern is not DNS1123_SUBDOMAIN else ", '.'"
        return f"must {what} lowercase letters, digits, '-'{dots}, and begin and end with a letter or digit"
    return None


def check(ctx: Context) -> Iterator[Problem]:
    for m in ctx.bundle.manifests:
        space = m.namespace
        if space and (group_of(m.api_version), m.kind) not in CLUSTER_SCOPED and _why(space, DNS1123_LABEL, 63):
            yield obj_problem(ID, m, "metadata.namespace", f"namespace '{space}' {_why(space, DNS1123_LABEL, 63)}",
                              "use a lowercase namespace of letters, digits and '-'")
        name = m.name
        if not name:
            continue  # the schema stage reports a missing name
        if m.api_version.split("/")[0] == RBAC[0] and m.kind in RBAC[1]:
            why = _path_segment_why(name)
            if why:
                yield obj_problem(ID, m, "metadata.name", f"{m.kind} name '{name}' {why}",
                                  "leave '/' and '%' out of the name")
            continue
        pattern, limit = NAME_RULES.get(m.kind, SUBDOMAIN)
        if len(name) > limit or not pattern.match(name):  # (_why says which, for the few names that fail)
            yield obj_problem(ID, m, "metadata.name", f"name '{name}' {_why(name, pattern, limit)}",
                              "use a lowercase name of letters, digits and '-'")
            continue
        launcher = launchers.of(m)
        if launcher is None:
            continue
        # The names the controller makes from this object's name.
        for field, derived, what, service in launcher.dns_names(m):
            pat = DNS1035_LABEL if service else DNS1123_LABEL
            if len(derived) > 63 or not pat.match(derived):
                yield obj_problem(ID, m, field,
                                  f"{what} would be '{derived}', which {_why(derived, pat, 63)}",
                                  "shorten the name" + ("" if pat is DNS1123_LABEL else " and start it with a letter"))
    apps, _ = ctx.argo.apps, ctx.argo.failed
    for app in apps:
        if app.element is None:
            continue  # a written-out Application's own name is checked with the other objects above
        why = _why(app.name, DNS1123_SUBDOMAIN, 253)
        if why:
            yield obj_problem(ID, app.manifest, app.field, f"generated Application name '{app.name}' {why}",
                              "change the element value or spec.template.metadata.name")
    for app in apps:
        ns = app.destination.get("namespace")
        if isinstance(ns, str) and ns:
            why = _why(ns, DNS1123_LABEL, 63)
            if why:
                yield obj_problem(ID, app.manifest, app.at("spec.destination.namespace"),
                                  f"{app.label()}: destination namespace '{ns}' {why}",
                                  "use a lowercase namespace of letters, digits and '-'")
