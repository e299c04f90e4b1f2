"""The Priority and RuntimeClass admission ports (policies/kube/admission_classes.py) on upstream's cases:
kubernetes plugin/pkg/admission/runtimeclass/admission_test.go @20f00018e023 (TestSetOverhead, TestSetScheduling,
TestValidate, TestValidateOverhead), pkg/util/tolerations/tolerations_test.go's MergeTolerations idea, and
plugin/pkg/admission/priority/admission_test.go's TestPodAdmission cases for a pod at creation (no class and no
default, a default class, a class that does not exist, a stated priority that differs, a system class outside
kube-system), then what the pod views give RES009 and RES010."""
from __future__ import annotations

import pytest

from policies.kube.admission_classes import (admit_priority, admit_runtime_class, merge_tolerations,
                                             priority_classes, validate_priority_class)
from policies.kube.limit_range import containers
from policies.kube.resource_quota import pod_usage
from policies.kube.values import Quantity


def rc(overhead=None, scheduling=None):
    out = {"metadata": {"name": "foo"}, "handler": "bar"}
    if overhead is not None:
        out["overhead"] = {"podFixed": overhead}
    if scheduling is not None:
        out["scheduling"] = scheduling
    return out


GUARANTEED = {"limits": {"cpu": "1", "memory": "10"}, "requests": {"cpu": "1", "memory": "10"}}
OVERHEAD = {"cpu": "100m", "memory": "1"}


def overhead_pod(resources=None, overhead=False):
    spec = {"containers": [{"name": "foo-0", "image": "foo:V0", "resources": resources or {}}]}
    if overhead:
        spec["overhead"] = dict(OVERHEAD)
    return spec


# TestSetOverhead
@pytest.mark.parametrize("runtime,pod,refused,overhead", [
    (rc(OVERHEAD), overhead_pod(), False, OVERHEAD),                           # overhead, no container requirements
    (rc(OVERHEAD), overhead_pod(GUARANTEED), False, OVERHEAD),                 # overhead, guaranteed pod
    (rc({"cpu": "10", "memory": "10G"}), overhead_pod(overhead=True), True, None),  # differing overhead already set
    (rc(OVERHEAD), overhead_pod(overhead=True), False, OVERHEAD),              # same overhead already set
    (rc({"cpu": "0.1", "memory": "1"}), overhead_pod(overhead=True), False, {"cpu": "0.1", "memory": "1"}),  # (here)
])
def test_set_overhead(runtime, pod, refused, overhead):
    spec, says = admit_runtime_class(pod, runtime)
    assert bool(says) is refused
    if not refused:
        assert spec["overhead"] == overhead
    else:
        assert says == "pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead"


NO_SCHEDULE = "NoSchedule"


def tol(key, value):
    return {"key": key, "operator": "Equal", "value": value, "effect": NO_SCHEDULE}


# TestSetScheduling
@pytest.mark.parametrize("scheduling,selector,tolerations,refused,want_selector,want_tolerations", [
    (None, {"foo": "bar"}, [], False, {"foo": "bar"}, []),                             # nil scheduling
    ({"nodeSelector": {"foo": "conflict"}}, {"foo": "bar"}, [], True, None, None),     # conflict node selector
    ({"nodeSelector": {"foo": "bar"}}, None, None, False, {"foo": "bar"}, None),       # nil node selector
    ({"nodeSelector": {"foo": "bar"}}, {"foo": "bar"}, None, False, {"foo": "bar"}, None),  # same key value
    ({"nodeSelector": {"foo": "bar", "fizz": "buzz"}}, {"foo": "bar"}, None, False,
     {"foo": "bar", "fizz": "buzz"}, None),                                            # different key value
    ({"tolerations": [tol("foo", "bar"), tol("fizz", "buzz")]}, {"foo": "bar"}, [tol("foo", "bar")], False,
     {"foo": "bar"}, [tol("foo", "bar"), tol("fizz", "buzz")]),                         # multiple tolerations
])
def test_set_scheduling(scheduling, selector, tolerations, refused, want_selector, want_tolerations):
    pod = {}
    if selector is not None:
        pod["nodeSelector"] = selector
    if tolerations is not None:
        pod["tolerations"] = tolerations
    spec, says = admit_runtime_class(pod, rc(scheduling=scheduling))
    if refused:
        assert says == ("conflict: runtimeClass.scheduling.nodeSelector[foo] = conflict; "
                        "pod.spec.nodeSelector[foo] = bar")
        return
    assert says is None
    assert spec.get("nodeSelector") == want_selector
    assert (spec.get("tolerations") or None) == (want_tolerations or None)


