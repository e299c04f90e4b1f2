"""The API server's Priority and RuntimeClass admission plugins for a pod at creation, where the class it names is
in the manifests (or built into every cluster): the pod as they mutate it, and what they refuse.

Priority (kubernetes plugin/pkg/admission/priority/admission.go, the v1.36 line with admitWorkload and
WorkloadAwarePreemption; the index's kubernetes/kubernetes copy is acd88a099d30, older: it still held
priorityClassPermittedInNamespace, which the v1.36 text no longer has, so a system class is allowed in every
namespace): `admitPod` on Create resolves `priorityClassName` (`no PriorityClass with name X was found` where it does
not exist), or, where the pod names none, the globalDefault class with the lowest value (`getDefaultPriorityClass`),
else priority 0 (`DefaultPriorityWhenNoDefaultClassExists`) and PreemptLowerPriority; it refuses a pod whose
`spec.priority` or `spec.preemptionPolicy` differs from what it computed, then sets both and the class name. The
API server creates `system-node-critical` (2000001000) and `system-cluster-critical` (2000000000) at start
(pkg/apis/scheduling/types.go SystemPriorityClasses), so every cluster has them. `validatePriorityClass` refuses a
second globalDefault class (`PriorityClass X is already marked as default. Only one default can exist`).
`ValidatePriorityClass` (pkg/apis/scheduling/validation/validation.go 36-53 @00447344aba0, the v1.36 line with the
Workload API) refuses a class named with the `system-` prefix other than the two built-in ones with their values and
globalDefault false (pkg/apis/scheduling/v1/helpers.go 67-79 IsKnownSystemPriorityClass @16913111deb1), a value over
HighestUserDefinablePriority (1000000000) on any other class, and a preemptionPolicy other than PreemptLowerPriority
or Never (pkg/apis/core/validation/validation.go ValidatePreemptionPolicy; an empty one is Required, a missing one is
defaulted to PreemptLowerPriority by SetDefaults_PriorityClass). Such a class is never created, so `priority_classes`
leaves it out: the pods that name it are judged as naming a class the cluster does not have.

RuntimeClass (kubernetes plugin/pkg/admission/runtimeclass/admission.go @fd18d233ad41, unchanged in v1.36):
`prepareObjects` refuses a pod whose RuntimeClass does not exist (`pod rejected: RuntimeClass "x" not found`);
`setOverhead` sets `spec.overhead` to the class's `overhead.podFixed`, refusing a pod that already sets a different
one; `setScheduling` merges the class's `scheduling.nodeSelector` into the pod's (`conflict: runtimeClass.scheduling.
nodeSelector[k] = a; pod.spec.nodeSelector[k] = b`) and its tolerations (pkg/util/tolerations/tolerations.go
@6fbbec6ac571 MergeTolerations, isSuperset); `validateOverhead` refuses a pod with an overhead and no class
overhead (`pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead`)."""
from __future__ import annotations

from typing import Any

from .values import listing, mapping, parse_quantity

PRIORITY_API = "scheduling.k8s.io/v1"
RUNTIME_API = "node.k8s.io/v1"
# pkg/apis/scheduling/types.go: HighestUserDefinablePriority 1e9; SystemCriticalPriority 2e9; node critical + 1000;
# SystemPriorityClassPrefix, the prefix only those two classes may have.
HIGHEST_USER_DEFINABLE_PRIORITY = 1000000000
SYSTEM_PRIORITY_CLASSES = {"system-node-critical": 2000001000, "system-cluster-critical": 2000000000}
SYSTEM_PRIORITY_PREFIX = "system-"
PREEMPT_LOWER = "PreemptLowerPriority"  # SetDefaults_PriorityClass, and getDefaultPriority without a default class
PREEMPTION_POLICIES = (PREEMPT_LOWER, "Never")  # core/v1 PreemptLowerPriority, PreemptNever
REFUSED_PRIORITY = "no PriorityClass with name {} was found"
REFUSED_RUNTIME = 'pod rejected: RuntimeClass "{}" not found'


