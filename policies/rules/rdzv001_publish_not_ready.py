"""The headless Service publishes the pods' DNS names before they are Ready.

A headless Service publishes a pod's DNS record only once the pod is Ready, unless `publishNotReadyAddresses: true`.
Training pods become Ready late or never (a readiness probe that waits for the model, a long image pull), while
torchrun on every pod already resolves pod 0 at start: the first lookups fail with `Name or service not known`
and, at scale, the rendezvous times out. A warning, because pods without readiness probes are Ready as soon as
they run (GKE's Indexed Job tutorial works so); an error when the training container has a readiness probe.
JobSet sets it itself unless `spec.network.publishNotReadyAddresses: false`.

Fails: the Service `ddp-train` behind an Indexed Job without `publishNotReadyAddresses`; a JobSet with
`network.publishNotReadyAddresses: false`.
Passes: `clusterIP: None` with `publishNotReadyAddresses: true`; a JobSet with the default.
"""
from __future__ import annotations

from typing import Iterator

from ..kube.objects import ERROR, WARNING, Problem
from .kit import Context, problem, service_problem

ID = "RDZV001"
NAME = "publish-not-ready-addresses"
SEVERITY = WARNING


def check(ctx: Context) -> Iterator[Problem]:
    for t in ctx.topologies:
        if t.pods <= 1:
            continue
        if t.workload.managed_dns:
            c = t.workload.launcher.publishes_not_ready(t.workload)
            if c is not None:
                yield problem(ID, t, c.field, c.message, c.hint, severity=c.severity or WARNING)
            continue
        if t.service is None:
            continue
        if (t.service.obj.get("spec") or {}).get("publishNotReadyAddresses") is True:
            continue
        probe = bool(t.first.pod.container.get("readinessProbe"))
        p = service_problem(ID, t, "spec.publishNotReadyAddresses",
                            f"Service '{t.service.name}' publishes only Ready pods" +
                            (": the training container has a readiness probe, so pod 0 has no DNS name while the "
                             "others look it up" if probe else ": pods that are slow to become Ready cannot be "
                             "resolved by their peers at start"),
                            "set spec.publishNotReadyAddresses: true")
        p.severity = ERROR if probe else WARNING
        yield p
