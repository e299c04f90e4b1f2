"""Containers cannot gain privileges: `allowPrivilegeEscalation: false`, never `privileged`.

`allowPrivilegeEscalation` defaults to true: a setuid binary in the image can make its process root. A privileged
container sees every device of the node, every GPU included, and can take the node over. A missing
`allowPrivilegeEscalation: false` is a warning by default (an environment raises it; 64x8-h100 does). `privileged:
true` is an error where the environment declares its `allowedHostAccess` without `privileged` (all three here do), a
warning where no declaration applies: some need it (RDMA NICs on hosts without a device plugin for them), and then
say so in `allowedHostAccess`.

Fails: a container without `allowPrivilegeEscalation: false`; `privileged: true`.
Passes: `securityContext: {allowPrivilegeEscalation: false}`.
"""
from __future__ import annotations

from typing import Iterator

from ..kube.objects import WARNING, Problem
from .kit import Context, obj_problem
from .sec008_host_access import allowed as host_access_allowed, severity as host_access_severity

ID = "SEC002"
NAME = "no-privilege-escalation"
SEVERITY = WARNING


def check(ctx: Context) -> Iterator[Problem]:
    for cs in ctx.containers:
        sc, field = cs.sc, cs.field
        if sc.get("privileged") is True:
            ok, why = host_access_allowed(ctx, "privileged")
            if not ok:
                yield obj_problem(ID, cs.manifest, f"{field}.securityContext.privileged", f"container "
                                  f"'{cs.name}' is privileged: it sees every device of the node and can take "
                                  f"it over; {why}", "remove privileged (GPUs come through the device plugin), or "
                                  "declare it in the environment's allowedHostAccess",
                                  severity=host_access_severity(ctx))
        elif sc.get("allowPrivilegeEscalation") is not False:
            yield obj_problem(ID, cs.manifest, f"{field}.securityContext.allowPrivilegeEscalation",
                              f"container '{cs.name}' may gain privileges (setuid binaries)",
                              "set securityContext.allowPrivilegeEscalation: false", severity=WARNING)
