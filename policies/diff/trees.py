"""`make diff`'s two sides: a git ref resolved (a local branch, else origin's) and exported as a tree, or the working
tree, each rendered with the same code and the build options its own gitops.yaml sets, as objects keyed by
apiVersion, kind, namespace and name."""
from __future__ import annotations

import io
import os
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

from .. import git
from ..kube.objects import Manifest

Key = tuple[str, str, str, str]  # apiVersion, kind, namespace, name


class DiffError(Exception):
    """A ref that does not exist, a repository that is not one: one line, exit 2."""



def _rev(root: Path, ref: str) -> str:
    proc = git.run(root, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", timeout=60)
    return proc.stdout.strip() if proc.returncode == 0 else ""


def resolve_ref(root: Path, ref: str, what: str) -> tuple[str, str]:
    """(the ref as shown, its commit): a branch this clone has only as origin/<branch> (a clone of another
    branch has no local main) is read there, as `git checkout <branch>` would, and shown as origin/<branch>."""
    if ref and not _rev(root, ref) and "/" not in ref and _rev(root, f"origin/{ref}"):
        ref = f"origin/{ref}"
    return ref, resolve(root, ref, what)


def resolve(root: Path, ref: str, what: str) -> str:
    if not ref:
        raise DiffError(f"{what} is empty: give a git ref, e.g. {what}=main")
    sha = _rev(root, ref)
    if not sha:
        if git.run(root, "rev-parse", "--git-dir").returncode != 0:
            raise DiffError(f"{root} is not a git repository, so {what}={ref} cannot be read")
        raise DiffError(f"{what}={ref} is not a commit in this repository (try `git fetch`, or a branch, tag or sha)")
    return sha


def export(root: Path, sha: str, dest: Path) -> Path:
    """The tree of a commit, unpacked under dest (git archive: no worktree, nothing in .git changes)."""
    data = git.output(root, "archive", "--format=tar", sha, binary=True)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(dest, filter="data")
    return dest




@dataclass
class Side:
    label: str
    root: Path
    objects: dict[str, dict[Key, Manifest]] = field(default_factory=dict)  # overlay -> key -> object
    errors: dict[str, str] = field(default_factory=dict)
    apps: dict[str, str] = field(default_factory=dict)  # overlay path -> Application name
    warnings: list[str] = field(default_factory=list)  # about the side as a whole (its gitops.yaml), one line each


def build_options(root: Path, label: str = "") -> tuple[list[str], str | None]:
    """This side's gitops.yaml build options (a pull request may change them), and None; where the side has no
    gitops.yaml or one that cannot be read, no options and one line saying so, naming the file and the ref (`label`),
    so that a difference the missing options cause is not shown as the change's own."""
    from ..render import gitops

    path = root / "gitops.yaml"
    at = f"gitops.yaml at {label}" if label else str(path)
    if not path.is_file():
        return [], f"{at} does not exist: this side was rendered without kustomize build options"
    try:
        return gitops.build_options(path), None
    except gitops.ConfigError as exc:
        why = str(exc).removeprefix(f"{path}: ").removeprefix("cannot read: ")
        return [], f"{at} cannot be read ({why}): this side was rendered without kustomize build options"


def folders(root: Path) -> list[str]:
    from ..render.kustomization import find_overlays

    found = [str(p.relative_to(root)) for p in find_overlays(root / "overlays")] if (root / "overlays").is_dir() else []
    if (root / "argocd" / "kustomization.yaml").is_file():
        found.append("argocd")
    return sorted(found)


def render_side(side: Side) -> Side:
    """Render every folder of one side through the one render (and its cache), with that side's build options."""
    from ..render.render import render_all

    todo = folders(side.root)
    options, warning = build_options(side.root, side.label)
    if warning:
        side.warnings.append(warning)
    for rel, r in zip(todo, render_all([side.root / rel for rel in todo], options=options)):
        if r.error is not None:
            side.errors[rel] = r.error
            continue
        manifests = [Manifest(m.obj, rel, m.index) for m in r.manifests]
        if rel == "argocd":
            manifests = manifests + generated_apps(manifests, side)
        side.objects[rel] = {key(m): m for m in manifests}
    return side


def generated_apps(manifests: list[Manifest], side: Side) -> list[Manifest]:
    """The Applications the ApplicationSets generate, diffed like objects (a changed launcher shows here)."""
    from ..argocd.apps import applications

    apps, _ = applications(manifests)
    out = []
    for a in apps:
        if a.element is None:
            path = (a.spec.get("source") or {}).get("path")
        else:
            path = (a.spec.get("source") or {}).get("path")
            out.append(Manifest(a.obj, f"{a.manifest.ref} {a.field}"))
        if isinstance(path, str):
            side.apps[path.strip("/")] = a.name
    return out


def key(m: Manifest) -> Key:
    return (m.api_version, m.kind, m.namespace, m.name)


def ref(k: Key) -> str:
    return f"{k[1]}/{k[2]}/{k[3]}" if k[2] else f"{k[1]}/{k[3]}"
