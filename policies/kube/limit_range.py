"""The API server's LimitRanger admission plugin, on in every cluster: how a namespace's LimitRanges change and refuse a
pod at creation. Ported from kubernetes plugin/pkg/admission/limitranger/admission.go (the newest upstream text
readable here, the release line with `PodMutateLimitFunc`/`PodValidateLimitFunc` split and sidecar-aware pod sums;
the function names below are upstream's), with what the API server does to both objects before admission
(pkg/apis/core/v1/defaults.go `SetDefaults_LimitRangeItem`, `SetDefaults_Pod`).

Order, as the API server runs it: the LimitRange was defaulted when stored (a Container item's `default` from `max`,
`defaultRequest` from `default`, then from `min`); the pod is defaulted when decoded (a container's missing request
is its limit); then, for each LimitRange of the namespace, `PodMutateLimitFunc` fills what each container and init
container still lacks (`default` as limits, `defaultRequest` as requests); then `PodValidateLimitFunc` checks each
LimitRange in turn and the first that finds anything refuses the pod with all its findings (`utilerrors.NewAggregate`:
one message as is, several deduplicated in `[a, b]`). Only pod creation is checked (`SupportsAttributes`: updates and
subresources are skipped). Upstream walks Go maps, so several findings come in any order; here by resource name.
Not modelled: pod-level `spec.resources` (LimitRanger reads containers only) and PersistentVolumeClaim items."""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from .values import Quantity, listing, mapping, parse_quantity

CONTAINER, POD = "Container", "Pod"
# resource.MaxMilliValue: the largest value whose milli-value fits an int64.
MAX_MILLI_VALUE = (2**63 - 1) // 1000
_DECIMAL_SUFFIX = {-9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}
_BINARY_SUFFIX = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]


# --------------------------------------------------------------------------------------------- quantities


