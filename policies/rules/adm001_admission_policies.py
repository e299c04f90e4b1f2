"""The objects and pods meet the ValidatingAdmissionPolicies the manifests bind.

A platform team ships `ValidatingAdmissionPolicy` and `ValidatingAdmissionPolicyBinding` objects
(admissionregistration.k8s.io/v1) beside the workloads: every Job carries a `kueue.x-k8s.io/queue-name` label, GPU
pods set limits, no `hostNetwork`. The API server runs each bound policy on every object created that it matches,
and refuses one a `Deny` binding's validation fails: the PyTorchJob itself, or, for a policy on pods, each pod its
controller creates (the workload is accepted, its pods never start, and only the controller's events say why). This
rule runs that admission on the manifests (`policies/schema/admission_policy.py`, ported from k8s.io/apiserver
v0.36.0 pkg/admission/plugin/policy: matching, params, matchConditions, variables, validations, failurePolicy) with
the project's CEL evaluator (the one CRD rules run on), on each object of the manifests and on each pod as its
controller creates it (SEC010's `pod_views`). The request is a CREATE, as applying a new object and a controller
creating a pod are.

- Matching: the policy's `matchConstraints` and the binding's `matchResources` (resourceRules with `*` and
  subresources, excludeResourceRules, resourceNames, namespaceSelector, objectSelector, matchPolicy `Equivalent`
  over the versions a CRD in the manifests serves). A kind's resource is its CRD's plural where the manifests hold
  the CRD, else the API server's own rule (restmapper.go UnsafeGuessKindToResource). A binding whose policy is not
  in the manifests, and a policy without a binding, do nothing here.
- `Deny` is an error where the input shows the policy applies and fails (`make plan` then creates no pod of a
  refused workload, or of a refused template: `pods_refused`, as for SEC010); `Warn` a warning (upstream's words:
  `Validation failed for ValidatingAdmissionPolicy ...`); `Audit` an info line (it only writes the audit log).
  An evaluation error follows `failurePolicy` (`Fail`: the validation fails with the error; `Ignore`: admitted), as
  do a matchCondition's error and a configuration error (params not found under `parameterNotFoundAction: Deny`).
- What the input does not show is never an error: a namespaceSelector on a namespace whose labels the manifests do
  not hold (the object names one not in them, or none), and an expression that reads `request.userInfo` (who applies
  the object, or the controller that creates the pods: a matchCondition that leaves out `system:` users is one),
  `namespaceObject` or the namespace of an object placed nowhere, or a pod's name the controller gives: a refusal
  that depends on them is a warning phrased as that condition; a matchCondition false on them, not checked. So is
  a pod refused only for a container its controller adds (SEC010's `PodView.without_added`), or from a runtime the
  manifests do not hold. An expression that reads `authorizer`, a `paramRef` whose params are not in
  the manifests, one past the CEL cost limit, or that does not compile here (a library this evaluator lacks), is
  said as not checked (info), once per binding and expression.
- The policy is assumed in force when the objects are created. It is not, for a moment, where both are applied
  together for the first time: in one sync wave Argo CD applies the kinds it does not order (these, and custom kinds)
  after those it does (a Job), by object name among themselves (argo-cd v3.5.1 gitops-engine/pkg/sync/
  sync_tasks.go 85-110), and the API server loads a new policy within seconds. Every later creation (the next
  run) is refused; put the policy and binding in an earlier sync wave, or apply them first.
- The object is seen as the API server decodes it: a CRD's schema defaults applied (a TrainJob's `runtimeRef.kind`).
  A built-in kind's defaults (a Job's `backoffLimit: 6`, a Pod's `restartPolicy`) are not modelled: an expression
  that errs on a field absent here (`no such key`, but metadata's) is a warning naming that condition, and one that
  tests such a field with `has()` reads it as absent.
- `params`: the binding's `paramRef` (name, namespace, selector, parameterNotFoundAction) resolved from the
  manifests; `namespaceObject`: the Namespace in the manifests; `oldObject`: null. auditAnnotations decide nothing
  and are not evaluated. Objects a controller creates besides pods (a JobSet's Jobs, a Service) are not modelled.
- What the API server's validation refuses about the policy or binding itself, where this port shows it for free,
  is an error on that object, which then holds nothing: an expression that does not parse, a label selector it
  cannot parse, a binding's `validationActions` empty, repeated, or with both Deny and Warn.

Fails: Kueue's sample policy "every Job carries a queue-name label" (kueue v0.19.2 sample-validating-policy.yaml,
extended to PyTorchJobs and TrainJobs) bound with `Deny` in a Namespace labelled `kueue-managed: "true"`, and a
PyTorchJob or TrainJob without the label; a policy on pods (no `hostNetwork`; images by digest) and a Job, or a
TrainJob whose runtime's pods break it; a binding's params (a ConfigMap) the object exceeds; a `Warn` binding (a
warning); a namespace whose labels the manifests do not hold (a warning); a PyTorchJob's pods refused only for the
operator's `init-pytorch` (a warning: its installation may give it another template); a policy that does not parse;
a binding with both Deny and Warn.
Passes: the same PyTorchJob or TrainJob with the label; a namespace the binding's namespaceSelector does not select;
a policy with no binding.
"""
from __future__ import annotations

