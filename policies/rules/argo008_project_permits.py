"""The AppProject permits everything its Applications sync: the repository, the destination, every kind and name.

An AppProject fences its Applications in: `sourceRepos`, `destinations` (cluster and namespace) and the objects they
may create. Argo CD v3.5.1 asks the project about every object of a sync (controller/sync.go:647-671,
validateSyncPermissions, through AppProject.IsGroupKindNamePermitted, pkg/apis/application/v1alpha1/
app_project_types.go:398-418): a namespaced object by group and kind against `namespaceResourceWhitelist`/
`...Blacklist`, and into a namespace among `destinations`; a cluster-scoped object by group, kind and name against
`clusterResourceWhitelist`/`...Blacklist`, which deny what they do not list. An entry's `name` (a glob, like group
and kind, matched as Go's filepath.Match: types.go:3856-3876) restricts a cluster-scoped kind to those names; without
one, every object of the kind is permitted: a merged change could then re-label `kube-system` privileged, take over
the `argocd` namespace or overwrite another team's ClusterTrainingRuntime. An object outside the fence fails the sync
of the whole Application. This rule renders each Application's path and checks every object against its project,
with Argo CD's own matching, when the project is among the same manifests; with `CreateNamespace=true` it checks the
destination namespace Argo CD creates (gitops-engine pkg/sync/sync_context.go:1027-1029, 1161-1212: a sync task
where the namespace does not exist yet, or always with `managedNamespaceMetadata`, controller/sync_namespace.go:14-46).
An overlay validated without argocd/ (`make validate PATHS=<overlay>`, the pre-commit hook, the installed `ddp-check`,
the Argo CD plugin) gets the same check of its objects, at its own objects, against the project of each Application
of its repository's argocd/ that syncs it, which sources are that repository read from that repository's gitops.yaml
(argocd.repoURL); where that argocd/ does not render, or holds an AppProject but no repoURL says which sources are
the repository, an info line says the overlay was not checked against it.

Fails: an overlay gains a NetworkPolicy the project does not list; an Application with destination namespace
`default`; a source repository the project does not name; an overlay that syncs `Namespace kube-system` or
`Namespace argocd`, or a ClusterTrainingRuntime under another name, where the project permits only its own names.
Passes: the repository's argocd/ folder.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

from ..argocd.apps import CLUSTER_SCOPED, App, Target, glob_match, group_kind_name_permitted, projects, resource_in_list
from ..render.files import rel
from ..kube.values import group_of
from ..kube.objects import ERROR, WARNING, Manifest, Problem
from .kit import Context, obj_problem

ID = "ARGO008"
NAME = "project-permits"
# Every unit: an overlay validated without argocd/ is checked against the AppProject that syncs it (engine.synced).
CREATE_NAMESPACE = "CreateNamespace=true"


def _dest_ok(entries: Any, dest: dict[str, Any]) -> bool:
    for e in entries or []:
        if not isinstance(e, dict):
            continue
        if e.get("name") not in (None, ""):
            cluster_ok = glob_match(e["name"], str(dest.get("name") or ""))
        else:
            cluster_ok = glob_match(e.get("server", ""), str(dest.get("server") or ""))
        if cluster_ok and glob_match(e.get("namespace", ""), str(dest.get("namespace") or "")):
            return True
    return False


def _gk(group: str, kind: str) -> str:
    return f"{group or 'core'}/{kind}"


def _refused(proj: Manifest, group: str, kind: str) -> str:
    """Argo CD's own words for the refusal (controller/sync.go:658)."""
    return f'"resource {group}:{kind} is not permitted in project {proj.name}"'


def _why_cluster(pspec: dict[str, Any], proj: Manifest, group: str, kind: str, lst: str) -> str:
    """Why a cluster-scoped object is refused: no entry for its kind, its name not among the entry's names, or a
    blacklist entry."""
    if lst == "clusterResourceBlacklist":
        return f"AppProject {proj.name}'s clusterResourceBlacklist denies it"
    white = [e for e in pspec.get("clusterResourceWhitelist") or [] if isinstance(e, dict)]
    names = [str(e.get("name")) for e in white if resource_in_list([e], group, kind) and e.get("name")]
    if not names:
        return f"AppProject {proj.name}'s clusterResourceWhitelist does not list {_gk(group, kind)}"
    named = ", ".join(names[:-1]) + " or " + names[-1] if len(names) > 1 else names[0]
    return f"AppProject {proj.name}'s clusterResourceWhitelist permits {kind} only named {named}"


