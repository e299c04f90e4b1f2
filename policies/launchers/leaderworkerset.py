"""LeaderWorkerSet (leaderworkerset.x-k8s.io/v1, kubernetes-sigs/lws v0.10.0): `replicas` groups of `size` pods.
The leader StatefulSet `<lws>` makes each group's leader `<lws>-<group>`; per leader, a worker StatefulSet
`<lws>-<group>` (ordinals from 1) makes its workers `<lws>-<group>-<worker>`; the pod webhook labels them and puts
LWS_LEADER_ADDRESS, LWS_GROUP_SIZE and LWS_WORKER_INDEX first in every container's env
(pkg/controllers/leaderworkerset_controller.go, pod_controller.go, pkg/webhooks/pod_webhook.go,
pkg/utils/pod/pod_utils.go).

A training world is one group: its leader is rank 0 and hosts the rendezvous (LWS_LEADER_ADDRESS), its `size` pods
are torchrun's nnodes (LWS_GROUP_SIZE) and LWS_WORKER_INDEX is the node rank, as upstream's multi-node examples
(docs/examples/sglang/lws.yaml: `--dist-init-addr $(LWS_LEADER_ADDRESS):20000 --nnodes $(LWS_GROUP_SIZE)
--node-rank $(LWS_WORKER_INDEX)`) start them. The groups are identical by construction (same templates, only the
group index differs), so group 0 is the world the rules check and the other `replicas - 1` groups are listed as
pods outside it: independent worlds of the same shape, not one world of `replicas x size` pods."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Iterator

from ..kube.values import DNS1035, as_int, dig, int_or_percent, mapping
from ..kube.objects import Manifest
from . import lws_tpu, statefulset
from .base import MAX_GROUP_PODS, Bundle, Check, Launcher, Unreadable, Workload
from .pods import FIRST, POD_INDEX, Injected, PodGroup, copies, fixed, indexed

GROUP = "leaderworkerset.x-k8s.io"
KIND = "LeaderWorkerSet"

# api/leaderworkerset/v1/leaderworkerset_types.go
PREFIX = "leaderworkerset.sigs.k8s.io/"
SET_NAME = PREFIX + "name"
GROUP_INDEX = PREFIX + "group-index"
WORKER_INDEX = PREFIX + "worker-index"
SIZE = PREFIX + "size"
GROUP_KEY = PREFIX + "group-key"
LEADER_NAME = PREFIX + "leader-name"
EXCLUSIVE = PREFIX + "exclusive-topology"
SUBDOMAIN_POLICY = PREFIX + "subdomainPolicy"
SUBGROUP_SIZE = PREFIX + "subgroup-size"
SUBGROUP_TYPE = PREFIX + "subgroup-policy-type"
SHARED = "Shared"
UNIQUE_PER_REPLICA = "UniquePerReplica"
LEADER_EXCLUDED = "LeaderExcluded"
SUBGROUP_EXCLUSIVE = PREFIX + "subgroup-exclusive-topology"
SUBGROUP_INDEX = PREFIX + "subgroup-index"
SUBGROUP_KEY = PREFIX + "subgroup-key"
LEADER_WORKER = "LeaderWorker"
LEADER_ADDRESS = "LWS_LEADER_ADDRESS"
GROUP_SIZE = "LWS_GROUP_SIZE"
WORKER_INDEX_ENV = "LWS_WORKER_INDEX"

# The pod webhook adds its env first in the list and drops a variable of the same name the user wrote
# (pod_utils.go addEnvVarsIfNotExists): base.FIRST.
MAX_INT32 = 2**31 - 1


def settings(spec: dict[str, Any]) -> tuple[int, int, str]:
    """(replicas, size, subdomain policy) after the CRD defaults (replicas 1, size 1) and the webhook's
    (leaderworkerset_webhook.go Default: subdomainPolicy Shared)."""
    lwt = mapping(spec.get("leaderWorkerTemplate"))
    replicas = as_int(spec.get("replicas"), 1)
    size = as_int(lwt.get("size"), 1)
    policy = mapping(spec.get("networkConfig")).get("subdomainPolicy") or SHARED
    return (1 if replicas is None else replicas), (1 if size is None else size), str(policy)


def _int_or_percent(value: Any, replicas: int, round_up: bool) -> tuple[str | None, int]:
    """(why the webhook refuses it, or None; its value scaled to `replicas`, as intstr.GetScaledValueFromIntOrPercent
    does: a percentage rounded up for maxSurge and down for maxUnavailable)."""
    parsed = int_or_percent(value)
    if parsed is None:
        return "must be an integer or percentage (e.g '5%')", 0
    number, percent = parsed
    if not percent:
        return ("must be greater than or equal to 0" if number < 0 else None), number
    if number > 100:
        return "must not be greater than 100%", 0
    return None, (-(-number * replicas // 100) if round_up else number * replicas // 100)


def rollout_validation(spec: dict[str, Any], replicas: int) -> list[Check]:
    """The rolling update settings (v0.10.0 leaderworkerset_webhook.go generalValidate lines 146-178): maxUnavailable
    and maxSurge non-negative integers or percentages within 100%, partition not negative, and not both 0 while
    replicas is not (nothing could ever be replaced). Unset, they are the CRD defaults: maxUnavailable 1,
    maxSurge 0, partition 0 (config/crd/bases/leaderworkerset.x-k8s.io_leaderworkersets.yaml)."""
    out: list[Check] = []
    where = "spec.rolloutStrategy.rollingUpdateConfiguration"
    roll = mapping(dig(spec, "rolloutStrategy", "rollingUpdateConfiguration"))
    scaled: dict[str, int] = {}
    for key, default, round_up in (("maxUnavailable", 1, False), ("maxSurge", 0, True)):
        why, scaled[key] = _int_or_percent(roll.get(key, default), replicas, round_up)
        if why:
            out.append(Check(f"{where}.{key}", f"{key} {roll.get(key)!r}: {why}: the LeaderWorkerSet webhook refuses "
                             "it", f"set {key} to a whole number of groups or a percentage up to 100%"))
    partition = as_int(roll.get("partition"), 0)
    if partition is not None and partition < 0:
        out.append(Check(f"{where}.partition", f"partition {partition}: must be greater than or equal to 0: the "
                         "LeaderWorkerSet webhook refuses it", "set partition to 0 or more"))
    if not out and scaled["maxUnavailable"] == 0 and scaled["maxSurge"] == 0 and replicas != 0:
        out.append(Check(f"{where}.maxUnavailable", "maxUnavailable must not be 0 when maxSurge is 0: the "
                         "LeaderWorkerSet webhook refuses it", "set maxUnavailable (or maxSurge) to at least 1"))
    return out


def group_key(namespace: str, leader: str) -> str:
    """pod_webhook.go genGroupUniqueKey: sha1 of `<namespace>/<leader pod>`, hex (for a subgroup:
    `<leader pod>/<subgroup index>`)."""
    return hashlib.sha1(f"{namespace}/{leader}".encode()).hexdigest()


@dataclass
class LeaderWorkerSetWorkload(Workload):
    """A LeaderWorkerSet's groups of pods, and how their Services are made."""

    replicas: int = 0
    subdomain_policy: Any = None


