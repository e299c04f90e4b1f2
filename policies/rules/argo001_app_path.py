"""Every Argo CD Application path exists in this repository and renders to at least one object.

An Application (written out, or made by an ApplicationSet's list generator) whose `source.path` names a folder
that is missing, has no kustomization, fails to build or builds nothing cannot sync; with `prune: true` an empty
render would even delete everything the Application synced before. Paths are checked for sources whose `repoURL`
is this repository (`argocd.repoURL` in gitops.yaml); a source in another repository is a warning, since nothing
here can check it. The folder is built with the same kustomize and options as Argo CD (gitops.yaml).

Fails: an ApplicationSet element `{env: gke-t4, launcher: statefulsett}` (no folder `overlays/gke-t4/statefulsett`);
a path whose kustomization names a missing patch.
Passes: `path: overlays/gke-t4/indexed-job`, which renders.
"""
from __future__ import annotations

from typing import Iterator

from ..argocd.apps import repo_url, same_repo
from ..render.files import rel
from ..kube.objects import WARNING, Problem
from .kit import Context, obj_problem

ID = "ARGO001"
NAME = "app-path-renders"
# Only Applications (written out or generated) are read: other overlays skip the rule.
KINDS = ("Application", "ApplicationSet")


def check(ctx: Context) -> Iterator[Problem]:
    apps, _ = ctx.argo.apps, ctx.argo.failed
    for app in apps:
        for field, source in app.sources:
            url = source.get("repoURL")
            if source.get("path") is not None and not same_repo(url):
                yield obj_problem(ID, app.manifest, app.at(f"{field}.repoURL"), f"{app.label()}: repository '{url}' "
                                  f"is not this one ({repo_url()}, gitops.yaml argocd.repoURL), so the ARGO rules "
                                  "cannot check what its path renders", "point it at this repository, or set "
                                  "argocd.repoURL in gitops.yaml to the URL Argo CD clones", severity=WARNING)
        for field, source, t in ctx.argo.targets(app):
            where = app.at(f"{field}.path")
            if t.error:
                yield obj_problem(ID, app.manifest, where, f"{app.label()}: path '{t.path}' {t.error}",
                                  f"point it at an overlay folder that `make validate PATHS={t.path}` renders")
            elif not t.manifests:
                yield obj_problem(ID, app.manifest, where, f"{app.label()}: path '{t.path}' renders no objects "
                                  f"({rel(t.folder)}); with prune it would delete everything it synced",
                                  "point it at an overlay that renders the environment's objects")
