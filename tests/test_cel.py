"""A CRD's own rules (x-kubernetes-validations) in the schema stage (policies/schema/cel.py, cel_library.py).

Ported upstream cases: kubernetes/kubernetes staging/src/k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel/
validation_test.go, TestValidationExpressions, the cases "lists", "stdlib regex functions", "optionals",
"transition rules", "skipped transition rule for nil old ..." and "quantity"/"URL parsing" (as stored at commit
f9cfc9d93491c42c0ee6b3705d4c46f7e173f356 of the index; the functions are the same at v1.36.0: lists.go, regex.go in
k8s.io/apiserver pkg/cel/library). Each `valid` rule must evaluate to true, each `errors` rule must err. The CRDs'
own rules: tests/fixtures/schema/cel/{pass,fail}/ (`# expect: RULE field` lines, as tests/test_schemas.py's).
"""
from __future__ import annotations

import datetime
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from policies.report import engine
from policies.kube.objects import Manifest
from policies.schema import BuiltinValidator, Transition, crd_rules, transition_problems
from policies.schema import cel_transition
from policies.schema import cel

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures" / "schema" / "cel"
PASS = sorted((FIXTURES / "pass").glob("*.yaml"))
FAIL = sorted((FIXTURES / "fail").glob("*.yaml"))


def load(path: Path) -> list[Manifest]:
    rel = path.relative_to(REPO).as_posix()
    return [Manifest(d, rel, i) for i, d in enumerate(yaml.safe_load_all(path.read_text())) if d is not None]


def expectations(path: Path) -> list[tuple[str, str | None]]:
    out = []
    for line in path.read_text().splitlines():
        if line.startswith("# expect:"):
            rule, where = line.split(":", 1)[1].split(None, 1)
            out.append((rule, None if where.strip() == "-" else where.strip()))
    assert out, f"{path.name} has no `# expect:` line"
    return out


@pytest.fixture(scope="module")
def builtin() -> BuiltinValidator:
    return BuiltinValidator()


def stage(builtin: BuiltinValidator, manifests: list[Manifest]):
    return crd_rules(manifests, builtin.validate(manifests))


@pytest.mark.parametrize("path", FAIL, ids=[p.name for p in FAIL])
def test_crd_rule_refuses(builtin, path):
    manifests = load(path)
    problems = stage(builtin, manifests)
    assert sorted((p.rule, p.field) for p in problems) == sorted(expectations(path)), [p.line() for p in problems]
    for p in problems:
        assert p.severity == "error" and p.obj == manifests[0].ref and "\n" not in p.line()
        assert "the API server refuses the object" in p.message and p.hint


@pytest.mark.parametrize("path", PASS, ids=[p.name for p in PASS])
def test_crd_rules_pass(builtin, path):
    assert [p.line() for p in stage(builtin, load(path))] == []


def test_every_rule_in_crds_compiles():
    """Every x-kubernetes-validations rule of every committed CRD schema compiles here (none is left unevaluated)."""
    rules = set()
    for path in sorted((REPO / "schemas" / "crds").rglob("*.json")):
        node = cel.rule_tree(path)
        todo = [node] if node else []
        while todo:
            n = todo.pop()
            rules.update(r.rule for r in n.rules)
            todo += [c for c in (*n.props.values(), n.items, n.additional) if c is not None]
    in_crds = set()
    for crd_file in sorted((REPO / "crds").rglob("*.yaml")):
        for doc in yaml.load_all(crd_file.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
            if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
                todo_raw = [v.get("schema") for v in doc["spec"]["versions"] if v.get("served")]
                while todo_raw:
                    n = todo_raw.pop()
                    if isinstance(n, dict):
                        in_crds.update(r["rule"] for r in n.get("x-kubernetes-validations") or [])
                        todo_raw += list(n.values())
                    elif isinstance(n, list):
                        todo_raw += n
    assert rules == in_crds and len(rules) >= 50  # every rule of crds/ reaches the schema stage
    env = cel.environment()
    for rule in sorted(rules):
        env.program(rule)  # raises NotCompiled


def test_object_with_schema_error_is_not_rule_checked(builtin):
    """hasBlockingErr (apiextensions-apiserver registry/customresource/strategy.go): the rules of an object the schema
    refuses are not run; the SCHEMA error alone is reported."""
    obj = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {"name": "9-x"},
           "spec": {"runtimeRef": {"name": "r"}, "numNodes": "two"}}
    rules = [p.rule for p in stage(builtin, [Manifest(obj, "x.yaml")])]
    assert "SCHEMA" in rules and "SCHEMA-CEL" not in rules


