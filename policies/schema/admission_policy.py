"""ValidatingAdmissionPolicy admission, as the API server runs it at k8s.io/apiserver v0.36.0 (Kubernetes v1.36.0),
on the objects a manifest set creates: which policy-binding pairs match a request (pkg/admission/plugin/policy/
matching/matching.go, generic/policy_matcher.go, webhook/predicates/rules/rules.go, namespace/matcher.go,
object/matcher.go), which params they read (generic/policy_dispatcher.go CollectParams), and what the policy's
matchConditions, variables and validations decide (validating/validator.go Validate, webhook/matchconditions/
matcher.go Match, cel/composition.go, cel/activation.go), evaluated with the project's CEL environment
(cel.py admission_environment, cel_cost.py for the cost bound).

What the input cannot show is never decided here: a namespace whose labels are not in the manifests (a
namespaceSelector), and an expression that reads who makes the request (`request.userInfo`), the authorizer, or a
namespaceObject / namespace the manifests do not hold. Such a decision comes back with `unknown`, the list of what it
depends on, and the caller words it as a condition or as not checked. Bounded: every expression's cost is bounded
before it runs (cel_cost.py) and one past the per-call limit is not run; cel-expr-python's iteration limit holds
the rest.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable, Iterable

from ..kube.values import LABEL_VALUE, listing, mapping, selects
from .cel import UNREADABLE, NotCompiled, admission_environment

CREATE = "CREATE"
DENY, WARN, AUDIT = "Deny", "Warn", "Audit"
FAIL, IGNORE = "Fail", "Ignore"
# celconfig (k8s.io/apiserver pkg/apis/cel/config.go@v0.36.0:22,26,31,44).
PER_CALL_LIMIT = 1_000_000
RUNTIME_COST_BUDGET = 10_000_000
MATCH_CONDITIONS_BUDGET = 2_500_000
MAX_MESSAGE_EXPRESSION = 5 * 1024
# Kinds the API server never sends to admission policies (rules.go@v0.36.0:121-129
# IsExemptAdmissionConfigurationResource).
EXEMPT_KINDS = frozenset({"ValidatingWebhookConfiguration", "MutatingWebhookConfiguration", "ValidatingAdmissionPolicy",
                          "ValidatingAdmissionPolicyBinding", "MutatingAdmissionPolicy",
                          "MutatingAdmissionPolicyBinding"})
ADMISSION_GROUP = "admissionregistration.k8s.io"
_STRING_LITERAL = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"")
_VARIABLE_REF = re.compile(r"\bvariables\s*(?:\.\s*([A-Za-z_][A-Za-z0-9_]*)|\[\s*''\s*\])")
_NO_SUCH_KEY = re.compile(r"no such key: ([^\s]+)$")
# Fields no defaulting sets: a missing one is missing at admission too.
METADATA_KEYS = frozenset({"metadata", "labels", "annotations", "name", "namespace", "generateName", "ownerReferences",
                           "finalizers"})
# The schema the cost bound reads the variables with: none (every value dyn, its sizes the actual ones); one object,
# so that cel.py's memo of bounds (keyed by the schema's identity) serves every request of a policy.
_DYN: dict[str, Any] = {}
_VARIABLE_INDEX = re.compile(r"\bvariables\s*\[\s*['\"]([A-Za-z_][A-Za-z0-9_]*)['\"]\s*\]")


def guess_resource(kind: str) -> str:
    """The resource of a kind (apimachinery pkg/api/meta/restmapper.go@v0.36.0:119-148 UnsafeGuessKindToResource,
    what the API server's built-in kinds follow; a CRD names its own plural)."""
    singular = kind.lower()
    if not singular or singular.endswith("endpoints"):
        return singular
    if singular.endswith("s"):
        return singular + "es"
    if singular.endswith("y"):
        return singular[:-1] + "ies"
    return singular + "s"


def group_version(api_version: str) -> tuple[str, str]:
    group, _, version = api_version.rpartition("/")
    return group, version


@dataclass
class Request:
    """One admission request: an object created (operation CREATE), as the API server's attributes hold it."""

    group: str
    version: str
    kind: str
    resource: str
    obj: dict[str, Any]
    namespace: str | None = ""    # "" cluster-scoped (or none set); None: namespaced, the namespace is not known
    name: str = ""
    subresource: str = ""
    operation: str = CREATE
    # (group, resource) -> the (group, version)s the API server also serves that resource at (matchPolicy
    # Equivalent: the EquivalentResourceMapper's; this request's own among them or not)
    equivalents: Callable[[str, str], Iterable[tuple[str, str]]] = lambda group, resource: ()

    @property
    def labels(self) -> dict[str, Any]:
        return mapping(mapping(self.obj.get("metadata")).get("labels"))

    def admission_request(self, gvr: tuple[str, str, str], gvk: tuple[str, str, str]) -> dict[str, Any]:
        """`request` as CEL sees it (cel/condition.go@v0.36.0:115-180 CreateAdmissionRequest); userInfo empty (the
        caller treats a read of it as unknown)."""
        def res(g: str, v: str, r: str) -> dict[str, str]:
            return {"group": g, "version": v, "resource": r}

        def knd(g: str, v: str, k: str) -> dict[str, str]:
            return {"group": g, "version": v, "kind": k}
        return {"kind": knd(*gvk), "resource": res(*gvr), "subResource": self.subresource,
                "requestKind": knd(self.group, self.version, self.kind),
                "requestResource": res(self.group, self.version, self.resource),
                "requestSubResource": self.subresource, "name": self.name, "namespace": self.namespace or "",
                "operation": self.operation, "userInfo": {"username": "", "uid": "", "groups": [], "extra": {}},
                "dryRun": False, "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}}


class ConfigError(Exception):
    """What the API server calls a configuration error of a policy or binding (policy_dispatcher.go@v0.36.0:120-133)."""


# --- matching --------------------------------------------------------------------------------------------------------

def selector_error(sel: Any) -> str | None:
    """metav1.LabelSelectorAsSelector's refusal of a selector (an operator it does not know, values where none go or
    none where some must, an invalid label value), else None."""
    for e in listing(mapping(sel).get("matchExpressions")):
        e = mapping(e)
        op, values = e.get("operator"), [str(v) for v in listing(e.get("values"))]
        if op in ("In", "NotIn") and not values:
            return "for 'in', 'notin' operators, values set can't be empty"
        if op in ("Exists", "DoesNotExist") and values:
            return "values set must be empty for exists and does not exist"
        if op not in ("In", "NotIn", "Exists", "DoesNotExist"):
            return f"{str(op).lower()!r} is not a valid label selector operator"
        for v in values:
            if len(v) > 63 or not LABEL_VALUE.match(v):
                return f"values[0][{e.get('key')}]: Invalid value: {v!r}: a valid label must be an empty string or " \
                       "consist of alphanumeric characters, '-', '_' or '.', and must start and end with an " \
                       "alphanumeric character"
    for k, v in mapping(mapping(sel).get("matchLabels")).items():
        if len(str(v)) > 63 or not LABEL_VALUE.match(str(v)):
            return f"values[0][{k}]: Invalid value: {str(v)!r}: a valid label must be an empty string or consist " \
                   "of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
    return None


def _empty(sel: Any) -> bool:
    return isinstance(sel, dict) and not mapping(sel).get("matchLabels") and not listing(sel.get("matchExpressions"))


def rule_matches(rule: dict[str, Any], req: Request, group: str, version: str, resource: str) -> bool:
    """rules.go@v0.36.0:35-117 Matcher.Matches: scope, operation, group, version, resource/subresource."""
    scope = rule.get("scope") or "*"
    is_namespace = (group, version, resource) == ("", "v1", "namespaces")
    if scope == "Namespaced" and (is_namespace or req.namespace == ""):
        return False
    if scope == "Cluster" and not (is_namespace or req.namespace == ""):
        return False
    if scope not in ("*", "Namespaced", "Cluster"):
        return False
    ops = [str(o) for o in listing(rule.get("operations"))]
    if "*" not in ops and req.operation not in ops:
        return False

    def wild(items: Any, value: str) -> bool:
        return any(i == "*" or i == value for i in listing(items))
    if not wild(rule.get("apiGroups"), group) or not wild(rule.get("apiVersions"), version):
        return False
    for res in listing(rule.get("resources")):
        r, _, sub = str(res).partition("/")
        if (r == "*" or r == resource) and (sub == "*" or sub == req.subresource):
            return True
    return False


def resource_rules_match(named: list[Any], policy: Any, req: Request) -> tuple[str, str, str] | None:
    """matching.go@v0.36.0:124-194 matchesResourceRules: the (group, version, resource) a rule matches the request
    as, or None. matchPolicy Equivalent (the v1 default) also tries the groups and versions the API server serves
    the resource at (req.equivalents)."""
    def named_ok(rule: dict[str, Any]) -> bool:
        names = [str(n) for n in listing(rule.get("resourceNames"))]
        return not names or req.name in names
    for rule in (mapping(r) for r in named):
        if rule_matches(rule, req, req.group, req.version, req.resource) and named_ok(rule):
            return req.group, req.version, req.resource
    if policy is None or policy == "Exact":
        return None
    for rule in (mapping(r) for r in named):
        for group, version in req.equivalents(req.group, req.resource):
            if (group, version) != (req.group, req.version) and rule_matches(rule, req, group, version, req.resource) \
                    and named_ok(rule):
                return group, version, req.resource
    return None


@dataclass
class Match:
    """Whether the criteria select the request: `gvr` where they do; `unknown`: where that depends on the labels of
    a namespace the manifests do not hold (the match holds only if they select it)."""

    gvr: tuple[str, str, str] | None
    unknown: list[str] = field(default_factory=list)


def matches(criteria: dict[str, Any], req: Request, ns_labels: dict[str, Any] | None) -> Match:
    """matching.go@v0.36.0:74-122 Matcher.Matches. `ns_labels`: the labels of the request's namespace, None where
    the manifests do not show them. Raises ConfigError where the API server errs (a selector it cannot parse, on a
    request the rules match; a nil selector, which defaulting never leaves, selects nothing:
    LabelSelectorAsSelector)."""
    ns_sel, obj_sel = criteria.get("namespaceSelector"), criteria.get("objectSelector")
    unknown: list[str] = []
    ns_match: bool | None = True
    ns_err = None
    if not (req.namespace == "" and req.resource != "namespaces"):  # namespace/matcher.go:105-113
        ns_err = selector_error(ns_sel) if ns_sel is not None else None
        if ns_sel is None:
            ns_match = False
        elif ns_err is None and not _empty(ns_sel):
            labels = req.labels if req.resource == "namespaces" else ns_labels  # matcher.go:78-86
            if labels is None:
                ns_match = None
                unknown.append("the labels of the namespace they are applied to" if req.namespace is None
                               else f"the labels of namespace '{req.namespace}' (not in these manifests)")
            else:
                ns_match = selects(ns_sel, labels)
    if ns_match is False and ns_err is None:
        return Match(None)
    obj_err = selector_error(obj_sel) if obj_sel is not None else None
    if obj_sel is None or (obj_err is None and not _empty(obj_sel) and not selects(obj_sel, req.labels)):
        return Match(None)  # object/matcher.go:52-61 (oldObject is null on CREATE)
    policy = criteria.get("matchPolicy")
    if resource_rules_match(listing(criteria.get("excludeResourceRules")), policy, req) is not None:
        return Match(None)
    rules = listing(criteria.get("resourceRules"))
    gvr = resource_rules_match(rules, policy, req) if rules else (req.group, req.version, req.resource)
    if gvr is None:
        return Match(None)
    if ns_err or obj_err:
        raise ConfigError(ns_err or obj_err)
    return Match(gvr, unknown)


def defaulted_criteria(raw: Any) -> dict[str, Any] | None:
    """MatchResources as the API server stores them (pkg/apis/admissionregistration/v1/defaults.go: namespaceSelector
    and objectSelector {}, matchPolicy Equivalent); None stays None."""
    if not isinstance(raw, dict):
        return None
    out = dict(raw)
    for key in ("namespaceSelector", "objectSelector"):
        if out.get(key) is None:
            out[key] = {}
    out.setdefault("matchPolicy", "Equivalent")
    return out


# --- CEL --------------------------------------------------------------------------------------------------------------

def plain(value: Any) -> Any:
    """A value cel-expr-python returned as plain Python (its lists' and maps' items come back as accessors), to be
    handed back to another expression (a variable's value)."""
    if isinstance(value, dict):
        return {plain(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if hasattr(value, "plain_value") and callable(getattr(value, "value", None)):
        return plain(value.value())
    if isinstance(value, bytearray):
        return bytes(value)
    return value


@lru_cache(maxsize=4096)
def code_of(expr: str) -> str:
    """The expression without its string literals (what it reads, not what it says)."""
    return _STRING_LITERAL.sub("''", expr)


@lru_cache(maxsize=8192)
def _reads_pattern(pattern: str, code: str) -> bool:
    return re.search(pattern, code) is not None


@dataclass
class Outcome:
    """One expression's result: ok with its value, or an error; `unknown`: what the input does not show that the
    expression reads (the result stands only where those do not change it); `not_run`: why it was not evaluated."""

    ok: bool
    value: Any = None
    error: str = ""
    unknown: list[str] = field(default_factory=list)
    not_run: str = ""


@dataclass
class Inputs:
    """The values the expressions of one policy-binding-param see, and what of them the input does not show."""

    data: dict[str, Any]
    hidden: dict[str, str]  # regex over an expression's code -> what it reads that the input does not show
    # What an absent field may be instead (a built-in kind's defaults, which are not modelled here): a `no such
    # key` error on any key but metadata's then depends on it ('': the object is as the API server sees it).
    defaults: str = ""
    variables: list[tuple[str, str]] = field(default_factory=list)
    _vars: dict[str, Outcome] = field(default_factory=dict)
    spent: int = 0

    def _reads(self, expr: str) -> list[str]:
        code = code_of(expr)
        out = [what for pattern, what in self.hidden.items() if _reads_pattern(pattern, code)]
        for name in self.referenced(code, expr):
            out += [w for w in self.variable(name).unknown if w not in out]
        return out

    @staticmethod
    @lru_cache(maxsize=4096)
    def referenced(code: str, expr: str = "") -> tuple[str, ...]:
        """The variables an expression reads: `variables.<name>`, and `variables['<name>']` in the expression
        itself (its literals are gone from `code`)."""
        out = [m.group(1) for m in _VARIABLE_REF.finditer(code) if m.group(1)]
        return tuple(out + [n for n in _VARIABLE_INDEX.findall(expr) if n not in out])

    def variable(self, name: str) -> Outcome:
        """A variable, evaluated once on first use (composition.go@v0.36.0:232-256: lazily, its errors only where
        read)."""
        hit = self._vars.get(name)
        if hit is None:
            expr = next((e for n, e in self.variables if n == name), None)
            self._vars[name] = Outcome(False, error=f"no such key: {name}")  # a cycle reads as missing
            if expr is None:
                return self._vars[name]
            hit = self.run(expr, raw=True)
            if not hit.ok and not hit.not_run:
                hit.error = f"composited variable \"{name}\" fails to evaluate: {hit.error}"
            elif hit.ok:
                hit.value = plain(hit.value)
            self._vars[name] = hit
        return hit

    def run(self, expr: str, budget: int = RUNTIME_COST_BUDGET, raw: bool = False) -> Outcome:
        """Evaluate one expression (activation.go@v0.36.0:140-186): its errors as `expression '<e>' resulted in
        error: <e>`, nothing claimed past the cost limits or where it reads the authorizer."""
        env = admission_environment()
        unknown = self._reads(expr)
        if _reads_pattern(r"\bauthorizer\b", code_of(expr)):
            return Outcome(False, unknown=unknown, not_run="it reads `authorizer` (what the requester may do), which "
                           "only the cluster knows")
        data = dict(self.data)
        vars_ = {}
        for name in self.referenced(code_of(expr), expr):
            got = self.variable(name)
            if got.not_run:
                return Outcome(False, unknown=unknown, not_run=got.not_run)
            if got.ok:
                vars_[name] = got.value
        data["variables"] = vars_
        try:
            bound = env.cost(expr, data, _DYN)
        except NotCompiled as e:
            return Outcome(False, unknown=unknown, not_run=f"it does not compile here: {e}")
        except Exception:  # noqa: BLE001 - the estimator on a value it does not model: no bound, evaluate as before
            bound = None
        if bound is not None and bound > PER_CALL_LIMIT:
            return Outcome(False, unknown=unknown, not_run=f"its cost may reach {bound:,}, past the per-call limit "
                           f"{PER_CALL_LIMIT:,} (cel-go's estimate: the API server may cancel it)")
        self.spent += bound or 0
        if self.spent > budget:  # a bound, not the cost: the API server may run out of budget (activation.go:149)
            return Outcome(False, unknown=unknown, not_run=f"the policy's expressions may cost up to {self.spent:,} "
                           f"together, past the budget {budget:,} (cel-go's estimate: the API server may refuse with "
                           "`validation failed due to running out of cost budget`)")
        ok, value = env.evaluate(expr, data)
        if not ok and str(value).startswith(UNREADABLE):  # a limit of cel-expr-python, not the expression's error
            return Outcome(False, unknown=unknown, not_run=f"its value cannot be handed back here: {value}")
        if not ok and str(value).startswith("Iteration budget exceeded"):
            return Outcome(False, unknown=unknown, not_run="it runs more comprehension iterations than "
                           "cel-expr-python allows (10,000)")
        if not ok:
            missing = [n for n in self.referenced(code_of(expr), expr) if not self.variable(n).ok]
            why = self.variable(missing[0]).error if missing else str(value)
            key = _NO_SUCH_KEY.search(why)
            if self.defaults and key and key.group(1) not in METADATA_KEYS and self.defaults not in unknown:
                unknown = unknown + [self.defaults]
            return Outcome(False, error=why if raw else f"expression '{expr}' resulted in error: {why}",
                           unknown=unknown)
        return Outcome(True, value=value, unknown=unknown)


@dataclass
class Decision:
    """validator.go's PolicyDecision, for one validation (or the policy as a whole: index None): `action` DENY or
    admit (""), its message; `unknown`/`not_run` as Outcome's."""

    action: str
    message: str
    index: int | None = None
    reason: str = ""
    unknown: list[str] = field(default_factory=list)
    not_run: str = ""


def failure_action(policy: Any) -> str:
    """policyDecisionActionForError (validator.go@v0.36.0:63-68): Fail denies, Ignore admits."""
    return DENY if (policy or FAIL) == FAIL else ""


def validate(spec: dict[str, Any], inputs: Inputs) -> list[Decision]:
    """validator.go@v0.36.0:85-212 Validate, after the match: matchConditions (matchconditions/matcher.go:80-143),
    then each validation, with its message (messageExpression, message, `failed expression: <e>`). Audit
    annotations are not evaluated (they decide nothing)."""
    fail = spec.get("failurePolicy") or FAIL
    inputs.variables = [(str(mapping(v).get("name")), str(mapping(v).get("expression") or ""))
                        for v in listing(spec.get("variables"))]
    errors: list[Outcome] = []
    pending: list[Outcome] = []
    reads: list[str] = []  # what the conditions that held read that the input does not show
    for cond in (mapping(c) for c in listing(spec.get("matchConditions"))):
        got = inputs.run(str(cond.get("expression") or ""), MATCH_CONDITIONS_BUDGET)
        if got.not_run or (got.ok and got.value is False and got.unknown):
            pending.append(got)  # false here, or not run: the cluster's values may make it true
        elif got.ok and got.value is False:
            return []  # matcher.go:115-122: a condition false, the policy does not apply
        else:
            reads += [u for u in got.unknown if u not in reads]
            if not got.ok:
                errors.append(got)
    if pending:  # a condition the input cannot decide: nothing is claimed (the caller says it was not checked)
        first = pending[0]
        return [Decision("", "", None, unknown=first.unknown, not_run=first.not_run
                         or f"a matchCondition reads {', '.join(first.unknown)}, which these manifests do not show")]
    if errors:  # matcher.go:124-139: errors (and no false) follow the failure policy, as one aggregate error
        texts = [e.error for e in errors]
        if failure_action(fail) == DENY:
            return [Decision(DENY, texts[0] if len(texts) == 1 else f"[{', '.join(texts)}]", unknown=reads)]
        return []
    inputs.spent = 0
    out: list[Decision] = []
    for i, val in enumerate(mapping(v) for v in listing(spec.get("validations"))):
        expr = str(val.get("expression") or "")
        got = inputs.run(expr)
        unknown = got.unknown + [u for u in reads if u not in got.unknown]
        if got.not_run:
            out.append(Decision("", "", i, unknown=unknown, not_run=got.not_run))
        elif not got.ok:
            out.append(Decision(failure_action(fail), got.error, i, unknown=unknown))
        elif got.value is not True:
            out.append(Decision(DENY, message(val, inputs), i, str(val.get("reason") or "Invalid"), unknown))
    return out


def message(val: dict[str, Any], inputs: Inputs) -> str:
    """validator.go@v0.36.0:175-207: the messageExpression's string (trimmed, one line, at most 5 KiB), else the
    message, else `failed expression: <expression>`."""
    text = ""
    if val.get("messageExpression"):
        got = inputs.run(str(val["messageExpression"]))
        if got.ok and isinstance(got.value, str):
            text = got.value.strip()
            if len(text) > MAX_MESSAGE_EXPRESSION or "\n" in text:
                text = ""
    if not text and str(val.get("message") or "").strip():
        text = str(val["message"]).strip()
    return text or f"failed expression: {str(val.get('expression') or '').strip()}"


# --- params -----------------------------------------------------------------------------------------------------------

@dataclass
class Params:
    """The params of one binding for one request (CollectParams): `objects` found ([None]: none used), or `missing`:
    what the manifests do not hold (the cluster may), and whether the binding then refuses (`deny`)."""

    objects: list[dict[str, Any] | None]
    missing: str = ""
    deny: bool = False


def collect_params(param_kind: Any, ref: Any, namespace: str | None, candidates: list[dict[str, Any]],
                   namespaced: bool | None) -> Params:
    """policy_dispatcher.go@v0.36.0:267-382 CollectParams, over the param objects of the manifests (`candidates`,
    of the paramKind). Raises ConfigError as upstream's errors. `namespace`: the request's (None: not known)."""
    if not isinstance(param_kind, dict) or not isinstance(ref, dict):
        return Params([None])  # 316-323: no paramKind, or a binding without paramRef: params null
    ns = ""
    if namespaced:
        if ref.get("namespace"):
            ns = str(ref["namespace"])
        elif namespace == "":
            raise ConfigError("cannot use namespaced paramRef in policy binding that matches cluster-scoped resources")
        elif namespace is None:
            ns = ""  # the request names no namespace: params that name none are applied with it, to the same one
        else:
            ns = namespace
    elif namespaced is False and ref.get("namespace"):
        raise ConfigError("paramRef.namespace must not be provided for a cluster-scoped `paramKind`")
    pool = [c for c in candidates if str(mapping(c.get("metadata")).get("namespace") or "") == ns] if namespaced \
        else candidates
    if ref.get("name"):
        if ref.get("selector") is not None:
            raise ConfigError("paramRef.name and paramRef.selector are mutually exclusive")
        found = [c for c in pool if mapping(c.get("metadata")).get("name") == ref["name"]][:1]
        what = f"{param_kind.get('kind')} '{ref['name']}'" + (f" in namespace '{ns}'" if ns else "")
    elif ref.get("selector") is not None:
        if selector_error(ref["selector"]):
            raise ConfigError(str(selector_error(ref["selector"])))
        found = [c for c in pool if selects(ref["selector"], mapping(mapping(c.get("metadata")).get("labels")))]
        what = f"{param_kind.get('kind')} params selected by the binding's paramRef.selector" + \
            (f" in namespace '{ns}'" if ns else "")
    else:
        raise ConfigError("one of name or selector must be provided")
    if found:
        return Params(list(found))
    return Params([], missing=what, deny=ref.get("parameterNotFoundAction") == DENY)
