"""GPU requests equal GPU limits.

GPUs are an extended resource: they cannot be overcommitted, so the API server rejects a request that differs from
the limit or a request with no limit. Write the limit (the request then defaults to it), or both, equal. Checked on
every container of every pod template and on a TrainJob's `resourcesPerNode`.

A TrainJob's `resourcesPerNode` is merged key by key into its runtime's `node` container (kubeflow/trainer v2.3.0
pkg/runtime/core/trainingruntime.go 199-233, MergeResourceRequirements), so what the API server sees is the merge: a
GPU request there is whole where the runtime's container sets the limit. With the runtime in the manifests the merge
is checked (an error), also for a TrainJob that sets no resourcesPerNode and so takes the runtime's container as it
is; with a runtime the manifests do not hold (upstream's `torch-distributed` as the Trainer installs it, or one
applied from elsewhere), the cluster's copy may set the limit: a warning phrased as that condition. A runtime without
`mlPolicy` merges nothing, so nothing of the TrainJob's is checked.

A (Cluster)TrainingRuntime starts no pods: the API server admits it whatever its containers ask for, and rejects the
pods of the TrainJobs on it. A gap in a container no TrainJob can change (an initializer's, or any container of a
runtime without `mlPolicy`) breaks every TrainJob on the runtime: an error. A gap in the trainer's `node` container
breaks only a TrainJob whose `resourcesPerNode` does not mend it: a warning phrased as that condition on the runtime
(and an error on each TrainJob in the manifests that leaves it).

Fails: `requests: {nvidia.com/gpu: 4}, limits: {nvidia.com/gpu: 8}`; a GPU request without a limit; a TrainJob's GPU
request where its runtime's node container sets no GPU limit; a TrainJob without resourcesPerNode on a runtime whose
node container requests a GPU without a limit.
Passes: `requests` and `limits` both `nvidia.com/gpu: 8`; only `limits: {nvidia.com/gpu: 1}`; a TrainJob's GPU
request with the limit in its runtime's node container.
"""
from __future__ import annotations

from typing import Any, Iterator

from ..kube.values import as_int, mapping
from ..launchers import gpu_resources
from ..launchers.trainingruntime import node_resources, template_use
from ..kube.objects import WARNING, Manifest, Problem
from ..launchers.podspecs import ContainerSite
from .kit import Context, obj_problem

ID = "RES002"
NAME = "gpu-request-equals-limit"


def _gaps(resources: Any, keys: Any = None) -> Iterator[tuple[str, str]]:
    """(key, what is wrong) for each GPU request without an equal limit; only the keys in `keys` where given."""
    if not isinstance(resources, dict):
        return
    requests = mapping(resources.get("requests"))
    limits = mapping(resources.get("limits"))
    for key in gpu_resources(requests):
        if keys is not None and key not in keys:
            continue
        if key not in limits:
            yield key, f"{key} request {requests[key]} has no limit"
        elif as_int(limits[key]) != as_int(requests[key]):
            yield key, f"{key} request {requests[key]} differs from the limit {limits[key]}"


def _hint(key: str, resources: dict[str, Any]) -> str:
    limit = mapping(resources.get("limits")).get(key)
    return f"make both {limit}" if limit is not None else f"set limits.{key} to {resources['requests'][key]}"


def _merged(ctx: Context, m: Manifest, field: str, resources: Any) -> Iterator[Problem]:
    """A setting outside any pod template (a TrainJob's resourcesPerNode), as the controller merges it."""
    w = ctx.workload_of(m)
    node = node_resources(w, resources)
    if node is None:
        return
    own = set(mapping(resources.get("requests"))) | set(mapping(resources.get("limits")))
    for key, wrong in _gaps(node.merged, None if node.shown else own):
        if key not in own:  # the runtime's own gap, which the TrainJob leaves as it is
            yield obj_problem(ID, m, field, f"{wrong} in the node container of {node.runtime}, and {field} does not "
                              f"set {key}: the API server rejects the trainer's pods",
                              f"in {field}, {_hint(key, node.merged)}")
        elif node.shown:
            yield obj_problem(ID, m, f"{field}.requests", f"{wrong} in the node container of {node.runtime}, once "
                              "merged: the API server rejects the trainer's pods", _hint(key, node.merged))
        else:
            said = (f" (none in {node.runtime} as upstream installs it, kubeflow/trainer v2.3.0)"
                    if node.upstream and key not in mapping(node.base.get("limits")) else "")
            cond = (f"if {node.runtime} (not in these manifests) has an mlPolicy, which merges resourcesPerNode into "
                    "its node container" if key in mapping(resources.get("limits")) else
                    f"unless {node.runtime} (not in these manifests) sets limits.{key} on its node container")
            yield obj_problem(ID, m, f"{field}.requests", f"{wrong}{said}: the API server rejects the trainer's pods "
                              f"{cond}", _hint(key, node.merged), severity=WARNING)


def _template(cs: ContainerSite, resources: dict[str, Any]) -> Iterator[Problem]:
    """A container of a pod template: its own object's pods, or (a runtime's) the pods of the jobs made from it."""
    use = template_use(cs.manifest, cs.field)
    field = f"{cs.field}.resources.requests"
    for key, wrong in _gaps(resources):
        hint = _hint(key, resources)
        if use is None:
            yield obj_problem(ID, cs.manifest, field, f"{wrong}: the API server rejects it", hint)
        elif "resources" not in use.set_by:
            yield obj_problem(ID, cs.manifest, field, f"{wrong}: the API server rejects the pods of every "
                              f"{use.user}", hint)
        else:
            mend = f"sets limits.{key}" if key not in mapping(resources.get("limits")) else "makes them equal"
            yield obj_problem(ID, cs.manifest, field, f"{wrong}: the API server rejects the pods of a {use.user} "
                              f"unless its {use.set_by['resources']} {mend}", hint, severity=WARNING)


def check(ctx: Context) -> Iterator[Problem]:
    for cs in ctx.containers:
        yield from _template(cs, mapping(cs.container.get("resources")))
    for m, launcher in ctx.launched:
        settings = launcher.container_settings(m, "resources")
        for field, resources in settings:
            yield from _merged(ctx, m, field, resources)
        w = None if settings else ctx.workload_of(m)
        if w is not None and (unset := launcher.setting_field(w, "resources")):
            yield from _merged(ctx, m, unset, {})  # no resourcesPerNode: the pods get the runtime's container