def test_validate_reports_the_rule_with_the_cli_source_line():
    unit = engine.Unit("x.yaml", "file", load(FIXTURES / "fail" / "trainjob-managedby-unknown.yaml"))
    engine.validate([unit], BuiltinValidator())
    found = [p for p in unit.problems if p.rule == "SCHEMA-CEL"]
    assert [p.field for p in found] == ["spec.managedBy"] and engine.failed([unit])


def test_repository_overlays_satisfy_every_crd_rule(builtin):
    units = engine.collect([str(REPO / "overlays")], REPO / "overlays")
    bad = [p.line() for u in units for p in crd_rules(u.manifests, []) if p.rule.startswith("SCHEMA")]
    assert bad == []


# ---------------------------------------------------------------- the API server's semantics (validation.go)

def schema(props: dict, rules: list[dict], **extra) -> dict:
    return {"type": "object", "properties": props, "x-kubernetes-validations": rules, **extra}


STRING = {"type": "string"}


def test_message_expression_field_path_and_default_message():
    s = schema({"a": STRING, "b": {"type": "object", "properties": {"c": STRING}}}, [
        {"rule": "self.a == 'x'", "messageExpression": "'a is ' + self.a", "fieldPath": ".a"},
        {"rule": "self.b.c == 'y'", "fieldPath": ".b.c"},
        {"rule": "self.a.size() > 5", "message": " too short ", "messageExpression": "1"},  # not a string: message
    ])
    found = cel.evaluate_schema(s, {"a": "z", "b": {"c": "n"}})
    assert [(f.path, f.message) for f in found] == [
        (["a"], "a is z"), (["b", "c"], "failed rule: self.b.c == 'y'"), ([], "too short")]


def test_evaluation_error_is_reported_as_the_api_server_words_it():
    found = cel.evaluate_schema(schema({"a": STRING}, [{"rule": "self.b == 'x'"}]), {"a": "z"})
    assert [f.message for f in found] == ["no such key: b evaluating rule: self.b == 'x'"]


def test_null_values_are_not_checked_and_defaults_are_applied():
    s = schema({"a": {"type": "string", "default": "d", "x-kubernetes-validations": [{"rule": "self == 'd'"}]},
                "n": {"type": ["string", "null"], "x-kubernetes-validations": [{"rule": "self == 'never'"}]}},
               [{"rule": "self.a == 'd'"}])
    assert cel.evaluate_schema(s, {"n": None}) == []


def test_number_fields_are_doubles_and_formats_are_typed():
    s = schema({"d": {"type": "number"}, "t": {"type": "string", "format": "date-time"},
                "du": {"type": "string", "format": "duration"}},
               [{"rule": "self.d == 1.0 && type(self.d) == double"},
                {"rule": "self.t < timestamp('2001-01-01T00:00:00Z')"},
                {"rule": "self.du == duration('1h2m1s')"}])
    assert cel.evaluate_schema(s, {"d": 1, "t": "2000-01-01T00:00:00Z", "du": "1h2m1s"}) == []


@pytest.mark.parametrize("text, span", [
    ("1h2m1s", "duration('1h2m1s')"), ("1.h", "duration('1h')"), ("2 days", "duration('48h')"),
    ("1wk", "duration('168h')"), ("12 Hours", "duration('12h')"), ("3 minutes and 2 sec", "duration('3m2s')"),
])
def test_a_duration_field_is_read_as_the_api_server_reads_it(text, span):
    """k8s.io/apiserver v0.36.0 valuesunstructured.go 137-142: strfmt.ParseDuration (time.ParseDuration, then
    kube-openapi's spelled-out units) turns the string into the CEL duration the rule sees."""
    s = schema({"du": {"type": "string", "format": "duration"}}, [{"rule": f"self.du == {span}"}])
    assert cel.evaluate_schema(s, {"du": text}) == []


