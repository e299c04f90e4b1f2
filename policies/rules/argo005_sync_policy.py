"""An auto-syncing Application applies server-side, retries with backoff, and never replaces everything.

`ServerSideApply=true`: client-side apply stores the whole object in a `last-applied-configuration` annotation,
limited to 256 KiB, which several CRDs and large objects here exceed. `retry` with a `backoff`: a first sync often
races an operator's webhook or CRD, and without retries an automated sync gives up until the next commit.
`Replace=true` for the whole Application turns every sync into `kubectl replace` (PVCs, Services and running
workloads included); the repository's scheme gives each run a new workload name instead, with a per-object
`Force=true,Replace=true` annotation as the only, explicit, opt-in (ARGO006).

Fails: `automated: {prune: true, selfHeal: true}` with no `ServerSideApply=true`; no `retry`, or a `retry` without
`backoff`; `syncOptions: [Replace=true]`.
Passes: the repository's ApplicationSet template (ServerSideApply, retry limit 5 with backoff 30s x2 up to 10m).
"""
from __future__ import annotations

from typing import Iterator

from ..kube.objects import Problem
from .kit import Context, obj_problem

ID = "ARGO005"
NAME = "sync-policy"
# Only Applications (written out or generated) are read: other overlays skip the rule.
KINDS = ("Application", "ApplicationSet")


def check(ctx: Context) -> Iterator[Problem]:
    apps, _ = ctx.argo.apps, ctx.argo.failed
    seen: set[tuple[str, str, str]] = set()
    for app in apps:
        # A generated Application's policy comes from the shared template: report it once per set.
        base = "spec.syncPolicy" if app.element is None else "spec.template.spec.syncPolicy"
        found = []
        opts = app.options
        if "Replace=true" in opts:
            found.append((f"{base}.syncOptions", "syncOptions has Replace=true: every sync replaces every object "
                          "(PVCs and running workloads included)", "remove it; name workloads per run, or opt one "
                          "object in with the annotation argocd.argoproj.io/sync-options: Force=true,Replace=true"))
        if app.automated is not None:
            if "ServerSideApply=true" not in opts:
                found.append((f"{base}.syncOptions", "automated sync without ServerSideApply=true: objects over "
                              "client-side apply's 256 KiB annotation limit fail to sync", "add ServerSideApply=true"))
            retry = app.sync_policy.get("retry")
            if not isinstance(retry, dict) or not retry.get("limit"):
                found.append((f"{base}.retry", "automated sync without retry: a failed first sync (a webhook or CRD "
                              "not ready yet) waits for the next commit", "add retry: {limit: 5, backoff: "
                              "{duration: 30s, factor: 2, maxDuration: 10m}}"))
            elif not isinstance(retry.get("backoff"), dict) or not retry["backoff"].get("duration"):
                found.append((f"{base}.retry.backoff", "retry has no backoff, so retries come every 5 s and give up "
                              "before an operator is ready", "add backoff: {duration: 30s, factor: 2, maxDuration: "
                              "10m}"))
        for field, message, hint in found:
            key = (app.manifest.ref, field, message)
            if key in seen:
                continue
            seen.add(key)
            yield obj_problem(ID, app.manifest, field, f"{app.label() if app.element is None else app.manifest.ref}:"
                              f" {message}", hint)
