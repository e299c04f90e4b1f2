"""ARGO005's one error: an object whose last-applied-configuration would take its annotations past the API server's
256 KiB (apimachinery v0.36.0 objectmeta.go 36, 58-67) fails to sync under client-side apply, every time; the rest of
the rule is practice (warnings). A repository of its own in tmp_path: gitops.yaml, an Application, the folder it
syncs (a ConfigMap of 300 KiB, or of 200 KiB)."""
from __future__ import annotations

import json

import pytest

from policies.argocd import identity
from policies.render import gitops
from policies.rules.argo005_sync_policy import ANNOTATIONS_LIMIT, last_applied_bytes

from test_rules import problems_of

APP = """apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {{name: big, namespace: argocd}}
spec:
  project: default
  source: {{repoURL: {url}, targetRevision: main, path: big}}
  destination: {{name: in-cluster, namespace: team}}
  syncPolicy:
    syncOptions: [{options}]
"""


def _repo(tmp_path, kib: int, options: str = "CreateNamespace=true", annotation: str = ""):
    (tmp_path / "gitops.yaml").write_text("")
    folder = tmp_path / "big"
    folder.mkdir()
    (folder / "kustomization.yaml").write_text("resources: [cm.yaml]\n")
    notes = f"\n  annotations: {{argocd.argoproj.io/sync-options: {annotation}}}" if annotation else ""
    (folder / "cm.yaml").write_text(f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: dashboards{notes}\n"
                                    f"data:\n  board.json: {json.dumps('x' * (kib * 1024))}\n")
    app = tmp_path / "app.yaml"
    app.write_text(APP.format(url=identity.EXAMPLE_REPO_URL, options=options))
    return app


def _argo005(app):
    with gitops.repository_url(identity.EXAMPLE_REPO_URL):
        return [p for p in problems_of(app) if p.rule == "ARGO005"]


def test_an_object_past_the_annotation_limit_fails_to_sync_client_side(tmp_path):
    [p] = _argo005(_repo(tmp_path, 300))
    assert p.severity == "error" and "ConfigMap/dashboards in big takes 300 KiB of annotations" in p.message
    assert p.field == "spec.syncPolicy.syncOptions" and "ServerSideApply=true" in p.hint


@pytest.mark.parametrize("kib, options, annotation", [
    (200, "CreateNamespace=true", ""),  # within the limit
    (300, "ServerSideApply=true", ""),  # server-side apply keeps no last-applied annotation
    (300, "CreateNamespace=true", "ServerSideApply=true"),  # the object asks for it itself
    (300, "Replace=true", ""),  # kubectl replace (a warning of its own)
])
def test_no_error_where_client_side_apply_does_not_write_it_or_it_fits(tmp_path, kib, options, annotation):
    assert not [p for p in _argo005(_repo(tmp_path, kib, options, annotation)) if p.severity == "error"]


def test_the_count_is_the_compact_json_and_the_annotations():
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "annotations": {"k": "v"}}}
    body = json.dumps(obj, separators=(",", ":"))
    assert last_applied_bytes(obj) == len(body) + len("kubectl.kubernetes.io/last-applied-configuration") + 2
    assert ANNOTATIONS_LIMIT == 262144
