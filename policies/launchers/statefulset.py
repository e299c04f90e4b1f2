"""The Kubernetes StatefulSet controller (apps/v1, kubernetes v1.36.0, pkg/controller/statefulset/): pods
`<name>-<ordinal>` with a stable identity, published under the headless Service named in `spec.serviceName`."""
from __future__ import annotations

from typing import Any, Iterator

from ..model import Manifest
from ..model import ERROR, WARNING
from .base import (POD_INDEX, RECREATE_POD, Bundle, Check, Decision, Launcher, PodExit, PodGroup, RestartCount,
                   ScaleSpec, Workload, as_int, dig, kubelet_restarts, listing, mapping)

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
        """OrderedReady (the default) creates pod N+1 only once pod N is Running and Ready (stateful_set_control.go
        at v1.36.0). Without a readiness probe a pod is Ready once its containers start, so the pods only start one
        after another (a warning); a probe the trainer must answer (exec, httpGet, grpc) keeps pod 0 unready while it
        waits in rendezvous for pod 1, which is never created (an error)."""
        policy = w.facts.get("pod_management_policy")
        if w.pods <= 1 or policy == PARALLEL:
            return None
        hint = "set podManagementPolicy: Parallel (immutable: recreate the StatefulSet)"
        probes = [(c.get("name"), kind) for c in (mapping(x) for x in listing(dig(w.groups[0].template, "spec",
                                                                                   "containers")))
                  for probe in ("readinessProbe", "startupProbe") if isinstance(c.get(probe), dict)
                  for kind in ("exec", "httpGet", "grpc") if kind in c[probe]]
        if probes:
            name, kind = probes[0]
            return Check("spec.podManagementPolicy", f"podManagementPolicy is {policy} and container '{name}' has an "
                         f"{kind} probe: pod 1 is created only once pod 0 is Ready, while pod 0 waits in rendezvous "
                         "for pod 1", hint, severity=ERROR)
        return Check("spec.podManagementPolicy", f"podManagementPolicy is {policy}: the {w.pods} pods are created one "
                     "after another, each once the one before runs", hint, severity=WARNING)

    def restarts(self, w: Workload, bundle: Bundle) -> list[str]:
        return ["a StatefulSet restarts its pods"]

    def after_exit(self, w: Workload, bundle: Bundle, ended: PodExit, count: RestartCount) -> Decision:
        """The kubelet restarts the container in place (a StatefulSet's pods are restartPolicy Always, the only value
        the API server accepts); a deleted pod is created again under the same name with the same claims
        (kubernetes v1.36.0 pkg/controller/statefulset/stateful_set_control.go updateStatefulSet: replicas missing
        or failed are recreated). A StatefulSet never fails."""
        in_place = kubelet_restarts({**w.pod(ended.index).spec, "restartPolicy": "Always"}, ended, count)
        if in_place is not None:
            return in_place
        return Decision(RECREATE_POD, "StatefulSet controller", f"pod deleted -> pod {ended.index} created again, "
                        "same name and claims", "kubernetes v1.36.0 pkg/controller/statefulset/stateful_set_control.go "
                        "updateStatefulSet")

    def scale_down(self, m: Manifest, nodes: int) -> list[str]:
        m.obj.setdefault("spec", {})["replicas"] = nodes
        return [f"{m.ref}: replicas -> {nodes}"]


LAUNCHER = StatefulSetLauncher()
