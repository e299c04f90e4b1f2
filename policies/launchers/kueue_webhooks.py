"""What Kueue's validating webhooks refuse on CREATE of its admin objects, beyond their CRD schemas' own rules.

Ported from kueue v0.19.2 pkg/webhooks: clusterqueue_webhook.go (ValidateCreate 76-81, ValidateClusterQueue
96-100, validateClusterQueueSpec 113-136, validateAdmissionCheckOnFlavorsWithOld 159-185, the totals 187-229,
validateResourceGroups 302-329, validateFlavorQuotas 331-356, validateResourceQuantity 359-365, validateLimit 368-380,
validateLendingLimit 383-389), common.go (validateResourceName, validateFairSharing), cohort_webhook.go
(validateCohort) and resourceflavor_webhook.go (ValidateResourceFlavor 84-94, validateNodeTaints 96-;
validateTolerations in workload_webhook.go 277-287).
Each refusal is one line in upstream's field.Error form (`path: Invalid value: "v": detail`).

Left to the CRD's CEL rules (the SCHEMA stage says them; not repeated here): a ClusterQueue's borrowingLimit without a
cohort, `preemption` reclaimWithinCohort Never with borrowWithinCohort.policy other than Never, a flavorFungibility
`preference` without TryNextFlavor twice, a flavor whose resources are not as many as coveredResources; a
ResourceFlavor's taint effects, toleration operators and effects. Not ported: concurrentAdmissionPolicy (behind the
ConcurrentAdmission feature gate, alpha and off by default in v0.19.2 pkg/features/kube_features.go 868-870).
LocalQueue's webhook validates nothing (webhooks.go 52-56); AdmissionCheck, WorkloadPriorityClass and Topology have
no webhook in pkg/webhooks.
"""
from __future__ import annotations

import re
from fractions import Fraction
from typing import Any

from ..kube.values import DNS1123_SUBDOMAIN, QUALIFIED_NAME, listing, mapping, parse_quantity

KUEUE_GROUP = "kueue.x-k8s.io"
WEBHOOK_KINDS = ("ClusterQueue", "Cohort", "ResourceFlavor")
_QUALIFIED = ("must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
              "character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
              "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")
_SUBDOMAIN = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
              "start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
              "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
_LABEL_VALUE = ("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and "
                "must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex "
                "used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")
NEGATIVE = "must be greater than or equal to 0"  # apimachinery validation IsNegativeErrorMsg
LIMIT_EMPTY = "must be nil when {} is empty"  # clusterqueue_webhook.go 41
LENDING = "must be less than or equal to the nominalQuota"  # clusterqueue_webhook.go 42


def _q(value: Any) -> str:
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


def invalid(path: str, value: Any, detail: str) -> str:
    shown = value if isinstance(value, int) and not isinstance(value, bool) else _q(value)
    return f"{path}: Invalid value: {shown}: {detail}"


def qualified_name(key: str) -> list[str]:
    """apimachinery validation IsQualifiedName: the details it gives for a label key (IsLabelKey) or a name."""
    prefix, slash, name = key.rpartition("/")
    out = []
    if slash and not prefix:
        out.append("prefix part must be non-empty")
    elif slash and (len(prefix) > 253 or not DNS1123_SUBDOMAIN.match(prefix)):
        out.append("prefix part " + ("must be no more than 253 characters" if len(prefix) > 253 else _SUBDOMAIN))
    if not name:
        out.append("name part must be non-empty")
    elif len(name) > 63:
        out.append("name part must be no more than 63 characters")
    if name and not QUALIFIED_NAME.match(name):
        out.append("name part " + _QUALIFIED)
    return out


def _labels(labels: Any, path: str) -> list[str]:
    """metav1 validation ValidateLabels: keys qualified names, values label values."""
    out = []
    for k, v in mapping(labels).items():
        out += [invalid(path, k, d) for d in qualified_name(str(k))]
        text = "" if v is None else str(v)
        if text and (len(text) > 63 or not QUALIFIED_NAME.match(text)):
            out.append(invalid(path, text, "must be no more than 63 characters" if len(text) > 63 else _LABEL_VALUE))
    return out


