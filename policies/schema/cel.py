"""A CRD's own rules (`x-kubernetes-validations`), evaluated in the schema stage as the API server evaluates them at
admission: k8s.io/apiextensions-apiserver pkg/apiserver/schema/cel/validation.go (kubernetes v1.36.0) validate,
validateExpressions, validateMap and validateArray; the object defaulted first from the schema's `default`s, as the
API server's decoder does (defaulting.py: pkg/apiserver/schema/defaulting/algorithm.go Default).

The library is cel-expr-python (Google's cel-cpp, the C++ sibling of the cel-go the API server runs): RE2 for
`matches`, the strings, math, optional-types, bindings and encoders extensions that Kubernetes enables, with the
Kubernetes functions it lacks in cel_library.py. Per rule, as validateExpressions does:
- a value that is null or absent is not checked (the rules of its parent see it);
- a rule that reads `oldSelf` (a transition rule) runs only where there is an old object: `make diff` between the
  base and the change (cel_transition.py), never in `make validate`;
- false: the rule's `messageExpression` (a one-line, non-empty string), else its `message`, else `failed rule:
  <rule>`, at the rule's `fieldPath` below the node; an evaluation error: `<error> evaluating rule: <rule>`;
- a rule that does not compile here (a function of a library not available, see cel_library.py), or that runs past
  cel-cpp's 10,000 comprehension iterations (a limit of this library, not of the API server), is said once per
  object as not evaluated (SCHEMA-NOT-RUN, info), never as passed or failed.

Cost (cel_cost.py): before a rule runs, an upper bound of the cost the API server would charge it on this value is
computed from its checked AST and the object's sizes (cel-go's estimator). A bound past celconfig.PerCallLimit, or
bounds past celconfig.RuntimeCELCostBudget for the whole object, is a warning (SCHEMA-CEL-COST: the API server may
refuse the object); a rule whose bound is past the whole budget is not evaluated here either (SCHEMA-NOT-RUN, info),
which bounds this stage's own time. Within both, nothing is said: the API server accepts the object on cost.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable

from ..kube.durations import strfmt_duration
from ..kube.objects import INFO, WARNING, Manifest, Problem, generated_name
from .defaulting import defaulted
from .lookup import RULE_NOT_RUN, find_schema, load_schema
from .messages import dotted, one_line

RULE_CEL = "SCHEMA-CEL"
RULE_CEL_COST = "SCHEMA-CEL-COST"
# celconfig.PerCallLimit and celconfig.RuntimeCELCostBudget (k8s.io/apiserver pkg/apis/cel/config.go@v0.36.0:22,26):
# one rule's evaluation is cancelled past the first (environment/base.go@v0.36.0:83); the rules of one object share
# the second (apiextensions-apiserver pkg/registry/customresource/strategy.go@v0.36.0:221,309).
PER_CALL_LIMIT = 1_000_000
RUNTIME_COST_BUDGET = 10_000_000
# A rule whose bound is past this is not evaluated here (its evaluation could take about as long as the API server
# gives a whole object: the budget's comment says roughly 1 s); the API server cancels it at PER_CALL_LIMIT anyway.
NOT_EVALUATED_ABOVE = RUNTIME_COST_BUDGET
# celconfig.MaxEvaluatedMessageExpressionSizeBytes (k8s.io/apiserver pkg/apis/cel/config.go).
MAX_MESSAGE_EXPRESSION = 5 * 1024
_OLD_SELF = re.compile(r"\boldSelf\b")
# cel-cpp's RuntimeOptions.comprehension_max_iterations (10,000 iterations per evaluation, nested ones counted
# together), which cel-expr-python 0.1.3 neither exposes nor lets one raise: a limit of this library, not of the API
# server, so a rule that reaches it is not evaluated here rather than failed.
_ITERATION_BUDGET = "Iteration budget exceeded"
_STRING_LITERAL = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"")


@dataclass
class Rule:
    rule: str
    message: str
    message_expression: str
    field_path: str
    reason: str
    transition: bool
    optional_old_self: bool


@dataclass
class Node:
    """A schema node under which some rule lives: its own rules and the children that lead to others."""

    schema: dict[str, Any]
    rules: list[Rule] = field(default_factory=list)
    props: dict[str, "Node"] = field(default_factory=dict)
    items: "Node | None" = None
    additional: "Node | None" = None
    root: bool = False
    view: "dict[str, Any] | None" = None  # the schema as the rules see it (cost_schema)


def cost_schema(node: Node) -> dict[str, Any]:
    """The node's schema as its rules see the value: at the root, metadata is only name and generateName
    (_root_view); the types of the paths the cost bound reads (cel_cost.schema_type)."""
    if node.view is None:
        view = node.schema
        if node.root:
            props = dict(view.get("properties") or {})
            props["metadata"] = {"type": "object", "properties": {"name": {"type": "string"},
                                                                  "generateName": {"type": "string"}}}
            view = {**view, "properties": props}
        node.view = view
    return node.view


def _rule(raw: dict[str, Any]) -> Rule:
    text = str(raw.get("rule") or "")
    code = _STRING_LITERAL.sub("''", text)
    return Rule(text, str(raw.get("message") or "").strip(), str(raw.get("messageExpression") or ""),
                str(raw.get("fieldPath") or ""), str(raw.get("reason") or ""),
                bool(_OLD_SELF.search(code)), bool(raw.get("optionalOldSelf")))


def _tree(schema: Any) -> Node | None:
    if not isinstance(schema, dict):
        return None
    node = Node(schema, rules=[_rule(r) for r in schema.get("x-kubernetes-validations") or [] if isinstance(r, dict)])
    for name, sub in (schema.get("properties") or {}).items():
        child = _tree(sub)
        if child is not None:
            node.props[name] = child
    node.items = _tree(schema.get("items"))
    node.additional = _tree(schema.get("additionalProperties"))
    if node.rules or node.props or node.items or node.additional:
        return node
    return None


@lru_cache(maxsize=None)
def rule_tree(path: Path) -> Node | None:
    """The rules of one committed schema file, as a tree of the nodes that lead to them (None: the kind has none)."""
    if b"x-kubernetes-validations" not in path.read_bytes():
        return None  # most kinds (every built-in one): no walk of their schema at all
    node = _tree(load_schema(path))
    if node is not None:
        node.root = True
    return node


def _types(schema: dict[str, Any]) -> set[str]:
    t = schema.get("type")
    return set(t) if isinstance(t, list) else {t} if isinstance(t, str) else set()


def _timestamp(text: str) -> datetime | None:
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return None


def prepared(value: Any, schema: Any) -> Any:
    """The value as the rules see it once defaulted (defaulting.py, which evaluate_schema runs first): null fields
    unset, numbers of a `number` field as doubles, strings of format date-time/date/duration as timestamps and
    durations (the API server's UnstructuredToVal); a copy, the manifest unchanged."""
    if not isinstance(schema, dict):
        return value
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        out: dict[str, Any] = {}
        for k, v in value.items():
            if v is not None:
                out[str(k)] = prepared(v, props.get(k, extra if isinstance(extra, dict) else None))
        return out
    if isinstance(value, list):
        items = schema.get("items")
        return [prepared(v, items) for v in value]
    types = _types(schema)
    if isinstance(value, int) and not isinstance(value, bool) and "number" in types and "integer" not in types:
        return float(value)
    if isinstance(value, str):
        fmt = schema.get("format")
        if fmt in ("date-time", "date"):
            when = _timestamp(value if fmt == "date-time" else value + "T00:00:00Z")
            if when is not None:
                from google.protobuf import timestamp_pb2  # cel-cpp takes timestamps as protobuf's well-known type

                stamp = timestamp_pb2.Timestamp()
                stamp.FromDatetime(when if when.tzinfo else when.replace(tzinfo=timezone.utc))
                return stamp
        if fmt == "duration":
            ns = strfmt_duration(value)  # as the API server reads the field (kube/durations.py)
            if ns is not None:
                from google.protobuf import duration_pb2

                out_span = duration_pb2.Duration()
                out_span.FromNanoseconds(ns)
                return out_span
    return value


def _root_view(obj: dict[str, Any]) -> dict[str, Any]:
    """The object as a rule on the root of a CRD's schema sees it (model.WithTypeAndObjectMeta): apiVersion, kind,
    and of metadata only name and generateName."""
    raw_meta = obj.get("metadata")
    meta: dict[str, Any] = raw_meta if isinstance(raw_meta, dict) else {}
    out = dict(obj)
    view = {k: meta[k] for k in ("name", "generateName") if isinstance(meta.get(k), str)}
    if not view.get("name") and view.get("generateName"):
        # The API server names the object before it validates it (objects.generated_name).
        view["name"] = generated_name(view["generateName"])
    out["metadata"] = view
    return out


# --- the CEL environment --------------------------------------------------------------------------------------------

class NotCompiled(Exception):
    """The rule does not compile in this environment."""


class _Env:
    def __init__(self, variables: tuple[str, ...] = ("self", "oldSelf")) -> None:
        from cel_expr_python import cel
        from cel_expr_python.ext import ext_bindings, ext_encoders, ext_math, ext_optional, ext_strings

        from . import cel_library

        self.cel = cel
        self.env = cel.NewEnv(variables={name: cel.Type.DYN for name in variables}, extensions=[
            ext_strings.ExtStrings(), ext_math.ExtMath(), ext_optional.ExtOptional(), ext_bindings.ExtBindings(),
            ext_encoders.ExtEncoders(), cel.CelExtension("kubernetes", cel_library.declarations(cel))])
        self.programs: dict[str, Any] = {}
        self.checked: dict[str, Any] = {}
        # (expr, id(schema), variables) -> (schema, the paths the estimator asked about, {the answers: bound})
        self.bounds: dict[tuple[str, int, tuple[str, ...]], tuple[Any, Any, dict[tuple[Any, ...], int | None]]] = {}

    def cost(self, expr: str, values: dict[str, Any], schema: dict[str, Any]) -> int | None:
        """An upper bound of the API server's runtime cost of `expr` on these values (None: the estimator cannot
        bound it; cel_cost.py). Raises NotCompiled as `program` does."""
        from . import cel_cost  # protobuf's message classes: built on first use, as cel-expr-python is loaded
        from .cel_ast import checked_expr

        checked = self.checked.get(expr)
        if checked is None:
            checked = self.checked[expr] = checked_expr(self.program(expr).serialize())
        act = cel_cost.Activation(values, {name: schema for name in values})
        # The bound is a function of the answers about the paths the estimator asks for (which paths: the AST's, the
        # same every time; their types: the schema's): a rule on every item of a long list is estimated once per
        # distinct tuple of answers, the rest of its items cost one walk of those paths each.
        key = (expr, id(schema), tuple(values))
        memo = self.bounds.get(key)
        if memo is not None and memo[0] is schema:
            answers = act.answers(memo[1])
            if answers in memo[2]:
                return memo[2][answers]
        bound = cel_cost.estimate(checked, act.size_at, act.type_at, traversal_at=act.traversal_at).bound
        if memo is None or memo[0] is not schema:
            memo = self.bounds[key] = (schema, act.asked(), {})
        if len(memo[2]) < 256:
            memo[2][act.answers(memo[1])] = bound
        return bound

    def program(self, expr: str) -> Any:
        hit = self.programs.get(expr)
        if hit is None:
            try:
                hit = self.env.compile(expr)
            except Exception as e:  # noqa: BLE001 - cel-cpp raises RuntimeError for every compile failure
                hit = NotCompiled(_compile_error(str(e)))
            self.programs[expr] = hit
        if isinstance(hit, NotCompiled):
            raise hit
        return hit

    def evaluate(self, expr: str, data: dict[str, Any]) -> tuple[bool, Any]:
        """(ok, value): the value of a program that evaluated, else its error text as cel-go words it."""
        try:
            result = self.program(expr).eval(data=data)
        except NotCompiled:
            raise
        except Exception as e:  # noqa: BLE001 - a value cel-cpp cannot take (an int past int64)
            return False, _eval_error(str(e))
        try:
            if result.type().name() == "ERROR":
                return False, _eval_error(str(result.value()))
            return True, result.value()
        except Exception:  # noqa: BLE001 - a value cel-expr-python cannot hand Python (an optional, a type)
            return False, f"{UNREADABLE} {result.type().name()} cannot be read here"


@lru_cache(maxsize=1)
def environment() -> _Env:
    return _Env()


# The variables of a ValidatingAdmissionPolicy's expressions (k8s.io/apiserver pkg/admission/plugin/cel/compile.go
# @v0.36.0:34-41,251-264: object, oldObject, namespaceObject, request, params, authorizer; `variables`, the policy's
# own, composition.go). All are dyn here (upstream types namespaceObject and request; the values given are complete,
# so a field reads the same). `authorizer` is declared so that an expression reading it compiles; its functions are
# not (admission_policy.py says such an expression could not be checked without evaluating it).
ADMISSION_VARIABLES = ("object", "oldObject", "namespaceObject", "request", "params", "authorizer", "variables")


@lru_cache(maxsize=1)
def admission_environment() -> _Env:
    """The environment of admission policies' expressions: the same library as a CRD rule's, other variables."""
    return _Env(ADMISSION_VARIABLES)


def compile_error(expr: str, env: "_Env | None" = None) -> str | None:
    """Why `expr` does not compile in `env` (the admission environment by default), as cel-go would say it; None where
    it compiles."""
    try:
        (env or admission_environment()).program(expr)
    except NotCompiled as e:
        return str(e)
    return None


# The start of evaluate's error for a value cel-expr-python cannot hand Python (an optional, a type): a limit of the
# library, which callers say as not evaluated rather than as the rule's error.
UNREADABLE = "a value of type"
_UNDECLARED = re.compile(r"undeclared reference to '([^']+)'")


def _compile_error(text: str) -> str:
    m = _UNDECLARED.search(text)
    if m:
        return f"no function or variable '{m.group(1)}' here"
    first = text.strip().splitlines()[0] if text.strip() else "does not compile"
    return re.sub(r"^[A-Z_]+: ", "", first)


def _eval_error(text: str) -> str:
    """cel-cpp's error text as cel-go's (`no such key: x`, `integer overflow`), as the API server shows it."""
    text = re.sub(r"^[A-Z_]+: ", "", text.strip().splitlines()[0] if text.strip() else "evaluation error")
    m = re.match(r'Key not found in map ?: ?"?([^"]*)"?$', text)
    if m:
        return f"no such key: {m.group(1)}"
    m = re.match(r"Index error: index=(-?\d+) size=\d+$", text)
    if m:  # cel-go's interpreter: `index out of bounds: <i>`
        return f"index out of bounds: {m.group(1)}"
    return text


# --- walking an object ---------------------------------------------------------------------------------------------

# Finding.kind: the object fails the rule; the rule was not evaluated here; the API server may refuse it on cost.
REFUSED, NOT_RUN, COST = "refused", "not-run", "cost"


@dataclass
class Finding:
    path: list[str | int]
    message: str
    rule: Rule | None  # None: a rule that could not be evaluated here (message says why)
    kind: str = REFUSED  # REFUSED, NOT_RUN (not evaluated here: message says why) or COST (RULE_CEL_COST)


@dataclass
class _Costs:
    """The bounds of one object's rules (the API server's RuntimeCELCostBudget is per object)."""

    total: int = 0
    rules: int = 0


def _fmt(n: int) -> str:
    return f"{n:,}"


def _field_path(path: list[str | int], relative: str) -> list[str | int]:
    """A rule's fieldPath (`.spec.x`, `.m['key']`) below the node's path."""
    out = list(path)
    for name, key in re.findall(r"\.([^.\[\]]+)|\['((?:[^'\\]|\\.)*)'\]", relative):
        out.append(name or key)
    return out


def _message(env: _Env, rule: Rule, data: dict[str, Any]) -> str:
    if rule.message_expression:
        try:
            ok, value = env.evaluate(rule.message_expression, data)
        except NotCompiled:
            ok, value = False, None
        if ok and isinstance(value, str):
            text = value.strip()
            if text and "\n" not in text and len(text) <= MAX_MESSAGE_EXPRESSION:
                return text
    return rule.message or f"failed rule: {rule.rule}"


def _rule_text(rule: Rule) -> str:
    """ruleErrorString: the message where the rule has one, else the rule."""
    return rule.message or rule.rule.strip()


def _evaluate(env: _Env, node: Node, value: Any, old: Any, path: list[str | int], out: list[Finding],
              transitions_only: bool, costs: _Costs) -> None:
    if value is None:
        return
    if node.rules:
        todo = [r for r in node.rules if (r.transition and (old is not None or r.optional_old_self))
                or (not r.transition and not transitions_only)]
        if todo:
            view = _root_view(value) if node.root and isinstance(value, dict) else value
            old_view = _root_view(old) if node.root and isinstance(old, dict) else old
            for rule in todo:
                data: dict[str, Any] = {"self": view}
                if rule.transition:
                    data["oldSelf"] = old_view
                try:
                    bound = env.cost(rule.rule, data, cost_schema(node))
                    if bound is not None:
                        if bound > PER_CALL_LIMIT:
                            out.append(Finding(path, f"the API server may refuse the object: a rule here may cost up "
                                                     f"to {_fmt(bound)}, past the per-call limit "
                                                     f"{_fmt(PER_CALL_LIMIT)} (cel-go's estimate on this object's "
                                                     f"sizes: a bound, not the cost): `{rule.rule}`", rule, COST))
                        if bound <= NOT_EVALUATED_ABOVE:  # one past it is said above and not run: not summed
                            costs.total += bound
                            costs.rules += 1
                        else:
                            out.append(Finding(path, f"rule `{rule.rule}` not evaluated here: its cost bound "
                                                     f"{_fmt(bound)} is past the object's whole budget "
                                                     f"{_fmt(RUNTIME_COST_BUDGET)}", None, NOT_RUN))
                            continue
                    ok, result = env.evaluate(rule.rule, data)
                except NotCompiled as e:
                    out.append(Finding(path, f"rule `{rule.rule}` not evaluated here: {e}", None, NOT_RUN))
                    continue
                if not ok and str(result).startswith(_ITERATION_BUDGET):
                    out.append(Finding(path, f"rule `{rule.rule}` not evaluated here: it runs more comprehension "
                                             "iterations than cel-expr-python allows (10,000: cel-cpp's "
                                             "comprehension_max_iterations; the API server bounds only the cost)",
                                       None, NOT_RUN))
                elif not ok:
                    out.append(Finding(path, f"{result} evaluating rule: {_rule_text(rule)}", rule))
                elif result is not True:
                    if rule.message_expression:  # evaluated, and charged to the object's budget (validation.go:477)
                        try:
                            costs.total += env.cost(rule.message_expression, data, cost_schema(node)) or 0
                        except NotCompiled:
                            pass
                    out.append(Finding(_field_path(path, rule.field_path), _message(env, rule, data), rule))
    if isinstance(value, dict):
        for k, v in value.items():
            child = node.props.get(k) or (node.additional if k not in (node.schema.get("properties") or {}) else None)
            if child is not None:
                _evaluate(env, child, v, old.get(k) if isinstance(old, dict) else None, [*path, k], out,
                          transitions_only, costs)
    elif isinstance(value, list) and node.items is not None:
        olds = _correlated(node.schema, old)
        for i, v in enumerate(value):
            _evaluate(env, node.items, v, olds(v), [*path, i], out, transitions_only, costs)


def _correlated(schema: dict[str, Any], old: Any) -> Any:
    """validateArray's makeMapList: only a list of x-kubernetes-list-type map correlates its items with the old
    list's (by their keys); any other list's items have no old value."""
    keys = schema.get("x-kubernetes-list-map-keys") or []
    if schema.get("x-kubernetes-list-type") != "map" or not isinstance(old, list) or not keys:
        return lambda v: None
    by_key = {tuple(repr(o.get(k)) for k in keys): o for o in old if isinstance(o, dict)}
    return lambda v: by_key.get(tuple(repr(v.get(k)) for k in keys)) if isinstance(v, dict) else None


def findings(obj: Any, path: Path, old: Any = None, transitions_only: bool = False) -> list[Finding]:
    """What the rules of the schema at `path` say about `obj` (against `old` for the transition rules)."""
    node = rule_tree(path)
    if node is None or not isinstance(obj, dict):
        return []
    return evaluate_schema(load_schema(path), obj, old, transitions_only, node)


def evaluate_schema(schema: dict[str, Any], obj: Any, old: Any = None, transitions_only: bool = False,
                    node: Node | None = None) -> list[Finding]:
    """What the rules of `schema` (a CRD version's openAPIV3Schema, or any schema node) say about `obj`."""
    if node is None:
        node = _tree(schema)
        if node is None:
            return []
        node.root = isinstance(obj, dict) and "metadata" in (schema.get("properties") or {})
    out: list[Finding] = []
    costs = _Costs()
    # the API server defaults the object (and, on an update, the stored one) before its rules see it
    _evaluate(environment(), node, prepared(defaulted(obj, schema), schema),
              prepared(defaulted(old, schema), schema) if old is not None else None, [], out, transitions_only, costs)
    if costs.total > RUNTIME_COST_BUDGET:
        out.append(Finding([], f"the API server may refuse the object: its {costs.rules} CRD validation rule "
                               f"evaluations may cost up to {_fmt(costs.total)} together, past the per-object budget "
                               f"{_fmt(RUNTIME_COST_BUDGET)} (cel-go's estimate on this object's sizes: a bound, not "
                               "the cost)", None, COST))
    return out


def problems(m: Manifest, obj: Any, schema_path: Path) -> list[Problem]:
    """SCHEMA-CEL errors for the rules the object fails, and one SCHEMA-NOT-RUN info line for those not evaluated."""
    found = findings(obj, schema_path)
    out = [Problem(RULE_CEL, one_line(f"{f.message} (the CRD's validation rule: the API server refuses the object)"),
                   m.source, obj=m.ref, field=dotted(f.path) or None,
                   hint=f"make the object satisfy the CRD's rule `{f.rule.rule}`" if f.rule else None)
           for f in found if f.kind == REFUSED]
    out += [Problem(RULE_CEL_COST, one_line(f.message), m.source, obj=m.ref, field=dotted(f.path) or None,
                    severity=WARNING,
                    hint=(f"the rule `{f.rule.rule}`: " if f.rule else "")
                    + "make the lists, maps and strings the rules iterate smaller, or check with kubectl apply "
                      "--dry-run=server")
            for f in found if f.kind == COST]
    skipped = [f for f in found if f.kind == NOT_RUN]
    if skipped:
        out.append(Problem(RULE_NOT_RUN, one_line(f"{len(skipped)} CRD validation rule(s) not evaluated here: "
                                                  f"{skipped[0].message}"), m.source, obj=m.ref,
                           field=dotted(skipped[0].path) or None, severity=INFO,
                           hint="the API server evaluates it at admission; check it there (kubectl apply --dry-run=server)"))
    return out


def evaluate_manifests(items: Iterable[tuple[Manifest, Any]]) -> list[Problem]:
    """The rules of every (manifest, object as admitted) whose kind has a schema with rules."""
    out: list[Problem] = []
    for m, obj in items:
        if not isinstance(obj, dict):
            continue
        path = find_schema(str(obj.get("apiVersion") or ""), str(obj.get("kind") or ""))
        if path is not None and rule_tree(path) is not None:
            out += problems(m, obj, path)
    return out