from typing import Any, Iterator

from ..argocd.apps import CLUSTER_SCOPED
from ..kube.objects import ERROR, INFO, WARNING, Manifest, Problem
from ..kube.values import BUILT_IN_GROUPS, listing, mapping
from ..schema.admission_policy import (ADMISSION_GROUP, AUDIT, DENY, EXEMPT_KINDS, WARN, ConfigError, Decision,
                                       Inputs, Request, collect_params, defaulted_criteria, failure_action,
                                       group_version, guess_resource, matches, selector_error, validate)
from ..schema.cel import compile_error
from ..schema.defaulting import defaulted
from ..schema.lookup import find_schema, load_schema
from .kit import Context, obj_problem
from .res008_limit_range import refusal
from .sec010_pod_security import PodView, argo_namespaces, pod_views

ID = "ADM001"
NAME = "admission-policies"
SEVERITY = ERROR
KINDS = ("ValidatingAdmissionPolicy",)
HINT = "make the object meet the policy's validation, or change the ValidatingAdmissionPolicy or its binding"
V1 = f"{ADMISSION_GROUP}/v1"
_USER = r"\brequest\s*(?:\.\s*userInfo\b|\[)"  # request.userInfo, or any request[...] (its key not read here)


class _World:
    """What the manifests say about kinds, namespaces and params, worked out once per unit."""

    def __init__(self, ctx: Context) -> None:
        self.crds: dict[tuple[str, str], tuple[str, list[str], bool]] = {}
        for crd in ctx.of_kind("CustomResourceDefinition"):
            spec = mapping(crd.obj.get("spec"))
            names = mapping(spec.get("names"))
            served = [str(mapping(v).get("name")) for v in listing(spec.get("versions")) if mapping(v).get("served")]
            self.crds[(str(spec.get("group") or ""), str(names.get("kind") or ""))] = \
                (str(names.get("plural") or ""), served, spec.get("scope") == "Cluster")
        self.plurals = {(g, p): served for (g, _), (p, served, _) in self.crds.items()}
        self.namespaces = {m.name: m for m in ctx.of_kind("Namespace") if m.api_version == "v1"}
        self.destinations, self.managed = argo_namespaces(ctx)
        self.objects = ctx.bundle.manifests
        self._of: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self.said: set[tuple[str, str]] = set()  # what could not be checked, said once (_info)

    def of(self, api_version: str, kind: str) -> list[dict[str, Any]]:
        """The objects of one apiVersion and kind (a paramKind's), listed once."""
        key = (api_version, kind)
        if key not in self._of:
            self._of[key] = [o.obj for o in self.objects if o.api_version == api_version and o.kind == kind]
        return self._of[key]

    def defaulted(self, m: Manifest) -> dict[str, Any]:
        """The object with its kind's schema defaults, as the API server decodes it before admission (a CRD's
        `default`s: schema/defaulting.py); a copy."""
        path = find_schema(m.api_version, m.kind)
        obj = defaulted(m.obj, load_schema(path)) if path is not None else m.obj
        return obj if isinstance(obj, dict) else m.obj

    def resource(self, group: str, kind: str) -> str:
        crd = self.crds.get((group, kind))
        return crd[0] if crd and crd[0] else guess_resource(kind)

    def namespaced(self, group: str, kind: str) -> bool | None:
        if (group, kind) in self.crds:
            return not self.crds[(group, kind)][2]
        return False if (group, kind) in CLUSTER_SCOPED else True

    def equivalents(self, group: str, resource: str) -> list[tuple[str, str]]:
        return [(group, v) for v in self.plurals.get((group, resource), [])]

    def homes(self, namespace: str) -> list[str | None]:
        return [namespace] if namespace else list(self.destinations) or [None]

    def labels(self, ns: str | None) -> dict[str, Any] | None:
        if ns and ns in self.namespaces:
            return mapping(self.namespaces[ns].metadata.get("labels"))
        if ns and ns in self.managed:
            return self.managed[ns][0]
        return None