def validate_priority_class(obj: dict[str, Any]) -> list[tuple[str, str]]:
    """ValidatePriorityClass on create, after the defaults: (field, the API server's message) for each refusal."""
    out: list[tuple[str, str]] = []
    name = str(mapping(obj.get("metadata")).get("name") or "")
    value = obj.get("value")
    value = value if isinstance(value, int) and not isinstance(value, bool) else 0  # int32; the schema types it
    if name.startswith(SYSTEM_PRIORITY_PREFIX):
        err = _known_system_class(name, value, obj.get("globalDefault") is True)
        if err:
            out.append(("metadata.name", f"metadata.name: Forbidden: priority class names with "
                        f"'{SYSTEM_PRIORITY_PREFIX}' prefix are reserved for system use only. error: {err}"))
    elif value > HIGHEST_USER_DEFINABLE_PRIORITY:
        out.append(("value", "value: Forbidden: maximum allowed value of a user defined priority is "
                    f"{HIGHEST_USER_DEFINABLE_PRIORITY}"))
    policy = obj.get("preemptionPolicy")
    if policy == "":
        out.append(("preemptionPolicy", "preemptionPolicy: Required value"))
    elif policy is not None and policy not in PREEMPTION_POLICIES:
        out.append(("preemptionPolicy", f'preemptionPolicy: Unsupported value: "{policy}": supported values: '
                    + ", ".join(f'"{p}"' for p in PREEMPTION_POLICIES)))
    return out


def _known_system_class(name: str, value: int, global_default: bool) -> str | None:
    """IsKnownSystemPriorityClass's error, None where the class is one of the built-in two as they are."""
    if name not in SYSTEM_PRIORITY_CLASSES:
        return f"{name} is not a known system priority class"
    if SYSTEM_PRIORITY_CLASSES[name] != value:
        return f"value of {name} PriorityClass must be {SYSTEM_PRIORITY_CLASSES[name]}"
    if global_default:
        return f"globalDefault of {name} PriorityClass must be false"
    return None


