"""Environment declarations (`components/<env>/policy.yaml`): found through the overlay's components, validated,
read by the rules that need them, and the one place where a rule's severity is raised or lowered; `--strict`."""
from __future__ import annotations

from pathlib import Path

import pytest

from policies.report import engine
from policies.rules import environment
from policies.render.files import read
from policies.kube.objects import ERROR, INFO, WARNING

from conftest import FIXTURES, REPO, run_cli

ENVS = sorted((REPO / "components").glob("*/policy.yaml"))
LATEST = FIXTURES / "rules/IMG001/fail/latest.yaml"  # warnings only (IMG001), no errors


def unit_of(path: Path, env: environment.Environment | None = None) -> engine.Unit:
    unit = engine.Unit(str(path), "file", read(str(path)))
    unit.environment = env
    engine.check_policies(unit)
    return unit


@pytest.mark.parametrize("path", ENVS, ids=lambda p: p.parent.name)
def test_every_environment_declares_what_the_rules_need(path):
    env, problems = environment.load(path)
    assert not problems, [p.message for p in problems]
    assert env.name == path.parent.name
    assert env.gpus_per_node is not None and env.gpu_capacity is not None and env.large_job_pods is not None


def test_each_overlay_gets_its_components_declaration():
    units = engine.collect([str(REPO / "overlays")], REPO / "overlays")
    for u in units:
        assert u.environment is not None, u.source
        assert u.environment.name == Path(u.source).parent.name, u.source


def test_environment_raises_and_lowers_severity():
    plain = [p for p in unit_of(LATEST).problems if p.rule == "IMG001"]
    assert plain and all(p.severity == WARNING for p in plain)
    raised = environment.Environment("strict-env", "x", severity={"IMG001": ERROR})
    assert {p.severity for p in unit_of(LATEST, raised).problems if p.rule == "IMG001"} == {ERROR}
    secret = FIXTURES / "rules/SEC007/fail/inline-secret.yaml"
    lowered = environment.Environment("lab", "x", severity={"SEC007": INFO})
    unit = unit_of(secret, lowered)
    assert {p.severity for p in unit.problems if p.rule == "SEC007"} == {INFO}
    assert not engine.failed([unit], strict=True)  # info never fails


def test_h100_makes_security_warnings_errors():
    env, _ = environment.load(REPO / "components/64x8-h100/policy.yaml")
    unit = unit_of(FIXTURES / "rules/SEC001/fail/no-security-context.yaml", env)
    assert [p.severity for p in unit.problems if p.rule == "SEC001"] == [ERROR]


COMPONENT = "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\nresources: []\n"


def _overlay(tmp_path: Path, policy: str | None, extra_component: bool = False) -> Path:
    """A tiny overlay: one resource file (the IMG001 `latest` fixture) and a component carrying `policy`."""
    comp = tmp_path / "components/lab"
    comp.mkdir(parents=True)
    (comp / "kustomization.yaml").write_text(COMPONENT)
    if policy is not None:
        (comp / "policy.yaml").write_text(policy)
    ov = tmp_path / "overlays/lab/indexed-job"
    ov.mkdir(parents=True)
    (ov / "all.yaml").write_text(LATEST.read_text())
    components = ["../../../components/lab"]
    if extra_component:
        other = tmp_path / "components/other"
        other.mkdir()
        (other / "kustomization.yaml").write_text(COMPONENT)
        (other / "policy.yaml").write_text(policy or "")
        components.append("../../../components/other")
    (ov / "kustomization.yaml").write_text("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
                                           "resources: [all.yaml]\ncomponents: [" + ", ".join(components) + "]\n")
    return ov


POLICY = """apiVersion: policies.ddp/v1
kind: Environment
metadata: {name: lab}
spec:
  gpusPerNode: 8
  gpuCapacity: 16
  largeJobPods: 4
  requireImageDigest: false
  severity:
    IMG001: error
"""


def test_severity_override_through_the_overlays_component(tmp_path):
    ov = _overlay(tmp_path, POLICY)
    proc = run_cli("validate", str(ov))
    assert proc.returncode == 1, proc.stdout
    assert "error IMG001" in proc.stdout and "warning IMG001" not in proc.stdout
    proc = run_cli("validate", str(_overlay(tmp_path / "b", POLICY.replace("IMG001: error", "IMG001: info"))))
    assert proc.returncode == 0 and "info IMG001" in proc.stdout, proc.stdout


def test_strict_fails_on_warnings():
    proc = run_cli("validate", str(LATEST))
    assert proc.returncode == 0 and "warning IMG001" in proc.stdout and " 0 errors" in proc.stdout
    proc = run_cli("validate", "--strict", str(LATEST))
    assert proc.returncode == 1
    assert proc.stdout.splitlines()[-1].startswith("FAILED") and "(strict)" in proc.stdout