def check(ctx: Context) -> Iterator[Problem]:
    policies: dict[str, Manifest] = {}
    for m in ctx.of_kind("ValidatingAdmissionPolicy"):
        if m.api_version != V1 or m.ref in ctx.schema_refused:
            continue
        refused = list(_refusals(m))
        yield from refused
        if not refused:
            policies[m.name] = m
    bindings: list[tuple[Manifest, Manifest]] = []
    for b in ctx.of_kind("ValidatingAdmissionPolicyBinding"):
        if b.api_version != V1 or b.ref in ctx.schema_refused:
            continue
        refused = list(_refusals(b))
        yield from refused
        name = str(mapping(b.obj.get("spec")).get("policyName"))
        if not refused and name in policies:
            bindings.append((b, policies[name]))
    if not bindings:
        return
    world = _World(ctx)
    for m in ctx.bundle.manifests:
        group, version = group_version(m.api_version)
        if (group == ADMISSION_GROUP and m.kind in EXEMPT_KINDS) or not m.kind or not version \
                or m.ref in ctx.schema_refused:
            continue  # rules.go 121-129; an object the schema stage refuses never reaches admission
        namespaced = world.namespaced(group, m.kind)
        for home in world.homes(m.namespace) if namespaced else [""]:
            obj = _placed(world.defaulted(m), home)
            req = Request(group, version, m.kind, world.resource(group, m.kind), obj, home, m.created_name,
                          equivalents=world.equivalents)
            yield from _admit(world, bindings, req, None, m)
    for view in pod_views(ctx):
        if view.manifest.kind == "Pod":
            continue  # a Pod of the manifests is checked as an object above
        for home in world.homes(view.namespace):
            pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {**view.metadata, "namespace": home or ""},
                   "spec": view.spec}
            req = Request("", "v1", "Pod", "pods", pod, home, equivalents=world.equivalents)
            yield from _admit(world, bindings, req, view, view.manifest)


def _placed(obj: dict[str, Any], home: str | None) -> dict[str, Any]:
    """The object as the API server admits it into namespace `home` (metadata.namespace set from the request; None,
    a namespace the input does not show: empty, and an expression that reads it is not decided on it)."""
    if home == "" or mapping(obj.get("metadata")).get("namespace"):
        return obj
    return {**obj, "metadata": {**mapping(obj.get("metadata")), "namespace": home or ""}}


def _refusals(m: Manifest) -> Iterator[Problem]:
    """What the API server's validation of a policy or binding refuses that this port shows for free (kubernetes
    pkg/apis/admissionregistration/validation: every expression compiled, every label selector parsed): an
    expression that does not parse, a selector LabelSelectorAsSelector refuses."""
    spec = mapping(m.obj.get("spec"))
    key = "matchConstraints" if m.kind == "ValidatingAdmissionPolicy" else "matchResources"
    for sel in ("namespaceSelector", "objectSelector"):
        raw = mapping(spec.get(key)).get(sel)
        why = selector_error(raw) if raw is not None else None
        if why:
            yield obj_problem(ID, m, f"spec.{key}.{sel}", f"the API server refuses the {m.kind}: {why}",
                              "write a label selector the API server accepts (operators In, NotIn, Exists, "
                              "DoesNotExist; valid label values)")
    if m.kind != "ValidatingAdmissionPolicy":
        yield from _actions_refused(m, spec.get("validationActions"))
        return
    for key, attr in (("matchConditions", "expression"), ("variables", "expression"), ("validations", "expression"),
                      ("validations", "messageExpression")):
        for i, item in enumerate(listing(spec.get(key))):
            expr = mapping(item).get(attr)
            why = compile_error(str(expr)) if isinstance(expr, str) and expr.strip() else None
            if why and "Syntax error" in why:
                yield obj_problem(ID, m, f"spec.{key}[{i}].{attr}", "the API server refuses the "
                                  f"ValidatingAdmissionPolicy: compilation failed: {why}", "write a CEL expression "
                                  "that parses (kubernetes.io/docs/reference/using-api/cel)")


