"""The AppProject permits everything its Applications sync: the repository, the destination and every kind.

An AppProject fences its Applications in: `sourceRepos`, `destinations` (cluster and namespace) and the kinds they
may create (`clusterResourceWhitelist` for cluster-scoped kinds, which are denied unless listed;
`namespaceResourceWhitelist`/`...Blacklist` for the rest). An object outside the fence fails the sync of the whole
Application at run time; this rule renders each Application's path and checks every object against its project
when the project is among the same manifests.

Fails: an overlay gains a NetworkPolicy the project does not list; an Application with destination namespace
`default`; a source repository the project does not name.
Passes: the repository's argocd/ folder.
"""
from __future__ import annotations

from ..argocd import CLUSTER_SCOPED, glob_match, permitted, projects
from ..kube import group_of
from ..rulekit import obj_problem

ID = "ARGO008"
NAME = "project-permits"
# Only Applications (written out or generated) are read: other overlays skip the rule.
KINDS = ("Application", "ApplicationSet")


def _dest_ok(entries, dest) -> bool:
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


def check(ctx):
    apps, _ = ctx.argo.apps, ctx.argo.failed
    projs = projects(ctx.bundle.manifests)
    seen: set[tuple[str, str]] = set()
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
        for _, _, t in ctx.argo.targets(app):
            for m in t.manifests:
                group, kind = group_of(m.api_version), m.kind
                if (group, kind) in CLUSTER_SCOPED:
                    ok = permitted(pspec.get("clusterResourceWhitelist"), group, kind) and \
                        not permitted(pspec.get("clusterResourceBlacklist"), group, kind)
                    lst = "clusterResourceWhitelist"
                else:
                    white = pspec.get("namespaceResourceWhitelist")
                    ok = (white is None or permitted(white, group, kind)) and \
                        not permitted(pspec.get("namespaceResourceBlacklist"), group, kind)
                    lst = "namespaceResourceWhitelist"
                key = (proj.name, f"{group}/{kind}")
                if ok or key in seen:
                    continue
                seen.add(key)
                yield obj_problem(ID, proj, f"spec.{lst}", f"{app.label()} syncs {m.ref} ({t.path}), but kind "
                                  f"{group or 'core'}/{kind} is not permitted, so the sync fails",
                                  f"add {{group: \"{group}\", kind: {kind}}} to spec.{lst}")
