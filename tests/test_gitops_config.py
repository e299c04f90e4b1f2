"""gitops.yaml is the one place for how overlays are built: render.py, the pinned kubectl and Argo CD all agree."""
from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from conftest import REPO
from policies.render import gitops, render


def test_render_uses_the_configured_build_options():
    assert render.KUSTOMIZE_FLAGS == gitops.build_options()
    assert all(isinstance(o, str) for o in render.KUSTOMIZE_FLAGS)


def test_pinned_kubectl_embeds_the_configured_kustomize():
    assert gitops.kubectl_kustomize_version(render.kubectl()) == gitops.kustomize_version()


def test_summary_names_the_kustomize_used():
    proc = subprocess.run([sys.executable, "-m", "policies.render.gitops"], cwd=REPO, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    line = proc.stdout.strip()
    assert line.startswith(f"kustomize {gitops.kustomize_version()} (kubectl kustomize") and "WARNING" not in line
    assert "build options:" in line and "Argo CD" in line


@pytest.mark.parametrize("text, message", [
    ("kustomize: {version: v5.8.1, buildOptions: --enable-helm}\n", "must be a list of strings"),
    ("kustomize: {buildOptions: []}\n", "kustomize.version must be a string"),
    ("- just a list\n", "expected a mapping with a `kustomize` section"),
    ("kustomize: [\n", "cannot read"),
])
def test_bad_config_is_one_line(tmp_path, text, message):
    path = tmp_path / "gitops.yaml"
    path.write_text(text)
    with pytest.raises(gitops.ConfigError) as exc:
        gitops.load(path)
    assert message in str(exc.value) and "\n" not in str(exc.value)


def argocd_doc(name: str) -> dict:
    return yaml.safe_load((REPO / "argocd" / name).read_text())


def test_argocd_builds_with_the_same_options_and_version():
    cm = argocd_doc("argocd-cm.yaml")
    assert cm["metadata"]["name"] == "argocd-cm"
    assert cm["data"]["kustomize.buildOptions"] == " ".join(gitops.build_options())
    settings = gitops.argocd_settings()
    source = argocd_doc("applicationset.yaml")["spec"]["template"]["spec"]["source"]
    pinned = gitops.kustomize_version()
    if settings["bundledKustomize"] == pinned:
        # Argo CD's own kustomize is the one validation uses: no custom binary, no per-app version.
        assert "kustomize" not in source or "version" not in source["kustomize"]
        assert not [k for k in cm["data"] if k.startswith("kustomize.path.")]
    else:
        assert source["kustomize"]["version"] == pinned
        assert f"kustomize.path.{pinned}" in cm["data"]


def test_argocd_names_the_configured_repository():
    url = gitops.argocd_settings()["repoURL"]
    assert argocd_doc("applicationset.yaml")["spec"]["template"]["spec"]["source"]["repoURL"] == url
    assert url in argocd_doc("appproject.yaml")["spec"]["sourceRepos"]
