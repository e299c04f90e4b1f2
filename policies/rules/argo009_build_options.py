"""Argo CD builds with the options validation used: argocd-cm's kustomize build options equal gitops.yaml's, all allowed.

Argo CD passes argocd-cm's `kustomize.buildOptions` (and `kustomize.buildOptions.<version>`), split on white space,
to every `kustomize build` it runs (argo-cd v3.5.1 util/settings/settings.go:1274-1298, util/kustomize/kustomize.go
412-413). Options other than gitops.yaml's mean Argo CD deploys something other than what `make validate` checked;
`--enable-helm`, `--helm-command`, `--enable-alpha-plugins`, `--enable-exec` make every render run a program the
change names, `--load-restrictor=LoadRestrictionsNone` puts any file of the repo server into a rendered object.
Only the allow-list in policies/render/offline.py may appear, in both places (docs/security.md).

Fails: argocd-cm `kustomize.buildOptions: --enable-helm`; options that differ from gitops.yaml's.
Passes: the repository's argocd/argocd-cm.yaml (the same, empty, options as gitops.yaml).
"""
from __future__ import annotations

from typing import Any, Iterator

from ..render import gitops
from ..render.offline import check_build_options
from ..kube.objects import Problem
from .kit import Context, obj_problem

ID = "ARGO009"
NAME = "argocd-build-options"
KINDS = ("ConfigMap",)
KEY = "kustomize.buildOptions"


def check(ctx: Context) -> Iterator[Problem]:
    try:
        wanted = gitops.build_options()
    except gitops.ConfigError:
        wanted = None  # every render already says what is wrong with gitops.yaml
    for m in ctx.bundle.manifests:
        if m.kind != "ConfigMap" or m.api_version != "v1" or m.name != "argocd-cm":
            continue
        data: Any = m.obj.get("data") if isinstance(m.obj.get("data"), dict) else {}
        for key, value in sorted(data.items(), key=lambda kv: str(kv[0])):
            if not (key == KEY or str(key).startswith(KEY + ".")):
                continue
            options = str(value or "").split()  # Go's strings.Fields
            bad = check_build_options(options)
            if bad:
                yield obj_problem(ID, m, f"data.{key}", f"Argo CD would build with '{value}': {bad}",
                                  "remove it: render what needs Helm or plugins once and commit the output")
            elif wanted is not None and options != wanted:
                yield obj_problem(ID, m, f"data.{key}", f"Argo CD would build with '{value}', gitops.yaml's "
                                  f"kustomize.buildOptions are '{' '.join(wanted)}': what syncs is not what "
                                  "make validate rendered", "keep argocd-cm's kustomize.buildOptions equal to "
                                  "gitops.yaml's (the items joined by spaces)")
