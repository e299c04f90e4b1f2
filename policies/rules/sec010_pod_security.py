"""Pods meet the Pod Security level their namespace enforces.

The API server's Pod Security admission (k8s.io/pod-security-admission v0.36.0, on in every cluster since 1.25)
holds every pod to the level its namespace's labels set (`pod-security.kubernetes.io/enforce: baseline` or
`restricted`, with `enforce-version`), over the cluster's defaults, and refuses a pod that breaks it. A controller's
pods are refused one by one while the Job, StatefulSet or PyTorchJob itself is accepted: the world never forms, and
only the controller's events say why. The checks are upstream's, ported with their messages (`policies/kube/
pod_security.py`, proven on upstream's 4,241 fixture pods), and they read each pod as its controller creates it:
the training operator's `init-pytorch` init container, for one, sets no securityContext, so no PyTorchJob with workers
meets `restricted` as its operator is installed by default.

- The level comes from the Namespace object where the manifests hold it (an invalid label is refused with the
  Namespace), or from the labels the Argo CD Application that syncs an overlay sets on its destination namespace
  (`managedNamespaceMetadata` with `CreateNamespace=true`, where the overlay's objects name no namespace); otherwise
  from the cluster's defaults, which an environment declares in `policy.yaml` as the cluster's AdmissionConfiguration
  does (`spec.podSecurity: {defaults: {enforce: baseline}, exemptions: {namespaces: [...]}}`; without it:
  `privileged`, upstream's default, and nothing is refused).
- An error where the input shows the level: the Namespace's label, or the declared default for a Namespace in the
  manifests without one. A warning phrased as the condition where it does not: a namespace not in the manifests (its
  labels may set another level), a violation only in a container the controller adds (its operator may be
  configured with another), a cluster that exempts usernames (the pods' creator may be one).
- A namespace that only warns (`pod-security.kubernetes.io/warn`) gets a warning with the API server's words; audit
  only records. Exempt namespaces and runtime classes are not evaluated, as upstream.

Fails: a PyTorchJob whose worker template meets `restricted`, in a Namespace labelled `enforce: restricted` (the
operator's init container does not); a pod with `hostNetwork: true` where the Namespace enforces `baseline`.
Passes: the repository's own pod templates in a `restricted` namespace; `hostNetwork` where the namespace enforces
`privileged` or is exempt.
"""
from __future__ import annotations

from dataclasses import dataclass, field as dc_field
from typing import Any, Iterator

from ..kube.admission_classes import (PRIORITY_API, RUNTIME_API, admit_priority, admit_runtime_class,
                                      priority_classes)
from ..kube.objects import ERROR, WARNING, Manifest, Problem
from ..kube.pod_security import LABEL_PREFIX, LEVEL_PRIVILEGED, CheckResult, LevelVersion, evaluate, forbidden_detail
from ..kube.pod_security_admission import DEFAULT_CONFIG, NamespacePolicy, namespace_policy
from ..kube.values import listing, mapping
from ..launchers import Workload
from .argo008_project_permits import CREATE_NAMESPACE
from .kit import Context, located, obj_problem

ID = "SEC010"
NAME = "pod-security-admission"
SEVERITY = ERROR
HINT = ("give the pods what the level requires (kubernetes.io/docs/concepts/security/pod-security-standards), or run "
        "them in a namespace whose level they meet")


@dataclass
class PodView:
    """One pod template as its controller creates it, and where a problem about it points."""

    manifest: Manifest
    field: str
    namespace: str
    metadata: dict[str, Any]  # the pod's annotations and labels
    spec: dict[str, Any]
    added: tuple[str, ...] = ()   # containers the controller adds to the template (none where it adds none)
    creator: str = ""             # who creates the pods, for the usernames exemption's condition
    # The template is a runtime's the manifests do not hold, read as its upstream installs it (a TrainJob's default).
    assumed: bool = False

    def without_added(self, spec: dict[str, Any] | None = None) -> dict[str, Any]:
        """The pod spec (`spec`, by default the admitted one) without the containers the controller adds: what the
        template itself is held to."""
        spec = self.spec if spec is None else spec
        return {**spec, **{key: [c for c in listing(spec.get(key))
                                 if not (isinstance(c, dict) and c.get("name") in self.added)]
                           for key in ("initContainers", "containers")}}

    def conditions(self, only_added: bool) -> list[str]:
        """What a finding about these pods holds only under: it is only in a container the controller adds
        (`only_added`, which the caller works out with without_added), or the template is a runtime's the manifests
        do not hold."""
        out = [f"in {', '.join(self.added)}, which {self.creator} adds as its installation does by default"] \
            if self.added and only_added else []
        if self.assumed:
            out.append("with the runtime's pod template as its upstream installs it: the runtime is not in these "
                       "manifests")
        return out
    # How many pods are created from it at once (every copy of the workload), None where the manifests do not say
    # (a kind no module models); and the workload that creates them (None for other pod templates).
    count: int | None = None
    workload: Workload | None = None
    aux: bool = False  # an auxiliary group's pods (a TrainJob's initializers), not the training world's
    # The spec as the controller writes it, before the Priority and RuntimeClass plugins mutate it into `spec`
    # (policies/kube/admission_classes.py), and what those plugins refuse: (plugin, message).
    written: dict[str, Any] = dc_field(default_factory=dict)
    refusals: list[tuple[str, str]] = dc_field(default_factory=list)


