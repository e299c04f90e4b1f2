"""Kubeflow Trainer v2 (Cluster)TrainingRuntime (trainer.kubeflow.org/v1alpha1, kubeflow/trainer tag v2.3.0): the
JobSet template a TrainJob's pods are made from, its replicated Jobs' steps (initializers, the trainer), the runtime
patches a TrainJob merges into it (trainingruntime.go), upstream's default runtime, and what the runtime's webhook
refuses. A runtime starts no pods itself: trainjob.py builds them."""
from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import yaml

from ..kube.values import as_int, dig, listing, mapping
from ..kube.objects import Manifest
from .base import Bundle, Check, Launcher, Workload

RUNTIME_KINDS = ("ClusterTrainingRuntime", "TrainingRuntime")
ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
TRAINER_STEP = "trainer"
# builder.go: the Jobs of these steps run as one replica each.
ANCESTORS = ("dataset-initializer", "model-initializer", TRAINER_STEP)
# trainingruntime_webhook.go expectedContainerNames: the container each ancestor step must have.
STEP_CONTAINERS = {"dataset-initializer": "dataset-initializer", "model-initializer": "model-initializer",
                   TRAINER_STEP: "node"}
# Upstream's default runtime, used (and said to be used) when a TrainJob names it without shipping it.
UPSTREAM_RUNTIME_FILE = Path(__file__).resolve().parent.parent / "upstream" / "torch_distributed.yaml"
UPSTREAM_RUNTIME = "torch-distributed"


def load_upstream_runtime() -> dict[str, Any]:
    runtime: dict[str, Any] = yaml.safe_load(UPSTREAM_RUNTIME_FILE.read_text())
    return runtime


def ancestor(rjob: dict[str, Any]) -> str | None:
    value = mapping(dig(rjob, "template", "metadata", "labels")).get(ANCESTOR_LABEL)
    return str(value) if value is not None else None


# Merge keys of the lists a runtime patch reaches (the patchMergeKey tags of the JobSet and core/v1 Go types);
# any other list is replaced whole, as a strategic merge patch does with an atomic list.
MERGE_KEYS = {"replicatedJobs": "name", "containers": "name", "initContainers": "name", "env": "name",
              "volumes": "name", "volumeMounts": "mountPath", "ports": "containerPort", "imagePullSecrets": "name"}


def strategic_merge(base: Any, patch: Any, key: str | None = None) -> Any:
    """k8s.io/apimachinery strategicpatch.StrategicMergePatch for the shapes a runtime patch has: mappings merged
    key by key, lists of named items merged by their merge key, everything else replaced."""
    if isinstance(base, dict) and isinstance(patch, dict):
        out = dict(base)
        for k, v in patch.items():
            out[k] = strategic_merge(base.get(k), v, str(k)) if k in base else copy.deepcopy(v)
        return out
    merge_key = MERGE_KEYS.get(key or "")
    if merge_key and isinstance(base, list) and isinstance(patch, list):
        items = [copy.deepcopy(x) for x in base]
        for item in patch:
            at = next((i for i, x in enumerate(items) if isinstance(x, dict) and isinstance(item, dict)
                       and x.get(merge_key) == item.get(merge_key)), None)
            if at is None:
                items.append(copy.deepcopy(item))
            else:
                items[at] = strategic_merge(items[at], item)
        return items
    return copy.deepcopy(patch)


def owned_template(template: dict[str, Any]) -> dict[str, Any]:
    """A copy of a runtime's JobSet template that this build may change: each replicated Job down to its pod spec
    and its container lists copied (the containers themselves are replaced, never changed in place), the rest
    shared with the runtime object (a deep copy of every runtime, for every TrainJob, is what made this slow)."""
    out = dict(template)
    jobs = []
    for rjob in listing(template.get("replicatedJobs")):
        rjob = dict(mapping(rjob))
        tmpl = rjob["template"] = dict(mapping(rjob.get("template")))
        js = tmpl["spec"] = dict(mapping(tmpl.get("spec")))
        pod = js["template"] = dict(mapping(js.get("template")))
        pod_spec = pod["spec"] = dict(mapping(pod.get("spec")))
        for key in ("containers", "initContainers"):
            if isinstance(pod_spec.get(key), list):
                pod_spec[key] = list(pod_spec[key])
        jobs.append(rjob)
    if "replicatedJobs" in template:
        out["replicatedJobs"] = jobs
    return out


