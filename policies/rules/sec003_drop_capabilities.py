"""Containers drop every Linux capability.

The runtime's default capability set (CHOWN, SETUID, NET_RAW, ...) is more than a training process needs; a trainer
reads data, computes and writes checkpoints. Drop `ALL`; add back only what the environment declares in
`allowedCapabilities` (IPC_LOCK for RDMA, for instance). A warning (upstream examples keep the default; an
environment can make it an error).

Fails: no `capabilities.drop: [ALL]`; `capabilities.add: [NET_ADMIN]` in an environment that does not allow it.
Passes: `securityContext: {capabilities: {drop: [ALL]}}`.
"""
from __future__ import annotations

from typing import Iterator

from ..kube.objects import WARNING, Problem
from .kit import Context, obj_problem

ID = "SEC003"
NAME = "drop-all-capabilities"
SEVERITY = WARNING


def check(ctx: Context) -> Iterator[Problem]:
    allowed = set(ctx.env.allowed_capabilities) if ctx.env else set()
    for cs in ctx.containers:
        caps = cs.sc.get("capabilities") or {}
        drop = caps.get("drop") or []
        if "ALL" not in drop and "ALL" not in {str(x).upper() for x in drop}:
            yield obj_problem(ID, cs.manifest, f"{cs.field}.securityContext.capabilities.drop", f"container "
                              f"'{cs.name}' keeps the runtime's default capabilities",
                              "set securityContext.capabilities.drop: [ALL]", severity=WARNING)
        extra = [str(x).upper() for x in caps.get("add") or [] if str(x).upper() not in allowed]
        if extra:
            yield obj_problem(ID, cs.manifest, f"{cs.field}.securityContext.capabilities.add", f"container "
                              f"'{cs.name}' adds {', '.join(extra)}, "
                              + (f"which {ctx.env.name}'s allowedCapabilities does not list" if ctx.env else
                                 "and no environment declaration allows capabilities"),
                              "remove them, or declare them in the environment's allowedCapabilities",
                              severity=WARNING)