def pod_views(ctx: Context) -> list[PodView]:
    """The pods of every modelled workload, one per template, with what the controller adds (a TrainJob's come
    from its runtime), then every other pod template in the manifests, read in its object's namespace; each spec as
    the Priority and RuntimeClass admission plugins leave it where the class it names is in the manifests. Worked
    out once per input: the rules that read them (RES008-RES010, ADM001, ADM002, SEC010) share one list."""
    found: list[PodView] | None = ctx.memo.get("pod_views")
    if found is not None:
        return found
    kept = [m for m in ctx.bundle.manifests if m.ref not in ctx.schema_refused]
    priorities = priority_classes([m.obj for m in kept if m.kind == "PriorityClass" and m.api_version == PRIORITY_API])
    runtimes = {m.name: m.obj for m in kept if m.kind == "RuntimeClass" and m.api_version == RUNTIME_API}
    found = ctx.memo["pod_views"] = []
    for view in _pod_views(ctx):
        view.written = spec = view.spec
        spec, refused = admit_priority(spec, priorities)
        if refused:
            view.refusals.append(("Priority", refused))
        runtime = spec.get("runtimeClassName")
        if not runtime or runtime in runtimes:
            spec, refused = admit_runtime_class(spec, runtimes.get(str(runtime)) if runtime else None)
            if refused:
                view.refusals.append(("RuntimeClass", refused))
        view.spec = spec
        found.append(view)
    return found


def _pod_views(ctx: Context) -> Iterator[PodView]:
    covered: set[int] = set()
    for w in ctx.workloads:
        if w.managed_by is not None or w.unresolved is not None or w.odd_group is not None or not w.groups:
            continue
        covered.update(id(m) for m in (w.manifest, w.runtime) if m is not None)
        seen: dict[tuple[str, tuple[str, ...]], PodView] = {}
        groups = [g for g in w.groups if isinstance(g.count, int) and g.count > 0]  # first_pods' groups
        views: list[PodView] = []
        for pod, group in zip(w.first_pods(), groups):
            count = group.count
            added = tuple(ce.name for ce in pod.init_containers + pod.containers if ce.added)
            key = (pod.spec_field, added)
            if key in seen:
                seen[key].count = (seen[key].count or 0) + count * w.copies
                continue
            spec = {**pod.spec, "initContainers": [ce.container for ce in pod.init_containers],
                    "containers": [ce.container for ce in pod.containers]}
            m, field = located(w, pod.spec_field)
            field = field or pod.spec_field
            seen[key] = found = PodView(m, field, pod.namespace, {"annotations": pod.annotations, "labels": pod.labels},
                                        spec, added,
                                        f"the {w.manifest.kind} controller", assumed=field.startswith("(runtime) "),
                                        count=count * w.copies, workload=w, aux=group.aux)
            views.append(found)
        yield from views
    for site in ctx.sites:
        if id(site.manifest) not in covered:
            plain = site.manifest.kind == "Pod"
            creator = "whoever applies it" if plain else f"the {site.manifest.kind} controller"
            yield PodView(site.manifest, site.field, site.manifest.namespace,
                          {"annotations": site.annotations, "labels": site.labels}, site.spec, (), creator,
                          count=1 if plain else None)