def _cluster_problem(app: App, proj: Manifest, pspec: dict[str, Any], t: Target, m: Manifest, group: str, kind: str,
                     lst: str) -> Problem:
    entry = f'{{group: "{group}", kind: {kind}, name: {m.name}}}'
    if lst == "clusterResourceBlacklist":
        hint = f"remove it from {t.path} ({proj.ref} spec.clusterResourceBlacklist denies it)"
    else:
        hint = f"remove it from {t.path}; if the environment must create it, add {entry} to {proj.ref} " \
               "spec.clusterResourceWhitelist"
    # At the rendered object, in its Application's folder (ARGO006's way): the overlay is what the change touched.
    why = _why_cluster(pspec, proj, group, kind, lst)
    return Problem(ID, f"{app.label()} syncs {kind} {m.name} ({t.path}), but {why}, so the sync fails: "
                   f"{_refused(proj, group, kind)}", rel(t.folder), obj=m.ref, field="metadata.name", hint=hint)


def refusal(app: App, proj: Manifest, t: Target, m: Manifest,
            at_object: bool = False) -> tuple[tuple[str, ...] | None, Problem] | None:
    """What the sync of `app` says of one object `m` its source `t` renders, asked of the AppProject `proj` as Argo
    CD asks it (validateSyncPermissions): None where the project permits it, else (the key it is reported once
    under, or None, and the problem). The one check for both ways ARGO008 sees an object: through the Applications
    of a validated argocd/, and in an overlay validated without it (`at_object`: every problem at the overlay's
    object, as the AppProject is not among the objects validated)."""
    pspec = proj.obj.get("spec") or {}
    dest = app.destination
    group, kind = group_of(m.api_version), m.kind
    namespaced = (group, kind) not in CLUSTER_SCOPED
    ok, lst = group_kind_name_permitted(pspec, group, kind, m.name, namespaced)
    if not ok and not namespaced:
        problem = _cluster_problem(app, proj, pspec, t, m, group, kind, lst)
        if at_object:
            problem.source = m.source
        return (proj.name, rel(t.folder), group, kind, m.name), problem
    if not ok:
        entry = f'{{group: "{group}", kind: {kind}}}'
        where = f"{proj.ref} spec.{lst}" if at_object else f"spec.{lst}"
        if lst.endswith("Blacklist"):
            why = f"is denied by spec.{lst}"
            fix = f"remove it from {t.path}, or {entry} from {where}"
        else:
            why, fix = "is not permitted", f"add {entry} to {where}"
        message = f"{app.label()} syncs {m.ref} ({t.path}), but kind {_gk(group, kind)} {why}, so the sync fails"
        problem = (Problem(ID, message, m.source, obj=m.ref, field="kind", hint=fix) if at_object else
                   obj_problem(ID, proj, f"spec.{lst}", message, fix))
        return (proj.name, lst, group, kind), problem
    if namespaced and m.namespace and m.namespace != str(dest.get("namespace") or ""):
        # validateSyncPermissions checks each namespaced object's own namespace (sync.go:660-669).
        if not _dest_ok(pspec.get("destinations"), {**dest, "namespace": m.namespace}):
            return None, Problem(ID, f"{app.label()} syncs {m.ref} ({t.path}) into namespace {m.namespace}, which is "
                                 f"not among AppProject {proj.name}'s destinations, so the sync fails: \"namespace "
                                 f"{m.namespace} is not permitted in project '{proj.name}'\"",
                                 m.source if at_object else rel(t.folder),
                                 obj=m.ref, field="metadata.namespace", hint="remove metadata.namespace, so that the "
                                 "Application's destination namespace applies")
    return None


