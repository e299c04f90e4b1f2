"""The API server's core validation of pod templates and Services, and the kubelet's hostname limit
(policies/launchers/core_validation.py): what the conformance fixtures cannot say (a warning, a skipped object)."""
from __future__ import annotations

from policies.report import engine
from policies.kube.objects import ERROR, WARNING, Manifest
from policies.schema import BuiltinValidator


def run(objs):
    unit = engine.Unit("t.yaml", "file", [Manifest(o, "t.yaml", i) for i, o in enumerate(objs)])
    engine.validate([unit], BuiltinValidator())
    return unit


def job(namespace, subdomain):
    meta = {"name": "myjob", **({"namespace": namespace} if namespace else {})}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": {
        "completions": 2, "parallelism": 2, "completionMode": "Indexed", "template": {"spec": {
            "restartPolicy": "Never", "subdomain": subdomain, "setHostnameAsFQDN": True,
            "containers": [{"name": "c", "image": "image:1"}]}}}}


def fqdn(unit):
    return [p for p in unit.problems if p.rule == "TOPO011" and "setHostnameAsFQDN" in p.message]


def test_fqdn_too_long_only_with_the_default_cluster_domain_is_a_warning():
    # myjob-1.distributed-training-workers.ml-training-team.svc. is 58 characters: 71 with cluster.local, but a
    # cluster whose domain is short enough would start the pod.
    [p] = fqdn(run([job("ml-training-team", "distributed-training-workers")]))
    assert p.severity == WARNING and "if the cluster domain is cluster.local" in p.message


def test_fqdn_without_namespace_is_a_warning_naming_the_namespace_assumed():
    [p] = fqdn(run([job(None, "distributed-training-workers-headless-service")]))
    assert p.severity == WARNING and "the namespace 'default'" in p.message


def test_fqdn_not_checked_without_set_hostname_as_fqdn():
    obj = job("ml-training-team", "distributed-training-workers-headless")
    del obj["spec"]["template"]["spec"]["setHostnameAsFQDN"]
    assert not fqdn(run([obj]))


def test_service_the_schema_refuses_is_not_checked_again():
    # An unknown field: the API server's decoding refuses it before ValidateService runs, so one error, not two.
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"}, "spec": {"portz": [{"port": 80}]}}
    errors = [p.rule for p in run([svc]).problems if p.severity == ERROR]
    assert errors == ["SCHEMA"]


def test_service_without_ports_is_refused_unless_headless():
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"}, "spec": {"selector": {"a": "b"}}}
    assert [p.field for p in run([svc]).problems if p.rule == "TOPO011"] == ["spec.ports"]
    svc["spec"]["clusterIP"] = "None"
    assert not [p for p in run([svc]).problems if p.rule == "TOPO011"]


def test_service_account_and_node_names_are_dns_subdomains():
    """ValidatePodSpec refuses a serviceAccountName or nodeName that is not a DNS-1123 subdomain (NameIsDNSSubdomain):
    ai-on-gke's GPU training Job (tutorials-and-examples/gpu-examples/training-single-gpu/src/gke-config/
    standard-tf-mnist-train.yaml) as written names `$K8S_SA_NAME`, which envsubst was meant to fill."""
    obj = job(None, "w")
    obj["spec"]["template"]["spec"]["serviceAccountName"] = "$K8S_SA_NAME"
    refused = [p for p in run([obj]).problems if p.rule == "TOPO011" and p.severity == ERROR]
    assert [p.field for p in refused] == ["spec.template.spec.serviceAccountName"], refused
    obj["spec"]["template"]["spec"]["serviceAccountName"] = "training-sa"
    obj["spec"]["template"]["spec"]["nodeName"] = "ip-10-0-0-1.ec2.internal"
    assert not [p for p in run([obj]).problems if p.rule == "TOPO011" and p.severity == ERROR]
    obj["spec"]["template"]["spec"]["nodeName"] = "Node_1"
    assert [p.field for p in run([obj]).problems if p.rule == "TOPO011" and p.severity == ERROR] == \
        ["spec.template.spec.nodeName"]