def apply_runtime_patches(template: dict[str, Any], patches: list[Any]) -> dict[str, Any]:
    """trainingruntime.go mergeRuntimePatches at v2.3.0: each `spec.runtimePatches[].trainingRuntimeSpec.template.
    spec` is merged into the JobSet spec in turn; the replicated Jobs keep the runtime's order."""
    order = {mapping(r).get("name"): i for i, r in enumerate(listing(template.get("replicatedJobs")))}
    for p in patches:
        spec = dig(p, "trainingRuntimeSpec", "template", "spec")
        if isinstance(spec, dict):
            template = strategic_merge(template, spec)
    jobs = listing(template.get("replicatedJobs"))
    template["replicatedJobs"] = sorted(jobs, key=lambda r: order.get(mapping(r).get("name"), len(order)))
    return template


def owned(obj: Any, *path: str) -> dict[str, Any] | None:
    """The mapping at `path` under `obj`, created where missing; None where something on the way is not a mapping
    (a runtime patch may put anything there: the schema stage reports it)."""
    for key in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.setdefault(key, {})
    return obj if isinstance(obj, dict) else None


def is_trainer_step(rjob: dict[str, Any]) -> bool:
    return ancestor(rjob) == TRAINER_STEP


def runtime_job_specs(m: Manifest, trainer_only: bool = False) -> Iterator[tuple[str, dict[str, Any]]]:
    """(field path, Job spec) of a (Cluster)TrainingRuntime's replicated Jobs (only the trainer step's with
    `trainer_only`)."""
    for i, rj in enumerate(listing(dig(m.obj, "spec", "template", "spec", "replicatedJobs"))):
        if trainer_only and not is_trainer_step(mapping(rj)):
            continue
        js = dig(rj, "template", "spec")
        if isinstance(js, dict):
            yield f"spec.template.spec.replicatedJobs[{i}].template.spec", js


class RuntimeKind(Launcher[Workload]):
    """A (Cluster)TrainingRuntime starts no pods itself; its templates are the TrainJob's."""

    id = "trainingruntime"
    order = 60
    upstream = "kubeflow/trainer v2.3.0"
    conformance = "trainjob"  # its cases are the TrainJob's (a runtime starts nothing alone)
    title = "Kubeflow Trainer v2 (Cluster)TrainingRuntime"
    kinds = tuple(("trainer.kubeflow.org", k) for k in RUNTIME_KINDS)
    starts_pods = False
    cluster_scoped = (("trainer.kubeflow.org", "ClusterTrainingRuntime"),)

    def pod_templates(self, m: Manifest) -> Iterator[tuple[str, dict[str, Any]]]:
        for field_path, js in runtime_job_specs(m):
            if isinstance(js.get("template"), dict):
                yield f"{field_path}.template", js["template"]

    def job_specs(self, m: Manifest, trainer_only: bool = False) -> Iterator[tuple[str, dict[str, Any]]]:
        return runtime_job_specs(m, trainer_only)

    def refused(self, m: Manifest, bundle: Bundle) -> list[Check]:
        """What the (Cluster)TrainingRuntime webhook refuses (trainingruntime_webhook.go 66-105, kubeflow/trainer
        v2.3.0, validateReplicatedJobs; the ClusterTrainingRuntime webhook calls the same): a replicated Job labelled
        with a known trainjob-ancestor-step (dataset-initializer, model-initializer, trainer) has replicas 1 (the
        CRD default) and a container named for its step (`node` for the trainer)."""
        out: list[Check] = []
        for i, rjob in enumerate(listing(dig(m.obj, "spec", "template", "spec", "replicatedJobs"))):
            step = ancestor(mapping(rjob))
            if step not in ANCESTORS:
                continue
            where = f"spec.template.spec.replicatedJobs[{i}]"
            replicas = mapping(rjob).get("replicas", 1)
            if as_int(replicas) != 1:
                out.append(Check(f"{where}.replicas", f"replicas is {replicas} on the '{step}' step: the Trainer's "
                                 "webhook refuses the runtime (it always must be 1)", "set replicas: 1 (the node "
                                 "count is mlPolicy.numNodes or the TrainJob's trainer.numNodes)", obj=m))
            want = STEP_CONTAINERS[step]
            names = [mapping(c).get("name") for c in listing(dig(rjob, "template", "spec", "template", "spec",
                                                                  "containers"))]
            if want not in names:
                out.append(Check(f"{where}.template.spec.template.spec.containers", f"the '{step}' step has no "
                                 f"container named '{want}': the Trainer's webhook refuses the runtime",
                                 f"name the step's main container '{want}'", obj=m))
        return out