def test_list_of_type_map_correlates_old_items_by_key():
    item = {"type": "object", "properties": {"name": STRING, "v": STRING},
            "x-kubernetes-validations": [{"rule": "self.v == oldSelf.v", "message": "v is immutable"}]}
    s = {"type": "object", "properties": {"l": {"type": "array", "items": item, "x-kubernetes-list-type": "map",
                                                "x-kubernetes-list-map-keys": ["name"]}}}
    old = {"l": [{"name": "a", "v": "1"}, {"name": "b", "v": "2"}]}
    new = {"l": [{"name": "b", "v": "2"}, {"name": "a", "v": "3"}, {"name": "c", "v": "9"}]}
    found = cel.evaluate_schema(s, new, old, transitions_only=True)
    assert [(f.path, f.message) for f in found] == [(["l", 1], "v is immutable")]
    atomic = {"type": "object", "properties": {"l": {"type": "array", "items": item}}}
    assert cel.evaluate_schema(atomic, new, old, transitions_only=True) == []  # no old item: skipped


# ---------------------------------------------------------------- ported: TestValidationExpressions

LISTS_OBJ = {
    "ints": [1, 2, 2, 3], "unsortedInts": [2, 1], "emptyInts": [],
    "doubles": [1.0, 2.0, 2.0, 3.0], "unsortedDoubles": [2.0, 1.0], "emptyDoubles": [],
    "intBackedDoubles": [1, 2, 2, 3], "unsortedIntBackedDDoubles": [2, 1], "emptyIntBackedDDoubles": [],
    "durations": ["1s", "1m", "1m", "1h"], "unsortedDurations": ["1m", "1s"], "emptyDurations": [],
    "strings": ["a", "b", "b", "c"], "unsortedStrings": ["b", "a"], "emptyStrings": [],
    "dates": ["2000-01-01", "2000-02-01", "2000-02-01", "2010-01-01"], "unsortedDates": ["2000-02-01", "2000-01-01"],
    "emptyDates": [],
    "objs": [{"f1": "a", "f2": "a"}, {"f1": "a", "f2": "b"}, {"f1": "a", "f2": "b"}, {"f1": "a", "f2": "c"}],
}


def _list_of(item: dict) -> dict:
    return {"type": "array", "items": item}


LISTS_SCHEMA = {"type": "object", "properties": {
    **{k: _list_of({"type": "integer"}) for k in ("ints", "unsortedInts", "emptyInts")},
    **{k: _list_of({"type": "number"}) for k in ("doubles", "unsortedDoubles", "emptyDoubles", "intBackedDoubles",
                                                 "unsortedIntBackedDDoubles", "emptyIntBackedDDoubles")},
    **{k: _list_of({"type": "string", "format": "duration"}) for k in ("durations", "unsortedDurations",
                                                                      "emptyDurations")},
    **{k: _list_of(STRING) for k in ("strings", "unsortedStrings", "emptyStrings")},
    **{k: _list_of({"type": "string", "format": "date"}) for k in ("dates", "unsortedDates", "emptyDates")},
    "objs": _list_of({"type": "object", "properties": {"f1": STRING, "f2": STRING}}),
}}

