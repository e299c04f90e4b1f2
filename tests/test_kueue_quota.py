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
from policies.launchers.kueue_quota import (CQ_INACTIVE, MULTIKUEUE, PROVISIONING, PodSet, admission_checks,
                                            inactive_reasons, namespace_refused, never_active_checks, never_admitted,
                                            pod_requests, stop_policy)

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


def _inactive(cq, objs, complete=True):
    """Kueue's Active condition message of a ClusterQueue found inactive, or its Ready message (clusterqueue.go
    inactiveReason 310-366)."""
    reasons = inactive_reasons(cq, objs, complete)
    return CQ_INACTIVE.format(", ".join(reasons)) if reasons else "Can admit new workloads"


def _check(name, controller="controller1", parameters=None):
    return name, {"metadata": {"name": name}, "spec": {"controllerName": controller,
                                                        **({"parameters": parameters} if parameters else {})}}


PRC = {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig", "name": "prc"}


def test_inactive_reasons_as_the_cache_tests_give_them():
    """kueue v0.19.2 pkg/cache/scheduler/cache_test.go TestClusterQueueReadiness (3145-3233): queue1 has one flavor
    flavor1 (cpu 10) and names check1; `complete` manifests, so what they do not hold does not exist."""
    base = {"spec": {"resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
        {"name": "flavor1", "resources": [{"name": "cpu", "nominalQuota": "10"}]}]}],
        "admissionChecksStrategy": {"admissionChecks": [{"name": "check1"}]}}}
    flavor = {"flavor1": {"metadata": {"name": "flavor1"}}}
    check = dict([_check("check1")])
    assert _inactive(base, {"AdmissionCheck": check}) == ("Can't admit new workloads: references missing "
                                                          "ResourceFlavor(s): flavor1.")
    assert _inactive(base, {"ResourceFlavor": flavor}) == ("Can't admit new workloads: references missing "
                                                           "AdmissionCheck(s): check1.")
    assert _inactive(base, {}) == ("Can't admit new workloads: references missing ResourceFlavor(s): flavor1, "
                                   "references missing AdmissionCheck(s): check1.")
    assert _inactive(base, {"ResourceFlavor": flavor, "AdmissionCheck": check}) == "Can admit new workloads"
    assert _inactive({"spec": {"stopPolicy": "HoldAndDrain"}}, {}) == "Can't admit new workloads: is stopped."
    # Not complete: the cluster may hold what the manifests do not, so nothing is claimed of it.
    assert inactive_reasons(base, {}, complete=False) == []
    # "check inactive" (an AdmissionCheck no controller marked Active): a check in the manifests never carries its
    # status, so only one whose controller is Kueue's own and whose parameters rule it out is said to be inactive.
    assert _inactive(base, {"ResourceFlavor": flavor, "AdmissionCheck": dict([_check("check1", PROVISIONING)])}) == (
        "Can't admit new workloads: references inactive AdmissionCheck(s): check1.")


def test_inactive_reasons_as_the_clusterqueue_tests_give_them():
    """clusterqueue_test.go TestClusterQueueUpdateWithAdmissionCheck (180-507): a ClusterQueue naming check1-check3,
    as a v1beta1 `admissionChecks` list (cqWithAC) and as a strategy (cqWithACStrategy), no resource groups."""
    listed = {"spec": {"admissionChecks": ["check1", "check2", "check3"]}}
    strategy = {"spec": {"admissionChecksStrategy": {"admissionChecks": [{"name": f"check{i}"} for i in (1, 2, 3)]}}}
    valid = {"AdmissionCheck": dict(_check(f"check{i}", f"controller{i}") for i in (1, 2, 3))}
    two = {"AdmissionCheck": dict(_check(f"check{i}", f"controller{i}") for i in (1, 2))}
    for cq in (listed, strategy):
        assert admission_checks(cq) == {"check1": set(), "check2": set(), "check3": set()}
        assert _inactive(cq, valid) == "Can admit new workloads"
        assert _inactive(cq, two) == "Can't admit new workloads: references missing AdmissionCheck(s): check3."
        inactive = {"AdmissionCheck": {**two["AdmissionCheck"], **dict([_check("check3", PROVISIONING)])}}
        assert _inactive(cq, inactive) == ("Can't admit new workloads: references inactive AdmissionCheck(s): "
                                           "check3.")
    multiple = {"AdmissionCheck": dict([_check("check1", MULTIKUEUE), _check("check2", "controller2"),
                                        _check("check3", MULTIKUEUE)])}
    assert _inactive(strategy, multiple) == ("Can't admit new workloads: Cannot use multiple MultiKueue "
                                             "AdmissionChecks on the same ClusterQueue, found: check1,check3.")
    both = {"AdmissionCheck": dict([_check("check1", MULTIKUEUE), _check("check2", "controller2"),
                                    _check("check3", PROVISIONING, PRC)]),
            "ProvisioningRequestConfig": {"prc": {}}}
    assert _inactive(listed, both) == ("Can't admit new workloads: Cannot use both MultiKueue and ProvisioningRequest "
                                       "AdmissionChecks together, found: check1, check3.")


