"""Pods mount no service-account token unless they need the Kubernetes API.

By default every pod gets a token for its namespace's service account in `/var/run/secrets/...`; a trainer never
calls the Kubernetes API, so the token only helps whoever takes over the container. Set
`automountServiceAccountToken: false` on the pod (or on the ServiceAccount it uses, in the same manifests). A pod
that does need it says so: a service account of its own (`serviceAccountName`) and
`automountServiceAccountToken: true`. A warning.

Fails: a pod template that sets neither; `automountServiceAccountToken: true` with the `default` account.
Passes: `automountServiceAccountToken: false`; a ServiceAccount `trainer` with `automountServiceAccountToken: false`
used by the pods.
"""
from __future__ import annotations

from typing import Iterator

from ..kube.objects import WARNING, Problem
from .kit import Context, obj_problem

ID = "SEC005"
NAME = "no-service-account-token"
SEVERITY = WARNING


def check(ctx: Context) -> Iterator[Problem]:
    accounts = {(m.namespace, m.name): m.obj.get("automountServiceAccountToken")
                for m in ctx.of_kind("ServiceAccount")}
    for site in ctx.sites:
        mount = site.spec.get("automountServiceAccountToken")
        account = str(site.spec.get("serviceAccountName") or site.spec.get("serviceAccount") or "default")
        if mount is False:
            continue
        if mount is True:
            if account != "default":
                continue  # stated on purpose, with an account of its own
            yield obj_problem(ID, site.manifest, f"{site.field}.automountServiceAccountToken", "mounts the token of "
                              "the namespace's default service account", "use a service account of its own, or "
                              "set automountServiceAccountToken: false", severity=WARNING)
            continue
        if accounts.get((site.manifest.namespace, account)) is False:
            continue
        yield obj_problem(ID, site.manifest, f"{site.field}.automountServiceAccountToken", f"service account "
                          f"'{account}' token is mounted though training needs no Kubernetes API access",
                          "set automountServiceAccountToken: false", severity=WARNING)
