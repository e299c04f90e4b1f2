"""Pods reach no more of their node than the environment allows: hostNetwork, hostPID, hostIPC, hostPath.

A pod on the host's network sees every port of the node and can bind over its daemons; with the host's PID or IPC
namespace it sees (and can signal, or read the shared memory of) every process of the node, other teams' trainers
included; a hostPath volume reads and writes the node's files (`/` or the container runtime's socket is the whole
node). Each environment declares what its pods may have in `policy.yaml` (`spec.allowedHostAccess`: some of
hostNetwork, hostPID, hostIPC, hostPath, privileged; RDMA on H100 may need hostNetwork, kind-cpu needs none). Where it
declares, anything else is an error: that environment said it must not be there. Where no declaration applies, each
is a warning (a security choice, docs/rules.md's principle). `privileged` is SEC002's, with the same declaration.

Fails: `hostNetwork: true` in an environment whose allowedHostAccess does not list it; a hostPath volume.
Passes: a pod with none of them; `hostNetwork: true` where allowedHostAccess lists hostNetwork.
"""
from __future__ import annotations

from typing import Any, Iterator

from ..kube.objects import ERROR, WARNING, Problem
from .kit import Context, obj_problem

ID = "SEC008"
NAME = "host-access"
SEVERITY = WARNING
HINTS = {
    "hostNetwork": "remove hostNetwork (pods reach each other through the headless Service)",
    "hostPID": "remove hostPID",
    "hostIPC": "remove hostIPC (shared memory comes from an emptyDir with medium: Memory at /dev/shm)",
    "hostPath": "use a PersistentVolumeClaim, a ConfigMap or an emptyDir instead of the node's files",
}


def allowed(ctx: Context, what: str) -> tuple[bool, str]:
    """(allowed, why) for one kind of host access in this unit's environment."""
    env = ctx.env
    if env is None or env.allowed_host_access is None:
        return False, "no environment declaration allows host access"
    if what in env.allowed_host_access:
        return True, ""
    narrowed = f" (as the operator's policy {env.operator} narrows it)" if env.operator else ""
    return False, f"{env.name}'s allowedHostAccess does not list {what}{narrowed}"


def severity(ctx: Context) -> str:
    env = ctx.env
    return ERROR if env is not None and env.allowed_host_access is not None else WARNING


def check(ctx: Context) -> Iterator[Problem]:
    for site in ctx.sites:
        spec = site.spec
        for key, sees in (("hostNetwork", "the node's network: every port of it"),
                          ("hostPID", "every process of the node"), ("hostIPC", "the node's shared memory")):
            if spec.get(key) is True:
                ok, why = allowed(ctx, key)
                if not ok:
                    yield obj_problem(ID, site.manifest, f"{site.field}.{key}", f"{key}: true: the pod sees {sees}; "
                                      f"{why}", HINTS[key] + ", or declare it in the environment's allowedHostAccess",
                                      severity=severity(ctx))
        volumes: Any = spec.get("volumes") if isinstance(spec.get("volumes"), list) else []
        for i, v in enumerate(volumes):
            if isinstance(v, dict) and isinstance(v.get("hostPath"), dict):
                ok, why = allowed(ctx, "hostPath")
                if not ok:
                    path = v["hostPath"].get("path")
                    yield obj_problem(ID, site.manifest, f"{site.field}.volumes[{i}].hostPath", f"volume "
                                      f"'{v.get('name')}' mounts the node's {path!r}; {why}",
                                      HINTS["hostPath"] + ", or declare it in the environment's allowedHostAccess",
                                      severity=severity(ctx))
