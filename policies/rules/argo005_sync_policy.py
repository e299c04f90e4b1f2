"""An Application applies server-side where client-side apply cannot, retries with backoff, and never replaces everything.

Client-side apply (`kubectl apply`, Argo CD's default) writes the whole object, as compact JSON, into its
`kubectl.kubernetes.io/last-applied-configuration` annotation (kubectl v0.36.1 pkg/util/apply.go
GetModifiedConfiguration 71-105, the version Argo CD v3.5.1 builds with), and the API server refuses an object whose
annotations together pass 256 KiB (apimachinery v0.36.0 pkg/api/validation/objectmeta.go 36, 58-67). So an object
an Application's path renders whose JSON alone is over that (a large CRD, a big dashboard ConfigMap) fails to sync,
every time, unless the Application or the object says `ServerSideApply=true` (server-side apply keeps no such
annotation) or `Replace=true`: an error, auto-syncing or not. The size is counted as Python writes the JSON, which
is never longer than Go's encoding of the same object, so the error is claimed only where Go's is over too.

The rest is practice, warnings by default (an environment raises them): an auto-syncing Application without
`ServerSideApply=true` (the next large object would fail); no `retry` with a `backoff` (a first sync often races an
operator's webhook or CRD, and without retries an automated sync gives up until the next commit: it matters only
after a failed sync); `Replace=true` for the whole Application, which turns every sync into `kubectl replace` (PVCs,
Services and running workloads included): the repository's scheme gives each run a new workload name instead, with a
per-object `Force=true,Replace=true` annotation as the only, explicit, opt-in (ARGO006).

Fails: `automated: {prune: true, selfHeal: true}` with no `ServerSideApply=true`; no `retry`, or a `retry` without
`backoff`; `syncOptions: [Replace=true]` (warnings); an Application, client-side, whose path renders a ConfigMap of
300 KiB (an error).
Passes: the repository's ApplicationSet template (ServerSideApply, retry limit 5 with backoff 30s x2 up to 10m).
"""
from __future__ import annotations

import json
from typing import Any, Iterator

from ..argocd.apps import SYNC_OPTIONS, annotations_of, sync_options
from ..kube.objects import ERROR, WARNING, Manifest, Problem
from .kit import Context, obj_problem

ID = "ARGO005"
NAME = "sync-policy"
SEVERITY = WARNING
# Only Applications (written out or generated) are read: other overlays skip the rule.
KINDS = ("Application", "ApplicationSet")
# apimachinery's TotalAnnotationSizeLimitB, and the annotation client-side apply writes.
ANNOTATIONS_LIMIT = 256 * 1024
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
SERVER_SIDE, REPLACE = "ServerSideApply=true", "Replace=true"


def last_applied_bytes(obj: dict[str, Any]) -> int:
    """The bytes of an object's annotations once client-side apply has written its last-applied-configuration:
    the object's compact JSON without that annotation, the key, and the other annotations (a lower bound of Go's
    count: Go escapes <, >, & and a few control characters longer; Argo CD's own tracking annotation not counted)."""
    meta = obj.get("metadata")
    notes = meta.get("annotations") if isinstance(meta, dict) else None
    others = {k: v for k, v in notes.items() if k != LAST_APPLIED} if isinstance(notes, dict) else {}
    bare = obj
    if isinstance(notes, dict) and LAST_APPLIED in notes and isinstance(meta, dict):
        bare = {**obj, "metadata": {**meta, "annotations": others}}
    body = json.dumps(bare, separators=(",", ":"), ensure_ascii=False, default=str).encode()
    return len(body) + len(LAST_APPLIED) + sum(len(str(k).encode()) + len(str(v).encode()) for k, v in others.items())


def _client_side(app_options: list[str], m: Manifest) -> bool:
    """Whether Argo CD applies `m` client-side: no ServerSideApply=true or Replace=true for it (the object's own
    sync-options annotation wins over the Application's for ServerSideApply)."""
    own = sync_options(annotations_of(m).get(SYNC_OPTIONS))
    if REPLACE in own or REPLACE in app_options:
        return False
    if "ServerSideApply=false" in own:
        return True
    return SERVER_SIDE not in own and SERVER_SIDE not in app_options


def check(ctx: Context) -> Iterator[Problem]:
    apps, _ = ctx.argo.apps, ctx.argo.failed
    seen: set[tuple[str, str, str]] = set()
    for app in apps:
        # A generated Application's policy comes from the shared template: report it once per set.
        base = "spec.syncPolicy" if app.element is None else "spec.template.spec.syncPolicy"
        found: list[tuple[str, str, str, str]] = []
        opts = app.options
        for _, _, t in ctx.argo.targets(app):
            for m in t.manifests:
                if not isinstance(m.obj, dict) or not _client_side(opts, m):
                    continue
                size = last_applied_bytes(m.obj)
                if size > ANNOTATIONS_LIMIT:
                    found.append((f"{base}.syncOptions", f"{m.ref} in {t.path} takes {size // 1024} KiB of "
                                  "annotations once client-side apply writes its last-applied-configuration, past the "
                                  "API server's 256 KiB: every sync of it fails (metadata.annotations: Too long)",
                                  f"add {SERVER_SIDE} to {base}.syncOptions (or to the object's annotation "
                                  f"{SYNC_OPTIONS})", ERROR))
        if REPLACE in opts:
            found.append((f"{base}.syncOptions", "syncOptions has Replace=true: every sync replaces every object "
                          "(PVCs and running workloads included)", "remove it; name workloads per run, or opt one "
                          "object in with the annotation argocd.argoproj.io/sync-options: Force=true,Replace=true",
                          WARNING))
        if app.automated is not None:
            if SERVER_SIDE not in opts:
                found.append((f"{base}.syncOptions", "automated sync without ServerSideApply=true: an object over "
                              "client-side apply's 256 KiB annotation limit would fail to sync",
                              f"add {SERVER_SIDE}", WARNING))
            retry = app.sync_policy.get("retry")
            if not isinstance(retry, dict) or not retry.get("limit"):
                found.append((f"{base}.retry", "automated sync without retry: a failed first sync (a webhook or CRD "
                              "not ready yet) waits for the next commit", "add retry: {limit: 5, backoff: "
                              "{duration: 30s, factor: 2, maxDuration: 10m}}", WARNING))
            elif not isinstance(retry.get("backoff"), dict) or not retry["backoff"].get("duration"):
                found.append((f"{base}.retry.backoff", "retry has no backoff, so retries come every 5 s and give up "
                              "before an operator is ready", "add backoff: {duration: 30s, factor: 2, maxDuration: "
                              "10m}", WARNING))
        for field, message, hint, severity in found:
            key = (app.manifest.ref, field, message)
            if key in seen:
                continue
            seen.add(key)
            yield obj_problem(ID, app.manifest, field, f"{app.label() if app.element is None else app.manifest.ref}:"
                              f" {message}", hint, severity)