LISTS_VALID = [
    "self.ints.sum() == 8", "self.ints.min() == 1", "self.ints.max() == 3", "self.emptyInts.sum() == 0",
    "self.ints.isSorted()", "self.emptyInts.isSorted()", "self.unsortedInts.isSorted() == false",
    "self.ints.indexOf(2) == 1", "self.ints.lastIndexOf(2) == 2", "self.ints.indexOf(10) == -1",
    "self.ints.lastIndexOf(10) == -1",
    "self.doubles.sum() == 8.0", "self.doubles.min() == 1.0", "self.doubles.max() == 3.0",
    "self.emptyDoubles.sum() == 0.0", "self.doubles.isSorted()", "self.emptyDoubles.isSorted()",
    "self.unsortedDoubles.isSorted() == false", "self.doubles.indexOf(2.0) == 1", "self.doubles.lastIndexOf(2.0) == 2",
    "self.doubles.indexOf(10.0) == -1", "self.doubles.lastIndexOf(10.0) == -1",
    "self.intBackedDoubles.sum() == 8.0", "self.intBackedDoubles.min() == 1.0", "self.intBackedDoubles.max() == 3.0",
    "self.emptyIntBackedDDoubles.sum() == 0.0", "self.intBackedDoubles.isSorted()",
    "self.unsortedIntBackedDDoubles.isSorted() == false", "self.intBackedDoubles.indexOf(2.0) == 1",
    "self.intBackedDoubles.lastIndexOf(2.0) == 2", "self.intBackedDoubles.indexOf(10.0) == -1",
    "self.intBackedDoubles.lastIndexOf(10.0) == -1",
    "self.durations.sum() == duration('1h2m1s')", "self.durations.min() == duration('1s')",
    "self.durations.max() == duration('1h')", "self.durations.isSorted()", "self.emptyDurations.isSorted()",
    "self.unsortedDurations.isSorted() == false", "self.durations.indexOf(duration('1m')) == 1",
    "self.durations.lastIndexOf(duration('1m')) == 2", "self.durations.indexOf(duration('2m')) == -1",
    "self.durations.lastIndexOf(duration('2m')) == -1",
    "self.strings.min() == 'a'", "self.strings.max() == 'c'", "self.strings.isSorted()",
    "self.emptyStrings.isSorted()", "self.unsortedStrings.isSorted() == false", "self.strings.indexOf('b') == 1",
    "self.strings.lastIndexOf('b') == 2", "self.strings.indexOf('x') == -1", "self.strings.lastIndexOf('x') == -1",
    "self.dates.min() == timestamp('2000-01-01T00:00:00.000Z')",
    "self.dates.max() == timestamp('2010-01-01T00:00:00.000Z')", "self.dates.isSorted()",
    "self.emptyDates.isSorted()", "self.unsortedDates.isSorted() == false",
    "self.dates.indexOf(timestamp('2000-02-01T00:00:00.000Z')) == 1",
    "self.dates.lastIndexOf(timestamp('2000-02-01T00:00:00.000Z')) == 2",
    "self.dates.indexOf(timestamp('2005-02-01T00:00:00.000Z')) == -1",
    "self.dates.lastIndexOf(timestamp('2005-02-01T00:00:00.000Z')) == -1",
    "[[1], [2]].indexOf([1]) == 0", "[{'a': 1}, {'b': 2}].lastIndexOf({'b': 2}) == 1",
    "self.objs.indexOf(self.objs[1]) == 1", "self.objs.lastIndexOf(self.objs[1]) == 2",
    "([0] + self.emptyInts).min() == 0",
    "dyn([]).sum() == 0", "dyn([1, 2]).sum() == 3", "dyn([1.0, 2.0]).sum() == 3.0", "[].sum() == 0",
]
# The API server refuses the last three when the CRD is created (its type check); cel-cpp dispatches a Python
# function by argument kind, so here they err when evaluated: refused either way.
LISTS_ERRORS = {
    "self.emptyInts.min() == 1": "min called on empty list", "self.emptyInts.max() == 3": "max called on empty list",
    "self.emptyDoubles.min() == 1.0": "min called on empty list",
    "self.emptyDoubles.max() == 3.0": "max called on empty list",
    "self.emptyStrings.min() == 'a'": "min called on empty list",
    "self.emptyStrings.max() == 'c'": "max called on empty list",
    "['a', 'b'].sum() == 'c'": "found no matching overload for 'sum'",
    "[[1], [2]].min() == [1]": "found no matching overload for 'min'",
    "[{'a': 1}, {'b': 2}].max() == {'b': 2}": "found no matching overload for 'max'",
}

