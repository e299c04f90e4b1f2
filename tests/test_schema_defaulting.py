"""policies/schema/defaulting.py: the API server's defaulting of a custom resource before it validates it.

The cases of TestDefault in kubernetes/apiextensions-apiserver v0.36.0 pkg/apiserver/schema/defaulting/
algorithm_test.go (lines 29-205), each written as the JSON schema `make schemas` makes of a CRD (Structural's
Default -> `default`, Nullable -> `nullable`, Items, Properties, AdditionalProperties); then the stage: a CRD field
both required and defaulted may be left out, with both validators and the CRD rules, and a required field without
a default still may not."""
from __future__ import annotations

import copy
import json

import pytest
import yaml

from conftest import FIXTURES
from policies.kube.objects import Manifest
from policies.schema import BuiltinValidator, crd_rules, find_schema
from policies.schema.defaulting import as_validated, defaulted, is_crd_schema


def props(**named):
    return {"properties": named}


A, B, C = ({"default": v} for v in "ABC")
CASES = [  # (algorithm_test.go line, name, json, schema, expected)
    (35, "empty", "null", {}, "null"),
    (36, "scalar", "4", {"default": "foo"}, "4"),
    (41, "scalar array", "[1,2]", {"items": {"default": "foo"}}, "[1,2]"),
    (48, "object array", '[{"a":1},{"b":1},{"c":1}]', {"items": props(a=A, b=B, c=C)},
     '[{"a":1,"b":"B","c":"C"},{"a":"A","b":1,"c":"C"},{"a":"A","b":"B","c":1}]'),
    (69, "object array object",
     '{"array":[{"a":1},{"b":2}],"object":{"a":1},"additionalProperties":{"x":{"a":1},"y":{"b":2}}}',
     props(array={"items": props(a=A, b=B)}, object=props(a={"default": "N"}, b={"default": "O"}),
           additionalProperties={"additionalProperties": props(a={"default": "alpha"}, b={"default": "beta"})},
           foo={"default": "bar"}),
     '{"array":[{"a":1,"b":"B"},{"a":"A","b":2}],"object":{"a":1,"b":"O"},'
     '"additionalProperties":{"x":{"a":1,"b":"beta"},"y":{"a":"alpha","b":2}},"foo":"bar"}'),
    (127, "empty and null", '[{},{"a":1},{"a":0},{"a":0.0},{"a":""},{"a":null},{"a":[]},{"a":{}}]',
     {"items": props(a=A)}, '[{"a":"A"},{"a":1},{"a":0},{"a":0.0},{"a":""},{"a":"A"},{"a":[]},{"a":{}}]'),
    (137, "null in nullable list", "[null]", {"nullable": True, "items": props(a=A)}, "[null]"),
    (151, "null in non-nullable list", "[null]", {"nullable": False, "items": {"default": "A"}}, '["A"]'),
    (161, "null in nullable object", '{"a": null}', props(a={"nullable": True, "default": "A"}), '{"a": null}'),
    (172, "null in non-nullable object", '{"a": null}', props(a={"nullable": False, "default": "A"}), '{"a": "A"}'),
    (182, "null in nullable object with additionalProperties", '{"a": null}',
     {"additionalProperties": {"nullable": True, "default": "A"}}, '{"a": null}'),
    (192, "null in non-nullable object with additionalProperties", '{"a": null}',
     {"additionalProperties": {"nullable": False, "default": "A"}}, '{"a": "A"}'),
    (202, "null unknown field", '{"a": null}', {"additionalProperties": True}, '{"a": null}'),
]


@pytest.mark.parametrize("line, name, given, schema, expected", CASES, ids=[c[1] for c in CASES])
def test_upstream_default_cases(line, name, given, schema, expected):
    obj = json.loads(given)
    before = copy.deepcopy(obj)
    assert defaulted(obj, schema) == json.loads(expected)
    assert obj == before  # the manifest's own object is never changed


def test_a_null_in_a_type_list_counts_as_nullable():
    """`make schemas` writes a nullable field as a type list with "null" (the CRDs' own `nullable: true`)."""
    assert defaulted({"a": None}, props(a={"type": ["string", "null"], "default": "A"})) == {"a": None}
    assert defaulted({"a": None}, props(a={"type": "string", "default": "A"})) == {"a": "A"}


def test_defaults_are_copied_and_local_refs_followed():
    schema = {"$defs": {"G": props(n={"default": {"k": [1]}})}, "properties": {"g": {"items": {"$ref": "#/$defs/G"}}}}
    out = defaulted({"g": [{}, {}]}, schema)
    assert out == {"g": [{"n": {"k": [1]}}, {"n": {"k": [1]}}]}
    out["g"][0]["n"]["k"].append(2)
    assert out["g"][1]["n"]["k"] == [1] and schema["$defs"]["G"]["properties"]["n"]["default"] == {"k": [1]}


def test_a_deep_object_is_bounded():
    deep: dict = {}
    node = deep
    for _ in range(5000):
        node["a"] = {}
        node = node["a"]
    schema: dict = {"properties": {}}
    schema["properties"]["a"] = {"$ref": "#"}
    assert defaulted(deep, schema) is not None  # no RecursionError: left as it is below MAX_DEPTH


def manifest(path):
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    return [Manifest(d, str(path), i) for i, d in enumerate(docs)]


RAYJOB = FIXTURES / "schema" / "pass" / "rayjob-worker-replicas-defaulted.yaml"


def test_kuberay_sample_with_defaulted_replicas_is_admitted():
    """KubeRay's own sample leaves out minReplicas and maxReplicas, which its CRD requires and defaults: the schema
    stage (and the CRD rules after it) see them filled in, as the API server does; before, two false errors."""
    [m] = manifest(RAYJOB)
    group = m.obj["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]
    assert "minReplicas" not in group and "maxReplicas" not in group
    assert BuiltinValidator().validate([m]) == []
    assert crd_rules([m], []) == []
    path = find_schema("ray.io/v1", "RayJob")
    assert path is not None and is_crd_schema(path)
    group = as_validated(m, path)["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]
    assert (group["minReplicas"], group["maxReplicas"]) == (0, 2147483647)
    assert "minReplicas" not in m.obj["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]


def test_builtin_kinds_are_not_defaulted():
    """Built-in kinds are defaulted by Go code, not by the OpenAPI schemas committed for them."""
    path = find_schema("apps/v1", "StatefulSet")
    assert path is not None and not is_crd_schema(path)
    m = Manifest({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "s"}, "spec": {}}, "x", 0)
    assert as_validated(m, path) == m.obj
