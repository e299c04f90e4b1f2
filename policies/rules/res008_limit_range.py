"""The pods meet the LimitRanges of their namespace.

The API server's LimitRanger admission plugin (on in every cluster) changes and checks every pod created in a
namespace that holds a `LimitRange` (`policies/kube/limit_range.py`, ported from kubernetes
plugin/pkg/admission/limitranger/admission.go with pkg/apis/core/v1/defaults.go): a container without a limit gets
the Container item's `default` (itself `max` where unset), one without a request its limit, else `defaultRequest`
(itself `default`, else `min`), init containers alike; then each LimitRange's `min`, `max` and
`maxLimitRequestRatio` hold every container (type Container) and the pod's sums (type Pod: containers added, the
largest init container, sidecars counted). A pod that breaks one is refused at creation with upstream's words
(`maximum cpu usage per Container is 2, but limit is 4`), while the Job, StatefulSet or PyTorchJob itself is
accepted: its pods never start and the world cannot form, and only the controller's events say why. Each pod is
read as its controller creates it (SEC010's `pod_views`: the training operator's `init-pytorch` has no resources, so
a `min` or a `maxLimitRequestRatio` without defaults refuses it too).

- An error where the input shows the LimitRange and the pods in one namespace: both name it, or both name none (they
  go where they are applied, together), or an Argo CD Application sends the pods to the LimitRange's namespace.
- A warning phrased as the condition where it does not: the pods name no namespace and the LimitRange names one (or
  the other way round) with no Application to say where they go; a finding only in a container the controller adds;
  a runtime's template the manifests do not hold.
- A LimitRange the API server itself refuses (pkg/apis/core/validation/validation.go ValidateLimitRange, on the
  defaulted object: values out of the order min <= defaultRequest <= default <= max, a ratio under 1 or over
  max/min, a GPU default unlike its defaultRequest) is an error of its own and holds no pod.
- What the defaults set is named in the message (upstream's `kubernetes.io/limit-ranger` annotation) where it matters.
  Several LimitRanges in one namespace run in the manifests' order (upstream lists them in no set order).
- Pods with pod-level `spec.resources` are left out: what the release pinned here makes of them is not ported.
- Defaulted limits do not feed TOPO002's CPU reasoning: the topology model reads the templates as written, so a
  CPU pod whose only limit is a LimitRange's default still gets TOPO002's "no CPU limit or request" warning, which
  only says less than it could (TOPO002's CPU checks are all warnings).

Fails: a StatefulSet whose container limits `cpu: 2` in a namespace whose LimitRange allows `max: {cpu: 1}` per
Container; a Pod item's `max: {memory: 1Gi}` under a 2Gi pod; a container the defaults give a 4:1 memory ratio where
`maxLimitRequestRatio` allows 2; a PyTorchJob under `min: {cpu: 200m}`, which the operator's `init-pytorch` (request
50m) breaks (a warning: the operator adds it); a LimitRange in a namespace the pods do not name (a warning); a
LimitRange whose `min` is over its `default` (the API server refuses it).
Passes: the same containers within `min` and `max`; a LimitRange whose `default` gives containers without limits one
within `max`.
"""
from __future__ import annotations

from typing import Iterator

from ..kube.limit_range import Admission, admit, aggregate, refusals
from ..kube.objects import ERROR, WARNING, Manifest, Problem
from .kit import Context, obj_problem
from .sec010_pod_security import PodView, argo_namespaces, pod_views

ID = "RES008"
NAME = "limit-range"
SEVERITY = ERROR
HINT = ("give each container requests and limits within the LimitRange's min, max and maxLimitRequestRatio (per "
        "Container, and summed per Pod), or change the LimitRange")


def limit_ranges(ctx: Context) -> list[Manifest]:
    """The LimitRanges the API server accepts (the schema stage's refusals and ValidateLimitRange's left out)."""
    return [m for m in ctx.of_kind("LimitRange")
            if m.api_version == "v1" and m.ref not in ctx.schema_refused and not refusals(m.obj)]


def homes(namespace: str, destinations: list[str]) -> list[str | None]:
    """Where an object lands: its namespace, else where the Applications that sync it send it, else wherever it is
    applied (None: the same place for every object that names none)."""
    return [namespace] if namespace else list(destinations) or [None]


def matches(view_ns: str, ranges: list[Manifest], destinations: list[str]) -> Iterator[tuple[str | None, list[Manifest],
                                                                                             list[tuple[Manifest, str]]]]:
    """For each place the pods land: the LimitRanges shown to be there, and those that are there only under a
    condition (with it)."""
    for home in homes(view_ns, destinations):
        shown: list[Manifest] = []
        maybe: list[tuple[Manifest, str]] = []
        for lr in ranges:
            theirs = homes(lr.namespace, destinations)
            if home in theirs:
                shown.append(lr)
            elif home is None and lr.namespace:
                maybe.append((lr, f"if these pods are applied to namespace '{lr.namespace}', as they name none"))
            elif home is not None and theirs == [None]:
                maybe.append((lr, f"if the LimitRange is applied to namespace '{home}', as it names none"))
        if shown or maybe:
            yield home, shown, maybe


def check(ctx: Context) -> Iterator[Problem]:
    for m in ctx.of_kind("LimitRange"):
        if m.api_version == "v1" and m.ref not in ctx.schema_refused:
            for field, says in refusals(m.obj):
                yield obj_problem(ID, m, field, f"the API server refuses the LimitRange: {says}, so it holds no pod",
                                  "keep each resource's min <= defaultRequest <= default <= max, a ratio within "
                                  "1..max/min, and default equal to defaultRequest for GPUs and hugepages")
    ranges = limit_ranges(ctx)
    if not ranges:
        return
    destinations, _ = argo_namespaces(ctx)
    for view in pod_views(ctx):
        if view.spec.get("resources"):
            continue  # pod-level resources (PodLevelResources): what LimitRanger makes of them is not ported
        for home, shown, maybe in matches(view.namespace, ranges, destinations):
            refused = admit([lr.obj for lr in shown], view.spec) if shown else None
            if refused is not None and refused.refused_by is not None:
                yield _problem(view, home, shown, refused, None)
                continue
            for lr, condition in maybe:
                chain = shown + [lr]
                found = admit([m.obj for m in chain], view.spec)
                if found.refused_by is not None:
                    yield _problem(view, home, chain, found, condition)


def _problem(view: PodView, home: str | None, chain: list[Manifest], found: Admission,
             condition: str | None) -> Problem:
    assert found.refused_by is not None
    says = f"LimitRange '{chain[found.refused_by].name}': {aggregate(found.findings)}"
    if found.annotation:
        says += f" (LimitRanger plugin set: {'; '.join(found.annotation)})"
    only_added = bool(view.added) and admit([m.obj for m in chain], view.without_added()).refused_by is None
    return refusal(ID, view, home, says, HINT, ([condition] if condition else []) + view.conditions(only_added))


def refusal(rule: str, view: PodView, home: str | None, says: str, hint: str, conditions: list[str]) -> Problem:
    """An admission plugin's refusal of these pods (RES008, RES009) where they land (`home`; None: wherever they
    are applied): an error the plan counts as pods refused, or a warning under its conditions."""
    where = f"namespace '{home}'" if home else "the namespace they are applied to"
    text = f"the API server refuses these pods in {where}: {says}"
    if conditions:
        text += f" ({'; '.join(conditions)})"
    p = obj_problem(rule, view.manifest, view.field, text, hint, severity=WARNING if conditions else ERROR)
    if not conditions:
        p.extra["pods_refused"] = True  # make plan: none of these pods is created
    return p
