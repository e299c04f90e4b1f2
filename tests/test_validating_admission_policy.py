"""ValidatingAdmissionPolicy admission (policies/schema/admission_policy.py, ADM001), against upstream's own cases at
k8s.io/apiserver v0.36.0: the matcher's table (pkg/admission/plugin/policy/matching/matching_test.go TestMatcher), the
decision's message (validating/validator_test.go TestValidate), the composited variables (cel/composition_test.go
TestCompositedPolicies), matchConditions (webhook/matchconditions/matcher_test.go), the actions' wording
(validating/admission_test.go TestWarnValidationAction, TestAuditValidationAction) and CollectParams
(generic/policy_dispatcher.go 267-382). Upstream's fakes stand for a filter's result; here the same results come from
real CEL expressions, and the values asserted are upstream's."""
from __future__ import annotations

from pathlib import Path

import pytest

from policies.kube.objects import ERROR, INFO, WARNING
from policies.render.files import read
from policies.report.engine import Unit, check_policies
from policies.schema.admission_policy import (DENY, ConfigError, Inputs, Request, collect_params, guess_resource,
                                              matches, validate)

# --- matching_test.go TestMatcher (v0.36.0 lines 63-540) ----------------------------------------------------------

# The test's EquivalentResourceMapper (lines 70-84): deployments co-located in every API group.
DEPLOYMENTS = [("extensions", "v1beta1"), ("apps", "v1"), ("apps", "v1beta1"), ("apps", "v1alpha1")]


def _eq(group, resource):
    return DEPLOYMENTS if resource == "deployments" else []


def _rule(groups, versions, resources, names=None):
    out = {"operations": ["*"], "apiGroups": groups, "apiVersions": versions, "resources": resources, "scope": "*"}
    if names:
        out["resourceNames"] = names
    return out


def _req(group, version, resource, sub="", kind="Deployment"):
    return Request(group, version, kind, resource, {"metadata": {"name": "name"}}, "ns", "name", sub,
                   equivalents=_eq)