def label_selector(sel: Any, path: str) -> list[str]:
    """metav1 validation ValidateLabelSelector (no options): matchLabels as labels, each matchExpression's operator,
    its values as the operator needs them, its key a qualified name."""
    sel = mapping(sel)
    out = _labels(sel.get("matchLabels"), f"{path}.matchLabels")
    for i, e in enumerate(listing(sel.get("matchExpressions"))):
        e, p = mapping(e), f"{path}.matchExpressions[{i}]"
        op, values = e.get("operator"), listing(e.get("values"))
        if op in ("In", "NotIn") and not values:
            out.append(f"{p}.values: Required value: must be specified when `operator` is 'In' or 'NotIn'")
        elif op in ("Exists", "DoesNotExist") and values:
            out.append(f"{p}.values: Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'")
        elif op not in ("In", "NotIn", "Exists", "DoesNotExist"):
            out.append(invalid(f"{p}.operator", op, "not a valid selector operator"))
        out += [invalid(f"{p}.key", e.get("key"), d) for d in qualified_name(str(e.get("key") or ""))]
    return out


def _text(value: Any) -> str:
    """A quantity as the webhook passes it to field.Invalid (Quantity.String(), a string: quoted)."""
    return str(value)


def _amount(value: Any) -> Fraction | None:
    q = parse_quantity(value)
    return q.value if q is not None else None


def resource_groups(groups: Any, has_parent: bool, path: str, cohort: bool, lending_check: bool) -> list[str]:
    """validateResourceGroups and validateFlavorQuotas: resource names, a resource or a flavor in two groups, each
    flavor's resources named as coveredResources, quantities not negative, limits only with a parent, a lendingLimit
    within the nominalQuota (ClusterQueue). A ClusterQueue's borrowingLimit without a cohort is its CEL rule's."""
    out: list[str] = []
    seen_res: set[str] = set()
    seen_flavors: set[str] = set()
    parent = "parent" if cohort else "cohort"
    for i, rg in enumerate(listing(groups)):
        rg, gp = mapping(rg), f"{path}[{i}]"
        covered = [str(r) for r in listing(rg.get("coveredResources"))]
        for j, name in enumerate(covered):
            p = f"{gp}.coveredResources[{j}]"
            out += [invalid(p, name, d) for d in qualified_name(name)]
            if name in seen_res:
                out.append(f"{p}: Duplicate value: {_q(name)}")
            seen_res.add(name)
        for j, fq in enumerate(listing(rg.get("flavors"))):
            fq, fp = mapping(fq), f"{gp}.flavors[{j}]"
            for k, rq in enumerate(listing(fq.get("resources"))[:len(covered)]):
                rq, rp = mapping(rq), f"{fp}.resources[{k}]"
                if rq.get("name") != covered[k]:
                    out.append(invalid(f"{rp}.name", rq.get("name"), "must match the name in coveredResources"))
                nominal = _amount(rq.get("nominalQuota"))
                if nominal is not None and nominal < 0:
                    out.append(invalid(f"{rp}.nominalQuota", _text(rq.get("nominalQuota")), NEGATIVE))
                for key in ("borrowingLimit", "lendingLimit"):
                    if rq.get(key) is None:
                        continue
                    value, amount = _text(rq[key]), _amount(rq[key])
                    if key == "lendingLimit" and amount is not None and amount < 0:
                        out.append(invalid(f"{rp}.{key}", value, NEGATIVE))
                    if not has_parent and (cohort or key == "lendingLimit"):
                        out.append(invalid(f"{rp}.{key}", value, LIMIT_EMPTY.format(parent)))
                    if key == "borrowingLimit" and amount is not None and amount < 0:
                        out.append(invalid(f"{rp}.{key}", value, NEGATIVE))
                    if key == "lendingLimit" and lending_check and amount is not None and nominal is not None \
                            and amount > nominal:
                        out.append(invalid(f"{rp}.{key}", value, LENDING))
            name = str(fq.get("name"))
            if name in seen_flavors:
                out.append(f"{fp}.name: Duplicate value: {_q(name)}")
            seen_flavors.add(name)
    return out


def fair_sharing(fs: Any, path: str) -> list[str]:
    """common.go validateFairSharing: a weight not negative, and 0 or over 1n (10e-9)."""
    weight = mapping(fs).get("weight")
    amount = _amount(weight) if weight is not None else None
    if amount is None:
        return []
    if amount < 0:
        return [invalid(path, _text(weight), NEGATIVE)]
    if 0 < amount <= Fraction(1, 10**9):
        return [invalid(path, _text(weight), "When not 0, weight must be > 10e-9")]
    return []