REGEX_VALID = [
    "self.str.find('[0-9]+') == '123'", "self.str.find('[0-9]+') != '456'", "self.str.find('xyz') == ''",
    "self.str.findAll('[0-9]+') == ['123', '456']", "self.str.findAll('[0-9]+', 0) == []",
    "self.str.findAll('[0-9]+', 1) == ['123']", "self.str.findAll('[0-9]+', 2) == ['123', '456']",
    "self.str.findAll('[0-9]+', 3) == ['123', '456']", "self.str.findAll('[0-9]+', -1) == ['123', '456']",
    "self.str.findAll('xyz') == []", "self.str.findAll('xyz', 1) == []",
]
# Upstream: the first three are compile errors ("error parsing regexp: unexpected )"), `x++` "invalid matches
# argument": refused here when evaluated.
REGEX_ERRORS = {"self.str.find(')') == ''": "error parsing regexp", "self.str.findAll(')') == []": "error parsing regexp",
                "self.str.findAll(')', 1) == []": "error parsing regexp",
                "self.str.matches('x++')": "invalid"}

OPTIONALS_OBJ = {"presentObj": {"presentStr": "value"}, "m": {"k": "v"}, "l": ["a"]}
OPTIONALS_SCHEMA = schema({"presentObj": {"type": "object", "properties": {"presentStr": STRING}},
                           "absentObj": {"type": "object", "properties": {"absentStr": STRING}},
                           "m": {"type": "object", "additionalProperties": STRING}, "l": _list_of(STRING)}, [])
OPTIONALS_VALID = [
    "self.?presentObj.?presentStr == optional.of('value')", "self.presentObj.?presentStr == optional.of('value')",
    "self.presentObj.?presentStr.or(optional.of('nope')) == optional.of('value')",
    "self.presentObj.?presentStr.orValue('') == 'value'", "self.presentObj.?presentStr.hasValue() == true",
    "self.presentObj.?presentStr.optMap(v, v == 'value').hasValue()",
    "self.?absentObj.?absentStr == optional.none()",
    "self.?absentObj.?absentStr.or(optional.of('nope')) == optional.of('nope')",
    "self.?absentObj.?absentStr.orValue('nope') == 'nope'", "self.?absentObj.?absentStr.hasValue() == false",
    "self.?absentObj.?absentStr.optMap(v, v == 'value').hasValue() == false",
    "self.m[?'k'] == optional.of('v')", "self.m[?'k'].or(optional.of('nope')) == optional.of('v')",
    "self.m[?'k'].orValue('') == 'v'", "self.m[?'k'].hasValue() == true", "self.m[?'k'].optMap(v, v == 'v').hasValue()",
    "self.m[?'x'] == optional.none()", "self.m[?'x'].or(optional.of('nope')) == optional.of('nope')",
    "self.m[?'x'].orValue('nope') == 'nope'", "self.m[?'x'].hasValue() == false",
    "self.l[?0] == optional.of('a')", "self.l[?1] == optional.none()", "self.l[?0].orValue('') == 'a'",
    "self.l[?0].hasValue() == true", "self.l[?0].optMap(v, v == 'a').hasValue()",
    "self.l[?1].or(optional.of('nope')) == optional.of('nope')", "self.l[?1].orValue('nope') == 'nope'",
    "self.l[?1].hasValue() == false",
    "optional.ofNonZeroValue(1).hasValue()", "optional.ofNonZeroValue(uint(1)).hasValue()",
    "optional.ofNonZeroValue(1.1).hasValue()", "optional.ofNonZeroValue('a').hasValue()",
    "optional.ofNonZeroValue(true).hasValue()", "optional.ofNonZeroValue(['a']).hasValue()",
    "optional.ofNonZeroValue({'k': 'v'}).hasValue()",
    "optional.ofNonZeroValue(timestamp('2011-08-18T00:00:00.000+01:00')).hasValue()",
    "optional.ofNonZeroValue(duration('19h3m37s10ms')).hasValue()",
    "optional.ofNonZeroValue(null) == optional.none()", "optional.ofNonZeroValue(0) == optional.none()",
    "optional.ofNonZeroValue(uint(0)) == optional.none()", "optional.ofNonZeroValue(0.0) == optional.none()",
    "optional.ofNonZeroValue('') == optional.none()", "optional.ofNonZeroValue(false) == optional.none()",
    "optional.ofNonZeroValue([]) == optional.none()", "optional.ofNonZeroValue({}) == optional.none()",
    pytest.param("optional.ofNonZeroValue(timestamp('0001-01-01T00:00:00.000+00:00')) == optional.none()",
                 marks=pytest.mark.xfail(strict=True, reason="cel-cpp's zero timestamp is the Unix epoch (protobuf's), "
                                         "cel-go's is Go's time.Time{} (year 1): a known library difference")),
    "optional.ofNonZeroValue(duration('0s')) == optional.none()",
    "{?'k': optional.none(), 'k2': 'v2'} == {'k2': 'v2'}",
    "{?'k': optional.of('v'), 'k2': 'v2'} == {'k': 'v', 'k2': 'v2'}",
    "['a', ?optional.none(), 'c'] == ['a', 'c']", "['a', ?optional.of('v'), 'c'] == ['a', 'v', 'c']",
]