def test_a_multikueue_check_on_some_flavors_only():
    """updateWithAdmissionChecks 437-445: a MultiKueue check must apply to every flavor of the ClusterQueue."""
    cq = {"spec": {"resourceGroups": [{"coveredResources": ["cpu"], "flavors": [{"name": "a"}, {"name": "b"}]}],
                   "admissionChecksStrategy": {"admissionChecks": [{"name": "mk", "onFlavors": ["a"]}]}}}
    objs = {"ResourceFlavor": {"a": {}, "b": {}}, "AdmissionCheck": dict([_check("mk", MULTIKUEUE)])}
    assert _inactive(cq, objs) == ("Can't admit new workloads: Cannot specify MultiKueue AdmissionCheck per flavor, "
                                   "found: mk.")
    cq["spec"]["admissionChecksStrategy"]["admissionChecks"][0]["onFlavors"] = ["a", "b"]
    assert _inactive(cq, objs) == "Can admit new workloads"


def test_a_tas_flavor_whose_topology_does_not_exist():
    """clusterqueue_test.go TestClusterQueueReadinessWithTAS (509-650): "Referenced TAS flavor without topology", and
    "TAS supports MultiKueue AdmissionCheck" (isTASViolated 368-380 skips the topology beside a MultiKueue check)."""
    cq = {"spec": {"resourceGroups": [{"coveredResources": ["example.com/gpu"], "flavors": [
        {"name": "tas-flavor", "resources": [{"name": "example.com/gpu", "nominalQuota": "5"}]}]}]}}
    tas = {"ResourceFlavor": {"tas-flavor": {"spec": {"topologyName": "example-topology"}}}}
    assert _inactive(cq, tas) == ('Can\'t admit new workloads: there is no Topology "example-topology" for TAS flavor '
                                  '"tas-flavor".')
    assert _inactive(cq, {**tas, "Topology": {"example-topology": {}}}) == "Can admit new workloads"
    assert inactive_reasons(cq, tas, complete=False) == []
    cq["spec"]["admissionChecksStrategy"] = {"admissionChecks": [{"name": "mk-check"}]}
    assert _inactive(cq, {**tas, "AdmissionCheck": dict([_check("mk-check", MULTIKUEUE)])}) == "Can admit new workloads"


def test_a_provisioning_check_is_never_active_without_its_config():
    """provisioning/admissioncheck_reconciler.go 44-57 with refValidForGK (pkg/util/admissioncheck/admissioncheck.go
    110-126): the parameters must name a kueue.x-k8s.io ProvisioningRequestConfig, which must exist."""
    cq = {"spec": {"admissionChecksStrategy": {"admissionChecks": [{"name": "prov"}]}}}

    def why(parameters, configs=(), complete=True):
        objs = {"AdmissionCheck": dict([_check("prov", PROVISIONING, parameters)]),
                "ProvisioningRequestConfig": {c: {} for c in configs}}
        return never_active_checks(cq, objs, complete).get("prov")

    assert why(None) == "missing parameters reference"
    assert why({**PRC, "name": ""}) == "empty name: bad parameters reference"
    assert why({**PRC, "apiGroup": "autoscaling.x-k8s.io"}) == ('wrong group "autoscaling.x-k8s.io", expecting '
                                                               '"kueue.x-k8s.io": bad parameters reference')
    assert why({**PRC, "kind": "MultiKueueConfig"}) == ('wrong kind "MultiKueueConfig", expecting '
                                                        '"ProvisioningRequestConfig": bad parameters reference')
    assert why(PRC) == 'provisioningrequestconfigs.kueue.x-k8s.io "prc" not found'
    assert why(PRC, complete=False) is None and why(PRC, ["prc"]) is None


