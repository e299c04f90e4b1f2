"""Training environments stay out of the cluster's own namespaces and Argo CD's.

The `kube-*` namespaces (kube-system, kube-public, kube-node-lease) hold the cluster's components, and Argo CD's
own namespace (the one its Applications live in) holds Argo CD and its repository credentials. An Application
that syncs a training environment into one, or an AppProject that lets it (a destination, or a Namespace its
`clusterResourceWhitelist` permits by name), lets every merged change write beside them: a ConfigMap that replaces
one kube-proxy or CoreDNS reads, a Service or NetworkPolicy in Argo CD's namespace. The training itself runs
there, so this is a policy warning, which an environment raises to an error in its policy.yaml; `make init
NAMESPACES=...` and `make new-env NAMESPACE=...` refuse such a namespace outright (policies/argocd/identity.py).

Fails: an ApplicationSet element with namespace kube-system; an AppProject destination `argocd`.
Passes: the repository's argocd/ folder (one ddp-<env> namespace per environment).
"""
from __future__ import annotations

from typing import Any, Callable, Iterator

from ..argocd import gomatch
from ..argocd.apps import glob_match, projects
from ..argocd.identity import ARGOCD_NAMESPACE, system_namespace
from ..kube.objects import WARNING, Problem
from .kit import Context, obj_problem

ID = "ARGO011"
NAME = "system-namespace"
SEVERITY = WARNING
# Applications (written out or generated) and AppProjects are read: other inputs skip the rule.
KINDS = ("Application", "ApplicationSet", "AppProject")
HINT = "give the environment a namespace of its own (ddp-<env>; `make init NAMESPACES=<env>=<namespace>`)"


def _reaches(pattern: object, home: str, matches: Callable[[str, str], bool]) -> str | None:
    """Why a project's namespace pattern reaches a system namespace: the name itself, or a glob (matched as Argo CD
    matches that field) or a missing name that covers kube-system or Argo CD's namespace."""
    if pattern in (None, ""):
        return "every namespace, kube-system and Argo CD's own among them"
    if not isinstance(pattern, str):
        return None
    why = system_namespace(pattern, home)
    if why or not any(ch in pattern for ch in "*?[!\\"):
        return why
    hit = next((ns for ns in ("kube-system", home) if matches(pattern, ns)), None)
    return f"a pattern that matches '{hit}'" if hit else None


def check(ctx: Context) -> Iterator[Problem]:
    for app in ctx.argo.apps:
        ns = app.destination.get("namespace")
        home = app.manifest.namespace or ARGOCD_NAMESPACE
        why = system_namespace(ns, home) if isinstance(ns, str) else None
        if why:
            yield obj_problem(ID, app.manifest, app.at("spec.destination.namespace"), f"{app.label()} syncs into "
                              f"'{ns}', {why}: every merged change can write there", HINT)
    for project in projects(ctx.bundle.manifests).values():
        raw_spec = project.obj.get("spec")
        spec: dict[str, Any] = raw_spec if isinstance(raw_spec, dict) else {}
        home = project.namespace or ARGOCD_NAMESPACE
        for i, dest in enumerate(spec.get("destinations") or []):
            ns = dest.get("namespace") if isinstance(dest, dict) else None
            why = _reaches(ns, home, glob_match) if isinstance(dest, dict) and ns is not None else None
            if why:
                yield obj_problem(ID, project, f"spec.destinations[{i}].namespace", f"AppProject {project.name} "
                                  f"lets its Applications sync into '{ns}', {why}", HINT)
        for i, entry in enumerate(spec.get("clusterResourceWhitelist") or []):
            if not isinstance(entry, dict) or entry.get("kind") != "Namespace" or entry.get("group", "") != "":
                continue
            name = entry.get("name")
            why = _reaches(name, home, gomatch.match)  # isNamedResourceInList: Go's filepath.Match
            if why:
                yield obj_problem(ID, project, f"spec.clusterResourceWhitelist[{i}]" + (".name" if name else ""),
                                  f"AppProject {project.name} permits Namespace '{name or ''}', {why}", HINT)
