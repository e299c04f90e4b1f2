"""An overlay validated on its own (`make validate PATHS=<overlay>`, the pre-commit hook `ddp-check changed`) is
checked against the AppProject of the Application that syncs it (ARGO008), as argocd/ validated with it would: a
cluster-scoped object the project refuses fails before Argo CD's sync does. Everything is read from the repository
(its ApplicationSet, its project), so a fork after `make init` is tested on its own environments."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, copy_repository
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
    return copy_repository(tmp_path_factory.mktemp("appproject-overlay") / "repo")


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


# ---------------------------------------------------------------- another repository's manifests (issue 32 item 3)
# Every entry point holds an overlay to the AppProject of the repository it lies in, read with that repository's own
# gitops.yaml (its argocd.repoURL says which Applications' sources are that repository): `make validate PATHS=` from
# this checkout on another repository, the installed `ddp-check` (and its pre-commit hook) and the Argo CD plugin.

OTHER_URL = "https://git.example.org/another-team/training-gitops.git"


def _another(tmp_path: Path, url: str | None = OTHER_URL) -> Path:
    """A copy of this repository declared at another URL (gitops.yaml and argocd/ rewritten, as make init does), or
    with no argocd.repoURL at all (url None)."""
    from policies.render import gitops

    root = copy_repository(tmp_path / "theirs")
    ours = gitops.load(REPO / "gitops.yaml")["argocd"]["repoURL"]
    for f in [root / "gitops.yaml", *(root / "argocd").rglob("*.yaml")]:
        text = f.read_text()
        if url is None and f.name == "gitops.yaml":
            text = "\n".join(line for line in text.splitlines() if not line.strip().startswith("repoURL:")) + "\n"
        f.write_text(text.replace(ours, url or ours))
    return root


def _validate_from_here(root: Path, overlay: str) -> subprocess.CompletedProcess[str]:
    """This checkout's command line on another repository's overlay (make validate PATHS=<their overlay>)."""
    return subprocess.run([sys.executable, "-m", "policies.cli", "validate", str(root / overlay)], cwd=REPO,
                          capture_output=True, text=True, timeout=300)


def test_another_repositorys_overlay_is_held_to_its_own_appproject(tmp_path, target):
    overlay, app, spec = target
    root = _another(tmp_path)
    role, namespace = refused_objects(spec)
    add_refused(root, overlay, role, namespace)
    proc = _validate_from_here(root, overlay)
    lines = argo008(proc)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    for ref in (f"ClusterRole/{role}", f"Namespace/{namespace}"):
        mine = [x for x in lines if f" {ref} metadata.name: " in x]
        assert len(mine) == 1 and mine[0].startswith("error ARGO008 ") and f"Application {app} " in mine[0], lines


def test_the_installed_command_holds_an_overlay_to_its_repositorys_appproject(tmp_path, target, monkeypatch,
                                                                             capsys):
    """Installed (no checkout around the code: paths.CHECKOUT None, gitops.yaml the package's own), ddp-check and
    the pre-commit hook skipped the AppProject: the user's repository's gitops.yaml now says which sources are it."""
    from policies import cli
    from policies.report import engine
    from policies.render import paths

    overlay, app, spec = target
    root = _another(tmp_path)
    role, namespace = refused_objects(spec)
    add_refused(root, overlay, role, namespace)
    monkeypatch.setattr(paths, "CHECKOUT", None)
    monkeypatch.setattr(engine, "CHECKOUT", None)
    monkeypatch.chdir(root)
    rc = cli.main(["validate", overlay])
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if " ARGO008 " in line]
    assert rc == 1, out
    assert len(lines) == 2 and all(x.startswith(f"error ARGO008 {overlay}: ") and f"Application {app} " in x
                                   for x in lines), lines


def test_the_plugin_holds_another_repositorys_overlay_to_its_appproject(tmp_path, target):
    overlay, app, spec = target
    root = _another(tmp_path)
    role, namespace = refused_objects(spec)
    add_refused(root, overlay, role, namespace)
    run_env = {k: v for k, v in os.environ.items() if not k.startswith(("ARGOCD_", "DDP_"))}
    run_env.update(PYTHONPATH=str(REPO), ARGOCD_APP_SOURCE_PATH=overlay)
    gen = subprocess.run([sys.executable, "-m", "policies", "cmp-generate"], cwd=root / overlay, env=run_env,
                         capture_output=True, text=True, timeout=300)
    assert gen.returncode == 1 and gen.stdout == "", gen.stderr[-3000:]
    lines = [line for line in gen.stderr.splitlines() if line.startswith("error ARGO008 ")]
    assert len(lines) == 2 and all(f"Application {app} " in x for x in lines), gen.stderr[-3000:]


def test_a_repository_that_names_no_url_says_the_overlay_was_not_checked(tmp_path, target):
    """Its argocd/ holds an AppProject, but no gitops.yaml argocd.repoURL says which Applications' sources are the
    repository: one info line says so instead of passing in silence."""
    overlay, _, _ = target
    root = _another(tmp_path, url=None)
    proc = _validate_from_here(root, overlay)
    (line,) = [x for x in proc.stdout.splitlines() if " ARGO008 " in x]
    assert line.startswith("info ARGO008 ") and "not checked against the AppProjects of " in line, line
    assert "declares no argocd.repoURL" in line and "(fix: give the repository a gitops.yaml with argocd.repoURL" \
        in line, line
    assert proc.returncode == 0, proc.stdout


def test_an_argo_cd_folder_that_does_not_render_says_the_overlay_was_not_checked(tmp_path, target):
    overlay, _, _ = target
    root = _another(tmp_path)
    kfile = root / "argocd" / "kustomization.yaml"
    kfile.write_text(kfile.read_text() + "\nresources-typo: [x]\n")
    proc = _validate_from_here(root, overlay)
    (line,) = [x for x in proc.stdout.splitlines() if " ARGO008 " in x]
    assert line.startswith("info ARGO008 ") and ": it does not render (" in line and "(fix: make validate PATHS=" \
        in line, line
