"""An environment's `clusterDomain` (components/<env>/policy.yaml): validated as a DNS-1123 subdomain; where declared,
TOPO011's setHostnameAsFQDN limit counts with it and is an error, TOPO003 accepts pod 0's name under it (and not
under cluster.local), and `make simulate` resolves the pods' names under it. Undeclared, cluster.local stays the
assumption: a warning for the FQDN limit, the cluster.local forms for TOPO003 and the simulator."""
from __future__ import annotations

import io

import pytest

from policies.report import engine
from policies.rules import environment
from policies.report.engine import Unit, check_policies
from policies.render.files import read
from policies.kube.objects import ERROR, WARNING, Manifest
from policies.rules.kit import Environment
from policies.schema import BuiltinValidator

from conftest import FIXTURES, REPO

DECLARATION = """apiVersion: policies.ddp/v1
kind: Environment
metadata: {name: lab}
spec:
  gpusPerNode: 8
"""


def declared(tmp_path, domain: str) -> Environment:
    path = tmp_path / "policy.yaml"
    path.write_text(DECLARATION + f"  clusterDomain: {domain}\n")
    env, problems = environment.load(path)
    assert not problems, [p.message for p in problems]
    return env


def test_undeclared_is_none_and_declared_is_read(tmp_path):
    path = tmp_path / "policy.yaml"
    path.write_text(DECLARATION)
    env, _ = environment.load(path)
    assert env.cluster_domain is None and environment.describe(env)["clusterDomain"] is None
    assert declared(tmp_path, "corp.example").cluster_domain == "corp.example"


@pytest.mark.parametrize("value, shown", [
    ("Cluster.Local", "'Cluster.Local'"),
    ("cluster.local.", "'cluster.local.'"),
    ("-corp.example", "'-corp.example'"),
    ("corp_example", "'corp_example'"),
    ("a" * 63 + ("." + "a" * 63) * 3, "'" + "a" * 63),  # 255 characters: over 253
    ("8", "8"),  # not a string
])
def test_a_bad_cluster_domain_is_one_env_error_with_file_and_line(tmp_path, value, shown):
    path = tmp_path / "policy.yaml"
    text = DECLARATION + f"  clusterDomain: {value}\n"
    path.write_text(text)
    env, problems = environment.load(path)
    assert env is None and len(problems) == 1
    [p] = problems
    assert p.rule == "ENV" and p.severity == ERROR and f"spec.clusterDomain is {shown}" in p.message, p.message
    assert p.location == (str(path), len(text.splitlines())) and "\n" not in p.line()


def test_an_operators_domain_is_the_one_pod_names_end_in(tmp_path):
    operator = Environment(name="op", source="op.yaml", cluster_domain="op.example")
    own = Environment(name="own", source="own.yaml", cluster_domain="own.example")
    assert environment.tightened(own, operator).cluster_domain == "op.example"
    assert environment.tightened(own, Environment(name="op", source="op.yaml")).cluster_domain == "own.example"
    assert environment.tightened(None, operator).cluster_domain == "op.example"


# TOPO011: setHostnameAsFQDN. myjob-1.distributed-training-workers.ml-training-team.svc. is 58 characters.
def fqdn_problems(namespace: str | None, env: Environment | None):
    meta = {"name": "myjob", **({"namespace": namespace} if namespace else {})}
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": {
        "completions": 2, "parallelism": 2, "completionMode": "Indexed", "template": {"spec": {
            "restartPolicy": "Never", "subdomain": "distributed-training-workers", "setHostnameAsFQDN": True,
            "containers": [{"name": "c", "image": "image:1"}]}}}}
    unit = engine.Unit("t.yaml", "file", [Manifest(job, "t.yaml", 0)])
    unit.environment = env
    engine.validate([unit], BuiltinValidator())
    return [p for p in unit.problems if p.rule == "TOPO011" and "setHostnameAsFQDN" in p.message]


def test_fqdn_fits_with_a_short_declared_domain(tmp_path):
    # 58 + 6 = 64 characters: the limit itself, which the kubelet accepts.
    assert not fqdn_problems("ml-training-team", declared(tmp_path, "corp.x"))


def test_fqdn_over_the_limit_with_the_declared_domain_is_an_error(tmp_path):
    [p] = fqdn_problems("ml-training-team", declared(tmp_path, "corp.example"))
    assert p.severity == ERROR, p.line()
    assert "myjob-1.distributed-training-workers.ml-training-team.svc.corp.example is 70 characters" in p.message
    assert "the environment's cluster domain corp.example" in p.message and "if the" not in p.message
    # 58 + 7 = 65: one over.
    [p] = fqdn_problems("ml-training-team", declared(tmp_path, "corp.xy"))
    assert p.severity == ERROR and "is 65 characters, over 64" in p.message
    # Declared as cluster.local, the finding is no longer a condition on the cluster either.
    [p] = fqdn_problems("ml-training-team", declared(tmp_path, "cluster.local"))
    assert p.severity == ERROR and "if the cluster domain" not in p.message


