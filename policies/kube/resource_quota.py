"""The API server's ResourceQuota admission for pods, as far as the manifests show it: which quotas hold a pod, the
resources a quota makes every container state, and what a pod counts against `hard`. Ported from kubernetes
pkg/quota/v1/evaluator/core/pods.go (`validationSet`, `podResources`, `Constraints`, `enforcePodContainerConstraints`,
`podComputeUsageHelper`, `PodUsageFunc`, `podMatchesScopeFunc`, `IsTerminating`, the newest text readable here:
the release line with DRA extended resources and pod-level resources) and the admission framework in
k8s.io/apiserver v0.36.0 pkg/admission/plugin/resourcequota/controller.go (`CheckRequest` 412-627: `failed quota:
<name>: <constraint>` 471, `exceeded quota: <name>, requested: ..., used: ..., limited: ...` 622, each masked to the
resources over `hard`; `prettyPrint` 741-754). Quota admission runs after LimitRanger's defaulting, on pod creation.

What the cluster already uses (`status.used`) is not in the manifests: it is at least 0, so a pod or a world that
needs more than `hard` on its own is refused whatever runs beside it. Scopes the manifests cannot settle
(`CrossNamespacePodAffinity`) and pods with pod-level `spec.resources` (their usage and exemptions follow
PodLevelResources) are left out: nothing is claimed about them. A pod's `spec.overhead` (which RuntimeClass admission sets) is
added as upstream adds it (pod_usage)."""
from __future__ import annotations

from fractions import Fraction
from typing import Any

from .limit_range import Container, add, canonical, pod_totals
from .values import Quantity, listing, mapping, parse_quantity

# pods.go validationSet: "if a quota tracks cpu or memory related resources, the incoming pod is required to have
# those values set ... do not add more resources to this list!" (GPUs are not in it).
VALIDATION_SET = frozenset({"cpu", "memory", "requests.cpu", "requests.memory", "limits.cpu", "limits.memory"})
POD_COUNT = "count/pods"
POD_RESOURCES = frozenset({POD_COUNT, "cpu", "memory", "ephemeral-storage", "requests.cpu", "requests.memory",
                           "requests.ephemeral-storage", "limits.cpu", "limits.memory", "limits.ephemeral-storage",
                           "pods"})
REQUESTS = "requests."
HUGEPAGES = "hugepages-"
_MODELLED_SCOPES = frozenset({"Terminating", "NotTerminating", "BestEffort", "NotBestEffort", "PriorityClass"})


def _native(name: str) -> bool:
    """helper.IsNativeResource: no domain, or a kubernetes.io one."""
    return "/" not in name or name.split("/", 1)[0].endswith("kubernetes.io")


def extended(name: str) -> bool:
    """An extended resource (`nvidia.com/gpu`): not native and not a quota's `requests.` name."""
    return not _native(name) and not name.startswith(REQUESTS)


def matching(hard: list[str]) -> list[str]:
    """MatchingResources: the quota's resources that pods count against (podResources, hugepages, and
    `requests.<extended resource>`, the only form a quota takes for one)."""
    return [n for n in hard if n in POD_RESOURCES or n.startswith((HUGEPAGES, REQUESTS + HUGEPAGES))
            or (not _native(n) and n.startswith(REQUESTS))]


def usage_helper(requests: dict[str, Quantity], limits: dict[str, Quantity]) -> dict[str, Quantity]:
    """podComputeUsageHelper: what requests and limits count as (`cpu` and `requests.cpu` from the request,
    `limits.cpu` from the limit, `requests.<name>` for an extended resource's request)."""
    one = Quantity(Fraction(1), "", "1")
    out: dict[str, Quantity] = {"pods": one}
    for name in ("cpu", "memory", "ephemeral-storage"):
        if name in requests:
            out[name] = out[REQUESTS + name] = requests[name]
        if name in limits:
            out["limits." + name] = limits[name]
    for name, q in requests.items():
        if name.startswith(HUGEPAGES):
            out[name] = out[REQUESTS + name] = q
        if extended(name):
            out[REQUESTS + name] = q
    return out


