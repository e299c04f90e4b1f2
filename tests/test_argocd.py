"""The Argo CD manifests: the ApplicationSet makes one Application per environment, each pointing at an overlay that
renders and validates; the project permits what they sync; the expansion behaves as Argo CD's does."""
from __future__ import annotations

import pytest

from conftest import REPO, run_cli
from policies.argocd import apps as argocd, identity
from policies.report.engine import collect, validate
from policies.render.files import read
from policies.render.loader import parse
from policies.kube.objects import ERROR, WARNING
from policies.schema import BuiltinValidator

ENVIRONMENTS = identity.environments_in_tree(REPO)
IDENTITY = identity.load(REPO)


@pytest.fixture(scope="module")
def generated():
    apps, failed = argocd.applications(read(str(REPO / "argocd/applicationset.yaml")))
    assert not failed
    return apps


def test_one_application_per_environment(generated):
    assert sorted(a.element["env"] for a in generated) == ENVIRONMENTS
    assert len({a.name for a in generated}) == len(ENVIRONMENTS)
    for app in generated:
        env, launcher = app.element["env"], app.element["launcher"]
        assert app.name == f"ddp-{env}"
        assert app.spec["source"]["path"] == f"overlays/{env}/{launcher}"
        place = IDENTITY.environments[env]
        assert (app.destination["name"], app.destination["namespace"]) == (place.cluster, place.namespace)
        assert app.spec["source"]["repoURL"] == IDENTITY.repo_url
        assert app.automated == {"prune": True, "selfHeal": True}
        assert "ServerSideApply=true" in app.options
        assert app.sync_policy["retry"]["backoff"]["factor"] >= 2


def test_generated_applications_are_valid_against_the_crd(generated):
    from policies.kube.objects import Manifest

    problems = BuiltinValidator().validate([Manifest(a.obj, "argocd/applicationset.yaml") for a in generated])
    assert not problems, [p.line() for p in problems]


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_each_application_path_renders_and_validates(generated, env):
    (app,) = [a for a in generated if a.element["env"] == env]
    folder = REPO / app.spec["source"]["path"]
    (unit,) = collect([str(folder)], REPO / "overlays")
    validate([unit], BuiltinValidator())
    assert not unit.failed_input and unit.manifests
    errors = [p.line() for p in unit.problems if p.severity in (ERROR, WARNING)]
    assert not errors, errors
    workloads = [m for m in unit.manifests if m.kind in argocd.WORKLOAD_KINDS]
    assert len(workloads) == 1 and workloads[0].name.endswith("-run-001")


def test_repository_argocd_folder_validates_clean():
    proc = run_cli("validate", "argocd")
    assert proc.returncode == 0, proc.stdout
    last = proc.stdout.splitlines()[-1]
    assert "0 errors, 0 warnings" in last, proc.stdout


def test_every_argo_rule_sees_the_repository_apps(generated):
    """The ARGO rules that render targets really reach them: break each target and the rule fires."""
    (unit,) = collect([str(REPO / "argocd")], REPO / "overlays")
    apps, _ = argocd.applications(unit.manifests)
    assert {a.name for a in apps} == {a.name for a in generated}
    for app in apps:
        (t,) = [t for _, _, t in argocd.targets(app, unit.source)]
        assert t.error is None and t.manifests


def test_fast_template_and_go_template_expand_alike():
    text = """apiVersion: argoproj.io/v1alpha1
kind: ApplicationSet
metadata: {name: s, namespace: argocd}
spec:
  {go}
  generators:
    - list:
        elements:
          - {env: gke-t4, nested: {launcher: indexed-job}}
  template:
    metadata: {name: "ddp-{{E}}"}
    spec:
      project: default
      source: {repoURL: r, path: "overlays/{{E}}/{{L}}"}
      destination: {name: in-cluster, namespace: "ddp-{{E}}"}
"""
    go = parse(text.replace("{go}", "goTemplate: true").replace("{{E}}", "{{ .env }}")
               .replace("{{L}}", "{{.nested.launcher}}"), "go.yaml")
    fast = parse(text.replace("{go}", "goTemplate: false").replace("{{E}}", "{{env}}")
                 .replace("{{L}}", "{{nested.launcher}}"), "fast.yaml")
    (a,), _ = argocd.applications(go)
    (b,), _ = argocd.applications(fast)
    assert a.obj == b.obj
    assert a.spec["source"]["path"] == "overlays/gke-t4/indexed-job" and a.name == "ddp-gke-t4"
    assert a.obj["metadata"]["namespace"] == "argocd"


@pytest.mark.parametrize("generators, expected", [
    ("[{git: {repoURL: r, revision: main}}]", "only list generators"),
    ("[{list: {elements: [{env: a}]}}]", "more than a plain key"),
])
def test_what_cannot_be_expanded_is_a_warning(generators, expected):
    text = f"""apiVersion: argoproj.io/v1alpha1
kind: ApplicationSet
metadata: {{name: s}}
spec:
  goTemplate: true
  generators: {generators}
  template:
    metadata: {{name: 'ddp-{{{{.env | lower}}}}'}}
    spec: {{project: default, destination: {{name: in-cluster}}}}
"""
    from policies.report.engine import Unit, check_policies

    unit = Unit("s.yaml", "file", parse(text, "s.yaml"))
    check_policies(unit, ["ARGO004"])
    (p,) = unit.problems
    assert p.severity == WARNING and expected in p.message and "cannot be expanded" in p.message


def test_rule_family_is_registered():
    from policies.rules import FAMILIES, ID_FORMAT, RULES

    assert "ARGO" in FAMILIES and ID_FORMAT.match("ARGO001")
    assert [r for r in RULES if r.startswith("ARGO")] == [f"ARGO{i:03d}" for i in range(1, 13)]
