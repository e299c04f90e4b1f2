"""The Kubernetes StatefulSet controller (apps/v1, kubernetes v1.36.0, pkg/controller/statefulset/): pods
`<name>-<ordinal>` with a stable identity, published under the headless Service named in `spec.serviceName`."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

from ..kube.values import DNS1123_LABEL, as_int, dig, int_or_percent, listing, mapping, selects
from ..kube.objects import Manifest
from ..kube.objects import WARNING
from . import core_validation
from .base import Bundle, Check, Launcher, ScaleSpec, Workload
from .lifecycle import RECREATE_POD, Decision, PodExit, RestartCount, kubelet_restarts
from .pods import POD_INDEX, PodGroup

KIND = "StatefulSet"
POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"
PARALLEL = "Parallel"


# kubernetes v1.36.0 pkg/apis/apps/validation/validation.go ValidateStatefulSetSpec (the API server's refusals, after
# apps/v1 SetDefaults_StatefulSet fills podManagementPolicy OrderedReady, updateStrategy RollingUpdate, the claim
# retention policies Retain and the template's restartPolicy Always where they are unset).
POD_MANAGEMENT_POLICIES = ("OrderedReady", PARALLEL)
UPDATE_STRATEGIES = ("RollingUpdate", "OnDelete")
RETENTION_POLICIES = ("Retain", "Delete")


def validation(spec: dict[str, Any], prefix: str = "spec", name: str | None = None) -> list[Check]:
    """What ValidateStatefulSetSpec refuses that the schema cannot say: a pod management policy, update strategy or
    claim retention policy outside its values, a rollingUpdate block with OnDelete, a negative partition, a
    maxUnavailable of 0, over 100% or not an integer or percentage, negative replicas/minReadySeconds/ordinals.start,
    a selector that does not select the template's labels, a template restartPolicy other than Always, and a
    template activeDeadlineSeconds. With `name`, ValidateStatefulSet's name check first: a DNS-1123 label
    (ValidateStatefulSetName, NameIsDNSLabel)."""
    out: list[Check] = []
    if name and (len(name) > 63 or not DNS1123_LABEL.match(name)):
        out.append(Check("metadata.name", f"name '{name}' is not a DNS-1123 label of at most 63 characters: the API "
                         "server refuses it", "use lowercase letters, digits and '-', at most 63 characters"))
    refuse = "the API server refuses it"

    def add(where: str, what: str, fix: str) -> None:
        out.append(Check(f"{prefix}.{where}", f"{what}: {refuse}", fix))

    policy = spec.get("podManagementPolicy")
    if policy and policy not in POD_MANAGEMENT_POLICIES:
        add("podManagementPolicy", f"podManagementPolicy '{policy}' is neither OrderedReady nor Parallel",
            "set podManagementPolicy: Parallel (or OrderedReady)")
    strategy = mapping(spec.get("updateStrategy"))
    kind, rolling = strategy.get("type") or "RollingUpdate", strategy.get("rollingUpdate")
    if kind not in UPDATE_STRATEGIES:
        add("updateStrategy", f"updateStrategy.type '{kind}' is neither RollingUpdate nor OnDelete",
            "set updateStrategy.type: RollingUpdate")
    elif kind == "OnDelete" and rolling is not None:
        add("updateStrategy.rollingUpdate", "rollingUpdate with updateStrategy OnDelete (only allowed for "
            "RollingUpdate)", "remove rollingUpdate, or set updateStrategy.type: RollingUpdate")
    elif isinstance(rolling, dict):
        partition = as_int(rolling.get("partition"), 0) or 0
        if partition < 0:
            add("updateStrategy.rollingUpdate.partition", f"partition {partition} is negative", "set it to 0 or more")
        unavailable = rolling.get("maxUnavailable")
        if unavailable is not None:
            parsed = int_or_percent(unavailable)
            where, fix = "updateStrategy.rollingUpdate.maxUnavailable", "set maxUnavailable to 1 or more (or 1%-100%)"
            if parsed is None:
                add(where, f"maxUnavailable '{unavailable}' is not an integer or a percentage", fix)
            elif parsed[0] <= 0:
                add(where, f"maxUnavailable {unavailable} (cannot be 0)", fix)
            elif parsed[1] and parsed[0] > 100:
                add(where, f"maxUnavailable {unavailable} is more than 100%", fix)
    for key in ("whenDeleted", "whenScaled"):
        value = mapping(spec.get("persistentVolumeClaimRetentionPolicy")).get(key)
        if value and value not in RETENTION_POLICIES:
            add(f"persistentVolumeClaimRetentionPolicy.{key}", f"{key} '{value}' is neither Retain nor Delete",
                f"set {key}: Retain (or Delete)")
    for where, value in (("replicas", spec.get("replicas")), ("minReadySeconds", spec.get("minReadySeconds")),
                         ("ordinals.start", mapping(spec.get("ordinals")).get("start"))):
        if isinstance(value, int) and value < 0:
            add(where, f"{where} {value} is negative", "set it to 0 or more")
    template = mapping(spec.get("template"))
    selector = spec.get("selector")
    labels = mapping(mapping(template.get("metadata")).get("labels"))
    if isinstance(selector, dict) and not selects(selector, labels):
        add("template.metadata.labels", "the selector does not select the template's labels (`selector` does not "
            "match template `labels`)", "give the template the labels spec.selector asks for")
    restart = mapping(template.get("spec")).get("restartPolicy")
    if restart is not None and restart != "Always":
        add("template.spec.restartPolicy", f"restartPolicy {restart} (Unsupported value: \"{restart}\"; a "
            "StatefulSet accepts only Always)", "remove restartPolicy (Always)")
    # ValidatePodTemplateSpecForStatefulSet checks only the template's labels and annotations: the pods the
    # controller creates from it, with a volume per claim template (stateful_set_utils.go updateStorage), meet the
    # API server's pod validation, which refuses them.
    own = {f"{prefix}.template.spec.restartPolicy", f"{prefix}.template.spec.activeDeadlineSeconds"}  # said below
    claims = tuple(str(mapping(mapping(t).get("metadata")).get("name"))
                   for t in listing(spec.get("volumeClaimTemplates")))
    out += [c for c in core_validation.pod_template(template, f"{prefix}.template", claims,
                                                    "the API server refuses the pods the controller creates from it")
            if c.field not in own]
    if mapping(template.get("spec")).get("activeDeadlineSeconds") is not None:
        add("template.spec.activeDeadlineSeconds", "activeDeadlineSeconds in a StatefulSet's pod template (not "
            "supported)", "remove activeDeadlineSeconds")
    return out


def start_ordinal(spec: dict[str, Any]) -> int:
    """`spec.ordinals.start` (StatefulSetStartOrdinal, GA in 1.31): the first pod's ordinal; 0 when unset."""
    return as_int(mapping(spec.get("ordinals")).get("start"), 0) or 0


