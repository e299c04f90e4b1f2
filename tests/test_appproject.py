"""The AppProject as Argo CD v3.5.1 reads it: upstream's permission tests ported to policies/argocd/apps.py, the
repository's project restricting cluster-scoped objects to exactly the names its environments create, and ARGO008
refusing issue 25's three attacks against that very project."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from conftest import FIXTURES, REPO, run_cli
from policies.argocd import apps as argocd, identity
from policies.render import gitops
from policies.render.files import read
from policies.kube.objects import ERROR, WARNING
from policies.kube.values import group_of
from policies.render.kustomization import find_overlays
from policies.render.render import render_all
from policies.rules.argo008_project_permits import _dest_ok

from test_rules import problems_of

PROJECT = read(str(REPO / "argocd/appproject.yaml"))[0]
ATTACKS = ("kube-system-namespace", "argocd-namespace", "runtime-named-like-another-teams")


def permitted(spec, group, kind, name, namespaced):
    return argocd.group_kind_name_permitted(spec, group, kind, name, namespaced)[0]


# ---------------------------------------------------------------- upstream's cases


def test_is_group_kind_permitted_as_upstream():
    """argo-cd v3.5.1 pkg/apis/application/v1alpha1/types_test.go:506-563, TestAppProject_IsGroupKindPermitted."""
    proj = {"namespaceResourceWhitelist": [], "namespaceResourceBlacklist": [{"group": "apps", "kind": "Deployment"}]}
    assert not permitted(proj, "apps", "ReplicaSet", "", True)
    assert not permitted(proj, "apps", "Deployment", "", True)

    proj2 = {"namespaceResourceWhitelist": [{"group": "apps", "kind": "ReplicaSet"}],
             "namespaceResourceBlacklist": [{"group": "apps", "kind": "Deployment"}]}
    assert permitted(proj2, "apps", "ReplicaSet", "", True)
    assert not permitted(proj2, "apps", "Action", "", True)

    proj3 = {"clusterResourceBlacklist": [{"group": "", "kind": "Namespace"}]}
    assert not permitted(proj3, "", "Namespace", "", False)

    proj4 = {"clusterResourceWhitelist": [{"group": "*", "kind": "*"}],
             "clusterResourceBlacklist": [{"group": "*", "kind": "*"}]}
    assert not permitted(proj4, "", "Namespace", "", False)
    assert permitted(proj4, "apps", "Action", "", True)

    proj5 = {"clusterResourceWhitelist": [], "namespaceResourceWhitelist": [{"group": "*", "kind": "*"}]}
    assert not permitted(proj5, "", "Namespace", "", False)
    assert permitted(proj5, "apps", "Action", "", True)

    proj6 = {}
    assert not permitted(proj6, "", "Namespace", "", False)
    assert permitted(proj6, "apps", "Action", "", True)

    proj7 = {"clusterResourceWhitelist": [{"group": "", "kind": "Namespace", "name": "team1-*"}]}
    assert not permitted(proj7, "", "Namespace", "other-namespace", False)
    assert permitted(proj7, "", "Namespace", "team1-namespace", False)


def test_validate_sync_permissions_as_upstream():
    """argo-cd v3.5.1 controller/sync_test.go TestValidateSyncPermissions (the cases that read the project)."""
    # "group kind not permitted returns error": a blacklisted ClusterRole.
    restricted = {"destinations": [{"namespace": "*", "server": "*"}],
                  "clusterResourceBlacklist": [{"group": "rbac.authorization.k8s.io", "kind": "ClusterRole"}]}
    assert argocd.group_kind_name_permitted(restricted, "rbac.authorization.k8s.io", "ClusterRole", "my-role",
                                            False) == (False, "clusterResourceWhitelist")
    # "cluster-scoped resource skips namespace check": */* permits Namespace my-ns whatever the destinations say.
    open_project = {"destinations": [{"namespace": "default", "server": "*"}],
                    "clusterResourceWhitelist": [{"group": "*", "kind": "*"}]}
    assert permitted(open_project, "", "Namespace", "my-ns", False)
    # "permitted namespaced resource" / "namespace not permitted": a ConfigMap in default, then in kube-system.
    project = {"destinations": [{"namespace": "default", "server": "*"}]}
    assert permitted(project, "", "ConfigMap", "my-cm", True)
    cluster = {"server": "https://kubernetes.default.svc"}
    assert _dest_ok(project["destinations"], {**cluster, "namespace": "default"})
    assert not _dest_ok(project["destinations"], {**cluster, "namespace": "kube-system"})


def test_names_are_go_globs_not_fnmatch():
    """isNamedResourceInList matches `name` with Go's filepath.Match (types.go:3856-3876): `[!k]` is a class of `!`
    and `k` (fnmatch would negate), `\\` escapes, and a malformed glob matches nothing."""
    spec = {"clusterResourceWhitelist": [{"group": "", "kind": "Namespace", "name": "[!k]*"}]}
    assert permitted(spec, "", "Namespace", "kube-system", False)
    assert not permitted(spec, "", "Namespace", "argocd", False)
    spec = {"clusterResourceWhitelist": [{"group": "", "kind": "Namespace", "name": "ddp-["}]}
    assert not permitted(spec, "", "Namespace", "ddp-[", False)
    spec = {"clusterResourceWhitelist": [{"group": "", "kind": "Namespace", "name": ""}]}
    assert permitted(spec, "", "Namespace", "kube-system", False)  # no name: every name
    spec = {"clusterResourceWhitelist": [{"group": "", "kind": "Namespace", "name": None}]}
    assert permitted(spec, "", "Namespace", "kube-system", False)  # null reads as Go's zero value ""


def test_blacklist_by_name_denies_only_those_names():
    spec = {"clusterResourceWhitelist": [{"group": "*", "kind": "*"}],
            "clusterResourceBlacklist": [{"group": "", "kind": "Namespace", "name": "kube-*"}]}
    assert argocd.group_kind_name_permitted(spec, "", "Namespace", "kube-system", False) == \
        (False, "clusterResourceBlacklist")
    assert permitted(spec, "", "Namespace", "ddp-kind-cpu", False)


# ---------------------------------------------------------------- the repository's project


def _created_objects() -> set[tuple[str, str, str]]:
    """(group, kind, name) of every cluster-scoped object an environment creates: what any overlay renders, and
    each destination namespace (CreateNamespace=true)."""
    out = set()
    for rendered in render_all(find_overlays(REPO / "overlays")):
        assert rendered.error is None, rendered.error
        for m in rendered.manifests:
            gk = (group_of(m.api_version), m.kind)
            if gk in argocd.CLUSTER_SCOPED:
                out.add((*gk, m.name))
    apps, failed = argocd.applications(read(str(REPO / "argocd/applicationset.yaml")))
    assert apps and not failed
    for app in apps:
        assert "CreateNamespace=true" in app.options
        out.add(("", "Namespace", app.destination["namespace"]))
    return out


def test_project_whitelists_exactly_what_the_environments_create():
    spec = PROJECT.obj["spec"]
    created = _created_objects()
    assert ("trainer.kubeflow.org", "ClusterTrainingRuntime", "ddp-torch") in created
    for group, kind, name in created:
        assert permitted(spec, group, kind, name, False), (group, kind, name)
    entries = spec["clusterResourceWhitelist"]
    # Every entry names one object (no glob, no empty name), and each is one an environment creates.
    assert {(e["group"], e["kind"], e.get("name")) for e in entries} == created
    assert not spec.get("clusterResourceBlacklist")


@pytest.mark.parametrize("name", ["kube-system", "argocd", "default", "kube-public", "ddp-other", ""])
def test_project_refuses_other_namespaces(name):
    assert not permitted(PROJECT.obj["spec"], "", "Namespace", name, False)


@pytest.mark.parametrize("name", ["torch-distributed", "deepspeed-distributed", "mlx-distributed", "ddp-torch-2"])
def test_project_refuses_other_runtimes(name):
    assert not permitted(PROJECT.obj["spec"], "trainer.kubeflow.org", "ClusterTrainingRuntime", name, False)


def against_repository(name: str, tmp_path: Path, text: str | None = None) -> Path:
    """An ARGO008 fixture turned on this repository's own project and identity: its AppProject replaced by
    argocd/appproject.yaml, its Applications cloning the repository gitops.yaml names into the project's first
    destination. A fork's `make init` and `make new-env` change both; the attacks must fail against what is there."""
    text = text if text is not None else (FIXTURES / f"rules/ARGO008/fail/{name}.yaml").read_text()
    dest = PROJECT.obj["spec"]["destinations"][0]
    out = []
    for doc in yaml.safe_load_all(text):
        if doc and doc.get("kind") == "AppProject":
            doc = PROJECT.obj
        elif doc and doc.get("kind") == "Application":
            doc["spec"]["source"]["repoURL"] = gitops.argocd_settings()["repoURL"]
            if doc["spec"]["destination"] == {"name": "in-cluster", "namespace": "ddp-kind-cpu"}:
                doc["spec"]["destination"] = {"name": dest["name"], "namespace": dest["namespace"]}
        out.append(doc)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump_all(out, sort_keys=False))
    return path