def _totals(groups: list[Any], path: str) -> list[str]:
    """validateTotalFlavors, validateTotalCoveredResources, validateFlavorResourceCombinations."""
    out = []
    flavors = sum(len(listing(mapping(rg).get("flavors"))) for rg in groups)
    if flavors > 256:
        out.append(invalid(path, flavors, f"total number of flavors across all resourceGroups must be ≤ 256, got "
                           f"{flavors}"))
    covered = sum(len(listing(mapping(rg).get("coveredResources"))) for rg in groups)
    if covered > 256:
        out.append(invalid(path, covered, "total number of covered resources across all resourceGroups must be ≤ "
                           f"256, got {covered}"))
    for i, rg in enumerate(groups):
        combos = sum(len(listing(mapping(f).get("resources"))) for f in listing(mapping(rg).get("flavors")))
        if combos > 512:
            out.append(invalid(f"{path}[{i}]", combos, "number of flavor-resource combinations in a resourceGroup "
                               f"must be ≤ 512, got {combos}"))
    return out


def cluster_queue(cq: dict[str, Any]) -> list[str]:
    """ValidateClusterQueue on CREATE (v1beta2's cohortName, v1beta1's cohort)."""
    spec = mapping(cq.get("spec"))
    groups = listing(spec.get("resourceGroups"))
    out = resource_groups(groups, bool(spec.get("cohortName") or spec.get("cohort")), "spec.resourceGroups", False,
                          True)
    if spec.get("namespaceSelector") is not None:
        out += label_selector(spec.get("namespaceSelector"), "spec.namespaceSelector")
    out += fair_sharing(spec.get("fairSharing"), "spec.fairSharing")
    out += _totals(groups, "spec.resourceGroups")
    flavors = {str(mapping(f).get("name")) for rg in groups for f in listing(mapping(rg).get("flavors"))}
    allowed = ", ".join(_q(f) for f in sorted(flavors))
    for i, check in enumerate(listing(mapping(spec.get("admissionChecksStrategy")).get("admissionChecks"))):
        for j, flavor in enumerate(listing(mapping(check).get("onFlavors"))):
            if str(flavor) not in flavors:
                out.append(f"spec.admissionChecksStrategy.admissionChecks[{i}].onFlavors[{j}]: Unsupported value: "
                           f"{_q(flavor)}" + (f": supported values: {allowed}" if flavors else ""))
    return out


def cohort(obj: dict[str, Any]) -> list[str]:
    """validateCohort: fairSharing, and resource groups whose limits need a parent (no lendingLimit bound)."""
    spec = mapping(obj.get("spec"))
    return fair_sharing(spec.get("fairSharing"), "spec.fairSharing") + \
        resource_groups(spec.get("resourceGroups"), bool(spec.get("parentName") or spec.get("parent")),
                        "spec.resourceGroups", True, False)


def resource_flavor(obj: dict[str, Any]) -> list[str]:
    """ValidateResourceFlavor: nodeLabels as labels, each taint's key a label name and value a label value, a taint
    key repeated for one effect, each toleration's key a label name."""
    spec = mapping(obj.get("spec"))
    out = _labels(spec.get("nodeLabels"), "spec.nodeLabels")
    seen: set[tuple[str, str]] = set()
    for i, t in enumerate(listing(spec.get("nodeTaints"))):
        t, p = mapping(t), f"spec.nodeTaints[{i}]"
        key, value = str(t.get("key") or ""), "" if t.get("value") is None else str(t.get("value"))
        out += [invalid(f"{p}.key", key, d) for d in qualified_name(key)]
        if value and (len(value) > 63 or not QUALIFIED_NAME.match(value)):
            out.append(invalid(f"{p}.value", value, "must be no more than 63 characters" if len(value) > 63
                               else _LABEL_VALUE))
        pair = (str(t.get("effect") or ""), key)
        if pair in seen:
            out.append(f"{p}: Duplicate value: {{key: {key}, effect: {pair[0]}}}: taints must be unique by key and "
                       "effect pair")
            continue
        seen.add(pair)
    for i, t in enumerate(listing(spec.get("tolerations"))):
        key = str(mapping(t).get("key") or "")
        if key:
            out += [invalid(f"spec.tolerations[{i}].key", key, d) for d in qualified_name(key)]
    return out


def refusals(api_version: str, kind: str, obj: dict[str, Any]) -> list[str]:
    """What Kueue's webhook refuses on creating this object; [] for any other kind."""
    if api_version.partition("/")[0] != KUEUE_GROUP:
        return []
    if kind == "ClusterQueue":
        return cluster_queue(obj)
    if kind == "Cohort":
        return cohort(obj)
    if kind == "ResourceFlavor":
        return resource_flavor(obj)
    return []
