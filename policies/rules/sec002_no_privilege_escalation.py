"""Containers cannot gain privileges: `allowPrivilegeEscalation: false`, never `privileged`.

`allowPrivilegeEscalation` defaults to true: a setuid binary in the image can make its process root. A privileged
container sees every device of the node, every GPU included, and can take the node over. A missing
`allowPrivilegeEscalation: false` and `privileged: true` are warnings by default: the job runs, and some need it (RDMA
NICs on hosts without a device plugin for them); an environment raises them to errors (64x8-h100 does).

Fails: a container without `allowPrivilegeEscalation: false`; `privileged: true`.
Passes: `securityContext: {allowPrivilegeEscalation: false}`.
"""
from __future__ import annotations

from ..model import WARNING
from ..rulekit import obj_problem

ID = "SEC002"
NAME = "no-privilege-escalation"
SEVERITY = WARNING


def check(ctx):
    for cs in ctx.containers:
        sc, field = cs.sc, cs.field
        if sc.get("privileged") is True:
            yield obj_problem(ID, cs.manifest, f"{field}.securityContext.privileged", f"container "
                              f"'{cs.name}' is privileged: it sees every device of the node and can take "
                              "it over", "remove privileged (GPUs come through the device plugin)",
                              severity=WARNING)
        elif sc.get("allowPrivilegeEscalation") is not False:
            yield obj_problem(ID, cs.manifest, f"{field}.securityContext.allowPrivilegeEscalation",
                              f"container '{cs.name}' may gain privileges (setuid binaries)",
                              "set securityContext.allowPrivilegeEscalation: false", severity=WARNING)