def test_stop_policy():
    """clusterqueue.go 179: any stopPolicy but None stops the queue (the CRD's enum: None, Hold, HoldAndDrain)."""
    assert stop_policy({"spec": {"stopPolicy": "Hold"}}) == "Hold"
    assert stop_policy({"spec": {"stopPolicy": "HoldAndDrain"}}) == "HoldAndDrain"
    assert stop_policy({"spec": {"stopPolicy": "None"}}) is None and stop_policy({"spec": {}}) is None


def _selfcontained(tmp_path, fixture, frameworks=True):
    """A copy of an RES010 fixture checked in an environment that declares its manifests self-contained."""
    import shutil
    from test_rules import problems_of
    from conftest import FIXTURES
    (tmp_path / "fail").mkdir(exist_ok=True)
    (tmp_path / "policy.yaml").write_text(
        "apiVersion: policies.ddp/v1\nkind: Environment\nmetadata: {name: sealed}\nspec:\n  selfContained: true\n"
        + ("  kueueFrameworks: [kubeflow.org/pytorchjob]\n" if frameworks else ""))
    shutil.copy(FIXTURES / "rules/RES010" / fixture, tmp_path / "fail/input.yaml")
    return [p for p in problems_of(tmp_path / "fail/input.yaml") if p.rule == "RES010"]


def test_what_a_self_contained_environment_lacks_is_an_error(tmp_path):
    """A ResourceFlavor or AdmissionCheck the manifests do not hold: nothing where the cluster may hold it (the pass
    fixtures), an error where the environment declares the manifests self-contained and Kueue's integration on, a
    warning phrased as that condition without the integration declared."""
    from policies.kube.objects import ERROR, WARNING
    [flavor] = _selfcontained(tmp_path, "pass/flavor-not-in-manifests.yaml")
    assert flavor.severity == ERROR and flavor.extra.get("never_admitted")
    assert ("ClusterQueue 'cluster-queue' (of LocalQueue 'user-queue') is inactive (Can't admit new workloads: "
            "references missing ResourceFlavor(s): spot.): it admits nothing") in flavor.message
    [check] = _selfcontained(tmp_path, "pass/admission-check-not-in-manifests.yaml")
    assert "(Can't admit new workloads: references missing AdmissionCheck(s): prov-test.)" in check.message
    [undeclared] = _selfcontained(tmp_path, "pass/admission-check-not-in-manifests.yaml", frameworks=False)
    assert undeclared.severity == WARNING and undeclared.message.startswith("if Kueue's kubeflow.org/pytorchjob "
                                                                            "integration is on, ClusterQueue")
    assert _selfcontained(tmp_path, "pass/provisioning-check-sample.yaml") == []  # its config is beside it


def test_a_held_queue_is_a_warning_and_make_plan_says_no_pod_starts_while_it_is_held():
    import json

    from conftest import FIXTURES, run_cli
    from policies.kube.objects import WARNING
    from test_rules import problems_of
    rules = FIXTURES / "rules/RES010"
    for name, said in (("cluster-queue-held", "ClusterQueue 'cluster-queue' is stopped (stopPolicy Hold)"),
                       ("local-queue-held", "LocalQueue 'user-queue' is stopped (stopPolicy HoldAndDrain)")):
        [held] = [p for p in problems_of(rules / f"fail/{name}.yaml") if p.rule == "RES010"]
        assert held.severity == WARNING and held.message.startswith(said + ": Kueue admits no new workload while a "
                                                                    "stopPolicy is set")
        assert held.extra.get("held") and not held.extra.get("never_admitted")
    fail, env = rules / "fail/cluster-queue-held.yaml", rules / "policy.yaml"
    proc = run_cli("plan", "--format", "json", "--env", str(env), str(fail))
    (job,) = [w for u in json.loads(proc.stdout)["overlays"] for w in u["workloads"]]
    assert job["pods_now"] == 0 and job["pods_refused"][0]["why"].startswith("ClusterQueue 'cluster-queue' is stopped")
    text = run_cli("plan", "--env", str(env), str(fail)).stdout
    assert ("note: PyTorchJob/pytorch-simple: no pod of PyTorchJob/default/pytorch-simple is created while its queue "
            "is held: ClusterQueue 'cluster-queue' is stopped (stopPolicy Hold)") in text
    assert "no pod of" not in run_cli("plan", str(fail)).stdout  # no declaration: a warning, no claim


