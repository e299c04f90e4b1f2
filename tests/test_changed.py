"""The pre-commit hook (policies.changed): changed files map to the overlays that read them, and a broken change
fails the commit with the same lines make validate prints."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest
import yaml

from conftest import REPO, copy_repository
from policies.argocd import identity
from policies.changed import affected

# Every environment's Indexed Job overlay (derived from the tree: a new environment's is expected too).
INDEXED_JOBS = [f"overlays/{env}/indexed-job" for env in identity.environments_in_tree(REPO)
                if (REPO / "overlays" / env / "indexed-job").is_dir()]


@pytest.mark.parametrize("files, expected", [
    (["base/indexed-job/job.yaml"], INDEXED_JOBS + ["argocd"]),
    (["components/gke-t4/patches/job.yaml"], ["overlays/gke-t4/indexed-job", "overlays/gke-t4/pytorchjob",
                                              "overlays/gke-t4/statefulset", "overlays/gke-t4/trainjob", "argocd"]),
    (["overlays/kind-cpu/trainjob/patches/set-run-id.yaml"], ["overlays/kind-cpu/trainjob", "argocd"]),
    (["overlays/gke-t4/pytorchjob/patches/new-unwired.yaml"], ["overlays/gke-t4/pytorchjob", "argocd"]),
    (["argocd/applicationset.yaml"], ["argocd"]),
    (["README.md", "trainer/train.py"], []),
])
def test_changed_files_map_to_overlays(files, expected):
    got = affected(files, REPO)
    assert [t for t in got if t in expected or not t.startswith("overlays/")] == expected
    assert set(expected) <= set(got)


def test_a_broken_change_fails_the_hook(tmp_path):
    root = copy_repository(tmp_path / "repo")
    patch = root / "overlays/kind-cpu/indexed-job/patches/set-topology.yaml"
    patch.write_text(patch.read_text().replace('value: "2"\n            - name: NPROC', 'value: "3"\n            - name: NPROC'))
    proc = subprocess.run([sys.executable, "-m", "policies.changed", "--root", str(root),
                           "overlays/kind-cpu/indexed-job/patches/set-topology.yaml"], cwd=REPO, capture_output=True,
                          text=True, timeout=180)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "validating 2 folder(s) the change touches: overlays/kind-cpu/indexed-job argocd" in proc.stderr
    assert "error TOPO001" in proc.stdout and proc.stdout.splitlines()[-1].startswith("FAILED: 2 rendered folders")


def test_nothing_to_validate():
    proc = subprocess.run([sys.executable, "-m", "policies.changed", "README.md"], cwd=REPO, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0 and "nothing to validate" in proc.stdout


def test_pre_commit_config_runs_the_same_checks():
    doc = yaml.safe_load((REPO / ".pre-commit-config.yaml").read_text())
    (repo,) = doc["repos"]
    assert repo["repo"] == "local"
    hooks = {h["id"]: h for h in repo["hooks"]}
    assert all(h["language"] == "system" for h in hooks.values())
    v = hooks["validate-changed-overlays"]
    assert v["entry"] == ".venv/bin/python -m policies.changed" and v["pass_filenames"]
    files = re.compile(v["files"])
    for path in ("base/indexed-job/job.yaml", "components/gke-t4/kustomization.yaml", "argocd/appproject.yaml",
                 "overlays/kind-cpu/trainjob/patches/set-topology.yaml", "gitops.yaml"):
        assert files.search(path), path
    assert not files.search("trainer/train.py") and not files.search("README.md")
    assert "vendor.github-workflows" in hooks["lint-workflows"]["entry"]
    assert "policies.cli docs" in hooks["rules-doc-up-to-date"]["entry"]


def test_plain_manifests_beside_the_overlays_are_validated(tmp_path):
    """make validate checks every manifest file under overlays/ outside a kustomization's folder; a change to one is
    validated by the hook too (it was 'nothing to validate')."""
    root = tmp_path / "repo"
    for d in ("base", "components", "overlays"):
        shutil.copytree(REPO / d, root / d)
    shutil.copy(REPO / "gitops.yaml", root)
    extra = root / "overlays/extras/quota.yaml"
    extra.parent.mkdir()
    extra.write_text("apiVersion: v1\nkind: Service\nmetadata:\n  name: q\nspec:\n  ports: 5\n")
    assert affected(["overlays/extras/quota.yaml"], root) == ["overlays/extras/quota.yaml"]
    proc = subprocess.run([sys.executable, "-m", "policies.changed", "--root", str(root),
                           "overlays/extras/quota.yaml"], cwd=REPO, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 1 and "overlays/extras/quota.yaml" in proc.stdout, proc.stdout + proc.stderr
    # A file inside an overlay's folder is the overlay's, as before.
    assert affected(["overlays/kind-cpu/trainjob/notes.yaml"], root) == ["overlays/kind-cpu/trainjob"]


HELM_JOB = ("apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: {{ .Release.Name }}\nspec:\n"
            "  completions: {{ .Values.replicas }}\n")


def test_a_helm_chart_is_helms_to_render_in_another_repository(tmp_path):
    """Another repository's pre-commit hook (`ddp-check changed`) and a folder walk meet a Helm chart: its templates
    (`{{ }}`) are no YAML and its Chart.yaml has no kind, and both were errors. A chart (a folder with a Chart.yaml,
    as helm's loader reads one) is its Chart.yaml alone, skipped with a line saying helm renders it and the
    validator does not; a manifest beside the chart is still checked."""
    from policies.changed import targets

    chart = tmp_path / "deploy" / "chart"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: trainer\nversion: 0.1.0\n")
    (chart / "values.yaml").write_text("replicas: 2\n")
    (chart / "templates" / "job.yaml").write_text(HELM_JOB)
    (tmp_path / "deploy" / "svc.yaml").write_text("apiVersion: v1\nkind: Service\nmetadata:\n  name: q\nspec:\n"
                                                  "  ports: [{port: 80}]\n")
    changed = ["deploy/chart/templates/job.yaml", "deploy/chart/values.yaml", "deploy/svc.yaml"]
    assert targets(changed, tmp_path) == ["deploy/chart/Chart.yaml", "deploy/svc.yaml"]
    for args in (["changed", *changed], ["validate", "deploy"]):
        proc = subprocess.run([sys.executable, "-m", "policies.cli", *args], cwd=tmp_path, capture_output=True,
                              text=True, timeout=180, env={**os.environ, "PYTHONPATH": str(REPO)})
        assert proc.returncode == 0, proc.stdout + proc.stderr
        skip = [ln for ln in proc.stdout.splitlines() if ln.startswith("info SKIP")]
        assert skip == ["info SKIP deploy/chart/Chart.yaml: a Helm chart's Chart.yaml: the chart is helm's to render, "
                        "which the validator does not run (`helm template <chart> | make validate PATHS=-` checks "
                        "what it renders): not a Kubernetes manifest, not checked"], proc.stdout
        assert "OK: 1 file (1 file skipped: not Kubernetes), 1 object" in proc.stdout