E = {}  # an empty selector
EXT = _rule(["extensions"], ["v1beta1"], ["deployments"])
APPS_B1 = _rule(["apps"], ["v1beta1"], ["deployments"])
EXT_SUB = _rule(["extensions"], ["v1beta1"], ["deployments", "deployments/scale"])
APPS_B1_SUB = _rule(["apps"], ["v1beta1"], ["deployments", "deployments/scale"])
APPS_V1_SUB = _rule(["apps"], ["v1"], ["deployments", "deployments/scale"])
DEPLOY = ("apps", "v1", "deployments")
SCALE = ("apps", "v1", "deployments", "scale")
BAD_NS = {"matchExpressions": [{"key": "key ", "operator": "In", "values": ["bad value"]}]}
BAD_OBJ = {"matchExpressions": [{"key": "key", "operator": "In", "values": ["bad value"]}]}
STAR_DEPLOY = {"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["deployments"]}
STAR_PODS = {"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["pods"]}
POD = ("example.apiserver.k8s.io", "v1", "pods")

MATCHER_CASES = [
    # (name, criteria, request (group, version, resource[, subresource]), matched resource or None, error)
    ("no rules (just write)", {"namespaceSelector": E, "resourceRules": []}, DEPLOY, None, ""),
    ("wildcard rule, match as requested", {"namespaceSelector": E, "objectSelector": E,
     "resourceRules": [_rule(["*"], ["*"], ["*"])]}, DEPLOY, DEPLOY, ""),
    ("specific rules, prefer exact match", {"namespaceSelector": E, "objectSelector": E, "resourceRules": [
        EXT, APPS_B1, _rule(["apps"], ["v1"], ["deployments"])]}, DEPLOY, DEPLOY, ""),
    ("specific rules, match miss", {"namespaceSelector": E, "objectSelector": E,
     "resourceRules": [EXT, APPS_B1]}, DEPLOY, None, ""),
    ("specific rules, exact match miss", {"matchPolicy": "Exact", "namespaceSelector": E, "objectSelector": E,
     "resourceRules": [EXT, APPS_B1]}, DEPLOY, None, ""),
    ("specific rules, equivalent match, prefer extensions", {"matchPolicy": "Equivalent", "namespaceSelector": E,
     "objectSelector": E, "resourceRules": [EXT, APPS_B1]}, DEPLOY, ("extensions", "v1beta1", "deployments"), ""),
    ("specific rules, equivalent match, prefer apps", {"matchPolicy": "Equivalent", "namespaceSelector": E,
     "objectSelector": E, "resourceRules": [APPS_B1, EXT]}, DEPLOY, ("apps", "v1beta1", "deployments"), ""),
    ("specific rules, subresource prefer exact match", {"namespaceSelector": E, "objectSelector": E,
     "resourceRules": [EXT_SUB, APPS_B1_SUB, APPS_V1_SUB]}, SCALE, DEPLOY, ""),
    ("specific rules, subresource match miss", {"namespaceSelector": E, "objectSelector": E,
     "resourceRules": [EXT_SUB, APPS_B1_SUB]}, SCALE, None, ""),
    ("specific rules, subresource exact match miss", {"matchPolicy": "Exact", "namespaceSelector": E,
     "objectSelector": E, "resourceRules": [EXT_SUB, APPS_B1_SUB]}, SCALE, None, ""),
    ("specific rules, subresource equivalent match, prefer extensions", {"matchPolicy": "Equivalent",
     "namespaceSelector": E, "objectSelector": E, "resourceRules": [EXT_SUB, APPS_B1_SUB]}, SCALE,
     ("extensions", "v1beta1", "deployments"), ""),
    ("specific rules, subresource equivalent match, prefer apps", {"matchPolicy": "Equivalent",
     "namespaceSelector": E, "objectSelector": E, "resourceRules": [APPS_B1_SUB, EXT_SUB]}, SCALE,
     ("apps", "v1beta1", "deployments"), ""),
    ("specific rules, prefer exact match and name match", {"namespaceSelector": E, "objectSelector": E,
     "resourceRules": [_rule(["apps"], ["v1"], ["deployments"], ["name"])]}, DEPLOY, DEPLOY, ""),
    ("specific rules, prefer exact match and name match miss", {"namespaceSelector": E, "objectSelector": E,
     "resourceRules": [_rule(["apps"], ["v1"], ["deployments"], ["wrong-name"])]}, DEPLOY, None, ""),
    ("specific rules, subresource equivalent match, prefer extensions and name match", {
        "matchPolicy": "Equivalent", "namespaceSelector": E, "objectSelector": E, "resourceRules": [
            _rule(["apps"], ["v1"], ["deployments", "deployments/scale"], ["name"])]},
     ("extensions", "v1beta1", "deployments", "scale"), DEPLOY, ""),
    ("specific rules, subresource equivalent match, prefer extensions and name match miss", {
        "matchPolicy": "Equivalent", "namespaceSelector": E, "objectSelector": E, "resourceRules": [
            _rule(["apps"], ["v1"], ["deployments", "deployments/scale"], ["wrong-name"])]},
     ("extensions", "v1beta1", "deployments", "scale"), None, ""),
    ("exclude resource match on miss", {"namespaceSelector": E, "objectSelector": E, "resourceRules": [
        _rule(["*"], ["*"], ["*"])], "excludeResourceRules": [EXT]}, DEPLOY, DEPLOY, ""),
    ("exclude resource miss on match", {"namespaceSelector": E, "objectSelector": E, "resourceRules": [
        _rule(["*"], ["*"], ["*"])], "excludeResourceRules": [EXT]}, ("extensions", "v1beta1", "deployments"), None,
     ""),
    ("treat empty ResourceRules as match", {"namespaceSelector": E, "objectSelector": E,
     "excludeResourceRules": [EXT]}, DEPLOY, DEPLOY, ""),
    ("treat non-empty ResourceRules as no match", {"namespaceSelector": E, "objectSelector": E,
     "resourceRules": [{}]}, DEPLOY, None, ""),
    ("erroring namespace selector on otherwise non-matching rule doesn't error", {"namespaceSelector": BAD_NS,
     "objectSelector": E, "resourceRules": [STAR_DEPLOY]}, POD, None, ""),
    ("erroring namespace selector on otherwise matching rule errors", {"namespaceSelector": BAD_OBJ,
     "objectSelector": E, "resourceRules": [STAR_PODS]}, POD, None, "bad value"),
    ("erroring object selector on otherwise non-matching rule doesn't error", {"namespaceSelector": E,
     "objectSelector": BAD_OBJ, "resourceRules": [STAR_DEPLOY]}, POD, None, ""),
    ("erroring object selector on otherwise matching rule errors", {"namespaceSelector": E,
     "objectSelector": BAD_OBJ, "resourceRules": [STAR_PODS]}, POD, None, "bad value"),
]


@pytest.mark.parametrize("name,criteria,attrs,expected,error", MATCHER_CASES, ids=[c[0] for c in MATCHER_CASES])
def test_matcher_as_upstream(name, criteria, attrs, expected, error):
    req = _req(*attrs)
    if error:
        with pytest.raises(ConfigError, match=error):
            matches(criteria, req, {})
        return
    assert matches(criteria, req, {}).gvr == expected


def test_a_namespace_selector_on_a_namespace_not_shown_is_a_condition_not_a_decision():
    """namespace/matcher.go 105-135: the labels come from the namespace; not in the manifests, the match is only
    conditional (RES008's wording, a warning)."""
    req = _req(*DEPLOY)
    found = matches({"namespaceSelector": {"matchLabels": {"a": "b"}}, "objectSelector": E}, req, None)
    assert found.gvr == DEPLOY and found.unknown == ["the labels of namespace 'ns' (not in these manifests)"]
    assert matches({"namespaceSelector": {"matchLabels": {"a": "b"}}, "objectSelector": E}, req, {"a": "c"}).gvr is None
    cluster = Request("", "v1", "Namespace", "namespaces", {"metadata": {"labels": {"a": "b"}}}, "")
    assert matches({"namespaceSelector": {"matchLabels": {"a": "b"}}, "objectSelector": E}, cluster, None).gvr


def test_kind_to_resource_is_the_api_servers_guess():
    """apimachinery restmapper.go UnsafeGuessKindToResource (v0.36.0 lines 119-148)."""
    assert [guess_resource(k) for k in ("Pod", "PyTorchJob", "NetworkPolicy", "Ingress", "Endpoints")] == \
        ["pods", "pytorchjobs", "networkpolicies", "ingresses", "endpoints"]


# --- validator_test.go TestValidate: the decision and its message (v0.36.0 lines 349-906) -------------------------

def _inputs(obj=None):
    obj = obj or {"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "endpoints1"},
                  "subsets": [{"addresses": [{"ip": "127.0.0.0"}]}]}  # condition_test.go 1585-1606
    return Inputs({"object": obj, "oldObject": None, "params": None, "namespaceObject": None, "authorizer": None,
                   "request": {}}, {})


@pytest.mark.parametrize("validation,message", [
    ({"expression": "1 == 2"}, "failed expression: 1 == 2"),                            # no message: the expression
    ({"expression": "1 == 2", "message": "test"}, "test"),                              # "test message for failed"
    ({"expression": "1 == 2", "messageExpression": "'evaluated message'"}, "evaluated message"),
    ({"expression": "1 == 2", "message": "I am overwritten", "messageExpression": "'evaluated message'"},
     "evaluated message"),
    ({"expression": "1 == 2", "message": "test1", "messageExpression": "1/0 == 1"}, "test1"),  # user failure
    ({"expression": "1 == 2", "message": "test1", "messageExpression": "' '"}, "test1"),      # eval to empty
    ({"expression": "1 == 2", "message": "test1", "messageExpression": "'hello\\nthere'"}, "test1"),  # multi-line
    ({"expression": "1 == 2", "message": "test1", "messageExpression": "'" + "x" * (5 * 1024 + 1) + "'"}, "test1"),
    ({"expression": "1 == 2", "message": "test1", "messageExpression": "null"}, "test1"),   # eval to null
])
def test_message_as_upstream(validation, message):
    [d] = validate({"validations": [validation]}, _inputs())
    assert (d.action, d.message) == (DENY, message)


def test_reason_and_failure_policy_as_upstream():
    """Reason Invalid unless set; an evaluation error denies under Fail (and unset), is admitted under Ignore
    ("test error with failurepolicy ignore/nil"); a pass decides nothing."""
    spec = {"validations": [{"expression": "1 == 2"}, {"expression": "1 == 2", "reason": "Forbidden"},
                            {"expression": "object.nope == 1"}, {"expression": "true"}]}
    got = validate(spec, _inputs())
    assert [(d.index, d.reason) for d in got[:2]] == [(0, "Invalid"), (1, "Forbidden")]
    assert got[2].action == DENY
    assert got[2].message == "expression 'object.nope == 1' resulted in error: no such key: nope"
    assert len(got) == 3
    ignored = validate({**spec, "failurePolicy": "Ignore"}, _inputs())
    assert [d.index for d in ignored if d.action == DENY] == [0, 1]


# --- composition_test.go TestCompositedPolicies (v0.36.0 lines 48-200) ----------------------------------------------

@pytest.mark.parametrize("variables,expression,result,error", [
    ([("name", "object.metadata.name")], "variables.name == 'endpoints1'", True, ""),
    ([("fortuneTelling", "true")], "variables.fortuneTelling", True, ""),
    ([("list", "[1, 2, 3, 4]")], "variables.list.sum() == 10", True, ""),
    ([("dict", '{"foo": "bar"}')], "variables.dict['foo'].contains('bar')", True, ""),
    ([("count", "object.subsets[114514].addresses.size()")], "variables.count == 810", None,
     'composited variable "count" fails to evaluate: index out of bounds: 114514'),
    ([("list", "[1, 2, 3, 4]")], "variables.list['invalid'] == 'invalid'", None, "resulted in error"),
    # upstream's type check refuses it (list(string) compared with int); here variables are dyn and CEL's
    # heterogeneous equality makes it false: refused either way, with another message
    ([("list", "['1', '2', '3', '4']")], "variables.list[0] == 1", None, ""),
])
def test_variables_as_upstream(variables, expression, result, error):
    spec = {"variables": [{"name": n, "expression": e} for n, e in variables],
            "validations": [{"expression": expression}]}
    got = validate(spec, _inputs())
    if result:
        assert got == []
    else:
        assert len(got) == 1 and got[0].action == DENY and error in got[0].message


def test_a_variable_that_does_not_compile_is_not_decided():
    """"early compile error": upstream refuses the policy's use of it with cel-go's type error, the same words
    cel-cpp gives; here it is said as not checked, never as passed."""
    spec = {"variables": [{"name": "name", "expression": "1 == '1'"}],
            "validations": [{"expression": "variables.name == 'endpoints1'"}]}
    [d] = validate(spec, _inputs())
    assert d.action == "" and "found no matching overload for '_==_' applied to '(int, string)'" in d.not_run


def test_a_variable_is_evaluated_only_where_read():
    """Lazy (composition.go 232-256): a failing variable no validation reads denies nothing."""
    spec = {"variables": [{"name": "bad", "expression": "object.nope"}], "validations": [{"expression": "true"}]}
    assert validate(spec, _inputs()) == []


# --- matchconditions/matcher_test.go (v0.36.0): all true applies, any false skips, else errors follow the policy ----

@pytest.mark.parametrize("conditions,fail,applies,denied", [
    (["true"], "Fail", True, False),                       # test single matches
    (["true", "true"], "Fail", True, False),               # test multiple match
    (["false"], "Fail", False, False),                     # test single no match
    (["false", "true", "true"], "Fail", False, False),     # test mixed with no match first
    (["true", "object.nope", "false"], "Fail", False, False),  # test mix of true, errors and false
    (["true", "object.nope"], "Fail", True, True),         # test mix of true, errors and fail policy fail
    (["true", "object.nope"], None, True, True),           # ... fail policy not set
    (["true", "object.nope"], "Ignore", False, False),     # ... fail policy ignore
])
def test_match_conditions_as_upstream(conditions, fail, applies, denied):
    spec = {"matchConditions": [{"name": f"c{i}", "expression": c} for i, c in enumerate(conditions)],
            "validations": [{"expression": "false", "message": "validated"}]}
    if fail:
        spec["failurePolicy"] = fail
    got = validate(spec, _inputs())
    if not applies:
        assert got == []
    elif denied:
        assert [d.action for d in got] == [DENY] and "no such key: nope" in got[0].message
    else:
        assert [d.message for d in got] == ["validated"]


def test_what_the_input_does_not_show_is_not_decided():
    """request.userInfo is not in the manifests: a false result that reads it is conditional; `authorizer` is not
    evaluated at all."""
    inputs = Inputs(_inputs().data, {r"\brequest\s*\.\s*userInfo\b": "who makes the request (request.userInfo)"})
    inputs.data["request"] = {"userInfo": {"username": ""}}
    [d] = validate({"validations": [{"expression": "request.userInfo.username == 'admin'"}]}, inputs)
    assert d.action == DENY and d.unknown == ["who makes the request (request.userInfo)"]
    [a] = validate({"validations": [{"expression": "authorizer.group('').resource('x').check('get').allowed()"}]},
                   _inputs())
    assert a.action == "" and "authorizer" in a.not_run


def test_cost_past_the_per_call_limit_is_not_run():
    """celconfig.PerCallLimit (config.go 22): an expression whose bound passes it is not evaluated here."""
    expr = "object.subsets.all(s, object.subsets.all(t, object.subsets.all(u, object.subsets.all(v, true))))"
    obj = {"metadata": {"name": "x"}, "subsets": [{"a": i} for i in range(200)]}
    [d] = validate({"validations": [{"expression": expr}]}, _inputs(obj))
    assert d.action == "" and "per-call limit" in d.not_run


# --- CollectParams (policy_dispatcher.go v0.36.0 267-382; admission_test.go TestParamRef's cases) --------------------

PARAM_KIND = {"apiVersion": "example.com/v1", "kind": "ParamsConfig"}


def _param(name, namespace="default", labels=None):
    return {"apiVersion": "example.com/v1", "kind": "ParamsConfig",
            "metadata": {"name": name, "namespace": namespace, "labels": labels or {}}}


def test_params_as_upstream():
    params = [_param("replicas-test.example.com"), _param("other", "ns2", {"a": "b"})]
    assert collect_params(None, {"name": "x"}, "default", params, True).objects == [None]       # no paramKind
    assert collect_params(PARAM_KIND, None, "default", params, True).objects == [None]          # no paramRef
    found = collect_params(PARAM_KIND, {"name": "replicas-test.example.com"}, "default", params, True)
    assert found.objects == [params[0]]
    assert collect_params(PARAM_KIND, {"selector": {"matchLabels": {"a": "b"}}, "namespace": "ns2"}, "default",
                          params, True).objects == [params[1]]
    missing = collect_params(PARAM_KIND, {"name": "nope", "parameterNotFoundAction": "Deny"}, "default", params, True)
    assert missing.objects == [] and missing.deny
    with pytest.raises(ConfigError, match="cannot use namespaced paramRef in policy binding that matches "
                                          "cluster-scoped resources"):
        collect_params(PARAM_KIND, {"name": "x"}, "", params, True)
    with pytest.raises(ConfigError, match="paramRef.namespace must not be provided for a cluster-scoped `paramKind`"):
        collect_params(PARAM_KIND, {"name": "x", "namespace": "a"}, "", params, False)
    with pytest.raises(ConfigError, match="paramRef.name and paramRef.selector are mutually exclusive"):
        collect_params(PARAM_KIND, {"name": "x", "selector": {}}, "default", params, True)


# --- ADM001 on manifests ---------------------------------------------------------------------------------------------

def _problems(tmp_path: Path, text: str):
    path = tmp_path / "m.yaml"
    path.write_text(text)
    unit = Unit(str(path), "file", read(str(path)))
    check_policies(unit)
    return [p for p in unit.problems if p.rule == "ADM001"]


POLICY = """apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: denypolicy.example.com}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}]
  validations: [{expression: "false", message: "I'm sorry Dave"}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: denybinding.example.com}
spec: {policyName: denypolicy.example.com, validationActions: %s}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: c, namespace: default}
"""


@pytest.mark.parametrize("actions,severities,text", [
    ("[Deny]", [ERROR], "the API server refuses the ConfigMap: ValidatingAdmissionPolicy 'denypolicy.example.com' "
                        "with binding 'denybinding.example.com' denied request: I'm sorry Dave"),
    # TestWarnValidationAction: upstream's warning, word for word
    ("[Warn]", [WARNING], "Validation failed for ValidatingAdmissionPolicy 'denypolicy.example.com' with binding "
                          "'denybinding.example.com': I'm sorry Dave"),
    ("[Audit]", [INFO], "validation.policy.admission.k8s.io/validation_failure"),   # TestAuditValidationAction
    # TestAllValidationActions binds Deny, Warn and Audit together, past the API server's validation of the
    # binding, which refuses Deny with Warn; Warn with Audit is what a real binding can have
    ("[Warn, Audit]", [WARNING, INFO], "I'm sorry Dave"),
    ("[Deny, Warn, Audit]", [ERROR], "the API server refuses the ValidatingAdmissionPolicyBinding: "
                                     "spec.validationActions: Invalid value: must not contain both Deny and Warn"),
    ("[]", [ERROR], "spec.validationActions: Required value: at least one validation action is required"),
])
def test_actions_as_upstream(tmp_path, actions, severities, text):
    found = _problems(tmp_path, POLICY % actions)
    assert [p.severity for p in found] == severities and all(text in p.message or "Dave" in p.message for p in found)
    assert text in found[0].message


def test_hostile_policies_give_one_line_problems(tmp_path):
    """Bad input: never a traceback; at most one-line problems."""
    text = """apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: p}
spec:
  matchConstraints: {resourceRules: [{apiGroups: ["*"], apiVersions: ["*"], operations: ["*"], resources: ["*"]}],
                     namespaceSelector: {matchExpressions: [{key: a, operator: Bogus}]}}
  variables: [{name: a, expression: "variables.a"}, {name: o, expression: "optional.of(1)"}]
  validations:
  - {expression: "variables.a == 1"}
  - {expression: "variables.o == 1"}
  - {expression: "[1,2].map(x, x)"}
  - {expression: "object.metadata.name.matches('(')"}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: b}
spec: {policyName: p, validationActions: [Deny], paramRef: {name: x}}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: c, namespace: default}
"""
    found = _problems(tmp_path, text)
    assert found and all("\n" not in p.line() for p in found)


def test_a_condition_on_who_creates_the_pods_is_a_warning_naming_the_creator(tmp_path):
    """A matchCondition that leaves out system users (a common exemption) holds with the empty user the manifests
    show, and reads who makes the request: the refusal of a controller's pods is a warning naming that condition."""
    text = """apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: no-host-network}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]
  matchConditions: [{name: not-system, expression: "!request.userInfo.username.startsWith('system:')"}]
  validations: [{expression: "!has(object.spec.hostNetwork) || !object.spec.hostNetwork"}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: b}
spec: {policyName: no-host-network, validationActions: [Deny]}
---
apiVersion: batch/v1
kind: Job
metadata: {name: j, namespace: train}
spec:
  template:
    spec:
      restartPolicy: Never
      hostNetwork: true
      containers: [{name: main, image: "ghcr.io/example/ddp-trainer:0.1.0"}]
"""
    [p] = _problems(tmp_path, text)
    assert p.severity == WARNING and p.field == "spec.template.spec"
    assert "unless who creates them (request.userInfo: the Job controller)" in p.message


def test_an_object_without_a_namespace_is_not_refused_for_reading_it(tmp_path):
    """object.metadata.namespace of an object that names none and no Application places: the API server sets it
    from the request, which the manifests do not show."""
    text = (POLICY % "[Deny]").replace('expression: "false"', "expression: \"object.metadata.namespace != 'x'\"")
    text = text.replace("metadata: {name: c, namespace: default}", "metadata: {name: c}")
    assert _problems(tmp_path, text) == []
    text = text.replace("!= 'x'", "== 'x'")
    [p] = _problems(tmp_path, text)
    assert p.severity == WARNING and "the namespace they are applied to" in p.message


ADM001 = Path(__file__).parent / "fixtures" / "rules" / "ADM001"


@pytest.mark.parametrize("fixture,field", [
    ("fail/kueue-queue-name-missing.yaml", "metadata"),      # the PyTorchJob itself: none of its pods either
    ("fail/pods-host-network.yaml", "spec.template.spec"),   # its pods, one template
    ("fail/trainjob-pods-image-digest.yaml", "spec.template.spec.replicatedJobs[0].template.spec.template.spec"),
])
def test_plan_hears_of_a_refusal_the_input_shows(fixture, field):
    """`make plan` counts no pod of a refused workload, or of a refused template (pods_refused, pods_now)."""
    from policies.report.plan import unit_doc

    path = ADM001 / fixture
    unit = Unit(str(path), "file", read(str(path)))
    check_policies(unit)
    [w] = unit_doc(unit)["workloads"]
    assert w["pods_now"] == 0
    assert [r["field"] for r in w["pods_refused"]] == [field] and "ADM001" not in w["pods_refused"][0]["why"]


def test_a_refusal_only_for_a_container_the_controller_adds_is_a_warning():
    """PodView.without_added, as SEC010 and RES008: the operator's init-pytorch alone breaks the policy."""
    path = ADM001 / "fail/pytorchjob-operator-init-container.yaml"
    unit = Unit(str(path), "file", read(str(path)))
    check_policies(unit)
    [p] = [p for p in unit.problems if p.rule == "ADM001"]
    assert p.severity == WARNING and p.field == "spec.pytorchReplicaSpecs.Worker.template.spec"
    assert p.message.endswith("containers may gain privileges: init-pytorch (in init-pytorch, which the PyTorchJob "
                              "controller adds as its installation does by default)")
    assert not p.extra.get("pods_refused")


def test_a_field_a_built_in_kind_defaults_is_not_a_refusal_where_it_is_absent(tmp_path):
    """The API server defaults a Job (backoffLimit 6) before admission; those defaults are not modelled, so an
    expression that fails on the absent field is a warning naming that; a missing label stays an error, and a CRD's
    schema defaults are applied (a TrainJob's runtimeRef.kind)."""
    job = """apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: p}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: ["batch", "trainer.kubeflow.org"], apiVersions: ["*"], operations: [CREATE],
                     resources: [jobs, trainjobs]}]
  validations: [{expression: "%s"}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: b}
spec: {policyName: p, validationActions: [Deny]}
---
apiVersion: %s
metadata: {name: j, namespace: train}
"""
    batch = "batch/v1\nkind: Job\nspec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers: " \
            "[{name: main, image: 'ghcr.io/example/ddp-trainer:0.1.0'}]\n"
    [p] = _problems(tmp_path, job % ("object.spec.backoffLimit <= 10", batch))
    assert p.severity == WARNING and "the defaults the API server sets on a Job (not modelled here)" in p.message
    [p] = _problems(tmp_path, job % ("object.metadata.labels['team'] == 'a'", batch))
    assert p.severity == ERROR and "no such key: labels" in p.message
    trainjob = "trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nspec: {runtimeRef: {name: torch-distributed}}\n"
    assert _problems(tmp_path, job % ("object.spec.runtimeRef.kind == 'ClusterTrainingRuntime'", trainjob)) == []


# admission_test.go TestParamRef / testParamRefCase (v0.36.0 lines 1472-1807): every valid ParamRef shape, against
# upstream's library of params made to fool the lookup, for a namespaced and a cluster-scoped request.
_NAME = "replicas-test.example.com"
_MATCHING, _NONMATCHING, _OTHER = {"doesitmatch": "yes"}, {"doesitmatch": "no"}, {"notaffiliated": "no"}
_NAMESPACED = {"apiVersion": "example.com/v1", "kind": "ParamsConfig"}
_CLUSTER = {"apiVersion": "example.com/v1", "kind": "ClusterScopedParamsConfig"}
_LIBRARY = [
    *(_param(_NAME + suffix, ns, labels) for suffix, labels_by_ns in (
        ("", {"default": _NONMATCHING, "mynamespace": _NONMATCHING, "othernamespace": _NONMATCHING}),
        ("1", {"default": _MATCHING, "mynamespace": _MATCHING, "othernamespace": _MATCHING}),
        ("2", {"default": _OTHER, "mynamespace": _OTHER, "othernamespace": _OTHER}),
        ("3", {"default": _OTHER, "mynamespace": _MATCHING, "othernamespace": _MATCHING}))
      for ns, labels in labels_by_ns.items()),
    *({**_CLUSTER, "metadata": {"name": _NAME + suffix, "labels": labels}} for suffix, labels in (
        ("", _MATCHING), ("1", _NONMATCHING), ("2", _OTHER), ("3", _MATCHING), ("4", _NONMATCHING), ("5", _OTHER))),
]


def _param_ref_cases():
    for cluster in (False, True):
        for name in (False, True):
            for namespace in (False, True):
                for selector in (False, True):
                    for deny in (False, True):
                        if (cluster and namespace) or (selector and name):
                            continue  # upstream skips the invalid configurations
                        yield cluster, name, namespace, selector, deny


@pytest.mark.parametrize("cluster,name,namespace,selector,deny", list(_param_ref_cases()))
def test_param_ref_as_upstream(cluster, name, namespace, selector, deny):
    kind = _CLUSTER if cluster else _NAMESPACED
    ref = {"name": _NAME} if name else {"selector": {"matchLabels": _MATCHING} if selector else {}}
    if namespace:
        ref["namespace"] = "mynamespace"
    ref["parameterNotFoundAction"] = "Deny" if deny else "Allow"
    pool = [p for p in _LIBRARY if p["kind"] == kind["kind"]]

    def expected(request_ns):
        out = []
        for p in pool:
            meta = p["metadata"]
            if (name and meta["name"] != _NAME) or (namespace and meta.get("namespace") != "mynamespace"):
                continue
            if not cluster and not namespace and meta.get("namespace") != request_ns:
                continue
            if "selector" in ref and ref["selector"] and any(meta["labels"].get(k) != v for k, v in _MATCHING.items()):
                continue
            out.append(p)
        return out

    want = expected("othernamespace")
    assert want, "all test cases should match at least one param"
    assert collect_params(kind, ref, "othernamespace", pool, not cluster).objects == want
    if not namespace and not cluster:  # shouldErrorOnClusterScopedRequests
        with pytest.raises(ConfigError, match="cannot use namespaced paramRef in policy binding that matches "
                                              "cluster-scoped resources"):
            collect_params(kind, ref, "", pool, not cluster)
    else:
        assert collect_params(kind, ref, "", pool, not cluster).objects == expected("") and expected("")
    # every matched param deleted: the not-found action
    gone = [p for p in pool if p not in want]
    found = collect_params(kind, ref, "othernamespace", gone, not cluster)
    assert found.objects == [] and found.deny is deny


def test_what_could_not_be_checked_is_said_once_per_binding(tmp_path):
    """A paramRef whose params the manifests do not hold: one info line for the binding, not one per object."""
    text = (POLICY % "[Deny]").replace("spec:\n  matchConstraints:", "spec:\n  paramKind: {apiVersion: v1, kind: "
                                       "ConfigMap}\n  matchConstraints:")
    text = text.replace("validationActions: [Deny]}", "validationActions: [Deny], paramRef: {name: absent, "
                        "parameterNotFoundAction: Allow}}")
    text += "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: d, namespace: default}\n"
    found = _problems(tmp_path, text)
    assert [p.severity for p in found] == [INFO]
    assert "its params (ConfigMap 'absent' in namespace 'default') are not in these manifests" in found[0].message