def test_a_tas_podset_group_gets_one_flavor_for_its_pod_sets_together():
    """flavorassigner_test.go, the leader worker set cases with PodSetGroup("group1") (432-640): the group's requests
    are summed and must fit one flavor."""
    from policies.launchers.kueue_quota import podset_group
    cq = _cq([("one", {"cpu": "4"}), ("two", {"cpu": "9"})])
    grouped = [_ps("worker", 4, {"cpu": "2"}), _ps("leader", 1, {"cpu": "1"})]
    for ps in grouped:
        ps.group = "group1"
    assert never_admitted(cq, FLAVORS, grouped) == []  # "leader and workers request the same resources fits": two
    gpu = _cq([("one", {"cpu": "4", "example.com/gpu": "4"}), ("two", {"cpu": "5", "example.com/gpu": "0"})])
    workers, leader = _ps("worker", 4, {"cpu": "1", "example.com/gpu": "1"}), _ps("leader", 1, {"cpu": "1"})
    assert never_admitted(gpu, FLAVORS, [workers, leader]) == []  # "without group it would fit"
    workers.group = leader.group = "group1"
    assert never_admitted(gpu, FLAVORS, [workers, leader]) == [
        "couldn't assign flavors to pod set worker (assigned with leader as podset group group1): insufficient quota "
        "for cpu in flavor one, previously considered podsets requests (0) + current podset request (5) > maximum "
        "capacity (4), insufficient quota for example.com/gpu in flavor two, previously considered podsets requests "
        "(0) + current podset request (4) > maximum capacity (0)"]
    # tas.go 111-113: the group annotation counts only beside a required or preferred topology.
    assert podset_group({"kueue.x-k8s.io/podset-group-name": "g",
                         "kueue.x-k8s.io/podset-required-topology": "rack"}) == "g"
    assert podset_group({"kueue.x-k8s.io/podset-group-name": "g",
                         "kueue.x-k8s.io/podset-preferred-topology": "rack"}) == "g"
    assert podset_group({"kueue.x-k8s.io/podset-group-name": "g"}) is None
    assert podset_group({"kueue.x-k8s.io/podset-group-name": "g",
                         "kueue.x-k8s.io/podset-unconstrained-topology": "true"}) is None


# --- Kueue's Configuration in the manifests (policies/launchers/kueue_config.py) ------------------------------------

def _res010(tmp_path, text, env=None):
    """RES010's problems on `text`, in the RES010 fixtures' environment, or one declaring `env` (spec lines)."""
    from test_rules import problems_of
    from conftest import FIXTURES
    (tmp_path / "fail").mkdir(exist_ok=True)
    policy = tmp_path / "policy.yaml"
    if env is None:
        policy.write_text((FIXTURES / "rules/RES010/policy.yaml").read_text())
    else:
        policy.write_text("apiVersion: policies.ddp/v1\nkind: Environment\nmetadata: {name: sealed}\nspec:\n" + env)
    (tmp_path / "fail/input.yaml").write_text(text)
    return [p for p in problems_of(tmp_path / "fail/input.yaml") if p.rule == "RES010"]


def _fixture(name):
    from conftest import FIXTURES
    return (FIXTURES / "rules/RES010" / name).read_text()


