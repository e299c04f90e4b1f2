"""The ResourceQuota port (policies/kube/resource_quota.py) on upstream's cases: kubernetes
pkg/quota/v1/evaluator/core/pods_test.go TestPodConstraintsFunc (its five container cases, by name) and
TestPodEvaluatorUsage (the cases for a pod just created: no deletion timestamp, no terminal phase, no overhead, no
pod-level resources), then scopes (podMatchesScopeFunc) and controller.go's prettyPrint."""
from __future__ import annotations

import pytest

from policies.kube.limit_range import canonical, containers
from policies.kube.resource_quota import constraints, holds, matching, modelled, pod_usage, pretty


def c(name, requests=None, limits=None, **extra):
    res = {}
    if requests:
        res["requests"] = requests
    if limits:
        res["limits"] = limits
    return {"name": name, "resources": res, **extra}


@pytest.mark.parametrize("spec,required,message", [
    # init container resource missing
    ({"initContainers": [c("dummy", {"cpu": "1m"}, {"cpu": "2m"})]}, ["memory"], "must specify memory for: dummy"),
    # multiple init container resource missing
    ({"initContainers": [c("foo", {"cpu": "1m"}, {"cpu": "2m"}), c("bar", {"cpu": "1m"}, {"cpu": "2m"})]}, ["memory"],
     "must specify memory for: bar,foo"),
    # container resource missing
    ({"containers": [c("dummy", {"cpu": "1m"}, {"cpu": "2m"})]}, ["memory"], "must specify memory for: dummy"),
    # multiple container resource missing
    ({"containers": [c("foo", {"cpu": "1m"}, {"cpu": "2m"}), c("bar", {"cpu": "1m"}, {"cpu": "2m"})]}, ["memory"],
     "must specify memory for: bar,foo"),
    # container resource missing multiple
    ({"containers": [c("foo"), c("bar")]}, ["memory", "cpu"], "must specify cpu for: bar,foo; memory for: bar,foo"),
    # (here) a request without a limit, and a limit alone, which is also the request (SetDefaults_Pod)
    ({"containers": [c("foo", {"cpu": "1"})]}, ["limits.cpu", "requests.cpu"], "must specify limits.cpu for: foo"),
    ({"containers": [c("foo", None, {"cpu": "1"})]}, ["limits.cpu", "requests.cpu"], None),
    # (here) not in validationSet: a GPU or storage quota never makes containers state it
    ({"containers": [c("foo")]}, ["requests.nvidia.com/gpu", "requests.ephemeral-storage", "pods"], None),
])
def test_pod_constraints(spec, required, message):
    assert constraints(required, containers(spec)) == message


def usage(spec):
    return {k: canonical(q) for k, q in pod_usage(containers(spec)).items()}


def test_pod_usage():
    base = {"count/pods": "1", "pods": "1"}
    for key in ("initContainers", "containers"):  # "init container ..." and "container ..." cases alike
        assert usage({key: [c("a", {"cpu": "1m"}, {"cpu": "2m"})]}) == {
            **base, "cpu": "1m", "requests.cpu": "1m", "limits.cpu": "2m"}
        assert usage({key: [c("a", {"memory": "1m"}, {"memory": "2m"})]}) == {
            **base, "memory": "1m", "requests.memory": "1m", "limits.memory": "2m"}
        assert usage({key: [c("a", {"ephemeral-storage": "32Mi"}, {"ephemeral-storage": "64Mi"})]}) == {
            **base, "ephemeral-storage": "32Mi", "requests.ephemeral-storage": "32Mi",
            "limits.ephemeral-storage": "64Mi"}
        assert usage({key: [c("a", {"hugepages-2Mi": "100Mi"})]}) == {
            **base, "hugepages-2Mi": "100Mi", "requests.hugepages-2Mi": "100Mi"}
        assert usage({key: [c("a", {"example.com/dongle": "3"}, {"example.com/dongle": "3"})]}) == {
            **base, "requests.example.com/dongle": "3"}


def test_init_container_maximums_override_sum_of_containers():
    def r(cpu, mem, dongle):
        return {"cpu": cpu, "memory": mem, "example.com/dongle": dongle}
    spec = {"initContainers": [c("i0", r("4", "100M", "4"), r("8", "200M", "4")),
                               c("i1", r("1", "50M", "2"), r("2", "100M", "2"))],
            "containers": [c("a", r("1", "50M", "1"), r("2", "100M", "1")),
                           c("b", r("2", "25M", "2"), r("5", "50M", "2"))]}
    assert usage(spec) == {"count/pods": "1", "pods": "1", "cpu": "4", "requests.cpu": "4", "limits.cpu": "8",
                           "memory": "100M", "requests.memory": "100M", "limits.memory": "200M",
                           "requests.example.com/dongle": "4"}


def test_sidecars_add_to_the_containers():
    """resourcehelper.PodRequests: a restartable init container runs beside the containers."""
    assert usage({"initContainers": [c("s", {"cpu": "1"}, None, restartPolicy="Always")],
                  "containers": [c("a", {"cpu": "2"})]})["requests.cpu"] == "3"


def test_matching_resources():
    assert matching(["pods", "count/pods", "requests.nvidia.com/gpu", "limits.cpu", "services", "requests.storage",
                     "hugepages-2Mi", "requests.hugepages-2Mi"]) == [
        "pods", "count/pods", "requests.nvidia.com/gpu", "limits.cpu", "hugepages-2Mi", "requests.hugepages-2Mi"]


@pytest.mark.parametrize("scopes,spec,expected", [
    ({"scopes": ["Terminating"]}, {"activeDeadlineSeconds": 60, "containers": [c("a")]}, True),
    ({"scopes": ["Terminating"]}, {"containers": [c("a")]}, False),
    ({"scopes": ["NotTerminating"]}, {"containers": [c("a")]}, True),
    ({"scopes": ["BestEffort"]}, {"containers": [c("a")]}, True),
    ({"scopes": ["BestEffort"]}, {"containers": [c("a", {"cpu": "1"})]}, False),
    ({"scopes": ["NotBestEffort"]}, {"containers": [c("a", {"cpu": "1"})]}, True),
    ({"scopeSelector": {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]}},
     {"priorityClassName": "high", "containers": [c("a")]}, True),
    ({"scopeSelector": {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]}},
     {"containers": [c("a")]}, False),
    ({"scopeSelector": {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "NotIn", "values": ["high"]}]}},
     {"containers": [c("a")]}, True),
    ({"scopeSelector": {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "Exists"}]}},
     {"priorityClassName": "low", "containers": [c("a")]}, True),
    ({"scopeSelector": {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "DoesNotExist"}]}},
     {"priorityClassName": "low", "containers": [c("a")]}, False),
])
def test_scopes(scopes, spec, expected):
    quota = {"spec": {"hard": {"pods": "10"}, **scopes}}
    assert modelled(quota)
    assert holds(quota, spec, containers(spec)) is expected


def test_unmodelled_scope_and_untracked_quota():
    assert not modelled({"spec": {"hard": {"pods": "1"}, "scopes": ["CrossNamespacePodAffinity"]}})
    assert not holds({"spec": {"hard": {"services": "1"}}}, {}, [])


def test_pretty_print():
    from policies.kube.values import parse_quantity
    q = {k: parse_quantity(v) for k, v in {"requests.memory": "2Gi", "limits.cpu": "1500m"}.items()}
    assert pretty(q) == "limits.cpu=1500m,requests.memory=2Gi"