def _created_namespace(app: App, proj: Manifest, pspec: dict[str, Any], rendered: list[Manifest]) -> Problem | None:
    """The destination namespace Argo CD creates with CreateNamespace=true, when the project does not permit it."""
    ns = str(app.destination.get("namespace") or "")
    if CREATE_NAMESPACE not in app.options or not ns:
        return None
    if any(group_of(m.api_version) == "" and m.kind == "Namespace" and m.name == ns for m in rendered):
        return None  # the rendered Namespace is the task, checked with the other objects
    ok, lst = group_kind_name_permitted(pspec, "", "Namespace", ns, namespaced=False)
    if ok:
        return None
    managed = app.sync_policy.get("managedNamespaceMetadata") is not None
    when = ("Argo CD syncs it on every sync (managedNamespaceMetadata)" if managed else
            "where it does not exist yet, Argo CD creates it")
    why = _why_cluster(pspec, proj, "", "Namespace", lst)
    return obj_problem(ID, app.manifest, app.at("spec.syncPolicy.syncOptions"), f"{app.label()} has "
                       f"{CREATE_NAMESPACE} for namespace {ns}: {when}, but {why}, so the sync fails: "
                       f"{_refused(proj, '', 'Namespace')}", f'add {{group: "", kind: Namespace, name: {ns}}} to '
                       f"{proj.ref} spec.clusterResourceWhitelist", severity=ERROR if managed else WARNING)


def check(ctx: Context) -> Iterator[Problem]:
    apps, _ = ctx.argo.apps, ctx.argo.failed
    projs = projects(ctx.bundle.manifests)
    seen: set[tuple[str, ...]] = set()
    for app in apps:
        proj = projs.get(str(app.spec.get("project") or ""))
        if proj is None:
            continue  # a project defined elsewhere (or Argo CD's `default`) is not checked here
        pspec = proj.obj.get("spec") or {}
        for field, source in app.sources:
            url = str(source.get("repoURL") or "")
            if not any(glob_match(p, url) for p in pspec.get("sourceRepos") or []):
                yield obj_problem(ID, app.manifest, app.at(f"{field}.repoURL"), f"{app.label()}: repository '{url}' "
                                  f"is not in AppProject {proj.name}'s sourceRepos", f"add it to {proj.ref} "
                                  "spec.sourceRepos, or fix the URL")
        dest = app.destination
        if not _dest_ok(pspec.get("destinations"), dest):
            yield obj_problem(ID, app.manifest, app.at("spec.destination"), f"{app.label()}: destination "
                              f"{dest.get('name') or dest.get('server')}/{dest.get('namespace')} is not among "
                              f"AppProject {proj.name}'s destinations", f"add it to {proj.ref} spec.destinations")
        rendered = []
        for _, _, t in ctx.argo.targets(app):
            rendered += t.manifests
            for m in t.manifests:
                found = refusal(app, proj, t, m)
                if found is not None and found[0] not in seen:
                    if found[0] is not None:
                        seen.add(found[0])
                    yield found[1]
        problem = _created_namespace(app, proj, pspec, rendered)
        if problem is not None:
            yield problem
    if ctx.synced is not None and not ctx.synced.projects_checked_elsewhere:
        yield from _overlay(ctx, seen)


def _overlay(ctx: Context, seen: set[tuple[str, ...]]) -> Iterator[Problem]:
    """An overlay validated without its repository's argocd/: the objects it renders (not those a controller makes
    from them), checked against the AppProject of each Application that syncs it (engine.synced)."""
    assert ctx.synced is not None, "check() calls _overlay only when ctx.synced is set"
    rendered = [m for m in ctx.bundle.manifests if m.ref not in ctx.bundle.children]
    for app, path in ctx.synced.apps:
        proj = ctx.synced.projects.get(str(app.spec.get("project") or ""))
        if proj is None:
            continue  # as above: a project defined elsewhere is not checked here
        t = Target(path, Path(ctx.source).resolve(), rendered)
        for m in t.manifests:
            found = refusal(app, proj, t, m, at_object=True)
            if found is not None and found[0] not in seen:
                if found[0] is not None:
                    seen.add(found[0])
                yield found[1]