RUNTIME = RuntimeKind()


def merge_resources(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """trainingruntimeutil.MergeResourceRequirements: limits and requests merged key by key, the TrainJob's win."""
    out: dict[str, Any] = {}
    for section in ("limits", "requests", "claims"):
        merged = {**mapping(base.get(section)), **mapping(override.get(section))} if section != "claims" else \
            (override.get(section) or base.get(section))
        if merged:
            out[section] = merged
    return out


# Where a TrainJob sets what the Trainer merges into its runtime's `node` container (trainingruntime.go 199-233).
RESOURCES_PER_NODE = "spec.trainer.resourcesPerNode"


@dataclass(frozen=True)
class TemplateUse:
    """A container of a (Cluster)TrainingRuntime's pod templates as the pods it becomes: the runtime starts none
    itself (the API server admits it whatever its containers ask for), every TrainJob on it does."""

    user: str                 # the objects whose pods it is in, in words (one of them)
    set_by: dict[str, str]    # container key -> the TrainJob field that replaces it (merges it: `resources`)


def template_use(m: Manifest, container_field: str) -> TemplateUse | None:
    """What a container of a runtime's templates (`container_field`, as podspecs lists it) becomes; None for any
    other object. In the `node` container of the trainer step's Job a TrainJob's spec.trainer sets `image`,
    `command` and `args` (kubeflow/trainer v2.3.0 pkg/runtime/framework/plugins/jobset/builder.go 113-139); its
    resourcesPerNode is merged into the `resources` of that container, or of the MPI `node` Job's under
    runLauncherAsNode, only where the runtime has an mlPolicy (pkg/runtime/core/trainingruntime.go 199-206).
    ContainerPatch (trainjob_types.go 466-494) sets none of these, so every other container's are the pods'."""
    if m.kind not in RUNTIME_KINDS:
        return None
    ml = dig(m.obj, "spec", "mlPolicy")
    launcher_as_node = isinstance(ml, dict) and mapping(ml.get("mpi")).get("runLauncherAsNode") is True
    node = STEP_CONTAINERS[TRAINER_STEP]
    set_by: dict[str, str] = {}
    for i, rj in enumerate(listing(dig(m.obj, "spec", "template", "spec", "replicatedJobs"))):
        rj = mapping(rj)
        prefix = f"spec.template.spec.replicatedJobs[{i}].template.spec.template.spec.containers["
        if not container_field.startswith(prefix):
            continue
        containers = listing(dig(rj, "template", "spec", "template", "spec", "containers"))
        k = as_int(container_field[len(prefix):-1])
        if k is None or not 0 <= k < len(containers) or mapping(containers[k]).get("name") != node:
            break
        if is_trainer_step(rj):
            set_by.update(image="spec.trainer.image", command="spec.trainer.command", args="spec.trainer.args")
        if isinstance(ml, dict) and (is_trainer_step(rj) or launcher_as_node and rj.get("name") == node):
            set_by["resources"] = RESOURCES_PER_NODE
        break
    return TemplateUse(f"TrainJob on {m.kind} '{m.name}'", set_by)


@dataclass
class NodeResources:
    """A TrainJob's resourcesPerNode as its pods get it: merged key by key into its runtime's `node` container
    (kubeflow/trainer v2.3.0 pkg/runtime/core/trainingruntime.go 199-233, MergeResourceRequirements)."""

    merged: dict[str, Any]
    base: dict[str, Any]   # the runtime node container's own resources
    runtime: str           # the runtime, in words
    shown: bool            # the runtime is in these manifests
    upstream: bool         # it is not, and is read as upstream installs it


def node_resources(w: Any, resources: Any) -> NodeResources | None:
    """What `resources` (a TrainJob workload's spec.trainer.resourcesPerNode) becomes in its pods; None where
    nothing is merged (a runtime without mlPolicy: trainingruntime.go 199-200) or it is no mapping."""
    runtime_obj = getattr(w, "runtime_obj", None)
    if not isinstance(resources, dict) or runtime_obj is not None and \
            not isinstance(dig(runtime_obj, "spec", "mlPolicy"), dict):
        return None
    base = mapping(getattr(w, "runtime_resources", {})) if runtime_obj is not None else {}
    runtime = f"{getattr(w, 'runtime_kind', '') or 'runtime'} '{getattr(w, 'runtime_name', '')}'"
    shown = runtime_obj is not None and getattr(w, "runtime", None) is not None
    return NodeResources(merge_resources(base, resources), base, runtime, shown, runtime_obj is not None and not shown)

