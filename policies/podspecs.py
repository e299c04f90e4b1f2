"""Every pod template in a set of manifests, whatever kind holds it (a Pod, a Deployment, any kind a launcher module
models ...), with the object and field path a problem about it points at. Security and image rules
read these; they apply to every pod in git, not only to training pods."""
from __future__ import annotations

from dataclasses import dataclass, field as dc_field
from typing import Any

from . import launchers
from .model import Manifest

# Kinds no launcher module models -> path of their one pod template (the modelled kinds say where theirs are:
# Launcher.pod_templates).
_TEMPLATE_PATHS = {
    "Deployment": ("spec", "template"),
    "ReplicaSet": ("spec", "template"),
    "DaemonSet": ("spec", "template"),
    "ReplicationController": ("spec", "template"),
    "CronJob": ("spec", "jobTemplate", "spec", "template"),
}
# Other Kubeflow training-operator v1 kinds: spec.<x>ReplicaSpecs.<type>.template.
_REPLICA_SPECS = {"TFJob": "tfReplicaSpecs", "MPIJob": "mpiReplicaSpecs", "XGBoostJob": "xgbReplicaSpecs",
                  "PaddleJob": "paddleReplicaSpecs", "JAXJob": "jaxReplicaSpecs"}
# KubeRay (ray.io/v1): the head and worker group templates, in a RayCluster or a RayJob's rayClusterSpec.
_RAY_CLUSTER = {"RayCluster": ("spec",), "RayJob": ("spec", "rayClusterSpec"), "RayService": ("spec", "rayClusterConfig")}
# Kinds that start distributed training no launcher module models: their pod templates get the security and
# image rules, and the engine says once per object that the topology was not checked.
NOT_MODELLED = (*_REPLICA_SPECS, *_RAY_CLUSTER)


@dataclass
class PodSite:
    """One pod template: the object it lives in, the field path of its PodSpec, the PodSpec and the pod labels."""

    manifest: Manifest
    field: str
    spec: dict[str, Any]
    labels: dict[str, Any]
    annotations: dict[str, Any]
    _containers: list[tuple[str, dict[str, Any]]] | None = dc_field(default=None, repr=False)

    def containers(self) -> list[tuple[str, dict[str, Any]]]:
        """(field path, container) for every init container and container, listed once (several rules read them)."""
        if self._containers is None:
            self._containers = [(f"{self.field}.{key}[{i}]", c) for key in ("initContainers", "containers")
                                for i, c in enumerate(self.spec.get(key) or []) if isinstance(c, dict)]
        return self._containers


@dataclass
class ContainerSite:
    """One container (or init container) of a pod template, with the security contexts that apply to it."""

    site: PodSite
    field: str
    container: dict[str, Any]
    sc: dict[str, Any]   # the container's securityContext
    psc: dict[str, Any]  # the pod's securityContext

    @property
    def manifest(self) -> Manifest:
        return self.site.manifest

    @property
    def name(self) -> Any:
        return self.container.get("name")


def container_sites(sites: list[PodSite]) -> list[ContainerSite]:
    out: list[ContainerSite] = []
    for site in sites:
        psc = site.spec.get("securityContext") or {}
        for field, c in site.containers():
            out.append(ContainerSite(site, field, c, c.get("securityContext") or {}, psc))
    return out


def _dig(obj: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def _site(m: Manifest, template: Any, field: str) -> PodSite | None:
    if not isinstance(template, dict):
        return None
    spec = template.get("spec")
    if not isinstance(spec, dict):
        return None
    meta = template.get("metadata") if isinstance(template.get("metadata"), dict) else {}
    return PodSite(m, f"{field}.spec", spec, meta.get("labels") or {}, meta.get("annotations") or {})


def pod_sites(manifests: list[Manifest]) -> list[PodSite]:
    out: list[PodSite] = []
    for m in manifests:
        kind = m.kind
        site: PodSite | None
        launcher = launchers.of(m) if kind != "Pod" else None
        if kind == "Pod":
            spec = m.obj.get("spec")
            if isinstance(spec, dict):
                out.append(PodSite(m, "spec", spec, m.metadata.get("labels") or {},
                                   m.metadata.get("annotations") or {}))
        elif launcher is not None:
            for field, template in launcher.pod_templates(m):
                site = _site(m, template, field)
                if site:
                    out.append(site)
        elif kind in _TEMPLATE_PATHS:
            path = _TEMPLATE_PATHS[kind]
            site = _site(m, _dig(m.obj, path), ".".join(path))
            if site:
                out.append(site)
        elif kind in _RAY_CLUSTER:
            base = _RAY_CLUSTER[kind]
            cluster = _dig(m.obj, base)
            prefix = ".".join(base)
            for field, template in [(f"{prefix}.headGroupSpec.template", _dig(cluster, ("headGroupSpec", "template")))] + [
                    (f"{prefix}.workerGroupSpecs[{i}].template", _dig(g, ("template",)))
                    for i, g in enumerate(_dig(cluster, ("workerGroupSpecs",)) or []) if isinstance(g, dict)] + [
                    ("spec.submitterPodTemplate", _dig(m.obj, ("spec", "submitterPodTemplate")) if kind == "RayJob"
                     else None)]:
                site = _site(m, template, field)
                if site:
                    out.append(site)
        elif kind in _REPLICA_SPECS:
            key = _REPLICA_SPECS[kind]
            for rtype, rspec in (_dig(m.obj, ("spec", key)) or {}).items():
                site = _site(m, _dig(rspec, ("template",)), f"spec.{key}.{rtype}.template")
                if site:
                    out.append(site)
    return out