def test_a_queued_job_in_a_namespace_kueue_does_not_manage_stays_suspended():
    """The webhook suspends a job that names a queue (jobframework/utils.go 147-150) but the reconciler skips a
    namespace managedJobsNamespaceSelector does not select (reconciler.go 334-339): an error, and make plan says no
    pod of it starts."""
    import json

    from conftest import FIXTURES, run_cli
    from policies.kube.objects import ERROR
    from test_rules import problems_of
    fail = FIXTURES / "rules/RES010/fail/namespace-not-managed.yaml"
    [p] = [p for p in problems_of(fail) if p.rule == "RES010"]
    assert p.severity == ERROR and p.field == "metadata.namespace" and p.extra.get("never_admitted")
    assert p.message.startswith("the managedJobsNamespaceSelector of Kueue's Configuration (ConfigMap "
                                "kueue-system/kueue-manager-config) does not select namespace 'default': Kueue's "
                                "webhook suspends the PyTorchJob (spec.runPolicy.suspend set true: it names "
                                "LocalQueue 'user-queue')")
    proc = run_cli("plan", "--format", "json", str(fail))  # the Configuration says Kueue runs: no environment needed
    (job,) = [w for u in json.loads(proc.stdout)["overlays"] for w in u["workloads"]]
    assert job["pods_now"] == 0 and job["pods_refused"][0]["field"] == "metadata.namespace"


def test_a_namespace_kueue_manages_is_judged_by_its_labels_where_the_manifests_hold_them(tmp_path):
    text = _fixture("fail/namespace-not-managed.yaml").replace(
        "    managedJobsNamespaceSelector:\n      matchExpressions:\n      - key: kubernetes.io/metadata.name\n"
        "        operator: In\n        values: [team-a]\n", "    managedJobsNamespaceSelector: {matchLabels: {kueue: managed}}\n")
    assert _res010(tmp_path, text) == []  # the cluster's namespace may carry the label
    labelled = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: default\n  labels: {kueue: managed}\n---\n"
    assert _res010(tmp_path, labelled + text) == []
    [p] = _res010(tmp_path, labelled.replace("managed}", "other}") + text)
    assert "does not select namespace 'default'" in p.message


def test_a_job_without_a_queue_under_manage_jobs_without_queue_name(tmp_path):
    """Suspended though it names no queue (utils.go 152-155), it waits for one for ever unless a LocalQueue `default`
    exists in its namespace: a warning phrased as that condition, an error where the manifests are self-contained."""
    from policies.kube.objects import ERROR, WARNING
    text = _fixture("fail/no-queue-name-managed.yaml")
    [warned] = _res010(tmp_path, text)
    assert warned.severity == WARNING and warned.message.startswith(
        "unless a LocalQueue 'default' exists in namespace 'default' when it is created (none among these manifests), "
        "Kueue's Configuration (ConfigMap kueue-system/kueue-manager-config) sets manageJobsWithoutQueueName")
    [sealed] = _res010(tmp_path, text, "  selfContained: true\n")
    assert sealed.severity == ERROR and sealed.extra.get("never_admitted") and sealed.message.endswith(
        "no LocalQueue 'default' in the namespace among these manifests, which sealed declares self-contained")
    # kube-system and kueue-system: Kueue's webhook configurations skip them, so it is never suspended
    assert _res010(tmp_path, text.replace("namespace: default\n", "namespace: kube-system\n"),
                   "  selfContained: true\n") == []
    # without manageJobsWithoutQueueName, or without the Configuration in the input: nothing is claimed
    assert _res010(tmp_path, text.replace("manageJobsWithoutQueueName: true", "manageJobsWithoutQueueName: false"),
                   "  selfContained: true\n") == []
    plain = text[text.index("apiVersion: kueue.x-k8s.io/v1beta2"):]
    assert _res010(tmp_path, plain, "  selfContained: true\n  kueueFrameworks: [kubeflow.org/pytorchjob]\n") == []
    # the Configuration's integrations are Kueue's: without kubeflow.org/pytorchjob it never sees the PyTorchJob
    assert _res010(tmp_path, text.replace('      - "kubeflow.org/pytorchjob"\n', ""), "  selfContained: true\n") == []