def test_fqdn_without_a_declared_domain_keeps_its_warning():
    [p] = fqdn_problems("ml-training-team", None)
    assert p.severity == WARNING and "if the cluster domain is cluster.local" in p.message
    # An environment that declares other things but no clusterDomain: the same.
    [p] = fqdn_problems("ml-training-team", Environment(name="lab", source="policy.yaml", gpus_per_node=8))
    assert p.severity == WARNING and "if the cluster domain is cluster.local" in p.message


def test_fqdn_with_a_declared_domain_but_no_namespace_is_a_warning_on_the_namespace(tmp_path):
    # The manifests do not say the namespace: 'default' (myjob-1.distributed-training-workers.default.svc. is 49).
    [p] = fqdn_problems(None, declared(tmp_path, "a-rather-long-corporate-domain.example"))
    assert p.severity == WARNING and "if the namespace is 'default'" in p.message, p.message
    assert not fqdn_problems(None, declared(tmp_path, "corp.example"))


# TOPO003: pod 0's FQDN under the cluster domain.
POD0_FQDN = FIXTURES / "rules/TOPO003/pass/fqdn-with-namespace.yaml"  # ddp-train-0.ddp-train.default.svc.cluster.local


def topo003(tmp_path, text: str, env: Environment | None):
    path = tmp_path / "manifests.yaml"
    path.write_text(text)
    unit = Unit(str(path), "file", read(str(path)))
    unit.environment = env
    check_policies(unit)
    return [p for p in unit.problems if p.rule == "TOPO003"]


def test_topo003_accepts_the_declared_domain_and_refuses_cluster_local_there(tmp_path):
    text = POD0_FQDN.read_text()
    assert ".svc.cluster.local" in text
    corp = declared(tmp_path, "corp.example")
    # Undeclared, or declared as cluster.local: the fixture's name resolves.
    assert not topo003(tmp_path, text, None)
    assert not topo003(tmp_path, text, declared(tmp_path, "cluster.local"))
    # Declared as corp.example: the cluster.local name does not resolve there, an error saying why.
    [p] = topo003(tmp_path, text, corp)
    assert p.severity == ERROR, p.line()
    assert "'ddp-train-0.ddp-train.default.svc.cluster.local'" in p.message
    assert "the environment's cluster domain is corp.example" in p.message
    assert p.hint == "set it to ddp-train-0.ddp-train"
    # Its own domain's name (with or without the final dot), and the shorter forms, resolve.
    for host in ("ddp-train-0.ddp-train.default.svc.corp.example", "ddp-train-0.ddp-train.default.svc.corp.example.",
                 "ddp-train-0.ddp-train.default.svc", "ddp-train-0.ddp-train"):
        assert not topo003(tmp_path, text.replace("ddp-train-0.ddp-train.default.svc.cluster.local", host), corp), host
    # Undeclared, another domain's name is not assumed to resolve.
    other = text.replace(".svc.cluster.local", ".svc.corp.example")
    [p] = topo003(tmp_path, other, None)
    assert p.severity == ERROR and "cluster domain" not in p.message


def test_topo003_etcd_endpoint_under_cluster_local_where_another_domain_is_declared(tmp_path):
    text = (FIXTURES / "rules/RDZV002/pass/etcd-own-ids.yaml").read_text()
    assert "--rdzv-endpoint=etcd:2379" in text
    local = text.replace("--rdzv-endpoint=etcd:2379", "--rdzv-endpoint=etcd.default.svc.cluster.local:2379")
    corp = declared(tmp_path, "corp.example")
    assert not topo003(tmp_path, local, None)
    problems = topo003(tmp_path, local, corp)
    assert problems and all(p.severity == ERROR for p in problems)
    assert "etcd endpoint host is 'etcd.default.svc.cluster.local'" in problems[0].message
    assert problems[0].hint == "set it to etcd.default.svc.corp.example, or etcd"
    ok = text.replace("--rdzv-endpoint=etcd:2379", "--rdzv-endpoint=etcd.default.svc.corp.example:2379")
    assert not topo003(tmp_path, ok, corp)


# make simulate: the name table and the pods' /etc/hosts.
def test_simulate_resolves_the_declared_domains_names(tmp_path):
    from policies.simulate.simulation import Simulation

    (unit,) = engine.collect([str(REPO / "overlays/kind-cpu/statefulset")], REPO / "overlays")
    for domain, other in ((None, "corp.example"), ("corp.example", "cluster.local")):
        sim = Simulation(unit.manifests, tmp_path / "r", 180, io.StringIO(), cluster_domain=domain)
        pods = sim.plan()
        suffix = f".svc.{domain or 'cluster.local'}"
        assert any(name.endswith(suffix) for name in sim.layout.dns), sorted(sim.layout.dns)
        assert not any(name.endswith(f".svc.{other}") for name in sim.layout.dns), sorted(sim.layout.dns)
        hosts = next(text for path, text in pods[0].files.items() if path.name == "hosts")
        assert hosts.splitlines()[0].split()[1] == f"{pods[0].pod.hostname}.{pods[0].pod.subdomain}.default{suffix}"
    assert not (tmp_path / "r").exists()  # planning writes nothing