class LeaderWorkerSetLauncher(Launcher[LeaderWorkerSetWorkload]):
    id = "leaderworkerset"
    order = 80
    upstream = "kubernetes-sigs/lws v0.10.0"
    title = "LeaderWorkerSet"
    kinds = ((GROUP, KIND),)
    # Kueue's integration for it (FrameworkName, kubernetes-sigs/kueue v0.19.2
    # pkg/controller/jobs/leaderworkerset/leaderworkerset_controller.go:40)
    kueue_framework = "leaderworkerset.x-k8s.io/leaderworkerset"
    for_training = False  # counts when a pod starts torchrun or reads env:// (LWS serves inference too)
    managed_dns = True    # the controller's headless Service(s)
    # leaderworkerset_webhook.go ValidateUpdate: subGroupSize can be neither changed, added nor removed.
    immutable = ("spec.leaderWorkerTemplate.subGroupPolicy",)

    def build(self, m: Manifest, bundle: Bundle) -> LeaderWorkerSetWorkload:
        spec = mapping(m.obj.get("spec"))
        lwt = mapping(spec.get("leaderWorkerTemplate"))
        name = m.name
        namespace = m.namespace or "default"  # the pods' metadata.namespace once applied (kubectl's default)
        replicas, size, policy = settings(spec)
        if max(replicas, 0) * max(size, 0) > MAX_GROUP_PODS:
            raise Unreadable(f"has {replicas:,} groups of {size:,} pods, more than the {MAX_GROUP_PODS:,} pods the "
                             "model works out")
        unique = policy == UNIQUE_PER_REPLICA
        lws_annotations = mapping(m.metadata.get("annotations"))
        leader_field = ("spec.leaderWorkerTemplate.leaderTemplate" if isinstance(lwt.get("leaderTemplate"), dict)
                        else "spec.leaderWorkerTemplate.workerTemplate")
        leader_tmpl = mapping(lwt.get("leaderTemplate")) or mapping(lwt.get("workerTemplate"))
        worker_tmpl = mapping(lwt.get("workerTemplate"))
        sub_policy = mapping(lwt.get("subGroupPolicy"))
        sub_size = as_int(sub_policy.get("subGroupSize")) if sub_policy.get("subGroupSize") is not None else None
        # The API field is subGroupPolicyType, defaulted to LeaderWorker by the CRD (leaderworkerset_types.go).
        sub_type = str(sub_policy.get("subGroupPolicyType") or LEADER_WORKER)
        if sub_size is not None and sub_size > MAX_GROUP_PODS:  # (the webhook refuses one over size: TOPO011)
            raise Unreadable(f"has subgroups of {sub_size:,} pods, more than the {MAX_GROUP_PODS:,} pods the model "
                             "works out")
        leader_tpus = bool(lws_tpu.tpu_containers(leader_tmpl.get("spec")))

        def common_notes() -> dict[str, str]:
            out = {SIZE: str(size)}
            if lws_annotations.get(EXCLUSIVE):
                out[EXCLUSIVE] = str(lws_annotations[EXCLUSIVE])
            if sub_size is not None:
                out[SUBGROUP_TYPE] = sub_type
                out[SUBGROUP_SIZE] = str(sub_policy["subGroupSize"])
                if lws_annotations.get(SUBGROUP_EXCLUSIVE):
                    out[SUBGROUP_EXCLUSIVE] = str(lws_annotations[SUBGROUP_EXCLUSIVE])
            return out

        def subgroup(worker: int) -> int | None:
            """The pod's subgroup-index label (pod_webhook.go Default): the leader's 0 unless LeaderExcluded; a
            worker's getSubGroupIndex (the leader counted as the extra pod of subgroup 0 where size - 1, not size,
            divides by subGroupSize)."""
            if sub_size is None or sub_size < 1:
                return None
            if worker == 0:
                return None if sub_type == LEADER_EXCLUDED else 0
            if (size - 1) % sub_size == 0 and size % sub_size != 0:
                return (worker - 1) // sub_size
            return worker // sub_size

        def subgroup_labels(pod: str, leader: str, worker: int) -> dict[str, str]:
            index = subgroup(worker)
            if index is None:
                return {}
            # genGroupUniqueKey(<leader pod>, <subgroup index>): the leader's own name for the leader.
            return {SUBGROUP_INDEX: str(index), SUBGROUP_KEY: group_key(leader, str(index))}

        def env(g: int, worker: int, subdomain: str, container: str, tmpl: dict[str, Any]) -> list[Injected]:
            # pod_webhook.go Default: the TPU variables (tpu.go) appended to the containers requesting TPUs, then
            # pod_utils.go AddLWSVariables first in every container and init container.
            leader = f"{name}-{g}"
            pod = leader if worker == 0 else f"{leader}-{worker}"
            tpu = lws_tpu.tpu_env(tmpl.get("spec"), pod, leader, worker, size, subdomain,
                                  worker != 0 and leader_tpus,
                                  (sub_size, subgroup(worker)) if sub_size is not None else None)
            return [Injected(LEADER_ADDRESS, f"{leader}.{subdomain}.{namespace}", mode=FIRST),
                    Injected(GROUP_SIZE, str(size), mode=FIRST),
                    Injected(WORKER_INDEX_ENV, str(worker), mode=FIRST)] + tpu.get(container, [])

        def replica(g: int) -> tuple[PodGroup, PodGroup]:
            """Replica g's leader group and worker group (one call per replica: the functions each group holds
            close over this replica's names)."""
            leader = f"{name}-{g}"
            # Shared: both StatefulSets' serviceName is the LWS; UniquePerReplica: the webhook sets the leader's
            # subdomain to its own name, and its worker StatefulSet's serviceName is the leader's name.
            subdomain = leader if unique else name
            key = group_key(namespace, leader)
            leader_notes = common_notes()
            if unique:
                leader_notes[SUBDOMAIN_POLICY] = UNIQUE_PER_REPLICA
            leader_group = PodGroup(
                role="leader", count=1, offset=0, template=leader_tmpl,
                template_field=leader_field,
                name=fixed(leader),
                hostname=fixed(leader), hostname_forced=True,
                subdomain=subdomain, subdomain_forced=True,
                labels=lambda i: {
                    WORKER_INDEX: "0", SET_NAME: name, GROUP_INDEX: str(g), GROUP_KEY: key,
                    statefulset.POD_NAME_LABEL: leader, POD_INDEX: str(g), **subgroup_labels(leader, leader, 0)},
                annotations=copies(leader_notes),
                inject=lambda i, c, init: env(g, 0, subdomain, c, leader_tmpl),
                aux=g > 0,
            )
            worker_notes = {**common_notes(), LEADER_NAME: leader}
            if leader_tpus:
                worker_notes[lws_tpu.LEADER_REQUESTS_TPUS] = "true"
            worker_group = PodGroup(
                role="worker", count=max(size - 1, 0), offset=1, template=worker_tmpl,
                template_field="spec.leaderWorkerTemplate.workerTemplate",
                name=indexed(leader, 1),
                hostname=indexed(leader, 1), hostname_forced=True,
                subdomain=subdomain, subdomain_forced=True,
                labels=lambda i: {
                    SET_NAME: name, GROUP_INDEX: str(g), GROUP_KEY: key, WORKER_INDEX: str(i + 1),
                    statefulset.POD_NAME_LABEL: f"{leader}-{i + 1}", POD_INDEX: str(i + 1),
                    **subgroup_labels(f"{leader}-{i + 1}", leader, i + 1)},
                annotations=copies(worker_notes),
                inject=lambda i, c, init: env(g, i + 1, subdomain, c, worker_tmpl),
                aux=g > 0,
            )
            return leader_group, worker_group

        groups: list[PodGroup] = []
        for g in range(max(replicas, 0)):
            groups.extend(replica(g))
        w = LeaderWorkerSetWorkload(m, self, groups, m.namespace, replicas=replicas, subdomain_policy=policy)
        if replicas > 1:
            w.notes.append(f"{replicas} groups of {size} pods: each group is its own torchrun world; group 0 is "
                           "checked, the others are the same templates")
        return w

    def services(self, w: LeaderWorkerSetWorkload) -> list[dict[str, Any]]:
        """Shared: one headless Service `<lws>` selecting the set's pods (leaderworkerset_controller.go
        reconcileHeadlessServices); UniquePerReplica: one per group, `<lws>-<group>`, selecting the group
        (pod_controller.go Reconcile). Both publish pods that are not Ready (controller_utils.go)."""
        name = w.manifest.name
        if w.subdomain_policy == UNIQUE_PER_REPLICA:
            return [{"name": f"{name}-{g}", "clusterIP": "None", "selector": {SET_NAME: name, GROUP_INDEX: str(g)},
                     "publishNotReadyAddresses": True} for g in range(min(w.replicas or 0, 1024))]
        return [{"name": name, "clusterIP": "None", "selector": {SET_NAME: name}, "publishNotReadyAddresses": True}]

    def pods_field(self, w: Workload) -> str:
        return "spec.leaderWorkerTemplate.size"

    def setting_field(self, w: Workload, name: str) -> str | None:
        return {"nnodes": "spec.leaderWorkerTemplate.size"}.get(name)

    def dns_field(self, w: Workload, pod: Any) -> str:
        return "metadata.name"

    def dns_names(self, m: Manifest) -> list[tuple[str, str, str, bool]]:
        replicas, size, policy = settings(mapping(m.obj.get("spec")))
        last = f"{m.name}-{max(replicas - 1, 0)}"
        out = [("spec.leaderWorkerTemplate.size", f"{last}-{size - 1}" if size > 1 else last,
                "the hostname of the last pod", False)]
        out.append(("metadata.name", last if policy == UNIQUE_PER_REPLICA else m.name,
                    "the controller's headless Service", True))
        return out

    def pod_templates(self, m: Manifest) -> Iterator[tuple[str, dict[str, Any]]]:
        lwt = mapping(dig(m.obj, "spec", "leaderWorkerTemplate"))
        for key in ("leaderTemplate", "workerTemplate"):
            if isinstance(lwt.get(key), dict):
                yield f"spec.leaderWorkerTemplate.{key}", lwt[key]

    def admission(self, w: Workload, bundle: Bundle, torchrun: bool) -> list[Check]:
        """pkg/webhooks/leaderworkerset_webhook.go generalValidate at v0.10.0 (after Default)."""
        out: list[Check] = []
        m = w.manifest
        spec = mapping(m.obj.get("spec"))
        replicas, size, _ = settings(spec)
        if m.name and (len(m.name) > 63 or not DNS1035.match(m.name)):
            out.append(Check("metadata.name", f"name '{m.name}' is not a DNS-1035 label (it names the headless "
                             "Service): the LeaderWorkerSet webhook refuses it",
                             "use lowercase letters, digits and '-', starting with a letter"))
        if replicas < 0 or replicas > 1000000:
            out.append(Check("spec.replicas", f"replicas {replicas} is outside 0..1000000: the LeaderWorkerSet "
                             "webhook refuses it", "set replicas between 0 and 1000000"))
        if size < 1:
            out.append(Check("spec.leaderWorkerTemplate.size", f"size {size}: size must be equal or greater than 1",
                             "set size to the pods of one group"))
        if replicas * size > MAX_INT32:
            out.append(Check("spec.replicas", f"the product of replicas and worker replicas must not exceed "
                             f"{MAX_INT32}", "lower replicas or size"))
        sub = mapping(dig(spec, "leaderWorkerTemplate", "subGroupPolicy"))
        if sub.get("subGroupSize") is not None:
            sg = as_int(sub.get("subGroupSize"), 0) or 0
            field_path = "spec.leaderWorkerTemplate.subGroupPolicy.subGroupSize"
            why = []
            if sg < 1:
                why.append("subGroupSize must be equal or greater than 1")
            elif size % sg != 0 and (size - 1) % sg != 0:
                why.append("size or size - 1 must be divisible by subGroupSize")
            if sg >= 1 and size < sg:
                why.append("subGroupSize cannot be larger than size")
            if sg >= 1 and sub.get("subGroupPolicyType") == LEADER_EXCLUDED and (size - 1) % sg != 0:
                why.append("size-1 must be divisible by subGroupSize when using LeaderExcluded")
            out += [Check(field_path, f"{y} (size {size}, subGroupSize {sg}): the LeaderWorkerSet webhook refuses "
                          "it", "pick a subGroupSize that divides size or size - 1") for y in why]
        elif SUBGROUP_EXCLUSIVE in mapping(m.metadata.get("annotations")):
            out.append(Check(f'metadata.annotations["{SUBGROUP_EXCLUSIVE}"]', "subgroup-exclusive-topology without "
                             "subGroupPolicy: the LeaderWorkerSet webhook refuses it",
                             "set leaderWorkerTemplate.subGroupPolicy.subGroupSize, or remove the annotation"))
        return out + rollout_validation(spec, replicas)

    def restarts(self, w: Workload, bundle: Bundle) -> list[str]:
        policy = dig(w.manifest.obj, "spec", "leaderWorkerTemplate", "restartPolicy") or "RecreateGroupOnPodRestart"
        why = ["a StatefulSet restarts its pods"]
        if policy == "RecreateGroupOnPodRestart":
            why.append("restartPolicy RecreateGroupOnPodRestart recreates the whole group")
        return why

    def scale_down(self, m: Manifest, nodes: int) -> list[str]:
        spec = m.obj.setdefault("spec", {})
        spec["replicas"] = 1
        spec.setdefault("leaderWorkerTemplate", {})["size"] = nodes
        return [f"{m.ref}: replicas -> 1, size -> {nodes}"]


LAUNCHER = LeaderWorkerSetLauncher()
