"""Applications go where gitops.yaml's identity says, and a real environment syncs from your repository.

gitops.yaml declares who the repository is (`argocd.repoURL`, and per environment the Argo CD cluster and namespace
in `identity.environments`); the repository's own `argocd/` repeats it in the ApplicationSet's elements. Where the
two disagree, Argo CD syncs an environment to a cluster or namespace nobody declared (and the AppProject, written
from the identity, refuses it): an error. Checked for the Applications of the repository's own `argocd/` folder.

Anywhere, an Application that syncs an environment declaring itself real (`real: true` in its
`components/<env>/policy.yaml`) from the template's example repository (`https://github.com/example/...`) clones a
repository that is not yours: an error until `make init REPO_URL=...` has run.

Fails: an Application syncing an environment with `real: true` from `https://github.com/example/ddp-k8s-gitops.git`;
an ApplicationSet element whose `cluster` differs from the environment's in gitops.yaml.
Passes: the repository's argocd/ folder; a real environment synced from the fork's own repository.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

from ..argocd.apps import App
from ..render.paths import repo_root
from .environment import real_environment
from ..argocd.identity import IdentityError, is_example_repo, load, same_url
from ..kube.objects import Problem
from .kit import Context, obj_problem

ID = "ARGO010"
NAME = "identity"
# Only Applications (written out or generated) are read: other overlays skip the rule.
KINDS = ("Application", "ApplicationSet")
INIT_HINT = "run `make init REPO_URL=<the repository Argo CD clones> IMAGE=<your image>` (docs/deploy.md)"


def _env_of(app: App) -> str | None:
    """The environment an Application syncs: its generator element's `env`, else `overlays/<env>/...` in its path."""
    if app.element is not None and isinstance(app.element.get("env"), str):
        env: str = app.element["env"]
        return env
    for _, source in app.sources:
        parts = str(source.get("path") or "").strip("/").split("/")
        if len(parts) >= 2 and parts[0] == "overlays":
            return parts[1]
    return None


def check(ctx: Context) -> Iterator[Problem]:
    start = ctx.source if ctx.source not in ("<stdin>", "") else "."
    root = repo_root(start)
    for app in ctx.argo.apps:
        for field, source in app.sources:
            path = source.get("path")
            if not is_example_repo(source.get("repoURL")) or not isinstance(path, str):
                continue
            env = real_environment(root / (path.strip().strip("/") or "."))
            if env:
                yield obj_problem(ID, app.manifest, app.at(f"{field}.repoURL"), f"{app.label()} syncs environment "
                                  f"{env}, which declares itself real, from the template's example repository "
                                  f"{source.get('repoURL')}", INIT_HINT)
    if Path(start).resolve() != (root / "argocd").resolve() or not ctx.argo.apps:
        return
    try:
        ident = load(root)
    except IdentityError as exc:
        app = ctx.argo.apps[0]
        yield obj_problem(ID, app.manifest, app.at("spec"), f"cannot check the Applications against the "
                          f"identity: {exc}", "fix gitops.yaml's identity section (docs/deploy.md)")
        return
    for app in ctx.argo.apps:
        env = _env_of(app)
        if env is None:
            continue
        place = ident.environments.get(env)
        if place is None:
            yield obj_problem(ID, app.manifest, app.at("spec.destination"), f"{app.label()} syncs environment "
                              f"{env}, which gitops.yaml's identity.environments does not declare",
                              f"add `{env}: {{cluster: <Argo CD cluster>, namespace: <namespace>}}` there "
                              "(`make new-env` writes both)")
            continue
        dest = app.destination
        if dest.get("name") != place.cluster or dest.get("namespace") != place.namespace:
            yield obj_problem(ID, app.manifest, app.at("spec.destination"), f"{app.label()} syncs {env} to cluster "
                              f"'{dest.get('name') or dest.get('server')}', namespace '{dest.get('namespace')}', but "
                              f"gitops.yaml's identity says cluster '{place.cluster}', namespace '{place.namespace}'",
                              "make them agree: `make init CLUSTERS=... NAMESPACES=...` rewrites both")
        for field, source in app.sources:
            if not same_url(source.get("repoURL"), ident.repo_url):
                yield obj_problem(ID, app.manifest, app.at(f"{field}.repoURL"), f"{app.label()} clones "
                                  f"{source.get('repoURL')}, but gitops.yaml's argocd.repoURL is {ident.repo_url}",
                                  "make them agree: `make init REPO_URL=...` rewrites both")
