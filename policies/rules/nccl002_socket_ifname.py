"""`NCCL_SOCKET_IFNAME` is set where a pod has several networks, and is well formed wherever it is set.

NCCL picks a network interface for its bootstrap and socket transport by itself. With `hostNetwork: true` the pod
sees every NIC of the node (docker0, virtual bridges, a management port) and with several networks attached
(Multus `k8s.v1.cni.cncf.io/networks`, GKE `networking.gke.io/interfaces`) it sees more than one: NCCL may pick one
the other nodes cannot reach and hang. Name the interface. The value is a comma-separated list of interface-name
prefixes, optionally starting with `^` (exclude) or `=` (exact names); loopback alone reaches no other node.

Fails: `hostNetwork: true` without `NCCL_SOCKET_IFNAME`; `NCCL_SOCKET_IFNAME="eth0, eth1"`; `NCCL_SOCKET_IFNAME=lo`.
Passes: `NCCL_SOCKET_IFNAME=eth0` with `hostNetwork: true`; a single-network pod without it.
"""
from __future__ import annotations

import re
from typing import Iterator

from ..kube.objects import WARNING, Problem
from .kit import RULE_DEFAULT, Context, env_problem, nccl_stated, problem_at, training_uses_nccl

ID = "NCCL002"
NAME = "nccl-socket-ifname"
MULTI_NIC_ANNOTATIONS = ("k8s.v1.cni.cncf.io/networks", "networking.gke.io/interfaces")
_IFNAME = re.compile(r"^[\^=]?[A-Za-z0-9_.:\-]{1,15}(,[A-Za-z0-9_.:\-]{1,15})*$")


def malformed(value: str) -> str | None:
    if not _IFNAME.match(value):
        return "not a comma-separated list of interface names (no spaces, at most 15 characters each)"
    names = value.lstrip("^=").split(",")
    if not value.startswith("^") and all(n == "lo" for n in names):
        return "loopback only: no other node can be reached"
    return None


def check(ctx: Context) -> Iterator[Problem]:
    seen = set()
    for t in ctx.topologies:
        if not training_uses_nccl(t) or (t.pods <= 1 and (t.nnodes_max or 1) <= 1):
            continue
        for pod in ctx.distinct_pods(t):
            value = pod.env.get("NCCL_SOCKET_IFNAME")
            if value is not None and "$" not in str(value):
                why = malformed(str(value))
                if why:
                    stated = nccl_stated(t)  # else the backend is in the code: said as a condition, a warning
                    p = env_problem(ID, ctx, t, pod, "NCCL_SOCKET_IFNAME", ("" if stated else "if the job uses NCCL: ")
                                    + f"NCCL_SOCKET_IFNAME '{value}' is {why}",
                                    "name the node-to-node interface, e.g. eth0 (or ^lo,docker to exclude)",
                                    severity=RULE_DEFAULT if stated else WARNING)
                    if (p.obj, p.field) not in seen:
                        seen.add((p.obj, p.field))
                        yield p
                continue
            if value is not None:
                continue
            host = pod.spec.get("hostNetwork") is True
            nets = [a for a in MULTI_NIC_ANNOTATIONS if pod.annotations.get(a)]
            if host or nets:
                why = "hostNetwork: true shows it every NIC of the node" if host else f"{nets[0]} attaches several networks"
                yield problem_at(ID, ctx, t, f"{pod.container_field}.env", f"NCCL_SOCKET_IFNAME is unset and {why}: "
                                 + ("NCCL" if nccl_stated(t) else "if the job uses NCCL, it") +
                                 " may pick an interface the other nodes cannot reach",
                                 "set NCCL_SOCKET_IFNAME to the node-to-node interface (e.g. eth0)", severity=WARNING)
