"""An Application applies server-side where client-side apply cannot, retries with backoff, and never replaces everything.

Client-side apply (`kubectl apply`, Argo CD's default) writes the whole object, as compact JSON, into its
`kubectl.kubernetes.io/last-applied-configuration` annotation (kubectl v0.36.1 pkg/util/apply.go
GetModifiedConfiguration 71-105, the version Argo CD v3.5.1 builds with), and the API server refuses an object whose
annotations together pass 256 KiB (apimachinery v0.36.0 pkg/api/validation/objectmeta.go 36, 58-67). So an object
an Application's path renders whose annotations would pass that (a large CRD, a big dashboard ConfigMap) fails to
sync, every time, unless the Application or the object says `ServerSideApply=true` (server-side apply keeps no such
annotation) or `Replace=true`: an error, auto-syncing or not.

The count is the API server's, byte for byte: the object as Argo CD hands it to kubectl (a namespaced object without
a namespace gets the destination's; Argo CD's tracking annotation `argocd.argoproj.io/tracking-id:
<app>:<group>/<kind>:<namespace>/<name>`, which lands in the last-applied JSON as well), written as Go's
encoding/json writes it (`<`, `>`, `&`, U+2028 and U+2029 take six bytes, a whole float `1.0` is `1`:
policies/kube/gojson.py), a newline, and every other annotation. An error is claimed only for what the manifests
show: the tracking annotation (or label) counts where an argocd-cm among them sets
`application.resourceTrackingMethod`; where none does, Argo CD v3.5.1's default (annotation) may have been changed by
the installation's own argocd-cm (this repository's sets only its own keys), so an object over the limit only with
that annotation is a warning. Where the manifests do not decide, the count takes the shorter: the Application's bare
name (not `<namespace>_<name>`), no namespace on a kind whose scope is not known (a CRD's), and no installation-id.
Scalars are read as go-yaml reads them (`1e3` is 1000, `y` is true: policies/render/loader.py).

The rest is practice, warnings by default (an environment raises them): an auto-syncing Application without
`ServerSideApply=true` (the next large object would fail); no `retry` with a `backoff` (a first sync often races an
operator's webhook or CRD, and without retries an automated sync gives up until the next commit: it matters only
after a failed sync); `Replace=true` for the whole Application, which turns every sync into `kubectl replace` (PVCs,
Services and running workloads included): the repository's scheme gives each run a new workload name instead, with a
per-object `Force=true,Replace=true` annotation as the only, explicit, opt-in (ARGO006).

Fails: `automated: {prune: true, selfHeal: true}` with no `ServerSideApply=true`; no `retry`, or a `retry` without
`backoff`; `syncOptions: [Replace=true]` (warnings); an Application, client-side, whose path renders a ConfigMap of
300 KiB, or of 255.8 KiB with 100 `<` in it (an error).
Passes: the repository's ApplicationSet template (ServerSideApply, retry limit 5 with backoff 30s x2 up to 10m).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterator

from ..argocd.apps import CLUSTER_SCOPED, SYNC_OPTIONS, App, annotations_of, sync_options
from ..kube.gojson import go_json
from ..kube.objects import ERROR, WARNING, Manifest, Problem
from ..kube.values import BUILT_IN_GROUPS, group_of
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
# Argo CD v3.5.1's tracking (common/common.go 190, 215-216) and its argocd-cm keys (util/settings/settings.go 471-477).
TRACKING_ID, INSTALLATION_ID = "argocd.argoproj.io/tracking-id", "argocd.argoproj.io/installation-id"
INSTANCE_LABEL = "app.kubernetes.io/instance"
METHOD_KEY, LABEL_KEY, INSTALLATION_KEY = ("application.resourceTrackingMethod", "application.instanceLabelKey",
                                           "installationID")
ANNOTATION, LABEL, BOTH = "annotation", "label", "annotation+label"


@dataclass(frozen=True)
class Tracking:
    """How Argo CD marks the objects it applies: argocd-cm's resourceTrackingMethod (None: no argocd-cm among the
    manifests sets it), instanceLabelKey and installationID (None: not set there)."""

    method: str | None = None
    label_key: str = INSTANCE_LABEL
    installation_id: str | None = None


def tracking_of(manifests: list[Manifest]) -> Tracking:
    """What an argocd-cm among the manifests says; a key it does not set is not known (the installation's own
    argocd-cm may set it: this repository's is merged into it by server-side apply, key by key)."""
    for m in manifests:
        data = m.obj.get("data")
        if m.kind == "ConfigMap" and m.api_version == "v1" and m.name == "argocd-cm" and isinstance(data, dict):
            method = data.get(METHOD_KEY)
            return Tracking(str(method) if method is not None else None,
                            str(data.get(LABEL_KEY) or "") or INSTANCE_LABEL,
                            str(data[INSTALLATION_KEY]) if data.get(INSTALLATION_KEY) else None)
    return Tracking()


def _truncated_label(value: str) -> str:
    """TruncateLabel (argo-cd v3.5.1 util/argo/resource_tracking.go 131-143): 63 characters, ending in [a-zA-Z0-9]."""
    if len(value) <= 63:
        return value
    value = value[:63]
    while len(value) > 1 and not (value[-1].isascii() and value[-1].isalnum()):
        value = value[:-1]
    return value


def as_applied(obj: dict[str, Any], app: App, tracking: Tracking) -> dict[str, Any]:
    """The object as Argo CD v3.5.1 hands it to kubectl: its namespace as NormalizeTargetObjects sets it (controller/
    state.go 525-551: a namespaced object without one gets the destination's, a cluster-scoped one loses its own) and
    its tracking as SetAppInstance writes it (util/argo/resource_tracking.go 109-122, 146-193, 233-235: the annotation
    `<app>:<group>/<kind>:<namespace>/<name>`, the namespace the object's or else the destination's; the repo server
    skips CRDs, reposerver/repository/repository.go 1806-1807, unless their namespace is cleared). Where the input
    does not decide, the shorter: the Application's bare name (InstanceName prefixes `<namespace>_` outside the control
    plane's namespace, pkg/apis/application/v1alpha1/types.go 4132-4139), no namespace added or kept where the kind's
    scope is not known, no installation-id annotation unless argocd-cm sets installationID here."""
    meta = dict(obj.get("metadata") or {}) if isinstance(obj.get("metadata"), dict) else {}
    api, kind = str(obj.get("apiVersion") or ""), str(obj.get("kind") or "")
    group = group_of(api)
    # CLUSTER_SCOPED lists the built-in groups' cluster-scoped kinds: their other kinds are namespaced; a kind of another
    # group (a CRD's) may be either.
    scope = False if (group, kind) in CLUSTER_SCOPED else True if group in BUILT_IN_GROUPS else None
    own, dest = str(meta.get("namespace") or ""), str(app.destination.get("namespace") or "")
    if scope is True and not own and dest:
        meta["namespace"] = dest
    elif scope is not True or not own:
        meta.pop("namespace", None)  # cleared (cluster-scoped, or empty), or not counted (scope unknown)
    modified = scope is False and bool(own)
    tracked = tracking.method is not None and ((group, kind) != ("apiextensions.k8s.io", "CustomResourceDefinition")
                                               or modified)
    if tracked and tracking.method != LABEL:
        ns = own if scope is True and own else dest if scope is False or not own else min(own, dest, key=len)
        had: dict[str, Any] = meta["annotations"] if isinstance(meta.get("annotations"), dict) else {}
        notes = {k: v for k, v in had.items() if k != INSTALLATION_ID}
        if tracking.installation_id:
            notes[INSTALLATION_ID] = tracking.installation_id
        notes[TRACKING_ID] = f"{app.name}:{group}/{kind}:{ns}/{meta.get('name') or ''}"
        meta["annotations"] = notes
    if tracked and tracking.method in (LABEL, BOTH):
        labels = dict(meta.get("labels") or {}) if isinstance(meta.get("labels"), dict) else {}
        labels[tracking.label_key] = app.name if tracking.method == LABEL else _truncated_label(app.name)
        meta["labels"] = labels
    return {**obj, "metadata": meta}


def last_applied_bytes(obj: dict[str, Any]) -> int:
    """The bytes of an object's annotations once client-side apply has written its last-applied-configuration
    (kubectl v0.36.1 pkg/util/apply.go 71-105): every other annotation's key and value, the key, and the value: the
    object without that annotation (`annotations: {}` where none is left), in Go's compact JSON and a newline
    (json.Encoder.Encode, apimachinery v0.36.1 pkg/apis/meta/v1/unstructured/helpers.go 404-407), counted by
    policies/kube/gojson.py."""
    meta: dict[str, Any] = obj["metadata"] if isinstance(obj.get("metadata"), dict) else {}
    notes: dict[str, Any] = meta["annotations"] if isinstance(meta.get("annotations"), dict) else {}
    others = {k: v for k, v in notes.items() if k != LAST_APPLIED}
    body = len(go_json({**obj, "metadata": {**meta, "annotations": others}}).encode("utf-8", "surrogatepass")) + 1
    return body + len(LAST_APPLIED) + sum(len(str(k).encode()) + len(str(v).encode()) for k, v in others.items())


def _client_side(app_options: list[str], m: Manifest) -> bool:
    """Whether Argo CD applies `m` client-side: no ServerSideApply=true or Replace=true for it (the object's own
    sync-options annotation wins over the Application's for ServerSideApply)."""
    own = sync_options(annotations_of(m).get(SYNC_OPTIONS))
    if REPLACE in own or REPLACE in app_options:
        return False
    if "ServerSideApply=false" in own:
        return True
    return SERVER_SIDE not in own and SERVER_SIDE not in app_options


def _far_under(obj: dict[str, Any], app: App, tracking: Tracking) -> bool:
    """Whether the object cannot come near the limit, told from Python's JSON of it (C speed) before the exact count
    (about 8 times slower): Go writes no value in more than 6 times Python's bytes (`<` as \\u003c; a float Python
    writes 1e+20 in 21 digits; each byte of a lone surrogate as \\ufffd), the other annotations are counted twice,
    and Argo CD adds its tracking (names, the installation id) in the annotation and in the JSON."""
    body = json.dumps(obj, separators=(",", ":"), ensure_ascii=False, default=str).encode("utf-8", "surrogatepass")
    added = len(app.name) + len(tracking.installation_id or "") + len(tracking.label_key) + 2048
    return 7 * len(body) + 12 * added < ANNOTATIONS_LIMIT // 2


def _too_long(ref: str, path: str, size: int, extra: str = "") -> str:
    return (f"{ref} in {path} takes {size:,} bytes ({size / 1024:.1f} KiB) of annotations once client-side apply writes"
            f" its last-applied-configuration{extra}, past the API server's {ANNOTATIONS_LIMIT:,} (256 KiB): every "
            "sync of it fails (metadata.annotations: Too long)")


def check(ctx: Context) -> Iterator[Problem]:
    apps, _ = ctx.argo.apps, ctx.argo.failed
    seen: set[tuple[str, str, str]] = set()
    tracking = tracking_of(ctx.bundle.manifests)
    for app in apps:
        # A generated Application's policy comes from the shared template: report it once per set.
        base = "spec.syncPolicy" if app.element is None else "spec.template.spec.syncPolicy"
        found: list[tuple[str, str, str, str]] = []
        opts = app.options
        for _, _, t in ctx.argo.targets(app):
            for m in t.manifests:
                if not isinstance(m.obj, dict) or not _client_side(opts, m):
                    continue
                hint = f"add {SERVER_SIDE} to {base}.syncOptions (or to the object's annotation {SYNC_OPTIONS})"
                if _far_under(m.obj, app, tracking):
                    continue
                size = last_applied_bytes(as_applied(m.obj, app, tracking))
                if size > ANNOTATIONS_LIMIT:
                    found.append((f"{base}.syncOptions", _too_long(m.ref, t.path, size), hint, ERROR))
                elif tracking.method is None and size > ANNOTATIONS_LIMIT // 2:
                    # Argo CD v3.5.1's default (util/settings/settings.go 904-914), which the installation may change.
                    tracked = last_applied_bytes(as_applied(m.obj, app, Tracking(ANNOTATION)))
                    if tracked > ANNOTATIONS_LIMIT:
                        found.append((f"{base}.syncOptions", _too_long(
                            m.ref, t.path, tracked, f" and Argo CD its {TRACKING_ID} annotation (tracking method "
                            f"annotation, Argo CD's default: no argocd-cm here sets {METHOD_KEY}; {size:,} bytes "
                            "without it)"), hint, WARNING))
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