def test_kueue_gives_a_job_without_a_queue_the_default_local_queue(tmp_path):
    """defaults.go 59-98: a LocalQueue `default` in the namespace becomes the job's queue, whose ClusterQueue is then
    judged: certain under manageJobsWithoutQueueName (the job waits in any case), else phrased as the condition that
    the queue exists when the job is created."""
    from policies.kube.objects import ERROR, WARNING
    text = _fixture("pass/no-queue-name-default-local-queue.yaml").replace("nominalQuota: 9", "nominalQuota: 1")
    [p] = _res010(tmp_path, text)
    assert p.severity == ERROR and p.message.startswith(
        "Kueue gives it LocalQueue 'default' (it names none, and under manageJobsWithoutQueueName waits for a queue in "
        "any case): ClusterQueue 'cluster-queue' (of LocalQueue 'default') never admits it: insufficient quota for cpu")
    [w] = _res010(tmp_path, text.replace("manageJobsWithoutQueueName: true", "manageJobsWithoutQueueName: false"))
    assert w.severity == WARNING and w.message.startswith(
        "if LocalQueue 'default' exists when the PyTorchJob is created (Kueue then gives it that queue: it names none), "
        "ClusterQueue 'cluster-queue' (of LocalQueue 'default') never admits it")


def test_the_quota_counts_what_the_configuration_counts(tmp_path):
    """excludeResourcePrefixes drops requests (workload.go 463-478); IgnoreUndeclared skips a resource the
    ClusterQueue does not cover (flavorassigner.go 803-812); a transformed resource is not judged here. Without a
    Configuration in the input, the GPU is still one no group covers."""
    pod = PodSet("p", 2, {}, {"cpu": parse_quantity("1"), "example.com/gpu": parse_quantity("1")})
    cq = {"spec": {"resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
        {"name": "f", "resources": [{"name": "cpu", "nominalQuota": "4"}]}]}]}}
    assert never_admitted(cq, {}, [pod]) == ["couldn't assign flavors to pod set p: resource example.com/gpu "
                                             "unavailable in ClusterQueue"]
    assert never_admitted(cq, {}, [pod], ignore_undeclared=True) == []
    assert _res010(tmp_path, _fixture("pass/gpu-excluded-by-configuration.yaml")) == []
    assert _res010(tmp_path, _fixture("pass/gpu-ignored-undeclared.yaml")) == []
    transformed = _fixture("pass/gpu-excluded-by-configuration.yaml").replace(
        'excludeResourcePrefixes: ["nvidia.com/"]', "transformations:\n      - input: nvidia.com/gpu")
    assert _res010(tmp_path, transformed) == []
    [p] = _res010(tmp_path, _fixture("fail/resource-not-covered.yaml"))
    assert "resource nvidia.com/gpu unavailable in ClusterQueue" in p.message


def test_the_configuration_in_the_manifests_answers_for_the_environments_kueue_frameworks(tmp_path):
    """One place says what Kueue runs (kueue_config.in_force): the Configuration the manifests deploy, over the
    environment's kueueFrameworks. Without kubeflow.org/pytorchjob among its integrations Kueue never sees the
    PyTorchJob, whatever the environment declares: make plan creates its pods now, and RES010 says nothing."""
    import json

    from conftest import FIXTURES, run_cli
    text = _fixture("fail/namespace-not-managed.yaml")
    f = tmp_path / "input.yaml"
    f.write_text(text.replace('      - "kubeflow.org/pytorchjob"\n', ""))
    env = FIXTURES / "rules/RES010/policy.yaml"  # declares kubeflow.org/pytorchjob
    proc = run_cli("plan", "--format", "json", "--env", str(env), str(f))
    (job,) = [w for u in json.loads(proc.stdout)["overlays"] for w in u["workloads"]]
    assert job["pods_now"] == job["pod_count"] == 2 and "queued" not in job
    assert _res010(tmp_path, f.read_text()) == []
    f.write_text(_fixture("pass/kueue-docs-sample.yaml"))  # no Configuration: the environment's declaration counts
    proc = run_cli("plan", "--format", "json", "--env", str(env), str(f))
    (job,) = [w for u in json.loads(proc.stdout)["overlays"] for w in u["workloads"]]
    assert job["pods_now"] == 0 and job["queued"] == "user-queue"