def test_fixtures_hold_the_template_project():
    """The attack fixtures and the passing one hold the project the template ships (the rule fixtures are the
    template's, tests/test_rules.py): in the template itself that is argocd/appproject.yaml, not a copy that drifted.
    The tests below run each attack against the repository's own project, which a fork changes."""
    for name in (*ATTACKS, "configmap-in-kube-system"):
        (proj,) = [m for m in read(str(FIXTURES / f"rules/ARGO008/fail/{name}.yaml")) if m.kind == "AppProject"]
        assert proj.obj["spec"]["sourceRepos"] == [identity.EXAMPLE_REPO_URL], name
        if gitops.argocd_settings()["repoURL"] == identity.EXAMPLE_REPO_URL:
            assert proj.obj["spec"] == PROJECT.obj["spec"], name
    (proj,) = [m for m in read(str(FIXTURES / "rules/ARGO008/pass/repository.yaml")) if m.kind == "AppProject"]
    assert proj.obj["spec"]["sourceRepos"] == [identity.EXAMPLE_REPO_URL]
    if gitops.argocd_settings()["repoURL"] == identity.EXAMPLE_REPO_URL:
        assert proj.obj["spec"] == PROJECT.obj["spec"]


# ---------------------------------------------------------------- ARGO008 on the attacks


