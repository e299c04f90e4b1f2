"""Pods run under the runtime's default seccomp profile.

Without a seccomp profile (`Unconfined`, the default of many clusters) every system call of the kernel is open to
the container. `seccompProfile: {type: RuntimeDefault}` on the pod (or each container) blocks the ones containers
never need; `Localhost` profiles pass too. A warning (an environment can make it an error).

Fails: no `seccompProfile`; `seccompProfile: {type: Unconfined}`.
Passes: pod `securityContext: {seccompProfile: {type: RuntimeDefault}}`.
"""
from __future__ import annotations

from typing import Iterator

from ..kube.objects import WARNING, Problem
from .kit import Context, obj_problem

ID = "SEC004"
NAME = "seccomp-runtime-default"
SEVERITY = WARNING
GOOD = ("RuntimeDefault", "Localhost")


def check(ctx: Context) -> Iterator[Problem]:
    for site in ctx.sites:
        pod_type = ((site.spec.get("securityContext") or {}).get("seccompProfile") or {}).get("type")
        bad = []
        containers = site.containers()
        for field, c in containers:
            ctype = ((c.get("securityContext") or {}).get("seccompProfile") or {}).get("type")
            effective = ctype or pod_type
            if effective not in GOOD:
                bad.append((field, c, ctype))
        if not bad:
            continue
        if len(bad) == len(containers) and not any(b[2] for b in bad):
            yield obj_problem(ID, site.manifest, f"{site.field}.securityContext.seccompProfile",
                              f"seccomp profile is {pod_type or 'unset (Unconfined on most clusters)'}: every system "
                              "call is open", "set securityContext.seccompProfile.type: RuntimeDefault on the pod",
                              severity=WARNING)
            continue
        for field, c, ctype in bad:
            yield obj_problem(ID, site.manifest, f"{field}.securityContext.seccompProfile", f"container "
                              f"'{c.get('name')}' runs with seccomp {ctype or pod_type or 'unset'}",
                              "set seccompProfile.type: RuntimeDefault", severity=WARNING)
