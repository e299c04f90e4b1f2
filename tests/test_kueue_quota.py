"""Kueue's flavor assignment as far as it settles that a ClusterQueue never admits a workload
(policies/launchers/kueue_quota.py, RES010), and the toleration and node-affinity matching it rests on
(policies/kube/scheduling.py). The pinned values are upstream's: kubernetes v1.36 staging/src/k8s.io/api/core/v1/
toleration_test.go TestTolerationToleratesTaint, and kueue v0.19.2 pkg/scheduler/flavorassigner/flavorassigner_test.go
(the reasons a pod set gets where a flavor's maximum capacity is too small; its quotas are nominal quotas of a
ClusterQueue in no cohort)."""
from __future__ import annotations

import pytest

from policies.kube.scheduling import flavor_matches, taint_text, tolerates, untolerated_taint
from policies.kube.values import parse_quantity
from policies.launchers.kueue_quota import PodSet, namespace_refused, never_admitted, pod_requests

# toleration_test.go: (toleration, taint, tolerated)
TOLERATIONS = [
    ({"key": "foo", "operator": "Exists", "effect": "NoSchedule"}, {"key": "foo", "effect": "NoSchedule"}, True),
    ({"key": "foo", "operator": "Exists", "effect": "NoSchedule"},
     {"key": "foo", "value": "bar", "effect": "NoSchedule"}, True),
    ({"key": "", "operator": "Exists", "effect": "NoSchedule"},
     {"key": "foo", "value": "bar", "effect": "NoSchedule"}, True),
    ({"key": "foo", "operator": "Equal", "value": "bar", "effect": "NoSchedule"},
     {"key": "foo", "value": "bar", "effect": "NoSchedule"}, True),
    ({"key": "foo", "operator": "Equal", "value": "value1", "effect": "NoSchedule"},
     {"key": "foo", "value": "value2", "effect": "NoSchedule"}, False),
    ({"key": "foo", "operator": "Equal", "value": "bar", "effect": "NoSchedule"},
     {"key": "foo", "value": "bar", "effect": "NoExecute"}, False),
    ({"key": "node.kubernetes.io/sla", "operator": "Gt", "value": "950", "effect": "NoSchedule"},
     {"key": "node.kubernetes.io/sla", "value": "800", "effect": "NoSchedule"}, False),
    ({"key": "node.kubernetes.io/sla", "operator": "Gt", "value": "750", "effect": "NoSchedule"},
     {"key": "node.kubernetes.io/sla", "value": "950", "effect": "NoSchedule"}, True),
    ({"key": "node.kubernetes.io/sla", "operator": "Lt", "value": "800", "effect": "NoSchedule"},
     {"key": "node.kubernetes.io/sla", "value": "950", "effect": "NoSchedule"}, False),
    ({"key": "node.kubernetes.io/sla", "operator": "Lt", "value": "950", "effect": "NoSchedule"},
     {"key": "node.kubernetes.io/sla", "value": "800", "effect": "NoSchedule"}, True),
    ({"key": "node.kubernetes.io/sla", "operator": "Gt", "value": "950", "effect": "NoSchedule"},
     {"key": "node.kubernetes.io/sla", "value": "950", "effect": "NoSchedule"}, False),
    ({"key": "node.kubernetes.io/sla", "operator": "Gt", "value": "950", "effect": "NoSchedule"},
     {"key": "node.kubernetes.io/sla", "value": "high", "effect": "NoSchedule"}, False),
    ({"key": "test-key", "operator": "Gt", "value": "-100", "effect": "NoSchedule"},
     {"key": "test-key", "value": "-200", "effect": "NoSchedule"}, False),
    ({"key": "test-key", "operator": "Gt", "value": "9223372036854775806", "effect": "NoSchedule"},
     {"key": "test-key", "value": "100", "effect": "NoSchedule"}, False),
]


@pytest.mark.parametrize("toleration,taint,tolerated", TOLERATIONS)
def test_toleration_tolerates_taint_as_upstream(toleration, taint, tolerated):
    assert tolerates(toleration, taint) is tolerated


def test_untolerated_taint_reads_only_the_effects_asked_for():
    taints = [{"key": "a", "effect": "PreferNoSchedule"}, {"key": "spot", "value": "true", "effect": "NoSchedule"}]
    found = untolerated_taint(taints, [], ("NoSchedule", "NoExecute"))
    assert found is not None and taint_text(found) == "spot=true:NoSchedule"
    assert untolerated_taint(taints, [{"key": "spot", "operator": "Exists"}], ("NoSchedule", "NoExecute")) is None
    assert taint_text({"key": "gpu", "effect": "NoExecute"}) == "gpu:NoExecute"


