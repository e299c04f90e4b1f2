"""A controller's feature gates as the environment declares them (`featureGates`): JobSet v0.12.0's webhook refuses a
`RestartJob` action and `restartStrategy: InPlaceRestart` unless their alpha gates are on (pkg/webhooks/
jobset_webhook.go:169-175, 441-444; the defaults in pkg/features/features.go:68-76). Undeclared, TOPO011 warns on
that condition; declared, the gate on says nothing and off is an error, since the input then shows the webhook's
refusal."""
from __future__ import annotations

import pytest

from policies.report import engine
from policies.rules import environment
from policies.launchers import BY_ID
from policies.kube.objects import ERROR, WARNING, Manifest
from policies.schema import BuiltinValidator

JOBSET = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "js"}, "spec": {
    "failurePolicy": {"maxRestarts": 3, "restartStrategy": "InPlaceRestart",
                      "rules": [{"name": "a", "action": "RestartJob", "targetReplicatedJobs": ["w"]}]},
    "replicatedJobs": [{"name": "w", "replicas": 1, "template": {"spec": {
        "completions": 2, "parallelism": 2, "template": {"spec": {"restartPolicy": "Never", "containers": [
            {"name": "c", "image": "x:1", "command": ["torchrun", "--nnodes=2", "t.py"]}]}}}}}]}}
DECLARATION = """apiVersion: policies.ddp/v1
kind: Environment
metadata: {name: lab}
spec:
  gpusPerNode: 8
"""
FIELDS = ("spec.failurePolicy.rules[0].action", "spec.failurePolicy.restartStrategy")


def gated(tmp_path, gates: str | None) -> dict[str, tuple[str, str]]:
    env = None
    if gates is not None:
        (tmp_path / "policy.yaml").write_text(DECLARATION + f"  featureGates: {gates}\n")
        env, problems = environment.load(tmp_path / "policy.yaml")
        assert not problems, [p.message for p in problems]
    unit = engine.Unit("t.yaml", "file", [Manifest(JOBSET, "t.yaml", 0)])
    unit.environment = env
    engine.validate([unit], BuiltinValidator())
    return {p.field: (p.severity, p.message) for p in unit.problems if p.rule == "TOPO011" and p.field in FIELDS}


def test_undeclared_gates_are_a_warning_on_the_condition(tmp_path):
    found = gated(tmp_path, None)
    assert {f: s for f, (s, _) in found.items()} == {f: WARNING for f in FIELDS}
    assert "off by default" in found[FIELDS[0]][1]


def test_declared_on_says_nothing_and_off_or_unlisted_is_an_error(tmp_path):
    assert gated(tmp_path, "{jobset: {RestartJob: true, InPlaceRestart: true}}") == {}
    found = gated(tmp_path, "{jobset: {RestartJob: true}}")  # InPlaceRestart unlisted: its default, off
    assert list(found) == [FIELDS[1]] and found[FIELDS[1]][0] == ERROR
    assert "lab's featureGates leave InPlaceRestart off" in found[FIELDS[1]][1]
    found = gated(tmp_path, "{jobset: {RestartJob: false, TLSOptions: true}}")
    assert {f: s for f, (s, _) in found.items()} == {f: ERROR for f in FIELDS}


@pytest.mark.parametrize("gates,shown", [
    ("{volcano-job: {Foo: true}}", "spec.featureGates names 'volcano-job', which has no feature gates"),
    ("{jobset: {RestartJobs: true}}", "spec.featureGates.jobset is {'RestartJobs': True}"),
    ("{jobset: {RestartJob: yes-please}}", "spec.featureGates.jobset is {'RestartJob': 'yes-please'}"),
    ("{jobset: [RestartJob]}", "spec.featureGates.jobset is ['RestartJob']"),
])
def test_a_bad_declaration_is_one_env_error(tmp_path, gates, shown):
    (tmp_path / "policy.yaml").write_text(DECLARATION + f"  featureGates: {gates}\n")
    env, problems = environment.load(tmp_path / "policy.yaml")
    assert env is None and [p.rule for p in problems] == ["ENV"] and shown in problems[0].message, problems[0].message


def test_the_gate_table_is_jobsets_at_its_tag():
    assert BY_ID["jobset"].feature_gates == {"InPlaceRestart": False, "TLSOptions": True, "RestartJob": False,
                                             "ElasticJobSet": False}
