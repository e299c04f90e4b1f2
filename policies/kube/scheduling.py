"""Which nodes a pod may land on, as far as labels and taints decide it: a toleration against a taint (kubernetes
v1.36 staging/src/k8s.io/api/core/v1/toleration.go `ToleratesTaint`, with the numeric `Lt` and `Gt` operators;
k8s.io/component-helpers scheduling/corev1 `FindMatchingUntoleratedTaint`) and a pod's required node affinity
against a node's labels (component-helpers scheduling/corev1/nodeaffinity `GetRequiredNodeAffinity(...).Match`: the
nodeSelector's labels all present, and one of the required terms' expressions all true), as Kueue judges its
ResourceFlavors with them (launchers/kueue_quota.py)."""
from __future__ import annotations

from typing import Any, Collection

from .values import listing, mapping


def _int64(text: Any) -> int | None:
    """strconv.ParseInt(text, 10, 64): a base-10 integer in int64, nothing else."""
    if not isinstance(text, str) or not text or not (text.lstrip("+-").isdigit() and text[0] in "+-0123456789"):
        return None
    value = int(text)
    return value if -(2 ** 63) <= value < 2 ** 63 else None


def tolerates(toleration: Any, taint: dict[str, Any]) -> bool:
    """Toleration.ToleratesTaint: effect (empty: any), key (empty: any), then the operator (empty: Equal)."""
    t = mapping(toleration)
    if t.get("effect") and t.get("effect") != taint.get("effect"):
        return False
    if t.get("key") and t.get("key") != taint.get("key"):
        return False
    op = t.get("operator") or "Equal"
    if op == "Equal":
        return (t.get("value") or "") == (taint.get("value") or "")
    if op == "Exists":
        return True
    if op in ("Lt", "Gt"):
        mine, theirs = _int64(t.get("value")), _int64(taint.get("value"))
        if mine is None or theirs is None:
            return False
        return theirs < mine if op == "Lt" else theirs > mine
    return False


def untolerated_taint(taints: Any, tolerations: list[Any], effects: Collection[str]) -> dict[str, Any] | None:
    """FindMatchingUntoleratedTaint: the first taint of one of `effects` that no toleration tolerates."""
    for taint in listing(taints):
        taint = mapping(taint)
        if taint.get("effect") in effects and not any(tolerates(t, taint) for t in tolerations):
            return taint
    return None


def taint_text(taint: dict[str, Any]) -> str:
    """Taint.ToString: `key=value:effect`, `key:effect` without a value."""
    value = taint.get("value")
    return f"{taint.get('key')}={value}:{taint.get('effect')}" if value else f"{taint.get('key')}:{taint.get('effect')}"


def requirement_matches(req: Any, labels: dict[str, Any]) -> bool:
    """One NodeSelectorRequirement against a node's labels (nodeaffinity's label selector: In, NotIn, Exists,
    DoesNotExist, Gt, Lt); an operator it does not know matches nothing."""
    r = mapping(req)
    key, op, values = str(r.get("key")), r.get("operator"), [str(v) for v in listing(r.get("values"))]
    present = key in labels
    value = str(labels[key]) if present else None
    if op == "In":
        return present and value in values
    if op == "NotIn":
        return not present or value not in values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt"):
        node, bound = _int64(value), _int64(values[0]) if len(values) == 1 else None
        if node is None or bound is None:
            return False
        return node > bound if op == "Gt" else node < bound
    return False


def flavor_matches(spec: dict[str, Any], labels: dict[str, Any]) -> bool:
    """Whether a pod spec's required node affinity lets it onto a node with `labels`, as Kueue judges a
    ResourceFlavor's nodeLabels (kueue v0.19.2 pkg/scheduler/flavorassigner/flavorassigner.go 1246-1254 and
    flavorSelector 1278-1328, then nodeaffinity's RequiredNodeAffinity.Match): only the nodeSelector's pairs and the
    expressions on the flavor's own label keys count; every pair must hold, and one of the required terms (all its
    expressions); a term left with no expression on those keys makes the affinity match any flavor."""
    for k, v in mapping(spec.get("nodeSelector")).items():
        if k in labels and str(labels[k]) != str(v):
            return False
    required = mapping(mapping(mapping(spec.get("affinity")).get("nodeAffinity")).get(
        "requiredDuringSchedulingIgnoredDuringExecution"))
    kept: list[list[Any]] = []
    for term in listing(required.get("nodeSelectorTerms")):
        exprs = [e for e in listing(mapping(term).get("matchExpressions")) if mapping(e).get("key") in labels]
        if not exprs:
            return True
        kept.append(exprs)
    return not kept or any(all(requirement_matches(e, labels) for e in exprs) for exprs in kept)