# TestValidate, TestValidateOverhead
@pytest.mark.parametrize("runtime,pod,says", [
    (rc(), overhead_pod(GUARANTEED, overhead=True),
     "pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead"),
    (rc({"cpu": "10", "memory": "10G"}), overhead_pod(overhead=True),
     "pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead"),
    (rc(OVERHEAD), overhead_pod(), None),                                 # matching (the overhead Admit set)
    (None, overhead_pod(overhead=True),                                  # no RuntimeClass, an overhead
     "pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead"),
    (None, overhead_pod(), None),                                         # neither
])
def test_validate_overhead(runtime, pod, says):
    assert admit_runtime_class(pod, runtime)[1] == says


def test_merge_tolerations_keeps_the_superset():
    exists = {"key": "foo", "operator": "Exists", "effect": NO_SCHEDULE}
    assert merge_tolerations([tol("foo", "bar")], [exists]) == [exists]
    everything = {"operator": "Exists"}
    assert merge_tolerations([tol("foo", "bar"), tol("a", "b")], [everything]) == [everything]
    assert merge_tolerations([tol("foo", "bar")], [tol("foo", "bar")]) == [tol("foo", "bar")]
    # NoExecute with tolerationSeconds: the shorter one is not covered by the longer
    short = {"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 10}
    long = {"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60}
    assert merge_tolerations([long], [short]) == [long]
    assert merge_tolerations([short], [long]) == [long]


CLASSES = priority_classes([{"metadata": {"name": "high"}, "value": 1000},
                            {"metadata": {"name": "never"}, "value": 10, "preemptionPolicy": "Never"}])


# TestPodAdmission, a pod at creation
@pytest.mark.parametrize("classes,pod,priority,says", [
    ({}, {}, None, None),                                               # no class, no default here: unjudged
    (CLASSES, {"priorityClassName": "high"}, 1000, None),
    (CLASSES, {"priorityClassName": "missing"}, None, None),            # not here: REF001's
    (CLASSES, {"priorityClassName": "high", "priority": 1000}, 1000, None),
    (CLASSES, {"priorityClassName": "high", "priority": 5}, None,
     "the integer value of priority (5) must not be provided in pod spec; priority admission controller computed "
     "1000 from the given PriorityClass name"),
    (CLASSES, {"priorityClassName": "system-cluster-critical"}, 2000000000, None),  # in a non-system namespace too
    (CLASSES, {"priorityClassName": "system-node-critical"}, 2000001000, None),
    (priority_classes([{"metadata": {"name": "d1"}, "value": 30, "globalDefault": True},
                       {"metadata": {"name": "d2"}, "value": 20, "globalDefault": True}]), {}, 20, None),
    (CLASSES, {"priorityClassName": "never", "preemptionPolicy": "PreemptLowerPriority"}, None,
     "the string value of PreemptionPolicy (PreemptLowerPriority) must not be provided in pod spec; priority "
     "admission controller computed Never from the given PriorityClass name"),
])
def test_priority(classes, pod, priority, says):
    spec, refused = admit_priority(pod, classes)
    assert refused == says
    assert spec.get("priority") == (priority if priority is not None else pod.get("priority"))
    if priority is not None and not pod.get("priorityClassName"):
        assert spec["priorityClassName"] == "d2"  # the lowest globalDefault (getDefaultPriorityClass)


def test_quota_usage_counts_overhead_as_pod_requests_and_limits_do():
    spec = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "1Gi"},
                                                         "limits": {"cpu": "2"}}}]}
    usage = pod_usage(containers(spec), {"cpu": "250m", "memory": "128Mi", "nvidia.com/gpu": "0"})
    value = {k: q.value for k, q in usage.items() if isinstance(q, Quantity)}
    assert value["requests.cpu"] == value["cpu"] == pytest.approx(1.25)
    assert value["limits.cpu"] == pytest.approx(2.25)      # a limit that is set: overhead added
    assert "limits.memory" not in value                     # no memory limit: none made up
    assert value["requests.memory"] == 1024**3 + 128 * 1024**2