@pytest.mark.parametrize("attack,obj", [("kube-system-namespace", "Namespace/kube-system"),
                                        ("argocd-namespace", "Namespace/argocd"),
                                        ("runtime-named-like-another-teams", "ClusterTrainingRuntime/torch-distributed")])
def test_attacks_are_one_error_each(attack, obj, tmp_path):
    found = [p for p in problems_of(against_repository(attack, tmp_path)) if p.rule == "ARGO008"]
    assert len(found) == 1, [p.line() for p in found]
    (p,) = found
    assert p.severity == ERROR and p.obj == obj and p.field == "metadata.name"
    assert p.source == f"tests/fixtures/argocd/targets/{attack}"
    project = PROJECT.name
    assert f"AppProject {project}" in p.message and f"is not permitted in project {project}" in p.message
    assert f"name: {obj.split('/')[1]}}} to AppProject/{project} spec.clusterResourceWhitelist" in p.hint
    assert "\n" not in p.line()


def test_attack_fails_validate(tmp_path):
    """What issue 25 saw pass `make validate` with 0 warnings now ends it with an error."""
    proc = run_cli("validate", str(against_repository("kube-system-namespace", tmp_path)))
    assert proc.returncode != 0, proc.stdout
    lines = [line for line in proc.stdout.splitlines() if line.startswith("error ARGO008 ")]
    assert len(lines) == 1 and "Namespace/kube-system" in lines[0], proc.stdout


def test_created_namespace_is_a_warning_unless_managed(tmp_path):
    """Argo CD creates the destination namespace only where it does not exist yet (controller/sync_namespace.go):
    a condition the manifests do not show, so a warning; with managedNamespaceMetadata it is synced every time."""
    text = (FIXTURES / "rules/ARGO008/fail/created-namespace-not-permitted.yaml").read_text()
    managed = "    managedNamespaceMetadata:\n      labels:\n        team: ddp\n"
    assert managed in text
    path = tmp_path / "unmanaged.yaml"
    path.write_text(text.replace(managed, ""))
    (p,) = [p for p in problems_of(path) if p.rule == "ARGO008"]
    assert p.severity == WARNING and "where it does not exist yet" in p.message
    assert p.field == "spec.syncPolicy.syncOptions"
    path.write_text(text.replace("name: ddp-kind-cpu}", "name: ddp-kind-cpu*}"))
    assert not [p for p in problems_of(path) if p.rule == "ARGO008"]


def test_rendered_namespace_is_checked_once_not_as_created(tmp_path):
    """A Namespace the path renders with the destination's name is that sync task (isNamespaceWithName): checked as
    an object, not again as the namespace CreateNamespace=true would create."""
    text = (FIXTURES / "rules/ARGO008/fail/kube-system-namespace.yaml").read_text()
    dest = "  destination:\n    name: in-cluster\n    namespace: ddp-kind-cpu\n"
    assert dest in text
    cluster = PROJECT.obj["spec"]["destinations"][0]["name"]
    path = against_repository("into-kube-system", tmp_path, text.replace(
        dest, f"  destination:\n    name: {cluster}\n    namespace: kube-system\n"))
    found = [p for p in problems_of(path) if p.rule == "ARGO008"]
    assert sorted(p.field for p in found) == ["metadata.name", "spec.destination"], [p.line() for p in found]


def test_the_cluster_scoped_kinds_are_every_crd_of_scope_cluster():
    """CLUSTER_SCOPED names every kind a CRD in crds/ serves at cluster scope (an AppProject must whitelist them,
    SEC009 asks for them), and no namespaced one."""
    scopes = {}
    for path in sorted((REPO / "crds").rglob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
                spec = doc["spec"]
                scopes[(spec["group"], spec["names"]["kind"])] = spec["scope"]
    assert len(scopes) > 25
    assert sorted(gk for gk, scope in scopes.items() if scope == "Cluster" and gk not in argocd.CLUSTER_SCOPED) == []
    assert sorted(gk for gk, scope in scopes.items() if scope == "Namespaced" and gk in argocd.CLUSTER_SCOPED) == []
