"""Containers run as a non-root user.

On a shared GPU cluster a process that is root in its container is one kernel or runtime bug away from root on a
node that holds other teams' jobs and data. Set `runAsNonRoot: true` (pod or container `securityContext`) and a
non-zero `runAsUser` the image works with (this repository's trainer image runs as uid 1000). `runAsNonRoot: true`
with `runAsUser: 0` is an error: the kubelet refuses to start the container. Otherwise a warning (upstream examples
run as root; an environment can make it an error).

Fails: a pod template without `runAsNonRoot`; `runAsUser: 0`.
Passes: pod `securityContext: {runAsNonRoot: true, runAsUser: 1000}`.
"""
from __future__ import annotations

from typing import Iterator

from ..kube.objects import ERROR, WARNING, Problem
from .kit import Context, obj_problem

ID = "SEC001"
NAME = "run-as-non-root"
SEVERITY = WARNING


def check(ctx: Context) -> Iterator[Problem]:
    for site in ctx.sites:
        psc = site.spec.get("securityContext") or {}
        containers = site.containers()
        missing = []
        for field, c in containers:
            csc = c.get("securityContext") or {}
            nonroot = csc.get("runAsNonRoot", psc.get("runAsNonRoot"))
            uid = csc.get("runAsUser", psc.get("runAsUser"))
            where = f"{field}.securityContext.runAsUser" if "runAsUser" in csc else f"{site.field}.securityContext.runAsUser"
            if uid == 0:
                yield obj_problem(ID, site.manifest, where, f"container '{c.get('name')}' runs as root (runAsUser 0)" +
                                  (" with runAsNonRoot: true: the kubelet refuses to start it" if nonroot is True else ""),
                                  "run as a non-root uid the image supports (e.g. 1000)",
                                  severity=ERROR if nonroot is True else WARNING)
            elif nonroot is not True:
                missing.append((field, c))
        if not missing:
            continue
        if len(missing) == len(containers) and "runAsNonRoot" not in psc:
            yield obj_problem(ID, site.manifest, f"{site.field}.securityContext.runAsNonRoot", "runAsNonRoot is not "
                              "set: the containers may run as root", "set securityContext.runAsNonRoot: true and "
                              "runAsUser: 1000 on the pod", severity=WARNING)
        else:
            for field, c in missing:
                yield obj_problem(ID, site.manifest, f"{field}.securityContext.runAsNonRoot", f"container "
                                  f"'{c.get('name')}' may run as root", "set securityContext.runAsNonRoot: true",
                                  severity=WARNING)