def priority_classes(objs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """name -> PriorityClass: the built-in system classes, then the manifests' own that the API server creates."""
    out = {name: {"metadata": {"name": name}, "value": value, "preemptionPolicy": PREEMPT_LOWER}
           for name, value in SYSTEM_PRIORITY_CLASSES.items()}
    for obj in objs:
        name = mapping(obj.get("metadata")).get("name")
        if isinstance(name, str) and name and not validate_priority_class(obj):
            out[name] = obj
    return out


def default_class(classes: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    """getDefaultPriorityClass: the globalDefault class of lowest value (several only by a race)."""
    found = None
    for pc in classes.values():
        if pc.get("globalDefault") is True and isinstance(pc.get("value"), int):
            if found is None or found["value"] > pc["value"]:
                found = pc
    return found


def admit_priority(spec: dict[str, Any], classes: dict[str, dict[str, Any]]) -> tuple[dict[str, Any], str | None]:
    """admitPod on Create: (the pod spec with priorityClassName, priority and preemptionPolicy set, the refusal or
    None). A class not among `classes`, or no class where `classes` holds no globalDefault one (the cluster may have
    one), leaves the spec as it is, unjudged."""
    name = spec.get("priorityClassName")
    if name:
        pc = classes.get(str(name))
    else:
        pc = default_class(classes)
    if pc is None or not isinstance(pc.get("value"), int):
        return spec, None
    value, policy = pc["value"], pc.get("preemptionPolicy") or PREEMPT_LOWER
    own = spec.get("priority")
    if own is not None and own != value:
        return spec, (f"the integer value of priority ({own}) must not be provided in pod spec; priority admission "
                      f"controller computed {value} from the given PriorityClass name")
    own_policy = spec.get("preemptionPolicy")
    if own_policy is not None and own_policy != policy:
        return spec, (f"the string value of PreemptionPolicy ({own_policy}) must not be provided in pod spec; priority "
                      f"admission controller computed {policy} from the given PriorityClass name")
    name = mapping(pc.get("metadata")).get("name") or name
    return {**spec, "priorityClassName": name, "priority": value, "preemptionPolicy": policy}, None


def _same_resources(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """apiequality.Semantic.DeepEqual of two ResourceLists: the same names, each quantity equal by value."""
    if set(a) != set(b):
        return False
    for k in a:
        qa, qb = parse_quantity(a[k]), parse_quantity(b[k])
        if qa is None or qb is None or qa.value != qb.value:
            return False
    return True


def admit_runtime_class(spec: dict[str, Any], rc: dict[str, Any] | None) -> tuple[dict[str, Any], str | None]:
    """Admit (setOverhead, setScheduling) then Validate (validateOverhead) for a pod whose RuntimeClass is `rc`
    (None: the pod names none): the pod spec as admitted, and the refusal or None."""
    overhead = mapping(spec.get("overhead"))
    fixed = mapping(rc.get("overhead")).get("podFixed") if rc is not None else None
    if rc is not None and isinstance(fixed, dict):
        if overhead and not _same_resources(fixed, overhead):
            return spec, "pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead"
        spec = {**spec, "overhead": dict(fixed)}
    elif overhead:
        return spec, "pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead"
    scheduling = rc.get("scheduling") if rc is not None else None
    if isinstance(scheduling, dict):
        selector = spec.get("nodeSelector")
        ours = {str(k): v for k, v in mapping(scheduling.get("nodeSelector")).items()}
        if not isinstance(selector, dict):
            merged = ours
        else:
            merged = dict(selector)
            for key, value in ours.items():
                if key in merged and merged[key] != value:
                    return spec, (f"conflict: runtimeClass.scheduling.nodeSelector[{key}] = {value}; "
                                  f"pod.spec.nodeSelector[{key}] = {merged[key]}")
                merged[key] = value
        tolerations = merge_tolerations([t for t in listing(spec.get("tolerations")) if isinstance(t, dict)],
                                        [t for t in listing(scheduling.get("tolerations")) if isinstance(t, dict)])
        spec = {k: v for k, v in spec.items() if k != "tolerations"}  # nil where the merge leaves none
        if merged or isinstance(selector, dict):
            spec["nodeSelector"] = merged
        if tolerations:
            spec["tolerations"] = tolerations
    return spec, None


def _toleration(t: dict[str, Any]) -> tuple[str, str, str, str, Any]:
    return (str(t.get("key") or ""), str(t.get("operator") or ""), str(t.get("value") or ""),
            str(t.get("effect") or ""), t.get("tolerationSeconds"))


def is_superset(ss: dict[str, Any], t: dict[str, Any]) -> bool:
    """isSuperset: ss tolerates everything t tolerates."""
    sk, sop, sv, se, ssec = _toleration(ss)
    tk, top, tv, te, tsec = _toleration(t)
    if (sk, sop, sv, se, ssec) == (tk, top, tv, te, tsec):
        return True
    if tk != sk and (sk != "" or sop != "Exists"):
        return False
    if te != se and se != "":
        return False
    if se == "NoExecute" and isinstance(ssec, int):
        if not isinstance(tsec, int) or tsec > ssec:
            return False
    if sop in ("Equal", ""):
        return top == "Equal" and tv == sv
    return sop == "Exists"


def merge_tolerations(first: list[dict[str, Any]], second: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """MergeTolerations: both lists, each toleration another one kept covers left out (of equal ones the first)."""
    everything = first + second
    merged: list[dict[str, Any]] = []
    for i, t in enumerate(everything):
        if any(is_superset(kept, t) for kept in merged):
            continue
        if any(_toleration(t) != _toleration(later) and is_superset(later, t) for later in everything[i + 1:]):
            continue
        merged.append(t)
    return merged
