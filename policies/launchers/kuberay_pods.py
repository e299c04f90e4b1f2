"""The pod templates of KubeRay's kinds (ray-project/kuberay v1.7.0) as the security and image rules read them: the
head and worker groups of each RayClusterSpec, with the Ray container as KubeRay builds it, and a RayJob's submitter
pod template as written (kuberay.py says where each kind holds them)."""
from __future__ import annotations

from typing import Any, Iterator

from ..kube.objects import Manifest
from ..kube.values import dig, listing


def ray_templates(m: Manifest, base: tuple[str, ...], submitter: tuple[str, ...] | None,
                  copied: bool = True) -> Iterator[tuple[str, Any]]:
    """(field path, template) of the head and each worker group of the RayClusterSpec at `base` (each as KubeRay
    builds its pods: `as_built_by_kuberay`), and the submitter pod template at `submitter` as written (None: the kind
    has none). `copied`: the object's own annotations reach the RayCluster (not a RayCronJob's: its RayJobs carry
    only KubeRay's own annotation, raycronjob_controller.go:170-191 at kuberay v1.7.0)."""
    cluster = dig(m.obj, *base)
    prefix = ".".join(base)
    # The object's own annotation reaches its pods' templates: a RayCluster's (pod.go 61-75), and a RayJob's or a
    # RayService's, which the RayCluster each makes copies (rayjob_controller.go 1004-1013, rayservice_controller.go
    # 1511-1536 at kuberay v1.7.0).
    raw = m.metadata.get("annotations")
    overwrite = copied and isinstance(raw, dict) and _is_true(raw.get(OVERWRITE_CMD))
    yield f"{prefix}.headGroupSpec.template", as_built_by_kuberay(dig(cluster, "headGroupSpec", "template"), overwrite)
    for i, g in enumerate(dig(cluster, "workerGroupSpecs") or []):
        if isinstance(g, dict):
            yield f"{prefix}.workerGroupSpecs[{i}].template", as_built_by_kuberay(dig(g, "template"), overwrite)
    if submitter is None:
        yield "spec.submitterPodTemplate", None
    else:
        yield ".".join(submitter), dig(m.obj, *submitter)


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