def _ceil(value: Fraction) -> int:
    return -((-value.numerator) // value.denominator)


def value(q: Quantity | None) -> int:
    """Quantity.Value(): rounded up to an integer; a missing quantity is Go's zero Quantity."""
    return _ceil(q.value) if q is not None else 0


def milli_value(q: Quantity | None) -> int:
    """Quantity.MilliValue(): thousandths, rounded up."""
    return _ceil(q.value * 1000) if q is not None else 0


def _format(q: Quantity) -> str:
    return "BinarySI" if q.suffix in _BINARY_SUFFIX[1:] else "DecimalExponent" if q.suffix[:1] in ("e", "E") \
        else "DecimalSI"


def canonical(q: Quantity, fmt: str | None = None) -> str:
    """Quantity.String() (resource/quantity.go CanonicalizeBytes): the value in its format's canonical form:
    `1.5` is `1500m`, `2048Mi` is `2Gi`, `0.5Gi` is `512Mi`, a binary value under 1024 or not whole is decimal."""
    fmt = fmt or _format(q)
    v = Fraction(_ceil(q.value * 10**9), 10**9)  # a Quantity holds nothing finer than nano, rounded up
    if v == 0:
        return "0"
    if fmt == "BinarySI" and (abs(v) < 1024 or v.denominator != 1):
        fmt = "DecimalSI"
    if fmt == "BinarySI":
        n, power = int(v), 0
        while n % 1024 == 0 and power < len(_BINARY_SUFFIX) - 1:
            n, power = n // 1024, power + 1
        return f"{n}{_BINARY_SUFFIX[power]}"
    exponent = -9
    mantissa = int(v * 10**9)
    while mantissa % 10 == 0:
        mantissa, exponent = mantissa // 10, exponent + 1
    while exponent % 3:
        mantissa, exponent = mantissa * 10, exponent - 1
    if fmt == "DecimalExponent" or exponent not in _DECIMAL_SUFFIX:
        return f"{mantissa}e{exponent}" if exponent else str(mantissa)
    return f"{mantissa}{_DECIMAL_SUFFIX[exponent]}"


def add(a: Quantity | None, b: Quantity) -> Quantity:
    """Quantity.Add: the sum keeps the first one's format."""
    return Quantity(a.value + b.value, a.suffix, a.number) if a is not None else b


# ------------------------------------------------------------------------------------------- the objects


@dataclass
class Item:
    """One LimitRangeItem as stored (SetDefaults_LimitRangeItem applied), its quantities parsed."""

    type: str
    min: dict[str, Quantity]
    max: dict[str, Quantity]
    default: dict[str, Quantity]
    default_request: dict[str, Quantity]
    ratio: dict[str, Quantity]


def _quantities(block: Any) -> dict[str, Quantity]:
    # A value that is no quantity is left out: the schema stage says so.
    return {str(k): q for k, v in mapping(block).items() if (q := parse_quantity(v)) is not None}


def items(limit_range: dict[str, Any]) -> list[Item]:
    """The LimitRange's items as the API server stores them (pkg/apis/core/v1/defaults.go SetDefaults_LimitRangeItem:
    for type Container, a missing `default` is `max`, a missing `defaultRequest` is `default`, else `min`)."""
    found = []
    for raw in listing(mapping(limit_range.get("spec")).get("limits")):
        if not isinstance(raw, dict):
            continue
        item = Item(str(raw.get("type") or ""), _quantities(raw.get("min")), _quantities(raw.get("max")),
                    _quantities(raw.get("default")), _quantities(raw.get("defaultRequest")),
                    _quantities(raw.get("maxLimitRequestRatio")))
        if item.type == CONTAINER:
            for source, target in ((item.max, item.default), (item.default, item.default_request),
                                   (item.min, item.default_request)):
                for k, q in source.items():
                    target.setdefault(k, q)
        found.append(item)
    return found


def _overcommit_allowed(name: str) -> bool:
    """helper.IsOvercommitAllowed: a native resource (no domain, or a kubernetes.io one) that is not hugepages."""
    native = "/" not in name or name.split("/", 1)[0].endswith("kubernetes.io")
    return native and not name.startswith("hugepages-")


def refusals(limit_range: dict[str, Any]) -> list[tuple[str, str]]:
    """What the API server's ValidateLimitRange (pkg/apis/core/validation/validation.go) refuses on the defaulted
    object, beyond the schema: (field, message) for each item's values out of order (min <= defaultRequest <= default
    <= max), a ratio under 1 or over max/min, a default that differs from defaultRequest for a resource that cannot
    be overcommitted (GPUs, hugepages), a type given twice, a default on a Pod item. A refused LimitRange never
    exists, so it holds no pod."""
    found: list[tuple[str, str]] = []
    seen: set[str] = set()
    raws = [r for r in listing(mapping(limit_range.get("spec")).get("limits")) if isinstance(r, dict)]
    for i, (raw, item) in enumerate(zip(raws, items(limit_range))):
        at = f"spec.limits[{i}]"
        if item.type in seen:
            found.append((f"{at}.type", f'Duplicate value: "{item.type}"'))
        seen.add(item.type)
        if item.type == POD:
            for key in ("default", "defaultRequest"):
                if mapping(raw.get(key)):
                    found.append((f"{at}.{key}", "Forbidden: may not be specified when `type` is 'Pod'"))
        keys = set(item.min) | set(item.max) | set(item.default) | set(item.default_request) | set(item.ratio)
        for k in sorted(keys):
            lo, hi, d, dr, ratio = (item.min.get(k), item.max.get(k), item.default.get(k),
                                    item.default_request.get(k), item.ratio.get(k))
            pairs = ((lo, hi, "min", "min value {} is greater than max value {}"),
                     (lo, dr, "defaultRequest", "min value {} is greater than default request value {}"),
                     (dr, hi, "defaultRequest", "default request value {} is greater than max value {}"),
                     (dr, d, "defaultRequest", "default request value {} is greater than default limit value {}"),
                     (lo, d, "default", "min value {} is greater than default value {}"),
                     (d, hi, "default", "default value {} is greater than max value {}"))
            for a, b, key, text in pairs:
                if a is not None and b is not None and a.value > b.value:
                    found.append((f"{at}.{key}.{k}", text.format(canonical(a), canonical(b))))
            if ratio is not None and ratio.value < 1:
                found.append((f"{at}.maxLimitRequestRatio.{k}", f"ratio {canonical(ratio)} is less than 1"))
            if ratio is not None and lo is not None and hi is not None:
                r, mn, mx = float(value(ratio)), value(lo), value(hi)
                if value(ratio) < MAX_MILLI_VALUE and mn < MAX_MILLI_VALUE and mx < MAX_MILLI_VALUE:
                    r, mn, mx = milli_value(ratio) / 1000, milli_value(lo), milli_value(hi)
                bound = float(mx) / float(mn) if mn else float("inf")
                if r > bound:
                    found.append((f"{at}.maxLimitRequestRatio.{k}",
                                  f"ratio {canonical(ratio)} is greater than max/min = {bound:f}"))
            if not _overcommit_allowed(k) and d is not None and dr is not None and d.value != dr.value:
                found.append((f"{at}.defaultRequest.{k}", f"default value {canonical(d)} must equal to defaultRequest "
                              f"value {canonical(dr)} in {k}"))
    return found


@dataclass
class Container:
    """A container's name and resources, as quantities, as admission sees them."""

    name: str
    init: bool
    sidecar: bool
    requests: dict[str, Quantity]
    limits: dict[str, Quantity]


def containers(spec: dict[str, Any]) -> list[Container]:
    """The pod's containers then init containers, defaulted as the API server decodes a pod (SetDefaults_Pod: a
    container with limits gets each missing request from its limit)."""
    found = []
    for key, init in (("containers", False), ("initContainers", True)):
        for c in listing(spec.get(key)):
            if not isinstance(c, dict):
                continue
            res = mapping(c.get("resources"))
            requests, limits = _quantities(res.get("requests")), _quantities(res.get("limits"))
            for k, q in limits.items():
                requests.setdefault(k, q)
            found.append(Container(str(c.get("name") or ""), init, init and c.get("restartPolicy") == "Always",
                                   requests, limits))
    return found


# ----------------------------------------------------------------------------------------------- mutate


def mutate(ranges: list[list[Item]], pod: list[Container]) -> list[str]:
    """PodMutateLimitFunc for each LimitRange in turn (defaultContainerResourceRequirements, then
    mergePodResourceRequirements): fills `pod` in place; returns the `kubernetes.io/limit-ranger` annotation's
    parts (`cpu, memory request for container trainer`), the last LimitRange that set anything winning, as upstream
    overwrites the annotation."""
    annotation: list[str] = []
    for lr in ranges:
        requests: dict[str, Quantity] = {}
        limits: dict[str, Quantity] = {}
        for item in lr:
            if item.type == CONTAINER:
                requests.update(item.default_request)
                limits.update(item.default)
        parts = []
        for c in pod:  # containers first, then init containers, as `containers` lists them
            set_limits = sorted(k for k in limits if k not in c.limits)
            set_requests = sorted(k for k in requests if k not in c.requests)
            c.limits.update({k: limits[k] for k in set_limits})
            c.requests.update({k: requests[k] for k in set_requests})
            prefix = "init container" if c.init else "container"
            if set_requests:
                parts.append(f"{', '.join(set_requests)} request for {prefix} {c.name}")
            if set_limits:
                parts.append(f"{', '.join(set_limits)} limit for {prefix} {c.name}")
        if parts:
            annotation = parts
    return annotation


# --------------------------------------------------------------------------------------------- validate


def _enforced(req: Quantity | None, lim: Quantity | None, enforced: Quantity) -> tuple[int, int, int]:
    """requestLimitEnforcedValues: milli-values where none overflows, else values."""
    r, li, e = value(req), value(lim), value(enforced)
    if r <= MAX_MILLI_VALUE and li <= MAX_MILLI_VALUE and e <= MAX_MILLI_VALUE:
        return milli_value(req), milli_value(lim), milli_value(enforced)
    return r, li, e


def min_constraint(kind: str, name: str, enforced: Quantity, request: dict[str, Quantity],
                   limit: dict[str, Quantity]) -> str | None:
    req, lim = request.get(name), limit.get(name)
    r, li, e = _enforced(req, lim, enforced)
    if req is None:
        return f"minimum {name} usage per {kind} is {canonical(enforced)}.  No request is specified"
    if r < e:
        return f"minimum {name} usage per {kind} is {canonical(enforced)}, but request is {canonical(req)}"
    if lim is not None and li < e:
        return f"minimum {name} usage per {kind} is {canonical(enforced)}, but limit is {canonical(lim)}"
    return None


def max_constraint(kind: str, name: str, enforced: Quantity, request: dict[str, Quantity],
                   limit: dict[str, Quantity]) -> str | None:
    req, lim = request.get(name), limit.get(name)
    r, li, e = _enforced(req, lim, enforced)
    if lim is None:
        return f"maximum {name} usage per {kind} is {canonical(enforced)}.  No limit is specified"
    if li > e:
        return f"maximum {name} usage per {kind} is {canonical(enforced)}, but limit is {canonical(lim)}"
    if req is not None and r > e:
        return f"maximum {name} usage per {kind} is {canonical(enforced)}, but request is {canonical(req)}"
    return None


def ratio_constraint(kind: str, name: str, enforced: Quantity, request: dict[str, Quantity],
                     limit: dict[str, Quantity]) -> str | None:
    """limitRequestRatioConstraint, in float64 as upstream, its ratio printed with %f."""
    req, lim = request.get(name), limit.get(name)
    r, li, _ = _enforced(req, lim, enforced)
    said = canonical(enforced)
    if req is None or r == 0:
        return f"{name} max limit to request ratio per {kind} is {said}, but no request is specified or request is 0"
    if lim is None or li == 0:
        return f"{name} max limit to request ratio per {kind} is {said}, but no limit is specified or limit is 0"
    observed = shown = float(li) / float(r)
    allowed = float(value(enforced))
    if value(enforced) <= MAX_MILLI_VALUE:
        observed, allowed = observed * 1000, float(milli_value(enforced))
    if observed > allowed:
        return f"{name} max limit to request ratio per {kind} is {said}, but provided ratio is {shown:f}"
    return None


def pod_totals(pod: list[Container], limits: bool) -> dict[str, Quantity]:
    """podRequests / podLimits: the containers' sum, sidecars (restartable init containers) added, and each other
    init container's own value plus the sidecars started before it, whichever is larger per resource."""
    total: dict[str, Quantity] = {}
    sidecars: dict[str, Quantity] = {}
    inits: dict[str, Quantity] = {}
    for c in pod:
        own = c.limits if limits else c.requests
        if not c.init:
            for k, q in own.items():
                total[k] = add(total.get(k), q)
            continue
        if c.sidecar:
            for k, q in own.items():
                total[k] = add(total.get(k), q)
                sidecars[k] = add(sidecars.get(k), q)
            candidate = dict(sidecars)
        else:
            candidate = dict(own)
            for k, q in sidecars.items():
                candidate[k] = add(candidate.get(k), q)
        for k, q in candidate.items():
            if k not in inits or q.value > inits[k].value:
                inits[k] = q
    for k, q in inits.items():
        if k not in total or q.value > total[k].value:
            total[k] = q
    return total


_CHECKS = (("min", min_constraint), ("max", max_constraint), ("ratio", ratio_constraint))


def validate(lr: list[Item], pod: list[Container]) -> list[str]:
    """PodValidateLimitFunc: every finding of one LimitRange on the (mutated) pod, deduplicated, in order."""
    found: list[str] = []
    for item in lr:
        if item.type == CONTAINER:
            subjects = [(c.requests, c.limits) for c in pod]
        elif item.type == POD:
            subjects = [(pod_totals(pod, False), pod_totals(pod, True))]
        else:
            continue
        for requests, limits in subjects:
            for attr, constraint in _CHECKS:
                bounds: dict[str, Quantity] = getattr(item, attr)
                for name in sorted(bounds):
                    said = constraint(item.type, name, bounds[name], requests, limits)
                    if said is not None and said not in found:
                        found.append(said)
    return found


def aggregate(messages: list[str]) -> str:
    """utilerrors.NewAggregate(errs).Error()."""
    return messages[0] if len(messages) == 1 else "[" + ", ".join(messages) + "]"


@dataclass
class Admission:
    """What LimitRanger does to one pod: the pod as admitted (its containers' resources), the annotation's parts,
    and the index of the LimitRange that refuses it with its findings (None: admitted)."""

    pod: list[Container]
    annotation: list[str]
    refused_by: int | None
    findings: list[str]


def admit(ranges: list[dict[str, Any]], spec: dict[str, Any]) -> Admission:
    """The LimitRanger on one pod spec in a namespace holding `ranges` (LimitRange objects, in order)."""
    parsed = [items(lr) for lr in ranges]
    pod = containers(spec)
    annotation = mutate(parsed, pod)
    for i, lr in enumerate(parsed):
        findings = validate(lr, pod)
        if findings:
            return Admission(pod, annotation, i, findings)
    return Admission(pod, annotation, None, [])
