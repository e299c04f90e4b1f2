"""An overlay validated on its own (`make validate PATHS=<overlay>`, the pre-commit hook `ddp-check changed`) is
checked against the AppProject of the Application that syncs it (ARGO008), as argocd/ validated with it would: a
cluster-scoped object the project refuses fails before Argo CD's sync does. Everything is read from the repository
(its ApplicationSet, its project), so a fork after `make init` is tested on its own environments."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO
from policies.argocd import apps as argocd
from policies.render.kustomization import find_overlays
from policies.render.render import render

RBAC = "rbac.authorization.k8s.io"
EXTRA = "project-refuses.yaml"


def cli(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The checkout's command line, run in the copy (its gitops.yaml says the same repository as the checkout's)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    return subprocess.run([sys.executable, "-m", "policies.cli", *args], cwd=root, env=env, capture_output=True,
                          text=True, timeout=300)


def synced(root: Path) -> list[tuple[str, str, dict]]:
    """(overlay path, Application name, its AppProject's spec) for each Application of the repository's argocd/
    whose project argocd/ declares and whose source is an overlay of this repository."""
    rendered = render(root / "argocd")
    assert rendered.error is None, rendered.error
    apps, _ = argocd.applications(rendered.manifests)
    projects = argocd.projects(rendered.manifests)
    out = []
    for app in apps:
        proj = projects.get(str(app.spec.get("project") or ""))
        for _, source in app.sources:
            path = source.get("path")
            if proj is not None and argocd.same_repo(source.get("repoURL")) and isinstance(path, str) \
                    and (root / path / "kustomization.yaml").is_file():
                out.append((path.strip("/"), app.name, proj.obj.get("spec") or {}))
    return out


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("appproject-overlay") / "repo"
    for d in ("base", "components", "overlays", "argocd"):
        shutil.copytree(REPO / d, root / d)
    shutil.copy(REPO / "gitops.yaml", root / "gitops.yaml")
    return root


@pytest.fixture(scope="module")
def target(scratch) -> tuple[str, str, dict]:
    found = synced(scratch)
    assert found, "argocd/ syncs no overlay of this repository under a project it declares"
    return found[0]


def refused_objects(spec: dict) -> tuple[str, str]:
    """A ClusterRole and a Namespace the project does not permit (preconditions read from the project itself)."""
    role, namespace = "ddp-overlay-reader", "kube-system"
    assert not argocd.group_kind_name_permitted(spec, RBAC, "ClusterRole", role, namespaced=False)[0]
    assert not argocd.group_kind_name_permitted(spec, "", "Namespace", namespace, namespaced=False)[0]
    return role, namespace


def add_refused(root: Path, overlay: str, role: str, namespace: str) -> Path:
    """Add a ClusterRole and `Namespace <namespace>` to the overlay (a file of its own, listed in its resources)."""
    folder = root / overlay
    (folder / EXTRA).write_text(
        f"apiVersion: {RBAC}/v1\nkind: ClusterRole\nmetadata:\n  name: {role}\nrules:\n"
        "  - apiGroups: [\"\"]\n    resources: [pods]\n    verbs: [get]\n"
        f"---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: {namespace}\n")
    kfile = folder / "kustomization.yaml"
    text = kfile.read_text()
    assert "\nresources:\n" in text, f"{overlay}: expected a resources list to add {EXTRA} to"
    kfile.write_text(text.replace("\nresources:\n", f"\nresources:\n  - {EXTRA}\n", 1))
    return folder / EXTRA


def argo008(proc: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in proc.stdout.splitlines() if " ARGO008 " in line]


def test_the_untouched_overlay_validates_clean(scratch, target):
    overlay, _, _ = target
    proc = cli(scratch, "validate", overlay)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not argo008(proc)


@pytest.fixture(scope="module")
def broken(scratch, target):
    overlay, app, spec = target
    kfile = scratch / overlay / "kustomization.yaml"
    before = kfile.read_text()
    role, namespace = refused_objects(spec)
    extra = add_refused(scratch, overlay, role, namespace)
    yield overlay, app, role, namespace, extra
    extra.unlink()
    kfile.write_text(before)


def assert_refused(proc, overlay, app, role, namespace):
    lines = argo008(proc)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    for ref, line in ((f"ClusterRole/{role}", 4), (f"Namespace/{namespace}", 13)):
        mine = [x for x in lines if f" {ref} metadata.name: " in x]
        assert len(mine) == 1, lines
        assert mine[0].startswith(f"error ARGO008 {overlay}: ") and f"Application {app} " in mine[0], mine[0]
        assert "so the sync fails" in mine[0] and mine[0].endswith(f"[{overlay}/{EXTRA}:{line}]"), mine[0]


def test_an_overlay_validated_alone_is_held_to_its_appproject(scratch, broken):
    overlay, app, role, namespace, _ = broken
    assert_refused(cli(scratch, "validate", overlay), overlay, app, role, namespace)


def test_the_pre_commit_hook_on_a_file_of_the_overlay_says_the_same(scratch, broken):
    overlay, app, role, namespace, extra = broken
    proc = cli(scratch, "changed", str(extra.relative_to(scratch)))
    assert_refused(proc, overlay, app, role, namespace)


def test_with_argocd_in_the_same_run_each_refusal_is_said_once(scratch, broken):
    """argocd/ validated too: ARGO008 checks the overlay there (as make validate always has), not twice."""
    overlay, _, role, namespace, _ = broken
    proc = cli(scratch, "validate", overlay, "argocd")
    assert proc.returncode == 1
    for ref in (f"ClusterRole/{role}", f"Namespace/{namespace}"):
        assert len([x for x in argo008(proc) if f" {ref} " in x]) == 1, argo008(proc)


def test_an_overlay_no_application_syncs_is_not_held_to_a_project(scratch, target):
    """Nothing syncs it, so no project refuses it: nothing is said (as ARGO008 says nothing of a project it cannot
    read)."""
    _, _, spec = target
    synced_paths = {path for path, _, _ in synced(scratch)}
    free = [str(f.relative_to(scratch)) for f in find_overlays(scratch / "overlays")
            if str(f.relative_to(scratch)) not in synced_paths]
    if not free:
        pytest.skip("every overlay of this repository is synced by an Application")
    overlay = free[0]
    kfile = scratch / overlay / "kustomization.yaml"
    before = kfile.read_text()
    role, namespace = refused_objects(spec)
    extra = add_refused(scratch, overlay, role, namespace)
    try:
        kinds = {m.kind for m in render(scratch / overlay).manifests}
        proc = cli(scratch, "validate", overlay)
    finally:
        extra.unlink()
        kfile.write_text(before)
    assert {"ClusterRole", "Namespace"} <= kinds
    assert not argo008(proc), proc.stdout