@dataclass
class StatefulSetWorkload(Workload):
    """A StatefulSet's pods, and how the controller starts them."""

    pod_management_policy: Any = "OrderedReady"


class StatefulSetLauncher(Launcher[StatefulSetWorkload]):
    id = "statefulset"
    order = 50
    upstream = "kubernetes/kubernetes v1.36.0"
    title = "StatefulSet + headless Service"
    kinds = (("apps", KIND),)
    # Kueue's integration for it (FrameworkName, kubernetes-sigs/kueue v0.19.2
    # pkg/controller/jobs/statefulset/statefulset_controller.go:39)
    kueue_framework = "statefulset"
    immutable = ("spec.selector", "spec.serviceName", "spec.volumeClaimTemplates", "spec.podManagementPolicy")
    scale = ScaleSpec(pods=[(("spec", "replicas"), 0)], env_container=("spec", "template", "spec", "containers", 0),
                      resources=[("spec", "template", "spec", "containers", 0, "resources")])

    def build(self, m: Manifest, bundle: Bundle) -> StatefulSetWorkload:
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
        return StatefulSetWorkload(m, self, [group], m.namespace,
                                   pod_management_policy=spec.get("podManagementPolicy") or "OrderedReady")

    def pods_field(self, w: Workload) -> str:
        return "spec.replicas"

    def admission(self, w: Workload, bundle: Bundle, torchrun: bool) -> list[Check]:
        return validation(mapping(w.manifest.obj.get("spec")), name=w.manifest.name)

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

    def startup(self, w: StatefulSetWorkload) -> Check | None:
        """OrderedReady (the default) creates pod N+1 only once pod N is Running and Ready (stateful_set_control.go
        at v1.36.0). Without a readiness probe a pod is Ready once its containers start, so the pods only start one
        after another (a warning); a probe the container answers (exec, httpGet, grpc) keeps pod 0 unready while it
        waits in rendezvous for pod 1, which is never created, if it succeeds only once training runs: what the
        probe asks of the image or the script is not in the manifests, so a warning phrased as that condition."""
        policy = w.pod_management_policy
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
                         f"{kind} probe: pod 1 is created only once pod 0 is Ready; if the probe succeeds only once "
                         "training runs, pod 0 waits in rendezvous for pod 1, which is never created", hint,
                         severity=WARNING)
        return Check("spec.podManagementPolicy", f"podManagementPolicy is {policy}: the {w.pods} pods are created one "
                     "after another, each once the one before runs", hint, severity=WARNING)

    def restarts(self, w: Workload, bundle: Bundle) -> list[str]:
        return ["a StatefulSet restarts its pods"]

    def after_exit(self, w: Workload, bundle: Bundle, ended: PodExit, count: RestartCount) -> Decision:
        """The kubelet restarts the container in place (a StatefulSet's pods are restartPolicy Always, the only value
        the API server accepts); a deleted pod is created again under the same name with the same claims
        (kubernetes v1.36.0 pkg/controller/statefulset/stateful_set_control.go updateStatefulSet: replicas missing
        or failed are recreated); a pod on a lost node only once the node is deleted or the pod force-deleted. Exit 0
        restarts the container too (restartPolicy Always): a StatefulSet never completes, and never fails."""
        # kubelet_restarts reads the pod spec's restartPolicy only: the pod itself need not be made.
        in_place = kubelet_restarts({"restartPolicy": "Always"}, ended, count)
        if in_place is not None:
            return in_place
        if ended.node_lost:
            # The pod object stays (Terminating once evicted) while its node cannot confirm it stopped, and the
            # controller never runs two pods of one identity (kubernetes/kubernetes#54368; "Force Delete
            # StatefulSet Pods" in the Kubernetes docs).
            return Decision(RECREATE_POD, "StatefulSet controller", f"pod {ended.index} on a lost node -> created "
                            "again, same name and claims, only once the Node object is deleted or the pod "
                            "force-deleted", "kubernetes/kubernetes#54368", awaits_node=True)
        return Decision(RECREATE_POD, "StatefulSet controller", f"pod deleted -> pod {ended.index} created again, "
                        "same name and claims", "kubernetes v1.36.0 pkg/controller/statefulset/stateful_set_control.go "
                        "updateStatefulSet")

    def scale_down(self, m: Manifest, nodes: int) -> list[str]:
        m.obj.setdefault("spec", {})["replicas"] = nodes
        return [f"{m.ref}: replicas -> {nodes}"]


LAUNCHER = StatefulSetLauncher()