def test_rules_that_need_a_declaration_say_they_could_not_run():
    gpu = FIXTURES / "rules/RES001/pass/h100.yaml"
    proc = run_cli("validate", str(gpu))
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("info ENV"))
    for rule in ("RES003", "RES004", "RES005", "IMG002"):
        assert rule in line
    assert "could not run" in line and "--env" in line
    # --env gives files the declaration an overlay would get from its component: then they run.
    proc = run_cli("validate", "--env", str(REPO / "components/64x8-h100/policy.yaml"), str(gpu))
    assert "info ENV" not in proc.stdout
    proc = run_cli("validate", "--env", str(REPO / "components/64x8-h100/policy.yaml"),
                   str(FIXTURES / "rules/IMG002/fail/tag-only.yaml"))
    assert proc.returncode == 1 and "error IMG002" in proc.stdout


@pytest.mark.parametrize("text, message", [
    ("apiVersion: v1\nkind: ConfigMap\n", "not an environment declaration"),
    (POLICY.replace("gpusPerNode: 8", "gpusPerNode: eight"), "spec.gpusPerNode is 'eight'"),
    (POLICY.replace("largeJobPods: 4", "largeJobPod: 4"), "unknown key spec.largeJobPod"),
    (POLICY.replace("IMG001: error", "IMG001: fatal"), "severity of IMG001 is 'fatal'"),
    (POLICY.replace("IMG001: error", "NOPE001: error"), "severity for unknown rule NOPE001"),
    (POLICY + "  clusterDomain: Corp.Example\n", "spec.clusterDomain is 'Corp.Example', expected a DNS-1123 subdomain"),
    ("spec: [\n", "invalid YAML"),
])
def test_bad_declarations_are_one_line_each_with_file_and_line(tmp_path, text, message):
    path = tmp_path / "policy.yaml"
    path.write_text(text)
    env, problems = environment.load(path)
    assert env is None and problems
    p = problems[0]
    assert p.rule == "ENV" and p.severity == ERROR and message in p.message, p.message
    assert p.location and p.location[0] == str(path) and p.location[1] >= 1
    if "fatal" in text:
        assert p.location[1] == text.splitlines().index("    IMG001: fatal") + 1
    proc = run_cli("validate", "--env", str(path), str(LATEST))
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr


def test_a_bad_declaration_fails_the_overlay(tmp_path):
    proc = run_cli("validate", str(_overlay(tmp_path, POLICY.replace("IMG001: error", "IMG001: loud"))))
    assert proc.returncode == 1 and "error ENV" in proc.stdout and "policy.yaml" in proc.stdout


def test_one_environment_per_overlay(tmp_path):
    proc = run_cli("validate", str(_overlay(tmp_path, POLICY, extra_component=True)))
    assert proc.returncode == 1
    assert "error ENV" in proc.stdout and "several environment declarations" in proc.stdout


def test_host_access_is_an_error_where_the_environment_declares_it_and_a_warning_elsewhere(tmp_path):
    """SEC008/SEC002: every environment here declares allowedHostAccess; a pod with hostPID in one is an error (that
    environment said it must not be there), with no declaration a warning (a security choice)."""
    from policies.rules import environment as envmod
    from policies.report.engine import Unit, check_policies
    from policies.render.loader import parse

    for name in ("kind-cpu", "gke-t4", "64x8-h100"):
        env, problems = envmod.load(REPO / "components" / name / "policy.yaml")
        assert not problems and env.allowed_host_access is not None, name
    pod = ("apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  hostPID: true\n  containers:\n"
           "    - name: c\n      image: busybox:1\n      securityContext: {privileged: true}\n")

    def severities(env):
        unit = Unit("p.yaml", "file", parse(pod, "p.yaml"))
        unit.environment = env
        check_policies(unit, ["SEC008", "SEC002"])
        return sorted((p.rule, p.severity) for p in unit.problems)

    kind, _ = envmod.load(REPO / "components/kind-cpu/policy.yaml")
    assert severities(kind) == [("SEC002", "error"), ("SEC008", "error")]
    assert severities(None) == [("SEC002", "warning"), ("SEC008", "warning")]
    bad = tmp_path / "policy.yaml"
    bad.write_text("apiVersion: policies.ddp/v1\nkind: Environment\nmetadata:\n  name: x\nspec:\n"
                   "  allowedHostAccess: [hostEverything]\n")
    _, problems = envmod.load(bad)
    assert problems and "allowedHostAccess lists 'hostEverything'" in problems[0].message
