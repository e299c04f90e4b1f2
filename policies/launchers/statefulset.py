"""The Kubernetes StatefulSet controller (apps/v1, kubernetes v1.36.0, pkg/controller/statefulset/): pods
`<name>-<ordinal>` with a stable identity, published under the headless Service named in `spec.serviceName`."""
from __future__ import annotations

from typing import Any, Iterator

from ..model import Manifest
from .base import POD_INDEX, Bundle, Check, Launcher, PodGroup, ScaleSpec, Workload, as_int, mapping

KIND = "StatefulSet"
POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"
PARALLEL = "Parallel"


def start_ordinal(spec: dict[str, Any]) -> int:
    """`spec.ordinals.start` (StatefulSetStartOrdinal, GA in 1.31): the first pod's ordinal; 0 when unset."""
    return as_int(mapping(spec.get("ordinals")).get("start"), 0) or 0


class StatefulSetLauncher(Launcher):
    id = "statefulset"
    title = "StatefulSet + headless Service"
    kinds = (("apps", KIND),)
    immutable = ("spec.selector", "spec.serviceName", "spec.volumeClaimTemplates", "spec.podManagementPolicy")
    scale = ScaleSpec(pods=[(("spec", "replicas"), 0)], env_container=("spec", "template", "spec", "containers", 0),
                      resources=[("spec", "template", "spec", "containers", 0, "resources")])

    def build(self, m: Manifest, bundle: Bundle) -> Workload:
        spec = mapping(m.obj.get("spec"))
        name = m.name
        start = start_ordinal(spec)
        service = spec.get("serviceName") or None

        # stateful_set_utils.go newStatefulSetPod / initIdentity / updateIdentity at v1.36.0: the pod is named
        # `<set>-<ordinal>`, its hostname is the pod name and its subdomain the set's serviceName, whatever the
        # template says; it is labelled with its name and (PodIndexLabel, GA in 1.32) its ordinal.
        group = PodGroup(
            role="pod",
            count=as_int(spec.get("replicas"), 1) or 0,
            offset=0,
            template=mapping(spec.get("template")),
            template_field="spec.template",
            name=lambda i: f"{name}-{start + i}",
            hostname=lambda i: f"{name}-{start + i}",
            hostname_forced=True,
            subdomain=service,
            subdomain_forced=True,
            labels=lambda i: {POD_NAME_LABEL: f"{name}-{start + i}", POD_INDEX: str(start + i)},
        )
        w = Workload(m, self, [group], m.namespace)
        w.facts.update(pod_management_policy=spec.get("podManagementPolicy") or "OrderedReady",
                       service_name=spec.get("serviceName"), start_ordinal=start)
        return w

    def pods_field(self, w: Workload) -> str:
        return "spec.replicas"

    def dns_field(self, w: Workload, pod: Any) -> str:
        return "spec.serviceName"

    def dns_names(self, m: Manifest) -> list[tuple[str, str, str, bool]]:
        spec = mapping(m.obj.get("spec"))
        last = start_ordinal(spec) + max((as_int(spec.get("replicas"), 1) or 1) - 1, 0)
        return [("spec.replicas", f"{m.name}-{last}", f"the hostname of pod {last}", False)]

    def pod_templates(self, m: Manifest) -> Iterator[tuple[str, dict[str, Any]]]:
        tmpl = mapping(m.obj.get("spec")).get("template")
        if isinstance(tmpl, dict):
            yield "spec.template", tmpl

    def startup(self, w: Workload) -> Check | None:
        policy = w.facts.get("pod_management_policy")
        if w.pods > 1 and policy != PARALLEL:
            return Check("spec.podManagementPolicy", f"podManagementPolicy is {policy}: pod 1 waits for pod 0 to be "
                         "Ready while pod 0 waits in rendezvous for pod 1",
                         "set podManagementPolicy: Parallel (immutable: recreate the StatefulSet)")
        return None

    def restarts(self, w: Workload, bundle: Bundle) -> list[str]:
        return ["a StatefulSet restarts its pods"]

    def scale_down(self, m: Manifest, nodes: int) -> list[str]:
        m.obj.setdefault("spec", {})["replicas"] = nodes
        return [f"{m.ref}: replicas -> {nodes}"]


LAUNCHER = StatefulSetLauncher()
