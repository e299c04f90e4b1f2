"""Kinds no launcher module models, and where their pod templates are: the security and image rules read those
templates (policies/launchers/podspecs.py), and the engine says once per object of a training kind among them that its
topology was not checked (a MODEL info line). A kind that gets a module of its own leaves this table."""
from __future__ import annotations

from typing import Any, Iterator

from ..kube.values import dig, listing
from ..kube.objects import Manifest

# Workload kinds with one pod template -> its path.
TEMPLATE_PATHS: dict[str, tuple[str, ...]] = {
    "Deployment": ("spec", "template"),
    "ReplicaSet": ("spec", "template"),
    "DaemonSet": ("spec", "template"),
    "ReplicationController": ("spec", "template"),
    "CronJob": ("spec", "jobTemplate", "spec", "template"),
}
# Other Kubeflow training-operator v1 kinds: spec.<x>ReplicaSpecs.<type>.template.
REPLICA_SPECS: dict[str, str] = {"TFJob": "tfReplicaSpecs", "MPIJob": "mpiReplicaSpecs",
                                 "XGBoostJob": "xgbReplicaSpecs", "PaddleJob": "paddleReplicaSpecs",
                                 "JAXJob": "jaxReplicaSpecs"}
# KubeRay (ray.io/v1): the head and worker group templates of a RayService's rayClusterConfig (RayCluster and RayJob
# have a module of their own: kuberay.py, which reads theirs with `ray_templates`).
RAY_CLUSTER: dict[str, tuple[str, ...]] = {"RayService": ("spec", "rayClusterConfig")}
# Kinds that start distributed training no launcher module models.
NOT_MODELLED: tuple[str, ...] = (*REPLICA_SPECS, *RAY_CLUSTER)
# Where a finished object's TTL is (ARGO002; the modelled kinds say theirs: Launcher.ttl_field).
TTL_FIELDS: dict[str, tuple[str, ...]] = {"MPIJob": ("spec", "runPolicy", "ttlSecondsAfterFinished")}
# Training kinds whose change means a new run, as a modelled workload's does (Argo CD's replace checks).
RUN_KINDS: tuple[str, ...] = ("MPIJob",)


def pod_templates(m: Manifest) -> Iterator[tuple[str, Any]]:
    """(field path, template as written: perhaps not a mapping) of every pod template of an object of these kinds."""
    kind = m.kind
    if kind in TEMPLATE_PATHS:
        path = TEMPLATE_PATHS[kind]
        yield ".".join(path), dig(m.obj, *path)
    elif kind in RAY_CLUSTER:
        yield from ray_templates(m, RAY_CLUSTER[kind], submitter=False)
    elif kind in REPLICA_SPECS:
        key = REPLICA_SPECS[kind]
        for rtype, rspec in (dig(m.obj, "spec", key) or {}).items():
            yield f"spec.{key}.{rtype}.template", dig(rspec, "template")



def ray_templates(m: Manifest, base: tuple[str, ...], submitter: bool) -> Iterator[tuple[str, Any]]:
    """(field path, template) of the head and each worker group of the RayClusterSpec at `base` (each as KubeRay
    builds its pods: `as_built_by_kuberay`), and with `submitter` a RayJob's submitter pod template as written."""
    cluster = dig(m.obj, *base)
    prefix = ".".join(base)
    # The object's own annotation reaches its pods' templates: a RayCluster's (pod.go 61-75), and a RayJob's or a
    # RayService's, which the RayCluster each makes copies (rayjob_controller.go 1004-1013, rayservice_controller.go
    # 1511-1536 at kuberay v1.7.0).
    raw = m.metadata.get("annotations")
    overwrite = isinstance(raw, dict) and _is_true(raw.get(OVERWRITE_CMD))
    yield f"{prefix}.headGroupSpec.template", as_built_by_kuberay(dig(cluster, "headGroupSpec", "template"), overwrite)
    for i, g in enumerate(dig(cluster, "workerGroupSpecs") or []):
        if isinstance(g, dict):
            yield f"{prefix}.workerGroupSpecs[{i}].template", as_built_by_kuberay(dig(g, "template"), overwrite)
    yield "spec.submitterPodTemplate", dig(m.obj, "spec", "submitterPodTemplate") if submitter else None


# kuberay v1.7.0 utils/constant.go:69: the annotation (on the object or a group's pod template) that keeps the Ray
# container's own command.
OVERWRITE_CMD = "ray.io/overwrite-container-cmd"


def _is_true(value: Any) -> bool:
    return isinstance(value, str) and value.lower() == "true"


def as_built_by_kuberay(template: Any, overwrite: bool) -> Any:
    """A head or worker group template with its Ray container (the first) as KubeRay's BuildPod makes it
    (ray-operator/controllers/ray/common/pod.go 878-912 at v1.7.0): unless the object or the template says
    `ray.io/overwrite-container-cmd: "true"`, or its command and args already contain `ray start`, the container's
    command becomes `/bin/bash -c --` and its one arg the shell line `<command> <args> && ulimit -n ...; ray start
    ...` (convertCmdToString joins the words with spaces; the `ray start` flags, generated from rayStartParams, are
    not modelled and left out). So its command and args are words of a bash line, not a program name. A copy; the
    template itself is not changed."""
    if not isinstance(template, dict) or not isinstance(template.get("spec"), dict):
        return template
    containers = template["spec"].get("containers")
    if not isinstance(containers, list) or not containers or not isinstance(containers[0], dict):
        return template
    meta = template.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, dict) else None
    if overwrite or (isinstance(annotations, dict) and _is_true(annotations.get(OVERWRITE_CMD))):
        return template
    ray = containers[0]
    words = [w for key in ("command", "args") for w in listing(ray.get(key))]
    line = "".join(f" {w} " for w in words)  # pod.go convertCmdToString (1036-1042)
    if "ray start" in line:
        return template
    generated = "ulimit -n ${RAY_START_ULIMIT_OPEN_FILES:-65536}; ray start"
    built = {**ray, "command": ["/bin/bash", "-c", "--"], "args": [f"{line} && {generated}" if line else generated]}
    return {**template, "spec": {**template["spec"], "containers": [built, *containers[1:]]}}