def _actions_refused(m: Manifest, raw: Any) -> Iterator[Problem]:
    """validateValidationActions (kubernetes pkg/apis/admissionregistration/validation/validation.go, as the code index
    holds it): each of Deny, Warn, Audit at most once, not Deny with Warn, at least one."""
    actions = [a for a in listing(raw)]
    says = [f"spec.validationActions[{i}]: Unsupported value: \"{a}\": supported values: \"Audit\", \"Deny\", "
            "\"Warn\"" for i, a in enumerate(actions) if a not in (DENY, WARN, AUDIT)]
    says += [f"spec.validationActions[{i}]: Duplicate value: \"{a}\"" for i, a in enumerate(actions)
             if a in actions[:i]]
    if DENY in actions and WARN in actions:
        says.append("spec.validationActions: Invalid value: must not contain both Deny and Warn (repeating the same "
                    "validation failure information in the API response and headers serves no purpose)")
    if not actions:
        says.append("spec.validationActions: Required value: at least one validation action is required")
    if says:
        yield obj_problem(ID, m, "spec.validationActions", f"the API server refuses the {m.kind}: {'; '.join(says)}",
                          "list each of Deny, Warn and Audit at most once, and Deny or Warn, not both")


def _admit(world: _World, bindings: list[tuple[Manifest, Manifest]], req: Request,
           view: PodView | None, m: Manifest) -> Iterator[Problem]:
    ns = req.namespace
    ns_labels = world.labels(ns) if ns else None
    for binding, policy in bindings:
        spec, bspec = mapping(policy.obj.get("spec")), mapping(binding.obj.get("spec"))
        fail = spec.get("failurePolicy") or "Fail"
        actions = [str(a) for a in listing(bspec.get("validationActions"))]
        who = f"ValidatingAdmissionPolicy '{policy.name}' with binding '{binding.name}'"
        try:
            constraints = defaulted_criteria(spec.get("matchConstraints"))
            if constraints is None:
                raise ConfigError("policy contained no match constraints, a required field")
            found = matches(constraints, req, ns_labels)
            if found.gvr is None:
                continue
        except ConfigError as e:  # dispatcher.go@v0.36.0:127-131,92-93,296: the policy's, without its binding
            if failure_action(fail) == DENY:
                yield _deny(req, view, m, f"ValidatingAdmissionPolicy '{policy.name}' denied request: failed to "
                            f"configure policy: {e}", [])
            continue
        try:
            bound = matches(defaulted_criteria(bspec.get("matchResources")) or {"namespaceSelector": {},
                            "objectSelector": {}}, req, ns_labels)
            if bound.gvr is None:
                continue
            unknown = found.unknown + [u for u in bound.unknown if u not in found.unknown]
            kind = mapping(spec.get("paramKind"))
            pgroup, _ = group_version(str(kind.get("apiVersion") or ""))
            candidates = world.of(str(kind.get("apiVersion") or ""), str(kind.get("kind") or "")) if kind else []
            params = collect_params(spec.get("paramKind"), bspec.get("paramRef"), ns, candidates,
                                    world.namespaced(pgroup, str(kind.get("kind") or "")))
        except ConfigError as e:
            if failure_action(fail) == DENY:
                yield _deny(req, view, m, f"{who} denied request: failed to configure binding: {e}", [])
            continue
        if params.missing:
            if params.deny and failure_action(fail) == DENY:
                yield _deny(req, view, m, f"{who} denied request: failed to configure binding: no params found for "
                            "policy binding with `Deny` parameterNotFoundAction",
                            _conditions(unknown) + [f"unless the cluster holds {params.missing}"])
            else:
                yield from _info(world, (who, "params"), m, view, f"{who} not checked: its params "
                                 f"({params.missing}) are not in these manifests")
            continue
        hidden = {_USER: f"who creates them (request.userInfo: {view.creator})" if view is not None
                  else "who applies it (request.userInfo)"}
        if ns is None or (ns and ns not in world.namespaces):
            hidden[r"\bnamespaceObject\b"] = "the namespace they are applied to (namespaceObject)" if ns is None \
                else f"namespace '{ns}' (namespaceObject), not in these manifests"
        if ns is None:
            hidden[r"\b(?:request\s*\.\s*namespace|object\s*\.\s*metadata\s*\.\s*namespace)\b"] = \
                "the namespace they are applied to"
        if view is not None:
            hidden[r"\b(?:object\s*\.\s*metadata\s*\.\s*(?:name|generateName|uid)|request\s*\.\s*name)\b"] = \
                "the pod's name, which its controller gives"
        gvr = found.gvr
        for param in params.objects:
            data = {"object": req.obj, "oldObject": None, "params": param, "authorizer": None,
                    "namespaceObject": mapping(world.namespaces[ns].obj) if ns and ns in world.namespaces else None,
                    "request": req.admission_request(gvr, (gvr[0], gvr[1], req.kind))}
            decisions = validate(spec, Inputs(data, hidden, _defaults(req, view)))
            only_added = False
            if view is not None and view.added and any(d.action == DENY for d in decisions):
                # refused only for a container the controller adds (its installation may give it another template)
                bare = {**data, "object": {**req.obj, "spec": view.without_added()}}
                only_added = not any(d.action == DENY for d in validate(spec, Inputs(bare, hidden,
                                                                                     _defaults(req, view))))
            yield from _decided(world, req, view, m, who, actions, decisions, unknown, only_added)


