"""One identity (gitops.yaml): the repository URL, the image repository and each environment's Argo CD cluster and
namespace are declared once; every repetition in argocd/, base/, components/ and the Makefile agrees with it, and
`make validate` (ARGO010) says where the repository's argocd/ does not."""
from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from conftest import REPO, copy_repository
from policies.argocd import identity


def test_the_repository_agrees_with_its_identity():
    ident = identity.load(REPO)
    assert identity.disagreements(REPO, ident) == []
    assert sorted(ident.environments) == identity.environments_in_tree(REPO)


def test_python_m_policies_identity_prints_and_checks():
    proc = subprocess.run([sys.executable, "-m", "policies.argocd.identity"], cwd=REPO, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    ident = identity.load(REPO)
    assert proc.stdout.splitlines()[:2] == [f"repository: {ident.repo_url}", f"image: {ident.image}"]
    image = subprocess.run([sys.executable, "-m", "policies.argocd.identity", "image"], cwd=REPO, capture_output=True,
                           text=True, timeout=60)
    assert image.stdout == ident.image + "\n"


@pytest.fixture()
def copy(tmp_path):
    return copy_repository(tmp_path / "repo", ("gitops.yaml", "Makefile"))


def test_each_repetition_that_disagrees_is_one_line(copy):
    ident = identity.load(copy)
    env = sorted(ident.environments)[0]
    place = ident.environments[env]
    appset = copy / "argocd/applicationset.yaml"
    appset.write_text(appset.read_text().replace(f"cluster: {place.cluster}\n", "cluster: elsewhere\n", 1))
    make = copy / "Makefile"
    make.write_text(make.read_text().replace(f"?= {ident.image}", "?= registry.acme.io/other"))
    (copy / "overlays" / "stray" / "indexed-job").mkdir(parents=True)
    shutil.copy(copy / "overlays" / env / "indexed-job" / "kustomization.yaml",
                copy / "overlays" / "stray" / "indexed-job" / "kustomization.yaml")
    found = identity.disagreements(copy)
    assert any(line.startswith("argocd/applicationset.yaml:") and "'elsewhere'" in line for line in found), found
    assert any(line.startswith("Makefile:") and "registry.acme.io/other" in line for line in found), found
    assert any("environment stray (overlays/stray) is not declared" in line for line in found), found
    assert all("\n" not in line for line in found)


def test_make_validate_refuses_an_argocd_folder_that_disagrees(copy):
    """ARGO010 on the repository's own argocd/: an element sent to another cluster than gitops.yaml says."""
    ident = identity.load(copy)
    env = sorted(ident.environments)[-1]
    place = ident.environments[env]
    appset = copy / "argocd/applicationset.yaml"
    text = appset.read_text()
    assert f"namespace: {place.namespace}\n" in text
    appset.write_text(text.replace(f"namespace: {place.namespace}\n", "namespace: somewhere-else\n", 1))
    shutil.copytree(REPO / "policies", copy / "policies", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO / "trainer", copy / "trainer", ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "schemas").symlink_to(REPO / "schemas")
    proc = subprocess.run([sys.executable, "-m", "policies.cli", "validate", "argocd"], cwd=copy,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (line,) = [ln for ln in proc.stdout.splitlines() if ln.startswith("error ARGO010")]
    assert f"syncs {env} to cluster '{place.cluster}', namespace 'somewhere-else'" in line
    assert f"gitops.yaml's identity says cluster '{place.cluster}', namespace '{place.namespace}'" in line
    assert "[argocd/applicationset.yaml:" in line


@pytest.mark.parametrize("text, message", [
    ("argocd: {repoURL: u}\n", "expected an `identity` mapping"),
    ("argocd: {repoURL: u}\nidentity: {image: 'Bad:tag', environments: {}}\n", "identity.image is 'Bad:tag'"),
    ("argocd: {repoURL: u}\nidentity: {image: a/b, environments: {e: {cluster: c}}}\n",
     "identity.environments.e must be"),
    ("argocd: {repoURL: u}\nidentity: {image: a/b, environments: {e: {cluster: c, namespace: Bad_NS}}}\n",
     "identity.environments.e.namespace is 'Bad_NS'"),
    ("identity: {image: a/b, environments: {}}\n", "argocd.repoURL must be"),
])
def test_a_bad_identity_is_one_line(tmp_path, text, message):
    (tmp_path / "gitops.yaml").write_text(text)
    with pytest.raises(identity.IdentityError) as exc:
        identity.load(tmp_path)
    assert message in str(exc.value) and "\n" not in str(exc.value)


@pytest.mark.parametrize("image, repository", [
    ("ghcr.io/example/ddp-trainer:0.1.0@sha256:" + "a" * 64, "ghcr.io/example/ddp-trainer"),
    ("registry:5000/team/x:1", "registry:5000/team/x"),
    ("registry:5000/team/x", "registry:5000/team/x"),
])
def test_image_repository(image, repository):
    assert identity.image_repository(image) == repository


def test_the_image_workflow_pushes_to_the_identity_image():
    """.github/workflows/image.yaml reads the image repository from gitops.yaml with awk (no Python on that job):
    its command, run here, prints identity.image."""
    import re

    text = (REPO / ".github/workflows/image.yaml").read_text()
    (command,) = re.findall(r"image=\$\((awk .*? gitops\.yaml)\)", text)
    proc = subprocess.run(["bash", "-c", command], cwd=REPO, capture_output=True, text=True, timeout=30)
    assert proc.stdout.strip() == identity.load(REPO).image, proc.stderr