def argo_namespaces(ctx: Context) -> tuple[list[str], dict[str, tuple[dict[str, str], str]]]:
    """The destination namespaces of the Argo CD Applications that sync this overlay (where its objects name none,
    theirs), and the labels an Application with CreateNamespace=true and managedNamespaceMetadata sets on its
    namespace at every sync (argo-cd v3.5.1 controller/sync.go 337-338, sync_namespace.go 14-46)."""
    destinations: list[str] = []
    managed: dict[str, tuple[dict[str, str], str]] = {}
    for app, _ in ctx.synced.apps if ctx.synced is not None else []:
        ns = str(app.destination.get("namespace") or "")
        if not ns:
            continue
        if ns not in destinations:
            destinations.append(ns)
        meta = app.sync_policy.get("managedNamespaceMetadata")
        if CREATE_NAMESPACE in app.options and isinstance(meta, dict):
            labels = {str(k): str(v) for k, v in mapping(meta.get("labels")).items()}
            managed.setdefault(ns, (labels, f"{app.label()}'s managedNamespaceMetadata"))
    return destinations, managed


def check(ctx: Context) -> Iterator[Problem]:
    cfg = ctx.env.pod_security if ctx.env is not None and ctx.env.pod_security is not None else DEFAULT_CONFIG
    namespaces = {m.name: m for m in ctx.of_kind("Namespace") if m.api_version == "v1"}
    destinations, managed = argo_namespaces(ctx)
    policies: dict[str, NamespacePolicy] = {}
    for name, obj in namespaces.items():
        policies[name] = found = namespace_policy(name, namespaces, cfg)
        if found.errors:
            # admission.go ValidateNamespace 248-252: on create, invalid labels are refused.
            yield obj_problem(ID, obj, "metadata.labels", "the API server refuses the Namespace: "
                              + "; ".join(found.errors), f"set {LABEL_PREFIX}<enforce|warn|audit> to privileged, "
                              "baseline or restricted and its -version to latest or v1.<minor>")
    for name in managed:
        policies.setdefault(name, namespace_policy(name, namespaces, cfg, managed))
    if all(p.enforce.level == p.warn.level == LEVEL_PRIVILEGED
           for p in [cfg.defaults] + [ns.policy for ns in policies.values()]):
        return  # every pod's namespace enforces and warns at privileged, where EvaluatePod runs no check
    for view in pod_views(ctx):
        # An object that names no namespace goes where the Application that syncs it sends it.
        for name in (destinations or [""]) if not view.namespace else [view.namespace]:
            ns = policies.get(name) or namespace_policy(name, namespaces, cfg, managed)
            policies.setdefault(name, ns)
            if ns.exempt or view.spec.get("runtimeClassName") in cfg.runtime_classes:
                continue  # admission.go ValidatePod 335, EvaluatePod 458
            refused = evaluate(ns.policy.enforce, view.metadata, view.spec)
            if refused:
                yield _problem(view, ns, ns.policy.enforce, refused, cfg.usernames, "enforce")
                continue
            warned = evaluate(ns.policy.warn, view.metadata, view.spec)  # EvaluatePod 508-524: only if allowed
            if warned:
                yield _problem(view, ns, ns.policy.warn, warned, cfg.usernames, "warn")


def _problem(view: PodView, ns: NamespacePolicy, lv: LevelVersion, results: list[CheckResult],
             usernames: tuple[str, ...], mode: str) -> Problem:
    label = f"{LABEL_PREFIX}{mode}"
    if ns.namespace is not None:
        where = f"namespace '{ns.name}' ({label}: {ns.labels[label]})" if label in ns.labels else \
            f"namespace '{ns.name}' (no {label} label: the cluster's default)"
    elif ns.shows(mode):
        where = f"namespace '{ns.name}' ({label}: {ns.labels[label]}, set by {ns.via})"
    elif ns.name:
        where = f"namespace '{ns.name}' (not in these manifests: the cluster's default)"
    else:
        where = "the namespace they are applied to (none set: the cluster's default)"
    detail = forbidden_detail(results)
    conditions = []
    if not ns.shows(mode):
        conditions.append("unless that namespace's labels set another level")
    conditions += view.conditions(bool(view.added) and not evaluate(lv, view.metadata, view.without_added()))
    if usernames:
        conditions.append(f"unless {view.creator} creates them as one of the cluster's exempt usernames")
    if mode == "enforce":
        says = f"the API server refuses these pods in {where}: violates PodSecurity \"{lv}\": {detail}"
        severity = WARNING if conditions else ERROR
    else:
        says = f"the API server warns on these pods in {where}: would violate PodSecurity \"{lv}\": {detail}"
        severity = WARNING
    if conditions:
        says += f" ({'; '.join(conditions)})"
    hint = HINT + ("; a container the controller adds takes its settings from the controller's installation (its "
                   "init-container template)" if view.added else "")
    found = obj_problem(ID, view.manifest, view.field, says, hint, severity=severity)
    if mode == "enforce" and not conditions:
        found.extra["pods_refused"] = True  # what the input shows: make plan says none of these pods is created
    return found

