"""Every pod template in a set of manifests, whatever kind holds it (a Pod, a Deployment, any kind a launcher module
models ...), with the object and field path a problem about it points at. Security and image rules
read these; they apply to every pod in git, not only to training pods."""
from __future__ import annotations

from dataclasses import dataclass, field as dc_field
from typing import Any

from .. import launchers
from ..kube.objects import Manifest
from ..kube.values import listing


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
                                for i, c in enumerate(listing(self.spec.get(key))) if isinstance(c, dict)]
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


def _site(m: Manifest, template: Any, field: str) -> PodSite | None:
    if not isinstance(template, dict):
        return None
    spec = template.get("spec")
    if not isinstance(spec, dict):
        return None
    raw_meta = template.get("metadata")
    meta: dict[str, Any] = raw_meta if isinstance(raw_meta, dict) else {}
    return PodSite(m, f"{field}.spec", spec, meta.get("labels") or {}, meta.get("annotations") or {})


def pod_sites(manifests: list[Manifest]) -> list[PodSite]:
    """Every pod template of these objects: a Pod's own spec, the templates of a modelled kind (its launcher's
    pod_templates) and of the kinds in the registry's table of unmodelled ones."""
    out: list[PodSite] = []
    for m in manifests:
        if m.kind == "Pod":
            spec = m.obj.get("spec")
            if isinstance(spec, dict):
                out.append(PodSite(m, "spec", spec, m.metadata.get("labels") or {},
                                   m.metadata.get("annotations") or {}))
            continue
        for field, template in launchers.pod_templates(m):
            site = _site(m, template, field)
            if site:
                out.append(site)
    return out
