"""The pods fit the ResourceQuotas of their namespace.

Quota admission (on wherever a namespace holds a `ResourceQuota`) checks every pod at creation, after LimitRanger
has filled in its defaults (`policies/kube/resource_quota.py`, ported from kubernetes
pkg/quota/v1/evaluator/core/pods.go and k8s.io/apiserver v0.36.0 pkg/admission/plugin/resourcequota/controller.go).
Two refusals follow from the manifests alone, since what the cluster already uses (`status.used`) is at least 0:

- A quota that tracks `cpu`, `memory`, `requests.*` or `limits.*` of them makes every container and init container
  state that value (`failed quota: compute: must specify limits.cpu for: init-pytorch`; upstream keeps this rule for
  cpu and memory alone, so a `requests.nvidia.com/gpu` quota does not make each container ask for a GPU).
- A pod that on its own asks for more than `hard` (`exceeded quota: gpus, requested: requests.nvidia.com/gpu=16,
  used: requests.nvidia.com/gpu=0, limited: requests.nvidia.com/gpu=8`): every such pod is refused.

Both are errors where the manifests put the quota and the pods in one namespace (as RES008 reads namespaces, with
the same warnings phrased as the condition where they do not, and where only a container the controller adds is
short). Beyond one pod: a torchrun world whose every pod must run at once (a fixed `--nnodes` equal to its pods)
and whose pods together need more than `hard` never forms, as the pods past the quota are refused while the others
wait for them: an error. The pods of these manifests together needing more than `hard` otherwise is a warning: they
cannot all be admitted at once, but may run one after another. `pods` and `count/pods` count one per pod; auxiliary
pods (a TrainJob's initializers) and templates of kinds no module models are not counted. Scopes are matched
(`Terminating`, `BestEffort`, `PriorityClass` and their negations, on the pod as the Priority plugin admits it: a
pod naming no class gets the manifests' globalDefault PriorityClass). A pod's usage counts the overhead of the
RuntimeClass it names where the manifests hold it (RuntimeClass admission sets `spec.overhead`; PodRequests adds
it to every request, PodLimits to each limit that is set). A quota with a `CrossNamespacePodAffinity` scope,
and pods with pod-level `spec.resources`, are left out.

Fails: a StatefulSet whose sidecar states no CPU limit in a namespace whose quota sets `limits.cpu`; an Indexed Job
world of 4 pods of 1 GPU (`--nnodes=4`) under a quota of 2 `requests.nvidia.com/gpu`; a pod asking for a GPU under a
quota of 0; 3 pods under `pods: 2` (a warning).
Passes: the same world under a quota of 4; the sidecar given a CPU limit by a LimitRange default; a `BestEffort`
quota beside pods that state their resources.
"""
from __future__ import annotations

from typing import Iterator

from ..kube.limit_range import Container, add, admit
from ..kube.objects import ERROR, WARNING, Manifest, Problem
from ..kube.resource_quota import constraints, hard, holds, matching, modelled, pod_usage, pretty
from ..kube.values import Quantity
from .kit import Context, obj_problem
from .res008_limit_range import limit_ranges, matches, refusal
from .sec010_pod_security import PodView, argo_namespaces, pod_views

ID = "RES009"
NAME = "resource-quota"
SEVERITY = ERROR
HINT_SPECIFY = "state every resource the quota tracks on each container, or give the namespace a LimitRange default"
HINT_EXCEED = "ask for less per pod, or raise the quota's hard (its namespace's spec.hard)"
HINT_WORLD = "raise the quota's hard to what the whole world needs, or run fewer or smaller pods"


def check(ctx: Context) -> Iterator[Problem]:
    quotas = [m for m in ctx.of_kind("ResourceQuota") if m.api_version == "v1" and m.ref not in ctx.schema_refused
              and modelled(m.obj) and hard(m.obj)]
    if not quotas:
        return
    destinations, _ = argo_namespaces(ctx)
    ranges = limit_ranges(ctx)
    # (quota, home) -> [(view, one pod's usage)] of the pods it admits, for the totals
    admitted: dict[tuple[int, str | None], list[tuple[PodView, dict[str, Quantity]]]] = {}
    for view in pod_views(ctx):
        if view.spec.get("resources"):
            continue  # pod-level resources (PodLevelResources): not modelled
        for home, shown, maybe in matches(view.namespace, quotas, destinations):
            lrs = next((s for h, s, _ in matches(view.namespace, ranges, destinations) if h == home), [])
            pod = admit([m.obj for m in lrs], view.spec).pod
            for quota, condition in [(q, None) for q in shown] + maybe:
                found = _refused(view, quota, pod, home, condition, lrs)
                if found is not None:
                    yield found
                elif condition is None and holds(quota.obj, view.spec, pod):
                    usage = pod_usage(pod, view.spec.get("overhead"))
                    admitted.setdefault((id(quota), home), []).append((view, usage))
    for quota in quotas:
        for (qid, home), pods in admitted.items():
            if qid == id(quota):
                yield from _together(ctx, quota, home, pods)