def test_jobset_priority_label_reads_the_admitted_priority():
    """The JobSet pod webhook's priority label (launchers/jobset.py pod_priority) is the priority the Priority plugin
    computes: a system class's value, the manifests' globalDefault class's for a pod naming none."""
    from policies.launchers.jobset import pod_priority
    defaults = priority_classes([{"metadata": {"name": "d"}, "value": 7, "globalDefault": True}])
    assert pod_priority({}, defaults) == "7"
    assert pod_priority({}, priority_classes([])) == "0"            # no default shown: a default cluster's 0
    assert pod_priority({"priorityClassName": "system-node-critical"}, priority_classes([])) == "2000001000"
    assert pod_priority({"priorityClassName": "elsewhere"}, priority_classes([])) is None


def test_what_the_manifests_do_not_show_is_a_warning_and_what_they_show_an_error():
    from conftest import FIXTURES
    from test_rules import problems_of
    from policies.kube.objects import ERROR, WARNING

    def adm002(name):
        return [p.severity for p in problems_of(FIXTURES / "rules/ADM002" / name) if p.rule == "ADM002"]
    assert adm002("fail/priority-with-class-elsewhere.yaml") == [WARNING]
    assert adm002("fail/priority-differs-from-class.yaml") == [ERROR]
    assert adm002("fail/runtime-class-node-selector-conflict.yaml") == [ERROR]
    assert adm002("pass/class-elsewhere.yaml") == []


def pc(name, value, **more):
    return {"metadata": {"name": name}, "value": value, **more}


# pkg/apis/scheduling/validation/validation_test.go TestValidatePriorityClass (@056a01553e91): its success cases and
# the errors ValidatePriorityClass itself adds (a namespace and a name's form are ObjectMeta's: SCHEMA and ARGO003),
# with a preemptionPolicy that core validation's ValidatePreemptionPolicy refuses.
@pytest.mark.parametrize("obj,fields", [
    (pc("tier1", 100), []),                                                     # no description
    (pc("tier1", 200, globalDefault=False, description="Used for the highest priority pods."), []),
    (pc("system-node-critical", 2000001000, description="system priority class 0"), []),
    (pc("tier1", 1000000000, preemptionPolicy="Never"), []),                    # the highest a user class may have
    (pc("tier1", 100, preemptionPolicy=None), []),                              # nil: defaulted
    (pc("system-node-critical", 0), ["metadata.name"]),                         # incorrect system class value
    (pc("system-something", 2000001000), ["metadata.name"]),                    # incorrect system class name
    (pc("system-cluster-critical", 2000000000, globalDefault=True), ["metadata.name"]),
    (pc("tier1", 1000000001), ["value"]),
    (pc("system-something", 2000000001), ["metadata.name"]),                    # the prefix's error, not the value's
    (pc("tier1", 100, preemptionPolicy="Preempt"), ["preemptionPolicy"]),
    (pc("tier1", 100, preemptionPolicy=""), ["preemptionPolicy"]),              # Required
])
def test_validate_priority_class(obj, fields):
    assert [f for f, _ in validate_priority_class(obj)] == fields


def test_validate_priority_class_says_what_the_api_server_says():
    [(_, says)] = validate_priority_class(pc("system-something", 5))
    assert says == ("metadata.name: Forbidden: priority class names with 'system-' prefix are reserved for system "
                    "use only. error: system-something is not a known system priority class")
    [(_, says)] = validate_priority_class(pc("system-node-critical", 5))
    assert says.endswith("error: value of system-node-critical PriorityClass must be 2000001000")
    [(_, says)] = validate_priority_class(pc("tier1", 1, preemptionPolicy="Preempt"))
    assert says == 'preemptionPolicy: Unsupported value: "Preempt": supported values: "PreemptLowerPriority", "Never"'


def test_a_refused_priority_class_is_not_one_the_pods_find():
    """A class the API server refuses is never created: the pods naming it are not judged against its value, and a
    system class written with another value leaves the built-in one in place."""
    classes = priority_classes([pc("tier1", 2000000001), pc("system-cluster-critical", 5)])
    assert "tier1" not in classes
    assert classes["system-cluster-critical"]["value"] == 2000000000
    assert admit_priority({"priorityClassName": "tier1", "priority": 5}, classes) == (
        {"priorityClassName": "tier1", "priority": 5}, None)