def _check(s: dict, obj: dict, rule: str, old: dict | None = None) -> list[cel.Finding]:
    return cel.evaluate_schema({**s, "x-kubernetes-validations": [{"rule": rule}]}, obj, old)


@pytest.mark.parametrize("rule", LISTS_VALID)
def test_upstream_lists_valid(rule):
    assert _check(LISTS_SCHEMA, LISTS_OBJ, rule) == []


@pytest.mark.parametrize("rule", sorted(LISTS_ERRORS))
def test_upstream_lists_errors(rule):
    found = _check(LISTS_SCHEMA, LISTS_OBJ, rule)
    assert len(found) == 1 and LISTS_ERRORS[rule] in found[0].message, found


@pytest.mark.parametrize("rule", REGEX_VALID)
def test_upstream_regex_valid(rule):
    assert _check(schema({"str": STRING}, []), {"str": "this is a 123 string 456"}, rule) == []


@pytest.mark.parametrize("rule", sorted(REGEX_ERRORS))
def test_upstream_regex_errors(rule):
    found = _check(schema({"str": STRING}, []), {"str": "this is a 123 string 456"}, rule)
    assert len(found) == 1 and REGEX_ERRORS[rule] in found[0].message, found


@pytest.mark.parametrize("rule", OPTIONALS_VALID)
def test_upstream_optionals_valid(rule):
    assert _check(OPTIONALS_SCHEMA, OPTIONALS_OBJ, rule) == []


def test_upstream_optionals_error():
    found = _check(OPTIONALS_SCHEMA, OPTIONALS_OBJ, "self.absentObj.?absentStr == optional.none()")
    assert len(found) == 1 and "no such key: absentObj" in found[0].message


@pytest.mark.parametrize("rule", ["oldSelf.v != self.v", "oldSelf.v == 'old' && self.v == 'new'"])
def test_upstream_transition_rules(rule):
    assert _check(schema({"v": STRING}, []), {"v": "new"}, rule, old={"v": "old"}) == []
    assert len(_check(schema({"v": STRING}, []), {"v": "new"}, "oldSelf.v == self.v", old={"v": "old"})) == 1


@pytest.mark.parametrize("s, obj", [(STRING, "exists"), (_list_of(STRING), []),
                                    (schema({"f": STRING}, []), {"f": "exists"})],
                         ids=["primitive", "array", "object"])
def test_upstream_transition_rule_skipped_without_old(s, obj):
    assert cel.evaluate_schema({**s, "x-kubernetes-validations": [{"rule": "oldSelf == self"}]}, obj) == []