def _refused(view: PodView, quota: Manifest, pod: list[Container], home: str | None, condition: str | None,
             lrs: list[Manifest]) -> Problem | None:
    if not holds(quota.obj, view.spec, pod):
        return None
    limits = hard(quota.obj)
    tracked = matching(list(limits))
    says = None
    missing = constraints(tracked, pod)
    if missing is not None:
        says, hint = f"failed quota: {quota.name}: {missing}", HINT_SPECIFY
    else:
        usage = pod_usage(pod, view.spec.get("overhead"))
        over = {k: q for k, q in usage.items() if k in tracked and q.value > limits[k].value}
        if over:
            zero = {k: Quantity(limits[k].value * 0, "", "0") for k in over}
            says = (f"exceeded quota: {quota.name}, requested: {pretty(over)}, used: {pretty(zero)}, limited: "
                    f"{pretty({k: limits[k] for k in over})} (even with nothing else running there)")
            hint = HINT_EXCEED
    if says is None:
        return None
    only_added = bool(view.added) and missing is not None and \
        constraints(tracked, [c for c in pod if c.name not in view.added]) is None
    if lrs:
        says += f" (after LimitRange {', '.join(repr(m.name) for m in lrs)})"
    return refusal(ID, view, home, says, hint, ([condition] if condition else []) + view.conditions(only_added))


def _together(ctx: Context, quota: Manifest, home: str | None,
              pods: list[tuple[PodView, dict[str, Quantity]]]) -> Iterator[Problem]:
    """The world that must run whole, over `hard` (an error), else all these pods together over it (a warning)."""
    limits = hard(quota.obj)
    tracked = matching(list(limits))
    where = f"namespace '{home}'" if home else "the namespace they are applied to"
    blamed = False
    for t in ctx.topologies:
        if not (t.nnodes_min is not None and t.nnodes_min == t.nnodes_max == t.pods):
            continue
        own = [(v, u) for v, u in pods if v.workload is t.workload and not v.aux and v.count]
        need = _sum([(u, (v.count or 0) // max(t.workload.copies, 1)) for v, u in own], tracked)
        over = {k: q for k, q in need.items() if q.value > limits[k].value}
        if own and over:
            blamed = True
            first = own[0][0]
            assumed = any(v.assumed for v, _ in own)
            yield obj_problem(ID, first.manifest, first.field, f"the world's {t.pods} pods must all run at once "
                              f"(--nnodes {t.nnodes_min}) but together ask for {pretty(over)}, over ResourceQuota "
                              f"'{quota.name}' in {where} (limited: {pretty({k: limits[k] for k in over})}, used: at "
                              "least 0): the pods past it are refused and the others wait for them"
                              + (" (with the runtime's pod template as its upstream installs it: the runtime is not in "
                                 "these manifests)" if assumed else ""), HINT_WORLD,
                              severity=WARNING if assumed else ERROR)
    if blamed:
        return
    total = _sum([(u, v.count or 0) for v, u in pods if not v.aux and v.count], tracked)
    over = {k: q for k, q in total.items() if q.value > limits[k].value}
    if over:
        yield obj_problem(ID, quota, "spec.hard", f"the pods of these manifests in {where} together ask for "
                          f"{pretty(over)}, over this quota's {pretty({k: limits[k] for k in over})}: not all can be "
                          "admitted at once (they may run one after another)", HINT_WORLD, severity=WARNING)


def _sum(parts: list[tuple[dict[str, Quantity], int]], tracked: list[str]) -> dict[str, Quantity]:
    total: dict[str, Quantity] = {}
    for usage, count in parts:
        for k, q in usage.items():
            if k in tracked and count:
                total[k] = add(total.get(k), Quantity(q.value * count, q.suffix, q.number))
    return total