def _defaults(req: Request, view: PodView | None) -> str:
    """What an absent field of a built-in kind may be at admission: the API server's defaults (pkg/apis/*/v1
    defaults.go), which are not modelled here (a CRD's schema defaults are applied)."""
    if view is not None or req.group in BUILT_IN_GROUPS:
        return f"the defaults the API server sets on a {req.kind} (not modelled here)"
    return ""


def _conditions(unknown: list[str], decision: Decision | None = None) -> list[str]:
    """What a finding holds only under: namespace labels the manifests do not hold, values an expression reads that
    they do not show."""
    out = [f"if {u} match the namespaceSelector" for u in unknown]
    reads = decision.unknown if decision is not None else []
    if reads:
        out.append(f"unless {', '.join(reads)}, which these manifests do not show, lets it pass")
    return out


def _decided(world: _World, req: Request, view: PodView | None, m: Manifest, who: str, actions: list[str],
             decisions: list[Decision], unknown: list[str], only_added: bool) -> Iterator[Problem]:
    denied = [d for d in decisions if d.action == DENY]
    for d in decisions:
        if d.not_run:
            where = f"validation {d.index}" if d.index is not None else "its matchConditions"
            yield from _info(world, (who, where), m, view, f"{who}: {where} not checked: {d.not_run}")
    if not denied:
        return
    if DENY in actions:
        first = min(denied, key=lambda d: len(_conditions(unknown, d)))  # a shown refusal before a conditional one
        yield _deny(req, view, m, f"{who} denied request: {first.message}", _conditions(unknown, first), only_added)
    for d in denied:
        conditions = _conditions(unknown, d) + (view.conditions(only_added) if view is not None else [])
        text = f"Validation failed for {who}: {d.message}" + (f" ({'; '.join(conditions)})" if conditions else "")
        if WARN in actions:
            yield obj_problem(ID, m, _field(view), f"the API server warns on creating {_what(req, view)}: {text}",
                              HINT, severity=WARNING)
        if AUDIT in actions:
            yield obj_problem(ID, m, _field(view), f"the API server records in its audit log for {_what(req, view)}"
                              f" (validation.policy.admission.k8s.io/validation_failure): {text}", HINT, severity=INFO)


def _what(req: Request, view: PodView | None) -> str:
    return "these pods" if view is not None else f"the {req.kind}"


def _field(view: PodView | None) -> str:
    return view.field if view is not None else "metadata"


def _deny(req: Request, view: PodView | None, m: Manifest, says: str, conditions: list[str],
          only_added: bool = False) -> Problem:
    if view is not None:  # SEC010's conditions: a container the controller adds, a runtime not in the manifests
        return refusal(ID, view, req.namespace, says, HINT, conditions + view.conditions(only_added))
    text = f"the API server refuses the {req.kind}: {says}" + (f" ({'; '.join(conditions)})" if conditions else "")
    p = obj_problem(ID, m, "metadata", text, HINT, severity=WARNING if conditions else ERROR)
    if not conditions:
        p.extra.update(pods_refused=True, object_refused=True)  # make plan: the object, and so its pods, not created
    return p


def _info(world: _World, key: tuple[str, str], m: Manifest, view: PodView | None, text: str) -> Iterator[Problem]:
    """What could not be checked, said once per policy binding and expression (on the first object it matches)."""
    if key not in world.said:
        world.said.add(key)
        yield obj_problem(ID, m, _field(view), text + " (said once, on the first object it matches)",
                          "check it with kubectl apply --dry-run=server against the cluster", severity=INFO)
