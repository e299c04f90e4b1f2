"""The LeaderWorkerSet pod webhook's TPU env (kubernetes-sigs/lws v0.10.0 pkg/utils/accelerators/tpu.go
AddTPUVariables, addTPUVariablesSubGroup; called from pkg/webhooks/pod_webhook.go Default when the pod requests
`google.com/tpu`, before the LWS_* variables): TPU_WORKER_HOSTNAMES, TPU_WORKER_ID, TPU_NAME,
TPU_PROCESS_ADDRESSES and, where the container does not set it, TPU_PROCESS_PORT, appended to each container that
requests TPUs (with a subgroup, to the first one only), unless its first such container already sets
TPU_WORKER_HOSTNAMES or TPU_WORKER_ID. The leader pod controller annotates the workers
`leader-requests-tpus: "true"` where the leader's template requests TPUs (pod_controller.go, AddTPUAnnotations), and
then the leader counts among the TPU workers."""
from __future__ import annotations

import functools

from typing import Any

from ..kube.values import env_entry, listing, mapping, parse_quantity
from .pods import TPU, Injected

HOSTNAMES, PROCESS_ADDRESSES, PROCESS_PORT = "TPU_WORKER_HOSTNAMES", "TPU_PROCESS_ADDRESSES", "TPU_PROCESS_PORT"
WORKER_ID, NAME = "TPU_WORKER_ID", "TPU_NAME"
DEFAULT_PORT = 8476
LEADER_REQUESTS_TPUS = "leaderworkerset.sigs.k8s.io/leader-requests-tpus"


def _requests_tpus(c: Any) -> bool:
    """numTPUsRequested: the limit, else the request, of google.com/tpu is not zero."""
    res = mapping(mapping(c).get("resources"))
    for section in ("limits", "requests"):
        value = mapping(res.get(section)).get(TPU)
        if value is not None:
            q = parse_quantity(value)
            return q is None or q.value != 0
    return False


def tpu_containers(spec: Any) -> list[dict[str, Any]]:
    """getContainersRequestingTPUs: the containers, then the init containers, that request TPUs."""
    spec = mapping(spec)
    return [mapping(c) for key in ("containers", "initContainers") for c in listing(spec.get(key))
            if _requests_tpus(c)]


def _user_env(c: dict[str, Any], name: str) -> str | None:
    """GetEnvVarValueIfInContainer: the value the container's own env gives `name` (its first entry of it)."""
    var = env_entry(c, name, first=True)
    return None if var is None else str(var.get("value") or "")


def tpu_env(spec: Any, pod: str, leader: str, worker: int, size: int, subdomain: str, leader_requests: bool,
            subgroup: tuple[int, int | None] | None) -> dict[str, list[Injected]]:
    """The TPU variables per container name of the pod `pod` (worker `worker` of the group led by `leader`);
    `subgroup` is (subGroupSize, the pod's subgroup-index label, None where it has none)."""
    containers = tpu_containers(spec)
    if not containers or any(_user_env(containers[0], n) is not None for n in (HOSTNAMES, WORKER_ID)):
        return {}
    if subgroup is not None:
        return _subgroup(containers[0], pod, leader, worker, subdomain, leader_requests, *subgroup)
    index = worker if worker == 0 or leader_requests else worker - 1
    ports = [_user_env(c, PROCESS_PORT) or str(DEFAULT_PORT + i) for i, c in enumerate(containers)]
    names, addresses = _hosts(f"{leader}.{subdomain}" if leader_requests or worker == 0 else None, leader,
                              subdomain, 1, size - 1, tuple(ports))
    out: dict[str, list[Injected]] = {}
    for i, c in enumerate(containers):
        env = [Injected(HOSTNAMES, names), Injected(WORKER_ID, str(index * len(containers) + i)),
               Injected(NAME, leader), Injected(PROCESS_ADDRESSES, addresses)]
        if _user_env(c, PROCESS_PORT) is None:
            env.append(Injected(PROCESS_PORT, ports[i]))
        out[str(c.get("name"))] = env
    return out


@functools.lru_cache(maxsize=16)
def _hosts(first: str | None, leader: str, subdomain: str, start: int, end: int,
           ports: tuple[str, ...]) -> tuple[str, str]:
    """(TPU_WORKER_HOSTNAMES, TPU_PROCESS_ADDRESSES) for the hosts `first` (where not None) then `<leader>-<i>` for i
    in start..end, each host once per port (container). Every pod of a group shares the same two strings, worked
    out once: O(group size) in all, not per pod."""
    hosts = ([first] if first is not None else []) + [f"{leader}-{i}.{subdomain}" for i in range(start, end + 1)]
    return (",".join(h for h in hosts for _ in ports),
            ",".join(f"{h}:{port}" for h in hosts for port in ports))


def _subgroup(c: dict[str, Any], pod: str, leader: str, worker: int, subdomain: str, leader_requests: bool,
              size: int, label: int | None) -> dict[str, list[Injected]]:
    """addTPUVariablesSubGroup: the hostnames of the pod's subgroup only, and its id within it. A pod without a
    subgroup-index label (the leader under LeaderExcluded) makes the webhook fail the pod's creation (strconv.Atoi
    of ""): nothing is injected here."""
    if label is None or size < 1:
        return {}
    index, worker_id = label, worker % size
    if worker != 0 and not leader_requests:
        worker_id, index = (worker - 1) % size, (worker - 1) // size
    port = _user_env(c, PROCESS_PORT) or str(DEFAULT_PORT)
    start, end = size * index + 1, size * (index + 1)
    first = None
    if worker == 0:
        first = f"{pod}.{subdomain}"
        end -= 1
    elif leader_requests and index == 0:
        end -= 1
        first = f"{leader}.{subdomain}"
    elif leader_requests:
        start, end = start - 1, end - 1
    names, addresses = _hosts(first, leader, subdomain, start, end, (port,))
    env = [Injected(HOSTNAMES, names), Injected(WORKER_ID, str(worker_id)), Injected(NAME, leader),
           Injected(PROCESS_ADDRESSES, addresses)]
    if _user_env(c, PROCESS_PORT) is None:
        env.append(Injected(PROCESS_PORT, port))
    return {str(c.get("name")): env}