def constraints(tracked: list[str], pod: list[Container]) -> str | None:
    """Constraints: each container and init container must state every cpu/memory resource the quota tracks;
    `must specify limits.cpu for: a,b; requests.memory for: b` (resources and names sorted), None where all do."""
    required = set(tracked) & VALIDATION_SET
    missing: dict[str, set[str]] = {}
    for c in pod:
        have = set(usage_helper(c.requests, c.limits))
        for name in required - have:
            missing.setdefault(name, set()).add(c.name)
    if not missing:
        return None
    return "must specify " + "; ".join(f"{r} for: {','.join(sorted(missing[r]))}" for r in sorted(missing))


def pod_usage(pod: list[Container], overhead: Any = None) -> dict[str, Quantity]:
    """PodUsageFunc for a pod just created: count/pods 1, then podComputeUsageHelper over the pod's requests and
    limits (containers summed, the largest init container, sidecars added: resourcehelper.PodRequests), the pod's
    `spec.overhead` (which RuntimeClass admission sets) added to every request and to each limit that is not zero
    (component-helpers resource/helpers.go PodRequests, PodLimits: "Add overhead to non-zero limits")."""
    one = Quantity(Fraction(1), "", "1")
    requests, limits = pod_totals(pod, False), pod_totals(pod, True)
    for name, value in mapping(overhead).items():
        q = parse_quantity(value)
        if q is None:
            continue
        name = str(name)
        requests[name] = add(requests.get(name), q)
        if name in limits and limits[name].value:
            limits[name] = add(limits[name], q)
    return {POD_COUNT: one, **usage_helper(requests, limits)}


def _best_effort(pod: list[Container]) -> bool:
    """qos.GetPodQOS == BestEffort: no container requests or limits cpu or memory."""
    return not any(k in ("cpu", "memory") for c in pod for k in (*c.requests, *c.limits))


def scope_selectors(quota: dict[str, Any]) -> list[dict[str, Any]]:
    """getScopeSelectorsFromQuota: each of spec.scopes as Exists, then spec.scopeSelector's expressions."""
    spec = mapping(quota.get("spec"))
    found = [{"scopeName": s, "operator": "Exists"} for s in listing(spec.get("scopes"))]
    found += [e for e in listing(mapping(spec.get("scopeSelector")).get("matchExpressions")) if isinstance(e, dict)]
    return found


def modelled(quota: dict[str, Any]) -> bool:
    """Every scope of the quota is one the manifests settle (not CrossNamespacePodAffinity, nor an unknown one)."""
    return all(s.get("scopeName") in _MODELLED_SCOPES for s in scope_selectors(quota))


def holds(quota: dict[str, Any], spec: dict[str, Any], pod: list[Container]) -> bool:
    """generic.Matches with podMatchesScopeFunc: the quota tracks a pod resource and every scope selector matches."""
    if not matching(list(hard(quota))):
        return False
    for s in scope_selectors(quota):
        name, op = s.get("scopeName"), s.get("operator")
        deadline = spec.get("activeDeadlineSeconds")
        terminating = isinstance(deadline, int) and not isinstance(deadline, bool) and deadline >= 0
        if name in ("Terminating", "NotTerminating"):
            ok = terminating == (name == "Terminating")
        elif name in ("BestEffort", "NotBestEffort"):
            ok = _best_effort(pod) == (name == "BestEffort")
        elif name == "PriorityClass":
            pc = str(spec.get("priorityClassName") or "")
            values = [str(v) for v in listing(s.get("values"))]
            ok = {"Exists": bool(pc), "DoesNotExist": not pc, "In": bool(pc) and pc in values,
                  "NotIn": not (pc and pc in values)}.get(str(op), False)
        else:
            return False
        if not ok:
            return False
    return True


def hard(quota: dict[str, Any]) -> dict[str, Quantity]:
    return {str(k): q for k, v in mapping(mapping(quota.get("spec")).get("hard")).items()
            if (q := parse_quantity(v)) is not None}


def pretty(values: dict[str, Quantity]) -> str:
    """prettyPrint: `name=quantity` sorted by name, joined by commas."""
    return ",".join(f"{k}={canonical(v)}" for k, v in sorted(values.items()))