@pytest.mark.parametrize("rule", ["isQuantity(self.val1)", "url('/path').getScheme() == ''"])
def test_opaque_type_libraries_are_said_not_evaluated(rule):
    """quantity, url (and ip, cidr, semver, format) return opaque CEL types that cel-expr-python cannot make from
    Python: such a rule is not evaluated, and says so, rather than passing or failing."""
    found = _check(schema({"val1": STRING}, []), {"val1": "20"}, rule)
    assert len(found) == 1 and found[0].kind == cel.NOT_RUN and "not evaluated here" in found[0].message


def test_not_evaluated_rule_is_one_info_line(builtin, tmp_path):
    crd_schema = schema({"val1": STRING}, [{"rule": "isQuantity(self.val1)"}, {"rule": "url(self.val1).getHost() == ''"}])
    m = Manifest({"val1": "x"}, "x.yaml")
    found = cel.evaluate_schema(crd_schema, m.obj)
    assert [f.kind for f in found] == [cel.NOT_RUN, cel.NOT_RUN]


# ---------------------------------------------------------------- transition rules in make diff

def _trainjob(**spec) -> dict:
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {"name": "t"},
            "spec": {"runtimeRef": {"name": "torch-distributed"}, **spec}}


def test_transition_rules_of_the_crd_say_what_cannot_change():
    old = _trainjob(trainer={"numNodes": 2})
    assert transition_problems(old, _trainjob(trainer={"numNodes": 2})) == Transition()
    assert transition_problems(old, _trainjob(trainer={"numNodes": 4})).refused == ["spec.trainer: field is immutable"]
    pj = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "p"},
          "spec": {"runPolicy": {"schedulingPolicy": {"queue": "a"}}, "pytorchReplicaSpecs": {}}}
    moved = {**pj, "spec": {"runPolicy": {"schedulingPolicy": {"queue": "b"}}, "pytorchReplicaSpecs": {}}}
    assert transition_problems(pj, moved) == Transition(refused=[
        "spec.runPolicy.schedulingPolicy.queue: spec.runPolicy.schedulingPolicy.queue is immutable"])
    assert transition_problems(pj, pj) == Transition()


def test_a_transition_rule_not_evaluated_here_is_said_in_make_diff(monkeypatch, tmp_path):
    """A transition rule the evaluator cannot run (here: url(), an opaque type) is neither a refusal nor silence:
    transition_problems gives it as unchecked, and make diff prints it as such (before, it was dropped)."""
    from policies.diff import objects as diff_objects
    crd = tmp_path / "thing.json"
    crd.write_text(json.dumps(schema({"val1": STRING}, [
        {"rule": "self.val1 == oldSelf.val1 || url(self.val1).getHost() == ''"},
        {"rule": "self.val1.size() >= oldSelf.val1.size()", "message": "val1 may not shrink"}])))
    monkeypatch.setattr(cel_transition, "find_schema", lambda api_version, kind: crd)
    got = transition_problems({"val1": "abc"}, {"val1": "x"})
    assert got.refused == ["(object): val1 may not shrink"]
    assert len(got.unchecked) == 1 and "not evaluated here" in got.unchecked[0] and "url(" in got.unchecked[0]

    key = ("example.com/v1", "Thing", "", "t")
    side = lambda val: SimpleNamespace(objects={"overlays/x/y": {key: Manifest({"apiVersion": "example.com/v1",  # noqa: E731
                                                                               "kind": "Thing", "val1": val}, "t.yaml")}},
                                       errors={}, apps={})
    [d] = diff_objects.compare(side("abc"), side("x"))  # type: ignore[arg-type]
    assert [w for w in d.warnings if "not checked here" in w and "url(" in w and "--dry-run=server" in w], d.warnings
    assert [w for w in d.warnings if "val1 may not shrink" in w and "refuses this change" in w], d.warnings


def test_timestamps_convert():
    stamp = cel.prepared("2000-01-01T00:00:00Z", {"type": "string", "format": "date-time"})
    assert stamp.ToDatetime(tzinfo=datetime.timezone.utc) == datetime.datetime(2000, 1, 1, tzinfo=datetime.timezone.utc)
    assert cel.prepared("nope", {"type": "string", "format": "date-time"}) == "nope"