def test_flavor_matches_only_on_the_flavors_own_label_keys():
    """flavorSelector (flavorassigner.go 1278-1328): a nodeSelector pair or an expression on a key the flavor does
    not label is left out; a required term left with no expression matches any flavor."""
    labels = {"instance-type": "spot"}
    assert flavor_matches({"nodeSelector": {"instance-type": "spot", "zone": "a"}}, labels)
    assert not flavor_matches({"nodeSelector": {"instance-type": "on-demand"}}, labels)

    def affinity(*terms):
        return {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": list(t)} for t in terms]}}}}

    not_in = {"key": "instance-type", "operator": "NotIn", "values": ["spot"]}
    other = {"key": "zone", "operator": "In", "values": ["a"]}
    assert not flavor_matches(affinity([not_in]), labels)
    assert flavor_matches(affinity([not_in], [other]), labels)  # the second term has no key of the flavor's
    assert flavor_matches(affinity([{"key": "instance-type", "operator": "In", "values": ["spot", "x"]}]), labels)
    assert flavor_matches(affinity([{"key": "instance-type", "operator": "Exists"}]), labels)
    assert not flavor_matches(affinity([{"key": "instance-type", "operator": "DoesNotExist"}]), labels)
    assert flavor_matches({}, labels) and flavor_matches(affinity(), labels)


def _cq(*groups, cohort=None):
    """MakeClusterQueue(...).ResourceGroup(MakeFlavorQuotas(name).Resource(r, nominal)...): each group a list of
    (flavor, {resource: nominal or (nominal, borrowingLimit)})."""
    rgs = []
    for flavors in groups:
        covered = sorted({r for _, res in flavors for r in res})
        rgs.append({"coveredResources": covered, "flavors": [
            {"name": name, "resources": [{"name": r, "nominalQuota": q[0], "borrowingLimit": q[1]}
                                         if isinstance(q, tuple) else {"name": r, "nominalQuota": q}
                                         for r, q in res.items()]} for name, res in flavors]})
    return {"spec": {"resourceGroups": rgs, **({"cohortName": cohort} if cohort else {})}}


def _ps(name, count, requests, spec=None):
    return PodSet(name, count, spec or {}, {k: parse_quantity(v) for k, v in requests.items()})


FLAVORS = {name: {"metadata": {"name": name}} for name in ("one", "two", "b_one", "b_two")}


def test_a_pod_set_over_every_flavors_maximum_capacity():
    """flavorassigner_test.go "multiple resource groups, one could fit with preemption, other doesn't fit": the memory
    group's only flavor holds 1Mi, the pod set asks for 10Mi."""
    cq = _cq([("one", {"cpu": "3"})], [("b_one", {"memory": "1Mi"})])
    assert never_admitted(cq, FLAVORS, [_ps("main", 1, {"cpu": "3", "memory": "10Mi"})]) == [
        "couldn't assign flavors to pod set main: insufficient quota for memory in flavor b_one, previously "
        "considered podsets requests (0) + current podset request (10Mi) > maximum capacity (1Mi)"]


def test_a_later_flavor_that_fits_leaves_nothing_to_say():
    """flavorassigner_test.go, the pod set of 3 CPUs and 10Mi: flavor one (2 CPUs) is too small, two (4) fits."""
    cq = _cq([("one", {"cpu": "2"}), ("two", {"cpu": "4"})], [("b_one", {"memory": "1Gi"}), ("b_two", {"memory": "5Gi"})])
    assert never_admitted(cq, FLAVORS, [_ps("main", 1, {"cpu": "3", "memory": "10Mi"})]) == []
    small = _cq([("one", {"cpu": "2"}), ("two", {"cpu": "2"})], [("b_one", {"memory": "1Gi"})])
    assert never_admitted(small, FLAVORS, [_ps("main", 1, {"cpu": "3", "memory": "10Mi"})]) == [
        "couldn't assign flavors to pod set main: insufficient quota for cpu in flavor one, previously considered "
        "podsets requests (0) + current podset request (3) > maximum capacity (2), insufficient quota for cpu in "
        "flavor two, previously considered podsets requests (0) + current podset request (3) > maximum capacity (2)"]


def test_one_flavor_for_all_the_resources_of_its_group():
    """flavorassigner_test.go "multiple flavors, leader worker set, workers request GPU ...": 4 workers of 1 CPU and
    1 GPU; flavor one holds 4 GPUs but 4 CPUs are fine, flavor two none: the workers fit one alone, the leader's CPU
    beside them does not (5 > 4 in one, and two has no GPU for the workers): together never."""
    cq = _cq([("one", {"cpu": "4", "example.com/gpu": "4"}), ("two", {"cpu": "5", "example.com/gpu": "0"})])
    workers = _ps("worker", 4, {"cpu": "1", "example.com/gpu": "1"})
    assert never_admitted(cq, FLAVORS, [workers]) == []
    assert never_admitted(cq, FLAVORS, [_ps("worker", 5, {"cpu": "1", "example.com/gpu": "1"})]) == [
        "couldn't assign flavors to pod set worker: insufficient quota for cpu in flavor one, previously considered "
        "podsets requests (0) + current podset request (5) > maximum capacity (4), insufficient quota for "
        "example.com/gpu in flavor one, previously considered podsets requests (0) + current podset request (5) > "
        "maximum capacity (4), insufficient quota for example.com/gpu in flavor two, previously considered podsets "
        "requests (0) + current podset request (5) > maximum capacity (0)"]
    # The leader may take flavor two (5 CPUs), so 4 + 1 CPUs fit in one and two together: nothing is claimed.
    assert never_admitted(cq, FLAVORS, [workers, _ps("leader", 1, {"cpu": "1"})]) == []
    # A leader of 6 CPUs fits no flavor on its own.
    assert never_admitted(cq, FLAVORS, [workers, _ps("leader", 1, {"cpu": "6"})])[0].startswith(
        "couldn't assign flavors to pod set leader: insufficient quota for cpu in flavor one")


def test_pod_sets_together_over_every_flavor_they_may_use():
    cq = _cq([("one", {"cpu": "4"})])
    assert never_admitted(cq, FLAVORS, [_ps("a", 3, {"cpu": "1"}), _ps("b", 2, {"cpu": "1"})]) == [
        "insufficient quota for cpu: the pod sets together request 5, more than the maximum capacity of the flavors "
        "they may use (one: 4)"]
    assert never_admitted(cq, FLAVORS, [_ps("a", 2, {"cpu": "1"}), _ps("b", 2, {"cpu": "1"})]) == []


def test_what_the_manifests_do_not_settle_is_never_a_claim():
    cq = _cq([("one", {"example.com/gpu": "4"})])
    big = [_ps("main", 8, {"example.com/gpu": "1"})]
    assert never_admitted(cq, FLAVORS, big)
    assert never_admitted(cq, {}, big) == []                                   # the flavor is not in the manifests
    assert never_admitted(_cq([("one", {"example.com/gpu": "4"})], cohort="c"), FLAVORS, big) == []  # may borrow
    bounded = _cq([("one", {"example.com/gpu": ("4", "2")})], cohort="c")    # borrows at most 2
    assert never_admitted(bounded, FLAVORS, big)[0].endswith("> maximum capacity (6)")


def test_a_resource_no_group_covers_and_the_pods_resource():
    cq = _cq([("one", {"cpu": "8", "memory": "8Gi"})])
    assert never_admitted(cq, FLAVORS, [_ps("main", 2, {"cpu": "1", "nvidia.com/gpu": "1"})]) == [
        "couldn't assign flavors to pod set main: resource nvidia.com/gpu unavailable in ClusterQueue"]
    pods = _cq([("one", {"cpu": "8", "pods": "2"})])  # Kueue counts `pods` where the ClusterQueue covers it
    assert never_admitted(pods, FLAVORS, [_ps("main", 3, {"cpu": "1"})]) == [
        "couldn't assign flavors to pod set main: insufficient quota for pods in flavor one, previously considered "
        "podsets requests (0) + current podset request (3) > maximum capacity (2)"]


def test_taints_and_node_labels_of_a_flavor_in_the_manifests():
    flavors = {"spot": {"spec": {"nodeLabels": {"instance-type": "spot"},
                                 "nodeTaints": [{"key": "spot", "value": "true", "effect": "NoSchedule"}]}}}
    cq = _cq([("spot", {"cpu": "9"})])
    plain = _ps("main", 1, {"cpu": "1"})
    assert never_admitted(cq, flavors, [plain]) == [
        "couldn't assign flavors to pod set main: untolerated taint spot=true:NoSchedule in flavor spot"]
    tolerating = {"tolerations": [{"key": "spot", "operator": "Equal", "value": "true", "effect": "NoSchedule"}]}
    assert never_admitted(cq, flavors, [_ps("main", 1, {"cpu": "1"}, tolerating)]) == []
    flavors["spot"]["spec"]["tolerations"] = [{"key": "spot", "operator": "Exists"}]  # the flavor's own
    assert never_admitted(cq, flavors, [plain]) == []
    elsewhere = {**tolerating, "nodeSelector": {"instance-type": "on-demand"}}
    assert never_admitted(cq, flavors, [_ps("main", 1, {"cpu": "1"}, elsewhere)]) == [
        "couldn't assign flavors to pod set main: flavor spot doesn't match node affinity"]


def test_pod_requests_as_kueue_counts_them():
    """Limits stand in for missing requests; init containers count at their largest, sidecars beside the others;
    the pod's overhead is added; zero values are left out."""
    spec = {"containers": [{"name": "a", "resources": {"limits": {"nvidia.com/gpu": 8, "cpu": "4"},
                                                       "requests": {"cpu": "2"}}},
                           {"name": "b", "resources": {"requests": {"cpu": "500m", "memory": 0}}}],
            "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "3"}}}],
            "overhead": {"cpu": "250m"}}
    got = {k: str(q.value) for k, q in pod_requests(spec).items()}
    assert got == {"nvidia.com/gpu": "8", "cpu": "13/4"}  # max(2 + 0.5, 3) + 0.25


def test_the_namespace_selector_of_the_cluster_queue():
    """ValidateAdmissibility (pkg/workload/resources.go 228-246): an unset namespaceSelector selects nothing; `{}`
    every namespace; a selector on other labels than the name label is judged only against a Namespace object."""
    unset = {"spec": {}}
    assert namespace_refused(unset, "default", None) == ("workload namespace doesn't match ClusterQueue selector (the "
                                                         "ClusterQueue sets no namespaceSelector, which selects no "
                                                         "namespace)")
    assert namespace_refused({"spec": {"namespaceSelector": {}}}, "default", None) is None
    by_name = {"spec": {"namespaceSelector": {"matchExpressions": [
        {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["team-a", "team-b"]}]}}}
    assert namespace_refused(by_name, "team-b", None) is None
    assert namespace_refused(by_name, "default", None) == ("workload namespace doesn't match ClusterQueue selector "
                                                           "(namespace default)")
    team = {"spec": {"namespaceSelector": {"matchLabels": {"team": "ml"}}}}
    assert namespace_refused(team, "default", None) is None  # the cluster's Namespace may carry the label
    assert namespace_refused(team, "default", {"metadata": {"labels": {"team": "ml"}}}) is None
    assert namespace_refused(team, "default", {"metadata": {"labels": {"team": "web"}}}).endswith("(namespace default)")
    assert namespace_refused(team, "", None) is None  # a namespace the manifests do not name


def test_make_plan_says_a_workload_kueue_never_admits_starts_no_pod():
    """RES010's error tells `make plan` (as SEC010's and ADM001's refusals do): no pod of the workload is created
    (`pods_now` 0), with a note; the warning without a declared integration claims nothing there."""
    import json

    from conftest import FIXTURES, run_cli
    rules = FIXTURES / "rules/RES010"
    fail, env = rules / "fail/gpus-over-nominal-quota.yaml", rules / "policy.yaml"
    proc = run_cli("plan", "--format", "json", "--env", str(env), str(fail))
    assert proc.returncode in (0, 1), proc.stderr
    (job,) = [w for u in json.loads(proc.stdout)["overlays"] for w in u["workloads"]]
    assert job["pod_count"] == 5 and job["pods_now"] == 0  # queued: 0 now in any case
    assert [(r["object"], r["field"]) for r in job["pods_refused"]] == [("PyTorchJob/default/pytorch-simple",
                                                                         "metadata.labels")]
    assert job["pods_refused"][0]["why"].startswith("ClusterQueue 'cluster-queue' (of LocalQueue 'user-queue') never "
                                                    "admits it")
    text = run_cli("plan", "--env", str(env), str(fail)).stdout
    assert ("note: PyTorchJob/pytorch-simple: no pod of PyTorchJob/default/pytorch-simple is created: ClusterQueue "
            "'cluster-queue' (of LocalQueue 'user-queue') never admits it: couldn't assign flavors to pod set "
            "spec.pytorchReplicaSpecs.Worker.template: insufficient quota for nvidia.com/gpu") in text
    assert "no pod of" not in run_cli("plan", str(fail)).stdout  # no declaration: a warning, no claim
